"""The traffic policies every public route gets: a rate-limit bucket per API client (and one for all
token clients), the HTTP body limit, TLS 1.2+, and no client-sent identity past the first filter."""

from __future__ import annotations

import pytest

from components.gateway import routes, traffic
from tests.components.gateway._helpers import config, docs, gateway, of_kind
from tests.conftest import STACKS


def _policy(stack: str, name: str) -> dict[str, object]:
    (doc,) = [d for d in of_kind(stack, "BackendTrafficPolicy") if d["metadata"]["name"] == name]
    return doc["spec"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("stack", STACKS)
def test_every_public_route_is_rate_limited_per_client(stack: str) -> None:
    cfg = config(stack)
    gw = gateway(stack)
    public = {(r["kind"], r["metadata"]["name"]) for r in gw.routes if r["metadata"]["name"] != routes.REDIRECT_ROUTE}
    targeted = set()
    for name in (traffic.HTTP_POLICY, traffic.GRPC_POLICY):
        spec = _policy(stack, name)
        targeted |= {(t["kind"], t["name"]) for t in spec["targetRefs"]}  # type: ignore[index]
        rules = spec["rateLimit"]["local"]["rules"]  # type: ignore[index]
        clients = cfg["clients"] if cfg["authentication"] != "jwt" else []
        expected = [
            {
                "clientSelectors": [{"headers": [{"name": "x-triton-client", "type": "Exact", "value": c}]}],
                "limit": {"requests": cfg["rps"], "unit": "Second"},
                "shared": True,
            }
            for c in clients
        ]
        if cfg["authentication"] != "api-keys":
            expected.append(
                {
                    "clientSelectors": [
                        {"headers": [{"name": "authorization", "type": "RegularExpression", "value": "^Bearer .+"}]}
                    ],
                    "limit": {"requests": cfg["jwt_rps"], "unit": "Second"},
                    "shared": True,
                }
            )
        assert rules == expected
    assert targeted == public


@pytest.mark.parametrize("stack", STACKS)
def test_http_bodies_are_limited_and_grpc_is_never_buffered(stack: str) -> None:
    http = _policy(stack, traffic.HTTP_POLICY)
    assert http["requestBuffer"] == {"limit": f"{config(stack)['body_mib']}Mi"}
    assert {t["kind"] for t in http["targetRefs"]} == {"HTTPRoute"}  # type: ignore[index, union-attr]
    grpc = _policy(stack, traffic.GRPC_POLICY)
    assert "requestBuffer" not in grpc
    assert {t["kind"] for t in grpc["targetRefs"]} == {"GRPCRoute"}  # type: ignore[index, union-attr]


@pytest.mark.parametrize("stack", STACKS)
def test_connections_take_tls_12_and_drop_a_client_sent_identity(stack: str) -> None:
    (policy,) = of_kind(stack, "ClientTrafficPolicy")
    spec = policy["spec"]
    assert spec["targetRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "triton"}]
    assert spec["tls"]["minVersion"] == "1.2"
    # Removed before any filter runs: only basic auth or the JWT filter can set who the client is.
    assert spec["headers"]["earlyRequestHeaders"]["remove"] == [routes.CLIENT_HEADER]
    assert spec["path"]["escapedSlashesAction"] == "RejectRequest"
    # The header the rate limits and the access log key on is the one the auth filters set.
    policies = [d for d in docs(stack) if d["kind"] == "SecurityPolicy"]
    for p in policies:
        forwarded = (p["spec"].get("basicAuth") or {}).get("forwardUsernameHeader") or next(
            c["header"] for c in p["spec"]["jwt"]["providers"][0]["claimToHeaders"]
        )
        assert forwarded == routes.CLIENT_HEADER
