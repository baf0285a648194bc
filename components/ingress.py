"""Public ingress for Triton: Traefik Proxy v3 behind an AWS NLB,
certificates from cert-manager through an ACME ClusterIssuer (HTTP-01).

Why Traefik and cert-manager (docs/serving-plane.md has the long form): ingress-nginx is
retired (no releases or security fixes after March 2026); Traefik's IngressRoute matches
on host, method, exact path and regular expression, which is what closing Triton's admin
API needs, and its IP allow-list, basic-auth, rate-limit and buffering middlewares cover
client CIDRs, API keys, per-client rate and request size without extra services.

What is public, and nothing else:
  https://infer.<domain>  POST /v2/models/<m>/infer, POST /v2/models/<m>/versions/<n>/infer,
                          GET /v2/models/<m>, GET /v2/models/<m>/versions/<n>,
                          GET /v2/models/<m>/config, GET /v2/models/<m>/ready,
                          GET /v2/models/<m>/versions/<n>/ready,
                          GET /v2/health/ready, GET /v2/health/live
  https://grpc.<domain>   inference.GRPCInferenceService/{ModelInfer, ModelMetadata,
                          ModelConfig, ModelReady, ServerLive, ServerReady}; header
                          `x-triton-deployment: <name>` selects a deployment (default: the first)
Each model's HTTP routes go to the deployment that serves it. /v2/repository, logging,
trace, shared memory, statistics and the metrics port have no route; Triton also refuses
them without the admin key (components/triton_deployment.py), and the chain strips any
client-sent `admin-key` header.

Middleware chains: HTTP routes run ipAllowList (ingressAllowedCidrs) -> basicAuth (one
API key per `ingressClients` entry) -> rateLimit (ingressRateLimitRps per client, per
Traefik replica) -> strip admin header -> buffering (ingressRequestBodyLimitMiB). gRPC
routes run the same chain WITHOUT buffering: Traefik's buffering middleware breaks gRPC
(response trailers are lost, traefik/traefik#9788), so gRPC message size is bounded only
by Triton (docs/serving-plane.md, "Request size").
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.gpu import gpu_contract
from components.kubernetes import naming, network_policies
from components.kubernetes.helm import pinned_release as _release
from components.kubernetes.network_policies import from_api_server_rule, pods_in, rule, tcp
from components.serving_namespace import ServingNamespace, ServingNamespaceArgs
from components.stack_config import cidr_rules
from components.triton_deployment import ADMIN_HEADER, GRPC_ADMIN_HEADER, GRPC_PORT, HTTP_PORT
from components.upstream import versions
from model_sync.contract import layout

ACME_SERVERS = {
    "letsencrypt": "https://acme-v02.api.letsencrypt.org/directory",
    "letsencrypt-staging": "https://acme-staging-v02.api.letsencrypt.org/directory",
}
INGRESS_CLASS = "traefik"
TLS_SECRET = "triton-tls"  # noqa: S105 (a Secret name)
API_KEYS_SECRET = "triton-api-keys"  # noqa: S105 (a Secret name)
DEFAULT_CLIENT = "default"
CLIENT_HEADER = "X-Triton-Client"
DEPLOYMENT_HEADER = "x-triton-deployment"
GRPC_SERVICE = "inference.GRPCInferenceService"
# Only these RPCs are routed. ModelStreamInfer (decoupled models) is left out: nothing on
# this platform serves decoupled models; repository, statistics, trace, logging and
# shared-memory RPCs are admin-only.
# ref: https://github.com/triton-inference-server/common/blob/main/protobuf/grpc_service.proto
GRPC_PUBLIC_METHODS = ("ModelInfer", "ModelMetadata", "ModelConfig", "ModelReady", "ServerLive", "ServerReady")
HEALTH_PATHS = ("/v2/health/ready", "/v2/health/live")
# Middleware roles in chain order. gRPC never gets `body-limit` (buffering breaks gRPC
# trailers: https://github.com/traefik/traefik/issues/9788).
MIDDLEWARES = ("allowlist", "auth", "ratelimit", "strip-admin", "body-limit")
HTTP_MIDDLEWARES = MIDDLEWARES
GRPC_MIDDLEWARES = ("allowlist", "auth", "ratelimit", "strip-admin")
ACME_SOLVER_PORT = 8089
# Traefik's container ports (traefik_values: `web`, `websecure`; the chart's metrics entry point).
TRAEFIK_WEB_PORT = 8000
TRAEFIK_WEBSECURE_PORT = 8443
TRAEFIK_POD_LABELS = {"app.kubernetes.io/name": "traefik"}
# cert-manager's pods and ports (the chart's defaults).
CERT_MANAGER_WEBHOOK_PORT = 10250
CERT_MANAGER_CONTROLLER_LABELS = {"app.kubernetes.io/name": "cert-manager", "app.kubernetes.io/component": "controller"}
CERT_MANAGER_WEBHOOK_LABELS = {"app.kubernetes.io/name": "webhook", "app.kubernetes.io/component": "webhook"}
ACME_SOLVER_LABELS = {"acme.cert-manager.io/http01-solver": "true"}
_DNS_NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_CLIENT = re.compile(r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$")


@dataclass(frozen=True)
class TritonBackend:
    """One Triton deployment behind the ingress: its name, Service and the models it serves."""

    deployment: str
    service: str
    models: tuple[str, ...]


@dataclass(frozen=True)
class IngressArgs:
    """Inputs of `Ingress`.

    domain: DNS zone of the public hosts `infer.<domain>` and `grpc.<domain>` (required).
    acme_email: contact registered with the ACME CA (required).
    tls_issuer: `letsencrypt` (default) or `letsencrypt-staging` (untrusted test certificates).
    backends: the Triton deployments, first = default for health and gRPC (required, >= 1;
        a model may be served by one backend only).
    allowed_cidrs: client CIDRs allowed (default none: required, >= 1; 0.0.0.0/0 = any).
    request_body_limit_mib: largest request body, MiB (1-1024; default 64).
    rate_limit_rps: average requests per second per client key, burst 2x (1-100000; default
        200). Traefik counts per replica: a client whose connections spread over all
        replicas gets up to `replicas x rate_limit_rps` (`aggregate_rate_limit_rps`).
    replicas: Traefik replicas (default 2; >= 2 keeps a drain from dropping the ingress).
    clients: API client names (DNS labels, unique; default ("default",)): one generated
        key each, exported as the secret map `api_keys`.
    vpc_cidr: the cluster VPC's CIDR, where Traefik and cert-manager reach the API server and
        the API server calls cert-manager's webhook (default: the stack config's `vpcCidr` default).
    triton_namespace / ingress_namespace / cert_manager_namespace: from components/kubernetes/naming.py.
    """

    domain: str
    acme_email: str
    backends: tuple[TritonBackend, ...]
    allowed_cidrs: tuple[str, ...]
    tls_issuer: str = "letsencrypt"
    request_body_limit_mib: int = 64
    rate_limit_rps: int = 200
    replicas: int = 2
    clients: tuple[str, ...] = (DEFAULT_CLIENT,)
    vpc_cidr: str = network_policies.DEFAULT_VPC_CIDR
    triton_namespace: str = naming.TRITON_NAMESPACE
    ingress_namespace: str = naming.INGRESS_NAMESPACE
    cert_manager_namespace: str = naming.CERT_MANAGER_NAMESPACE

    def __post_init__(self) -> None:
        network_policies.check_vpc_cidr("IngressArgs", self.vpc_cidr)
        if not _DNS_NAME.match(self.domain):
            raise ValueError(
                f"IngressArgs.domain: {self.domain!r} is not allowed; allowed: a lowercase DNS name such as "
                "inference.example.com"
            )
        if "@" not in self.acme_email:
            raise ValueError(f"IngressArgs.acme_email: {self.acme_email!r} is not allowed; allowed: an e-mail address")
        if self.tls_issuer not in ACME_SERVERS:
            raise ValueError(
                f"IngressArgs.tls_issuer: {self.tls_issuer!r} is not allowed; allowed: {' | '.join(ACME_SERVERS)}"
            )
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
        if not 1 <= self.request_body_limit_mib <= 1024:
            raise ValueError(
                f"IngressArgs.request_body_limit_mib: {self.request_body_limit_mib!r} is out of range; allowed: 1 to "
                "1024"
            )
        if not 1 <= self.rate_limit_rps <= 100_000:
            raise ValueError(
                f"IngressArgs.rate_limit_rps: {self.rate_limit_rps!r} is out of range; allowed: 1 to 100000"
            )
        if self.replicas < 1:
            raise ValueError(f"IngressArgs.replicas: {self.replicas!r} is not allowed; allowed: 1 or more")
        if not self.clients:
            raise ValueError(
                "IngressArgs.clients: () is not allowed; allowed: at least one client name such as 'default'"
            )
        for c in self.clients:
            if not _CLIENT.match(c):
                raise ValueError(
                    f"IngressArgs.clients: {c!r} is not allowed; allowed: a DNS label (lowercase letters, digits, "
                    "'-'; at most 32 characters)"
                )
        if len(set(self.clients)) != len(self.clients):
            raise ValueError(
                f"IngressArgs.clients: {list(self.clients)!r} has duplicates; allowed: each client name once"
            )

    @property
    def aggregate_rate_limit_rps(self) -> int:
        """The most one client can get through all Traefik replicas together."""
        return self.rate_limit_rps * self.replicas

    @property
    def http_host(self) -> str:
        return f"infer.{self.domain}"

    @property
    def grpc_host(self) -> str:
        return f"grpc.{self.domain}"


# --------------------------------------------------------------------------------------
# Builders.
# --------------------------------------------------------------------------------------


def _system_node_selector() -> dict[str, str]:
    return gpu_contract.system_node_labels()


def traefik_values(args: IngressArgs) -> dict[str, Any]:
    # ref: https://github.com/traefik/traefik-helm-chart/blob/master/traefik/values.yaml
    return {
        "deployment": {"replicas": args.replicas},
        "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
        "nodeSelector": _system_node_selector(),
        "ingressClass": {"enabled": True, "isDefaultClass": False, "name": INGRESS_CLASS},
        "providers": {
            # Routes reference only Services in their own namespace.
            "kubernetesCRD": {"enabled": True, "allowCrossNamespace": False, "allowExternalNameServices": False},
            # Needed for cert-manager's HTTP-01 solver Ingress.
            "kubernetesIngress": {"enabled": True, "allowExternalNameServices": False},
        },
        # No version checks or anonymous usage reports from production (the chart's
        # `global` block; it renders --global.checknewversion / --global.sendanonymoususage).
        # ref: https://doc.traefik.io/traefik/contributing/data-collection/
        "global": {"checkNewVersion": False, "sendAnonymousUsage": False},
        "ports": {
            # Port 80 serves only ACME HTTP-01 challenges; nothing else is routed there.
            "web": {"port": 8000, "exposedPort": 80},
            # Chart >= 39 takes the entry point's TLS under `http` (values.schema.json refuses `tls` here).
            "websecure": {
                "port": 8443,
                "exposedPort": 443,
                "http": {"tls": {"enabled": True}},
                "http3": {"enabled": False},
            },
        },
        "tlsOptions": {"default": {"minVersion": "VersionTLS12", "sniStrict": True}},
        "service": {
            # Local keeps the client source address, which the ipAllowList middleware checks.
            # ref:
            # https://kubernetes.io/docs/tasks/access-application-cluster/create-external-load-balancer/#preserving-the-client-source-ip
            "spec": {"externalTrafficPolicy": "Local"},
            # ref: https://docs.aws.amazon.com/eks/latest/userguide/network-load-balancing.html
            "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"},
        },
        # Chart >= 41 names these `log` / `accessLog` (it used to be `logs.general` / `logs.access`).
        # ref: https://doc.traefik.io/traefik/reference/install-configuration/observability/logs-and-accesslogs/
        "log": {"format": "json"},
        "accessLog": {"enabled": True, "format": "json"},
        "metrics": {"prometheus": {"entryPoint": "metrics"}},
        "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
    }


def cert_manager_values(replicas: int) -> dict[str, Any]:
    # ref: https://cert-manager.io/docs/installation/helm/
    # The chart's security contexts are already restricted (non-root, seccomp RuntimeDefault,
    # read-only root, no capabilities); what it leaves empty is resources. Sized for one
    # cluster's certificates: memory limits 2x the request, CPU limits well above steady use
    # (room for the informers' initial list at start-up).
    # ref: https://github.com/cert-manager/cert-manager/blob/v1.20.2/deploy/charts/cert-manager/values.yaml (resources)
    system = _system_node_selector()
    return {
        "crds": {"enabled": True, "keep": True},
        "replicaCount": replicas,
        # With neither bound set the chart renders `minAvailable: 1` (its values.yaml only
        # documents the bounds in comments, so they are not default keys).
        "podDisruptionBudget": {"enabled": replicas > 1},
        "nodeSelector": system,
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
        # The webhook and the cainjector get the same PDB as the controller: a drain that took
        # every webhook replica at once would refuse every Certificate change meanwhile.
        "webhook": {
            "replicaCount": replicas,
            "nodeSelector": system,
            "podDisruptionBudget": {"enabled": replicas > 1},
            "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
        },
        "cainjector": {
            "replicaCount": replicas,
            "nodeSelector": system,
            "podDisruptionBudget": {"enabled": replicas > 1},
            "resources": {"requests": {"cpu": "20m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        },
        "startupapicheck": {
            "nodeSelector": system,
            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
        },
    }


def cluster_issuer_spec(args: IngressArgs) -> dict[str, Any]:
    # ref: https://cert-manager.io/docs/configuration/acme/http01/
    return {
        "acme": {
            "server": ACME_SERVERS[args.tls_issuer],
            "email": args.acme_email,
            "privateKeySecretRef": {"name": f"{args.tls_issuer}-account-key"},
            "solvers": [{"http01": {"ingress": {"ingressClassName": INGRESS_CLASS}}}],
        }
    }


def certificate_spec(args: IngressArgs) -> dict[str, Any]:
    return {
        "secretName": TLS_SECRET,
        "dnsNames": [args.http_host, args.grpc_host],
        "issuerRef": {"name": args.tls_issuer, "kind": "ClusterIssuer", "group": "cert-manager.io"},
        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        "duration": "2160h",
        "renewBefore": "720h",
    }


def htpasswd_line(client: str, key: str) -> str:
    """A `{SHA}` htpasswd entry. The keys are 48 random alphanumerics (~285 bits), so a
    slow salted hash buys nothing, while bcrypt would cost ~50 ms of CPU per request."""
    digest = base64.b64encode(hashlib.sha1(key.encode(), usedforsecurity=False).digest()).decode()
    return f"{client}:{{SHA}}{digest}"


def middleware_specs(args: IngressArgs) -> dict[str, dict[str, Any]]:
    """Traefik Middleware specs keyed by role (`MIDDLEWARES` order = chain order)."""
    # ref: https://doc.traefik.io/traefik/middlewares/http/overview/
    return {
        "allowlist": {"ipAllowList": {"sourceRange": list(args.allowed_cidrs)}},
        "auth": {
            "basicAuth": {
                "secret": API_KEYS_SECRET,
                "realm": "triton",
                "removeHeader": True,
                "headerField": CLIENT_HEADER,
            }
        },
        "ratelimit": {
            "rateLimit": {
                "average": args.rate_limit_rps,
                "burst": 2 * args.rate_limit_rps,
                "period": "1s",
                "sourceCriterion": {"requestHeaderName": CLIENT_HEADER},
            }
        },
        # An empty value removes the header: clients can never present Triton's admin key,
        # neither as the HTTP header nor as the gRPC metadata Triton reads it from.
        "strip-admin": {"headers": {"customRequestHeaders": {ADMIN_HEADER: "", GRPC_ADMIN_HEADER: ""}}},
        "body-limit": {
            "buffering": {
                "maxRequestBodyBytes": args.request_body_limit_mib * 1024 * 1024,
                "memRequestBodyBytes": 4 * 1024 * 1024,
            }
        },
    }


def htpasswd_users(keys: dict[str, str]) -> str:
    """The basicAuth Secret's `users`: one htpasswd line per client, sorted by name."""
    return "\n".join(htpasswd_line(client, keys[client]) for client in sorted(keys))


