"""The edge keys: the public DNS zone, its certificates' issuer and who may come through the ingress."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from components.stack_config import cidr_rules, rules
from components.stack_config.declarations import KEYS_BY_NAME
from components.stack_config.errors import ConfigError
from components.stack_config.readers import read_cidr, read_dns_label, read_list, read_str
from components.stack_config.vocabulary import DNS_NAME, EMAIL, config_key


def read_ingress(values: Mapping[str, Any], environment: str, explicit: Collection[str]) -> dict[str, Any]:
    """`domain`, `acmeEmail`, `tlsIssuer` and `ingressAllowedCidrs`: client CIDRs whose union is at most a
    /8, or the whole internet written `0.0.0.0/0`."""
    domain = read_str(
        config_key("domain"), values["domain"], DNS_NAME, "a lowercase DNS name such as inference.example.com"
    )
    acme_email = read_str(config_key("acmeEmail"), values["acmeEmail"], EMAIL, "an e-mail address")
    tls_issuer = KEYS_BY_NAME["tlsIssuer"].read(values["tlsIssuer"])
    rules.check_tls_issuer(tls_issuer, environment)
    rules.check_ingress_named(explicit, environment)
    key = config_key("ingressAllowedCidrs")
    cidrs = tuple(str(read_cidr(key, c)) for c in read_list(key, values["ingressAllowedCidrs"]))
    if not cidrs:
        raise ConfigError(key, [], "is empty", "at least one client CIDR")
    if cidr_rules.world_open(cidrs) and cidrs != (str(cidr_rules.WORLD),):
        raise ConfigError(
            key,
            cidr_rules.describe(cidrs),
            "lets (almost) every client through under another spelling",
            "[0.0.0.0/0] written as such for a public API, or client CIDRs whose union is at most a /8",
        )
    return {"domain": domain, "acme_email": acme_email, "tls_issuer": tls_issuer, "ingress_allowed_cidrs": cidrs}


def read_ingress_clients(value: Any) -> tuple[str, ...]:
    """`ingressClients`: unique DNS labels (the basic-auth user names of the API keys)."""
    key = config_key("ingressClients")
    clients = [read_dns_label(key, c) for c in read_list(key, value)]
    if not clients:
        raise ConfigError(key, clients, "is empty", "at least one client name such as default")
    if len(set(clients)) != len(clients):
        raise ConfigError(key, clients, "has duplicate names", "each client name once")
    return tuple(clients)
