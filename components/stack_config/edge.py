"""The edge keys: the public DNS zone, its certificates' issuer and who may come through the ingress."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from components.stack_config import cidr_rules, rules
from components.stack_config.declarations import KEYS_BY_NAME
from components.stack_config.errors import ConfigError
from components.stack_config.readers import read_cidr, read_dns_label, read_list, read_str
from components.stack_config.vocabulary import DNS_NAME, EMAIL, HTTPS_URL, JWT_CLAIM, config_key


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


JWT_KEYS = (
    "ingressJwtIssuer",
    "ingressJwtAudiences",
    "ingressJwtJwksUri",
    "ingressJwtJwksCacheSeconds",
    "ingressJwtModelsClaim",
    "ingressJwtDeploymentsClaim",
    "ingressJwtClientClaim",
    "ingressJwtRateLimitRps",
)


def read_ingress_authentication(
    values: Mapping[str, Any], environment: str, explicit: Collection[str]
) -> dict[str, Any]:
    """`ingressAuthentication` and, with JWT, the `ingressJwt*` keys; `ingressClients` with API keys.

    A stack without JWT sets no `ingressJwt*` key and a JWT-only stack sets no `ingressClients`
    (a key that would be ignored is refused); prod names its choice (`rules.check_authentication_named`)."""
    authentication = KEYS_BY_NAME["ingressAuthentication"].read(values["ingressAuthentication"])
    rules.check_authentication_named(explicit, environment)
    jwt_on = authentication != "api-keys"
    out: dict[str, Any] = {"ingress_authentication": authentication}
    if authentication == "jwt":
        if "ingressClients" in explicit:
            raise ConfigError(
                config_key("ingressClients"),
                values["ingressClients"],
                "is set but ingressAuthentication is jwt (no API keys are made)",
                "no ingressClients, or ingressAuthentication api-keys | both",
            )
        out["ingress_clients"] = ()
    else:
        out["ingress_clients"] = read_ingress_clients(values["ingressClients"])
    if not jwt_on:
        stray = [k for k in JWT_KEYS if k in explicit]
        if stray:
            raise ConfigError(
                config_key(stray[0]),
                values[stray[0]],
                "is set but ingressAuthentication is api-keys",
                "ingressJwt* keys only with ingressAuthentication jwt | both",
            )
        return out
    issuer_key, uri_key, aud_key = (
        config_key(k) for k in ("ingressJwtIssuer", "ingressJwtJwksUri", "ingressJwtAudiences")
    )
    out["ingress_jwt_issuer"] = read_str(issuer_key, values["ingressJwtIssuer"], HTTPS_URL, "the issuer's https URL")
    out["ingress_jwt_jwks_uri"] = read_str(uri_key, values["ingressJwtJwksUri"], HTTPS_URL, "the JWKS https URL")
    audiences = tuple(read_str(aud_key, a) for a in read_list(aud_key, values["ingressJwtAudiences"]))
    if not audiences:
        raise ConfigError(aud_key, [], "is empty", f"at least one audience with ingressAuthentication {authentication}")
    out["ingress_jwt_audiences"] = audiences
    for name in ("ingressJwtModelsClaim", "ingressJwtDeploymentsClaim", "ingressJwtClientClaim"):
        out[KEYS_BY_NAME[name].attribute] = read_str(
            config_key(name), values[name], JWT_CLAIM, "a claim name (letters, digits, _ : -; '.' for a nested claim)"
        )
    for name in ("ingressJwtJwksCacheSeconds", "ingressJwtRateLimitRps"):
        out[KEYS_BY_NAME[name].attribute] = KEYS_BY_NAME[name].read(values[name])
    return out


def read_ingress_clients(value: Any) -> tuple[str, ...]:
    """`ingressClients`: unique DNS labels (the basic-auth user names of the API keys)."""
    key = config_key("ingressClients")
    clients = [read_dns_label(key, c) for c in read_list(key, value)]
    if not clients:
        raise ConfigError(key, clients, "is empty", "at least one client name such as default")
    if len(set(clients)) != len(clients):
        raise ConfigError(key, clients, "has duplicate names", "each client name once")
    return tuple(clients)