def middleware_refs(roles: tuple[str, ...] = HTTP_MIDDLEWARES) -> list[dict[str, str]]:
    return [{"name": f"triton-{role}"} for role in roles]


def _or(*terms: str) -> str:
    return terms[0] if len(terms) == 1 else "(" + " || ".join(terms) + ")"


def http_rules(args: IngressArgs) -> list[tuple[str, TritonBackend]]:
    """(Traefik rule, backend) for every public HTTP route."""
    host = f"Host(`{args.http_host}`)"
    rules: list[tuple[str, TritonBackend]] = []
    for b in args.backends:
        for m in b.models:
            base = f"/v2/models/{m}"
            infer = _or(f"Path(`{base}/infer`)", f"PathRegexp(`^{base}/versions/[0-9]+/infer$`)")
            meta = _or(
                f"Path(`{base}`)",
                f"Path(`{base}/config`)",
                f"Path(`{base}/ready`)",
                f"PathRegexp(`^{base}/versions/[0-9]+$`)",
                f"PathRegexp(`^{base}/versions/[0-9]+/ready$`)",
            )
            rules.append((f"{host} && Method(`POST`) && {infer}", b))
            rules.append((f"{host} && Method(`GET`) && {meta}", b))
    health = _or(*(f"Path(`{p}`)" for p in HEALTH_PATHS))
    rules.append((f"{host} && Method(`GET`) && {health}", args.backends[0]))
    return rules


