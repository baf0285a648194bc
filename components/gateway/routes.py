"""The public surface: every HTTPRoute and GRPCRoute the Gateway serves, and nothing else.

What is public:
  https://infer.<domain>  POST /v2/models/<m>/infer, POST /v2/models/<m>/versions/<n>/infer,
                          GET /v2/models/<m>, GET /v2/models/<m>/versions/<n>,
                          GET /v2/models/<m>/config, GET /v2/models/<m>/ready,
                          GET /v2/models/<m>/versions/<n>/ready,
                          GET /v2/health/ready, GET /v2/health/live
  https://grpc.<domain>   inference.GRPCInferenceService/{ModelInfer, ModelMetadata, ModelConfig,
                          ModelReady, ServerLive, ServerReady}; header `x-triton-deployment: <name>`
                          selects a deployment (default: the first)
  http://<either host>    a 301 to https (and cert-manager's HTTP-01 challenge routes)
Each model's HTTP routes go to the deployment that serves it. /v2/repository, logging, trace,
shared memory, statistics and the metrics port have no route; Triton also refuses them without
the admin key (components/triton_deployment.py), and every route removes a client-sent admin key
header (HTTP header and gRPC metadata) and the client's credentials before Triton.

One route object per (model | health | gRPC deployment) and authentication method, so that each
gets a SecurityPolicy of its own (components/gateway/access.py). With both methods, the JWT routes
match `Authorization: Bearer ...` in addition (one more header match: Gateway API gives them
precedence over the API-key routes, which take everything else and answer 401 with a Basic
challenge).
ref: https://gateway-api.sigs.k8s.io/reference/spec/#httproutematch (precedence)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.gateway.args import JWT, IngressArgs, TritonBackend
from components.kubernetes import naming
from components.kubernetes.triton_server import ADMIN_HEADER, GRPC_ADMIN_HEADER, GRPC_PORT, HTTP_PORT
from model_sync.contract.ingress import DEPLOYMENT_HEADER

GRPC_SERVICE = "inference.GRPCInferenceService"
# Only these RPCs are routed. ModelStreamInfer (decoupled models) is left out: nothing on this
# platform serves decoupled models; repository, statistics, trace, logging and shared-memory RPCs
# are admin-only.
# ref: https://github.com/triton-inference-server/common/blob/main/protobuf/grpc_service.proto
GRPC_PUBLIC_METHODS = ("ModelInfer", "ModelMetadata", "ModelConfig", "ModelReady", "ServerLive", "ServerReady")
HEALTH_PATHS = ("/v2/health/ready", "/v2/health/live")
# The authenticated client's name, set by the proxy (API key user or the JWT's client claim) after
# the client's own copy is dropped on arrival (components/gateway/traffic.py); the access log
# records it.
CLIENT_HEADER = "x-triton-client"
BEARER = "^Bearer .+"
# Removed from every request before Triton: the admin key in both of Triton's spellings (never a
# client's to send) and the client's credentials (checked by the proxy; Triton has no use for them).
REMOVED_HEADERS = (ADMIN_HEADER, GRPC_ADMIN_HEADER, "authorization")
HSTS = "max-age=31536000; includeSubDomains"
# The Gateway's listeners (components/gateway/proxy.py).
HTTP_LISTENER = "http"
INFER_LISTENER = "https-infer"
GRPC_LISTENER = "https-grpc"
REDIRECT_ROUTE = "triton-https-redirect"


@dataclass(frozen=True)
class Route:
    """One public route object: its kind and name, the authentication it takes, where it goes, and
    the model (HTTP) or deployment (gRPC) whose claim authorizes it (None: any authenticated client)."""

    kind: str  # HTTPRoute | GRPCRoute
    name: str
    method: str  # args.API_KEYS | args.JWT
    backend: TritonBackend
    model: str | None
    deployment: str | None
    spec: dict[str, Any]


def _object_name(model: str) -> str:
    return model.replace("_", "-")


def _parent(args: IngressArgs, listener: str) -> list[dict[str, Any]]:
    return [{"name": naming.GATEWAY_NAME, "namespace": args.triton_namespace, "sectionName": listener}]


def _bearer(args: IngressArgs, method: str) -> list[dict[str, Any]]:
    """The extra header match of a JWT route when API keys are on too."""
    if method == JWT and args.api_keys_on:
        return [{"type": "RegularExpression", "name": "authorization", "value": BEARER}]
    return []


def _request_filters() -> list[dict[str, Any]]:
    return [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"remove": list(REMOVED_HEADERS)}}]


def _http_filters() -> list[dict[str, Any]]:
    return [
        *_request_filters(),
        {
            "type": "ResponseHeaderModifier",
            "responseHeaderModifier": {"set": [{"name": "Strict-Transport-Security", "value": HSTS}]},
        },
    ]


def _http_match(method: str, kind: str, path: str, headers: list[dict[str, Any]]) -> dict[str, Any]:
    match: dict[str, Any] = {"path": {"type": kind, "value": path}, "method": method}
    if headers:
        match["headers"] = headers
    return match


def _http_rule(
    name: str, matches: list[dict[str, Any]], backend: TritonBackend, filters: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "name": name,
        "matches": matches,
        "filters": filters,
        "backendRefs": [{"name": backend.service, "port": HTTP_PORT}],
    }


def model_rules(model: str, backend: TritonBackend, headers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A model's inference and metadata rules: exact paths, and anchored expressions for versions."""
    base = f"/v2/models/{model}"
    version = f"^{base}/versions/[0-9]+"
    infer = [
        _http_match("POST", "Exact", f"{base}/infer", headers),
        _http_match("POST", "RegularExpression", f"{version}/infer$", headers),
    ]
    metadata = [
        *(_http_match("GET", "Exact", p, headers) for p in (base, f"{base}/config", f"{base}/ready")),
        _http_match("GET", "RegularExpression", f"{version}$", headers),
        _http_match("GET", "RegularExpression", f"{version}/ready$", headers),
    ]
    filters = _http_filters()
    return [_http_rule("infer", infer, backend, filters), _http_rule("metadata", metadata, backend, filters)]


