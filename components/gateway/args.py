"""Inputs of the public ingress (`IngressArgs`): hosts, the Triton backends, and who may call them."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from components.kubernetes import naming, network_policies
from components.stack_config import cidr_rules
from components.stack_config.declarations import check_declared
from components.stack_config.readers import read_dns_label, read_str
from components.stack_config.vocabulary import DNS_NAME, EMAIL, HTTPS_URL, INGRESS_AUTHENTICATION, JWT_CLAIM
from model_sync.contract import layout

ACME_SERVERS = {
    "letsencrypt": "https://acme-v02.api.letsencrypt.org/directory",
    "letsencrypt-staging": "https://acme-staging-v02.api.letsencrypt.org/directory",
}
# How clients authenticate (the stack config's vocabulary): API keys (HTTP basic auth, one generated
# key per `clients` entry), bearer JWTs from an OIDC issuer, or either of the two.
AUTHENTICATION = INGRESS_AUTHENTICATION
API_KEYS, JWT, BOTH = AUTHENTICATION
DEFAULT_CLIENT = "default"
# A claim value granting every model (or deployment) of the stack.
ANY = "*"


@dataclass(frozen=True)
class TritonBackend:
    """One Triton deployment behind the ingress: its name, Service and the models it serves."""

    deployment: str
    service: str
    models: tuple[str, ...]


@dataclass(frozen=True)
class JwtArgs:
    """Bearer-token authentication (OIDC): Envoy verifies every token itself (signature against the
    issuer's JWKS, `iss`, `aud`, `exp`/`nbf`) before a request reaches Triton.

    issuer: the tokens' `iss` (an https URL, required).
    audiences: accepted `aud` values (required, >= 1; a token must name one of them).
    jwks_uri: where the issuer publishes its signing keys (https, required); Envoy fetches it.
    jwks_cache_seconds: how long Envoy keeps the key set before fetching it again (60-86400;
        default 300). A rotated-in key is accepted at most this long after it is published.
    models_claim: the claim (a string array) listing the models a client may call over HTTP
        (`*` = all; default `triton_models`; `a.b` for a nested claim).
    deployments_claim: the claim listing the Triton deployments a client may call over gRPC,
        where the model travels inside the protobuf body (`*` = all; default `triton_deployments`).
    client_claim: the claim naming the client in the logs (default `sub`).
    rate_limit_rps: requests per second all token clients together get from each proxy replica
        (1-100000; default 1000). Per-subject limits need Envoy's global rate limit service.
    """

    issuer: str
    audiences: tuple[str, ...]
    jwks_uri: str
    jwks_cache_seconds: int = 300
    models_claim: str = "triton_models"
    deployments_claim: str = "triton_deployments"
    client_claim: str = "sub"
    rate_limit_rps: int = 1000

    def __post_init__(self) -> None:
        for field, value in (("issuer", self.issuer), ("jwks_uri", self.jwks_uri)):
            if not HTTPS_URL.match(value):
                raise ValueError(f"JwtArgs.{field}: {value!r} is not allowed; allowed: an https:// URL")
        if not self.audiences or any(not a or len(a) > 253 for a in self.audiences):
            raise ValueError(
                f"JwtArgs.audiences: {list(self.audiences)!r} is not allowed; allowed: 1 or more non-empty audiences"
            )
        check_declared("JwtArgs.jwks_cache_seconds", "ingressJwtJwksCacheSeconds", self.jwks_cache_seconds)
        check_declared("JwtArgs.rate_limit_rps", "ingressJwtRateLimitRps", self.rate_limit_rps)
        for field, value in (
            ("models_claim", self.models_claim),
            ("deployments_claim", self.deployments_claim),
            ("client_claim", self.client_claim),
        ):
            if not JWT_CLAIM.match(value):
                raise ValueError(
                    f"JwtArgs.{field}: {value!r} is not allowed; allowed: a claim name (letters, digits, _ : -), "
                    "'.' between the names of a nested claim"
                )


@dataclass(frozen=True)
class IngressArgs:
    """Inputs of `Ingress`.

    domain: DNS zone of the public hosts `infer.<domain>` and `grpc.<domain>` (required).
    acme_email: contact registered with the ACME CA (required).
    tls_issuer: `letsencrypt` (default) or `letsencrypt-staging` (untrusted test certificates).
    backends: the Triton deployments, first = default for health and gRPC (required, >= 1;
        a model may be served by one backend only).
    allowed_cidrs: client CIDRs allowed (default none: required, >= 1; 0.0.0.0/0 = any).
    authentication: `api-keys` (default), `jwt` or `both` (a client presents either).
    clients: API client names (DNS labels, unique; default ("default",)): one generated key each,
        exported as the secret map `api_keys`. Must be () with `jwt` alone (no keys are made).
    jwt: the token settings; required with `jwt` or `both`, refused otherwise.
    request_body_limit_mib: largest HTTP request body, MiB (1-1024; default 64).
    rate_limit_rps: requests per second per API client, per proxy replica (1-100000; default
        200). Each Envoy replica counts for itself: a client whose connections spread over all
        replicas gets up to `replicas x rate_limit_rps` (`aggregate_rate_limit_rps`).
    replicas: Envoy proxy replicas (default 2; >= 2 keeps a drain from dropping the ingress);
        the Envoy Gateway controller runs min(replicas, 2).
    vpc_cidr: the cluster VPC's CIDR, where the controller and cert-manager reach the API server and
        the API server calls cert-manager's webhook (default: the stack config's `vpcCidr` default).
    triton_namespace / ingress_namespace / cert_manager_namespace: from components/kubernetes/naming.py.
    """

    domain: str
    acme_email: str
    backends: tuple[TritonBackend, ...]
    allowed_cidrs: tuple[str, ...]
    tls_issuer: str = "letsencrypt"
    authentication: str = API_KEYS
    clients: tuple[str, ...] = (DEFAULT_CLIENT,)
    jwt: JwtArgs | None = None
    request_body_limit_mib: int = 64
    rate_limit_rps: int = 200
    replicas: int = 2
    vpc_cidr: str = network_policies.DEFAULT_VPC_CIDR
    triton_namespace: str = naming.TRITON_NAMESPACE
    ingress_namespace: str = naming.INGRESS_NAMESPACE
    cert_manager_namespace: str = naming.CERT_MANAGER_NAMESPACE

    def __post_init__(self) -> None:
        network_policies.check_vpc_cidr("IngressArgs", self.vpc_cidr)
        if not DNS_NAME.match(self.domain):
            raise ValueError(
                f"IngressArgs.domain: {self.domain!r} is not allowed; allowed: a lowercase DNS name such as "
                "inference.example.com"
            )
        read_str("IngressArgs.acme_email", self.acme_email, EMAIL, "an e-mail address")
        check_declared("IngressArgs.tls_issuer", "tlsIssuer", self.tls_issuer)
        self._check_backends()
        self._check_cidrs()
        self._check_authentication()
        check_declared("IngressArgs.request_body_limit_mib", "ingressRequestBodyLimitMiB", self.request_body_limit_mib)
        check_declared("IngressArgs.rate_limit_rps", "ingressRateLimitRps", self.rate_limit_rps)
        if self.replicas < 1:
            raise ValueError(f"IngressArgs.replicas: {self.replicas!r} is not allowed; allowed: 1 or more")

    def _check_backends(self) -> None:
        if not self.backends:
            raise ValueError("IngressArgs.backends: () is not allowed; allowed: at least one Triton backend")
        seen: dict[str, str] = {}
        for b in self.backends:
            for m in b.models:
                if not layout.MODEL_NAME_RE.match(m):
                    raise ValueError(
                        f"IngressArgs.backends[{b.deployment}].models: {m!r} is not allowed; allowed: lowercase "
                        "letters, digits, '_' and '-'"
                    )
                if m in seen:
                    raise ValueError(
                        f"IngressArgs.backends: model {m!r} is served by both {seen[m]!r} and {b.deployment!r}; "
                        "allowed: each model in one deployment"
                    )
                seen[m] = b.deployment
        # Route objects are named after the model with `_` as `-` (object names take no `_`).
        by_object: dict[str, str] = {}
        for m in seen:
            other = by_object.setdefault(m.replace("_", "-"), m)
            if other != m:
                raise ValueError(
                    f"IngressArgs.backends: models {other!r} and {m!r} differ only in '_' and '-'; allowed: names "
                    "that stay distinct with '_' read as '-' (their routes are named after them)"
                )

    def _check_cidrs(self) -> None:
        if not self.allowed_cidrs:
            raise ValueError(
                "IngressArgs.allowed_cidrs: () is not allowed; allowed: at least one CIDR (0.0.0.0/0 for any client)"
            )
        for c in self.allowed_cidrs:
            try:
                ipaddress.ip_network(c, strict=True)
            except ValueError:
                raise ValueError(
                    f"IngressArgs.allowed_cidrs: {c!r} is not allowed; allowed: CIDRs such as 203.0.113.0/24"
                ) from None
        if cidr_rules.world_open(self.allowed_cidrs) and tuple(self.allowed_cidrs) != (str(cidr_rules.WORLD),):
            raise ValueError(
                f"IngressArgs.allowed_cidrs: {cidr_rules.describe(self.allowed_cidrs)} lets (almost) every client "
                "through under another spelling; "
                "allowed: ('0.0.0.0/0',) for a public API, or CIDRs whose union is at most a /8"
            )

    def _check_authentication(self) -> None:
        check_declared("IngressArgs.authentication", "ingressAuthentication", self.authentication)
        if self.api_keys_on:
            if not self.clients:
                raise ValueError(
                    "IngressArgs.clients: () is not allowed; allowed: at least one client name such as 'default'"
                )
        elif self.clients:
            raise ValueError(
                f"IngressArgs.clients: {list(self.clients)!r} is not allowed with authentication 'jwt'; allowed: () "
                "(no API keys are made)"
            )
        for c in self.clients:
            read_dns_label("IngressArgs.clients", c)
        if len(set(self.clients)) != len(self.clients):
            raise ValueError(
                f"IngressArgs.clients: {list(self.clients)!r} has duplicates; allowed: each client name once"
            )
        if self.jwt_on and self.jwt is None:
            raise ValueError(
                f"IngressArgs.jwt: None is not allowed with authentication {self.authentication!r}; allowed: JwtArgs"
            )
        if not self.jwt_on and self.jwt is not None:
            raise ValueError(
                "IngressArgs.jwt: is set with authentication 'api-keys'; allowed: None, or authentication jwt | both"
            )

    @property
    def api_keys_on(self) -> bool:
        return self.authentication in (API_KEYS, BOTH)

    @property
    def jwt_on(self) -> bool:
        return self.authentication in (JWT, BOTH)

    @property
    def methods(self) -> tuple[str, ...]:
        """The authentication methods in use, each with routes of its own: API keys, then JWT."""
        return tuple(m for m, on in ((API_KEYS, self.api_keys_on), (JWT, self.jwt_on)) if on)

    @property
    def aggregate_rate_limit_rps(self) -> int:
        """The most one API client can get through all proxy replicas together."""
        return self.rate_limit_rps * self.replicas

    @property
    def http_host(self) -> str:
        return f"infer.{self.domain}"

    @property
    def grpc_host(self) -> str:
        return f"grpc.{self.domain}"