def grpc_rules(args: IngressArgs) -> list[tuple[str, TritonBackend, int]]:
    """(Traefik rule, backend, priority) for the gRPC host: one rule per deployment
    selected by header, plus the first deployment without it."""
    host = f"Host(`{args.grpc_host}`)"
    methods = _or(*(f"Path(`/{GRPC_SERVICE}/{m}`)" for m in GRPC_PUBLIC_METHODS))
    out = [
        (f"{host} && Method(`POST`) && Header(`{DEPLOYMENT_HEADER}`, `{b.deployment}`) && {methods}", b, 100)
        for b in args.backends
    ]
    out.append((f"{host} && Method(`POST`) && {methods}", args.backends[0], 10))
    return out


def http_route_spec(args: IngressArgs) -> dict[str, Any]:
    return {
        "entryPoints": ["websecure"],
        "routes": [
            {
                "kind": "Rule",
                "match": rule,
                "middlewares": middleware_refs(HTTP_MIDDLEWARES),
                "services": [{"name": b.service, "port": HTTP_PORT}],
            }
            for rule, b in http_rules(args)
        ],
        "tls": {"secretName": TLS_SECRET},
    }


def grpc_route_spec(args: IngressArgs) -> dict[str, Any]:
    return {
        "entryPoints": ["websecure"],
        "routes": [
            {
                "kind": "Rule",
                "match": rule,
                "priority": prio,
                "middlewares": middleware_refs(GRPC_MIDDLEWARES),
                "services": [{"name": b.service, "port": GRPC_PORT, "scheme": "h2c"}],
            }
            for rule, b, prio in grpc_rules(args)
        ],
        "tls": {"secretName": TLS_SECRET},
    }