def _http_route(args: IngressArgs, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"parentRefs": _parent(args, INFER_LISTENER), "hostnames": [args.http_host], "rules": rules}


def _grpc_route(args: IngressArgs, backend: TritonBackend, headers: list[dict[str, Any]]) -> dict[str, Any]:
    matches = []
    for m in GRPC_PUBLIC_METHODS:
        match: dict[str, Any] = {"method": {"type": "Exact", "service": GRPC_SERVICE, "method": m}}
        if headers:
            match["headers"] = headers
        matches.append(match)
    return {
        "parentRefs": _parent(args, GRPC_LISTENER),
        "hostnames": [args.grpc_host],
        "rules": [
            {
                "name": "inference",
                "matches": matches,
                "filters": _request_filters(),
                "backendRefs": [{"name": backend.service, "port": GRPC_PORT}],
            }
        ],
    }


def public_routes(args: IngressArgs) -> list[Route]:
    """Every route a client can reach, per authentication method in use."""
    out: list[Route] = []
    first = args.backends[0]
    for method in args.methods:
        bearer = _bearer(args, method)
        for b in args.backends:
            for m in b.models:
                name = f"triton-model-{_object_name(m)}-{method}"
                spec = _http_route(args, model_rules(m, b, bearer))
                out.append(Route("HTTPRoute", name, method, b, m, None, spec))
        health = [_http_match("GET", "Exact", p, bearer) for p in HEALTH_PATHS]
        spec = _http_route(args, [_http_rule("health", health, first, _http_filters())])
        out.append(Route("HTTPRoute", f"triton-health-{method}", method, first, None, None, spec))
        for b in args.backends:
            selected = [{"type": "Exact", "name": DEPLOYMENT_HEADER, "value": b.deployment}, *bearer]
            name = f"triton-grpc-{b.deployment}-{method}"
            out.append(Route("GRPCRoute", name, method, b, None, b.deployment, _grpc_route(args, b, selected)))
        # Without the header: the first deployment (fewer header matches: the selecting routes win).
        spec = _grpc_route(args, first, bearer)
        out.append(Route("GRPCRoute", f"triton-grpc-{method}", method, first, None, first.deployment, spec))
    return out


def redirect_route_spec(args: IngressArgs) -> dict[str, Any]:
    """Plain HTTP answers a permanent redirect to https. cert-manager's HTTP-01 solver attaches its
    own route for /.well-known/acme-challenge/<token> to the same listener: an exact path, which
    takes precedence over this route's `/` prefix."""
    return {
        "parentRefs": _parent(args, HTTP_LISTENER),
        "hostnames": [args.http_host, args.grpc_host],
        "rules": [
            {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}]}
        ],
    }
