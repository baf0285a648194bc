"""What the proxies enforce on traffic: per-client rate limits and the HTTP body limit per route
(BackendTrafficPolicy), and on every connection TLS 1.2+ and the client's own identity header
dropped on arrival (ClientTrafficPolicy).

Rate limits are Envoy's local ones, counted by each proxy replica: one bucket per API client
(matched on the `x-triton-client` the basic-auth filter sets, which runs before the limiter) of
`rate_limit_rps` requests a second, shared by all of that client's routes; bearer-token clients
share one bucket of `jwt.rate_limit_rps`. Envoy Gateway's local limits cannot key on a header's
distinct values (only its global rate limit service can), so JWT subjects are not limited one by
one. gRPC gets no body limit: request buffering breaks streaming APIs, and Triton bounds gRPC
message sizes itself.
ref: https://gateway.envoyproxy.io/docs/tasks/traffic/local-rate-limit/
ref: https://gateway.envoyproxy.io/docs/api/extension_types/#clienttrafficpolicy
"""

from __future__ import annotations

from typing import Any

from components.gateway.args import IngressArgs
from components.gateway.routes import BEARER, CLIENT_HEADER, Route
from components.kubernetes import naming

HTTP_POLICY = "triton-http"
GRPC_POLICY = "triton-grpc"
CLIENT_POLICY = "triton-clients"


def rate_limit_rules(args: IngressArgs) -> list[dict[str, Any]]:
    rules = [
        {
            "clientSelectors": [{"headers": [{"name": CLIENT_HEADER, "type": "Exact", "value": c}]}],
            "limit": {"requests": args.rate_limit_rps, "unit": "Second"},
            "shared": True,
        }
        for c in args.clients
    ]
    if args.jwt is not None:
        rules.append(
            {
                "clientSelectors": [
                    {"headers": [{"name": "authorization", "type": "RegularExpression", "value": BEARER}]}
                ],
                "limit": {"requests": args.jwt.rate_limit_rps, "unit": "Second"},
                "shared": True,
            }
        )
    return rules


def _targets(routes: list[Route]) -> list[dict[str, Any]]:
    return [{"group": "gateway.networking.k8s.io", "kind": r.kind, "name": r.name} for r in routes]


def backend_traffic_policy_specs(args: IngressArgs, routes: list[Route]) -> dict[str, dict[str, Any]]:
    """name -> BackendTrafficPolicy spec: the HTTP routes' (rate and body limits), the gRPC routes' (rate)."""
    limit = {"type": "Local", "local": {"rules": rate_limit_rules(args)}}
    http = [r for r in routes if r.kind == "HTTPRoute"]
    grpc = [r for r in routes if r.kind == "GRPCRoute"]
    return {
        HTTP_POLICY: {
            "targetRefs": _targets(http),
            "rateLimit": limit,
            # Larger bodies get 413 before anything reaches Triton.
            "requestBuffer": {"limit": f"{args.request_body_limit_mib}Mi"},
        },
        GRPC_POLICY: {"targetRefs": _targets(grpc), "rateLimit": limit},
    }


def client_traffic_policy_spec(args: IngressArgs) -> dict[str, Any]:
    return {
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": naming.GATEWAY_NAME}],
        "tls": {"minVersion": "1.2"},
        # Before any filter: a client cannot name itself; the auth filters set the header afterwards.
        "headers": {"earlyRequestHeaders": {"remove": [CLIENT_HEADER]}},
        # An encoded slash (%2F) in a path is refused rather than decoded past the route rules.
        "path": {"escapedSlashesAction": "RejectRequest"},
    }