def acme_solver_policy_spec(ingress_namespace: str) -> dict[str, Any]:
    """The triton namespace denies everything by default; cert-manager's HTTP-01 solver
    pods (created next to the Certificate) must be reachable from Traefik."""
    return network_policies.policy(
        ACME_SOLVER_LABELS, ingress=[rule([pods_in(ingress_namespace, TRAEFIK_POD_LABELS)], *tcp(ACME_SOLVER_PORT))]
    )


def ingress_network_policy_specs(args: IngressArgs) -> dict[str, dict[str, Any]]:
    """The ingress namespace's allow policies (role -> spec), on top of its default deny.
    Clients come from anywhere: the NLB keeps their addresses (externalTrafficPolicy Local)
    and the allowlist is Traefik's `ipAllowList` middleware, so the policy cannot narrow it."""
    return {
        "traefik": network_policies.policy(
            TRAEFIK_POD_LABELS,
            ingress=[
                rule([network_policies.cidr(network_policies.WORLD)], *tcp(TRAEFIK_WEB_PORT, TRAEFIK_WEBSECURE_PORT)),
            ],
            egress=[
                # The Triton Services' pods and cert-manager's HTTP-01 solvers, nothing else in the cluster.
                rule(
                    [pods_in(args.triton_namespace, {"app.kubernetes.io/name": "triton"})], *tcp(HTTP_PORT, GRPC_PORT)
                ),
                rule([pods_in(args.triton_namespace, ACME_SOLVER_LABELS)], *tcp(ACME_SOLVER_PORT)),
                network_policies.api_server_rule(args.vpc_cidr),
            ],
        ),
    }


def cert_manager_network_policy_specs(args: IngressArgs) -> dict[str, dict[str, Any]]:
    """The cert-manager namespace's allow policies (role -> spec), on top of its default deny."""
    return {
        # The controller talks ACME to the CA (HTTPS) and self-checks each HTTP-01 challenge
        # through the public host (port 80) before asking the CA to validate it.
        # ref: https://cert-manager.io/docs/configuration/acme/http01/
        "acme": network_policies.policy(
            CERT_MANAGER_CONTROLLER_LABELS, egress=[rule([network_policies.internet()], *tcp(443, 80))]
        ),
        "webhook": network_policies.policy(
            CERT_MANAGER_WEBHOOK_LABELS, ingress=[from_api_server_rule(args.vpc_cidr, *tcp(CERT_MANAGER_WEBHOOK_PORT))]
        ),
        # Controller, webhook, cainjector and the startup check all call the API server.
        "api-server": network_policies.policy(None, egress=[network_policies.api_server_rule(args.vpc_cidr)]),
    }


# --------------------------------------------------------------------------------------
# The component.
# --------------------------------------------------------------------------------------


class Ingress(pulumi.ComponentResource):
    """Traefik + cert-manager, the ClusterIssuer, the certificate and Triton's public routes."""

    http_host: pulumi.Output[str]
    grpc_host: pulumi.Output[str]
    http_endpoint: pulumi.Output[str]
    grpc_endpoint: pulumi.Output[str]
    api_keys: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: IngressArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:serving:Ingress", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        ingress_ns = ServingNamespace(
            f"{name}-namespace",
            ServingNamespaceArgs(args.ingress_namespace, allow=ingress_network_policy_specs(args)),
            opts=child,
        )
        cm_ns = ServingNamespace(
            f"{name}-cert-manager-namespace",
            ServingNamespaceArgs(args.cert_manager_namespace, allow=cert_manager_network_policy_specs(args)),
            opts=child,
        )

        self.cert_manager = _release(
            f"{name}-cert-manager",
            versions.CERT_MANAGER_CHART,
            args.cert_manager_namespace,
            cert_manager_values(min(args.replicas, 3)),
            pulumi.ResourceOptions(parent=self, depends_on=[cm_ns]),
        )
        self.traefik = _release(
            f"{name}-traefik",
            versions.TRAEFIK_CHART,
            args.ingress_namespace,
            traefik_values(args),
            pulumi.ResourceOptions(parent=self, depends_on=[ingress_ns]),
        )

        after_cm = pulumi.ResourceOptions(parent=self, depends_on=[self.cert_manager])
        after_traefik = pulumi.ResourceOptions(parent=self, depends_on=[self.traefik])
        in_triton: Any = lambda n: {  # noqa: E731
            "name": n,
            "namespace": args.triton_namespace,
            "labels": {"app.kubernetes.io/part-of": "triton-platform"},
        }

        self.cluster_issuer = k8s.apiextensions.CustomResource(
            f"{name}-cluster-issuer",
            api_version="cert-manager.io/v1",
            kind="ClusterIssuer",
            metadata={"name": args.tls_issuer},
            spec=cluster_issuer_spec(args),
            opts=after_cm,
        )
        self.certificate = k8s.apiextensions.CustomResource(
            f"{name}-certificate",
            api_version="cert-manager.io/v1",
            kind="Certificate",
            metadata=in_triton(TLS_SECRET),
            spec=certificate_spec(args),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.cluster_issuer]),
        )
        solver_spec: Any = acme_solver_policy_spec(args.ingress_namespace)
        k8s.networking.v1.NetworkPolicy(
            f"{name}-acme-solver-policy", metadata=in_triton("allow-acme-http01-solver"), spec=solver_spec, opts=child
        )

        # One key per client; `<name>-<client>-api-key` keeps the original default key.
        keys = {
            c: random.RandomPassword(f"{name}-{c}-api-key", length=48, special=False, opts=child).result
            for c in args.clients
        }
        all_keys: pulumi.Output[dict[str, str]] = pulumi.Output.all(**keys)
        self.api_keys = pulumi.Output.secret(all_keys)
        self.api_keys_secret = k8s.core.v1.Secret(
            f"{name}-api-keys",
            metadata=in_triton(API_KEYS_SECRET),
            type="Opaque",
            string_data={"users": all_keys.apply(htpasswd_users)},
            opts=child,
        )

        self.middlewares = {
            role: k8s.apiextensions.CustomResource(
                f"{name}-middleware-{role}",
                api_version="traefik.io/v1alpha1",
                kind="Middleware",
                metadata=in_triton(f"triton-{role}"),
                spec=spec,
                opts=after_traefik,
            )
            for role, spec in middleware_specs(args).items()
        }
        routes_opts = pulumi.ResourceOptions(
            parent=self, depends_on=[self.traefik, self.certificate, *self.middlewares.values()]
        )
        self.http_route = k8s.apiextensions.CustomResource(
            f"{name}-http-route",
            api_version="traefik.io/v1alpha1",
            kind="IngressRoute",
            metadata=in_triton("triton-http"),
            spec=http_route_spec(args),
            opts=routes_opts,
        )
        self.grpc_route = k8s.apiextensions.CustomResource(
            f"{name}-grpc-route",
            api_version="traefik.io/v1alpha1",
            kind="IngressRoute",
            metadata=in_triton("triton-grpc"),
            spec=grpc_route_spec(args),
            opts=routes_opts,
        )

        self.http_host = pulumi.Output.from_input(args.http_host)
        self.grpc_host = pulumi.Output.from_input(args.grpc_host)
        self.http_endpoint = pulumi.Output.from_input(f"https://{args.http_host}")
        self.grpc_endpoint = pulumi.Output.from_input(f"{args.grpc_host}:443")
        self.register_outputs(
            {
                "httpHost": self.http_host,
                "grpcHost": self.grpc_host,
                "httpEndpoint": self.http_endpoint,
                "grpcEndpoint": self.grpc_endpoint,
                "apiKeys": self.api_keys,
            }
        )
