"""Who may call each public route, per stack: the table of route x authentication x authorization read
from the render and checked against the stack file; API keys answered as clients send them today;
bearer tokens signed with a test key and checked as the routes' JWT policies state (issuer,
audience, expiry, signature, the models and deployments claims); client CIDRs everywhere."""

from __future__ import annotations

import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet

from components.gateway import routes
from tests.components.gateway._helpers import CLIENT, api_key, basic, config, gateway, hosts
from tests.conftest import STACKS
from tests.support.gateway_api import Gateway, Request, Routed


def route_table(stack: str) -> list[tuple[str, str, str, str]]:
    """(route, authentication, authorization, client CIDRs) of every public route, from the render."""
    gw = gateway(stack)
    rows = []
    for r in sorted(gw.routes, key=lambda d: d["metadata"]["name"]):
        name = r["metadata"]["name"]
        if name == routes.REDIRECT_ROUTE:
            continue
        spec = gw.policy_of(Routed(r["kind"], name, None, None, {}))["spec"]
        authn = "api-key (basic auth)" if "basicAuth" in spec else "jwt"
        (rule,) = spec["authorization"]["rules"]
        assert spec["authorization"]["defaultAction"] == "Deny"
        assert rule["action"] == "Allow"
        claims = (rule["principal"].get("jwt") or {}).get("claims") or []
        authz = " & ".join(f"{c['name']} contains one of {c['values']}" for c in claims) or (
            "any valid token" if authn == "jwt" else "any API client"
        )
        rows.append((f"{r['kind']} {name}", authn, authz, ",".join(rule["principal"]["clientCIDRs"])))
    return rows


@pytest.mark.parametrize("stack", STACKS)
def test_the_route_table_follows_the_stack_file(stack: str) -> None:
    cfg = config(stack)
    methods = {"api-keys": ["api-keys"], "jwt": ["jwt"], "both": ["api-keys", "jwt"]}[cfg["authentication"]]
    cidrs = ",".join(cfg["cidrs"])
    first = next(iter(cfg["models"]))
    expected = []
    for method in methods:
        authn = "api-key (basic auth)" if method == "api-keys" else "jwt"

        def authz(claim: str, value: str, authn: str = authn) -> str:
            return f"{claim} contains one of ['{value}', '*']" if authn == "jwt" else "any API client"

        for deployment, models in cfg["models"].items():
            expected += [
                (f"HTTPRoute triton-model-{m.replace('_', '-')}-{method}", authn, authz("triton_models", m), cidrs)
                for m in models
            ]
            expected.append(
                (f"GRPCRoute triton-grpc-{deployment}-{method}", authn, authz("triton_deployments", deployment), cidrs)
            )
        expected.append((f"GRPCRoute triton-grpc-{method}", authn, authz("triton_deployments", first), cidrs))
        any_one = "any valid token" if authn == "jwt" else "any API client"
        expected.append((f"HTTPRoute triton-health-{method}", authn, any_one, cidrs))
    assert route_table(stack) == sorted(expected)


def test_prod_takes_both_keys_and_tokens_and_dev_keys_only() -> None:
    assert {a for _, a, _, _ in route_table("prod")} == {"api-key (basic auth)", "jwt"}
    assert {a for _, a, _, _ in route_table("dev")} == {"api-key (basic auth)"}


# ---- API keys, as clients send them today -----------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_exported_api_key_is_accepted_with_the_header_clients_send(stack: str) -> None:
    gw = gateway(stack)
    infer, grpc = hosts(stack)
    for client in config(stack)["clients"]:
        for req in (
            Request(infer, "POST", "/v2/models/resnet18/infer", api_key(stack, client), source=CLIENT),
            Request(
                grpc,
                "POST",
                "/inference.GRPCInferenceService/ModelInfer",
                api_key(stack, client),
                source=CLIENT,
                grpc=True,
            ),
        ):
            got = gw.route(req)
            assert got is not None
            assert got.route.endswith("-api-keys"), got
            decision = gw.authorize(req, got)
            assert decision.status == 200
            assert decision.headers[routes.CLIENT_HEADER] == client  # the access log's client
    req = Request(infer, "POST", "/v2/models/resnet18/infer", basic("default", "not-the-key"))
    assert gw.authorize(req, gw.route(req)).status == 401  # type: ignore[arg-type]
    req = Request(infer, "POST", "/v2/models/resnet18/infer")
    assert gw.authorize(req, gw.route(req)).status == 401  # type: ignore[arg-type]


def test_a_client_outside_the_allowed_cidrs_is_denied() -> None:
    gw = gateway("staging")  # allows 198.51.100.0/24 and 203.0.113.0/24
    infer, _ = hosts("staging")
    inside = Request(infer, "POST", "/v2/models/resnet18/infer", api_key("staging", "default"), source="198.51.100.7")
    outside = Request(infer, "POST", "/v2/models/resnet18/infer", api_key("staging", "default"), source="192.0.2.7")
    assert gw.authorize(inside, gw.route(inside)).status == 200  # type: ignore[arg-type]
    assert gw.authorize(outside, gw.route(outside)).status == 403  # type: ignore[arg-type]


# ---- bearer tokens ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def signing_key() -> ECKey:
    return ECKey.generate_key("P-256", parameters={"kid": "test-1"})


def _jwks(stack: str, key: ECKey) -> dict[str, KeySet]:
    """The JWKS document the stack's JWKS URL serves: the test key's public half."""
    return {config(stack)["jwks"]: KeySet.import_key_set(KeySet([key]).as_dict(private=False))}


def _token(stack: str, key: ECKey, **claims: Any) -> dict[str, str]:
    cfg = config(stack)
    body = {"iss": cfg["issuer"], "aud": cfg["audiences"][0], "sub": "search-team", "exp": int(time.time()) + 300}
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    return {"authorization": "Bearer " + jwt.encode({"alg": "ES256", "kid": key.kid}, body, key)}


def _decide(gw: Gateway, req: Request, jwks: dict[str, KeySet]) -> int:
    got = gw.route(req)
    assert got is not None
    return gw.authorize(req, got, jwks).status


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_a_token_reaches_the_models_its_claim_lists_and_no_other(stack: str, signing_key: ECKey) -> None:
    gw = gateway(stack)
    infer, _ = hosts(stack)
    jwks = _jwks(stack, signing_key)

    def infer_call(model: str, token: dict[str, str]) -> Request:
        return Request(infer, "POST", f"/v2/models/{model}/versions/2/infer", token, source=CLIENT)

    token = _token(stack, signing_key, triton_models=["resnet18"])
    req = infer_call("resnet18", token)
    routed = gw.route(req)
    assert routed is not None
    assert routed.route == "triton-model-resnet18-jwt"
    decision = gw.authorize(req, routed, jwks)
    assert decision.status == 200
    assert decision.headers[routes.CLIENT_HEADER] == "search-team"
    assert _decide(gw, infer_call("text-encoder", token), jwks) == 403
    assert _decide(gw, infer_call("text-encoder", _token(stack, signing_key, triton_models=["*"])), jwks) == 200
    assert _decide(gw, infer_call("resnet18", _token(stack, signing_key)), jwks) == 403  # no models claim
    # Health needs a valid token, not a model.
    assert (
        _decide(gw, Request(infer, "GET", "/v2/health/ready", _token(stack, signing_key), source=CLIENT), jwks) == 200
    )


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({"iss": "https://evil.example.com/"}, "another issuer"),
        ({"aud": "someone-else"}, "another audience"),
        ({"exp": int(time.time()) - 60}, "expired"),
        ({"exp": None}, "no expiry"),
    ],
)
def test_a_token_the_policy_refuses_is_unauthenticated(signing_key: ECKey, claims: dict[str, Any], why: str) -> None:
    gw = gateway("prod")
    infer, _ = hosts("prod")
    token = _token("prod", signing_key, triton_models=["*"], **claims)
    assert _decide(gw, Request(infer, "POST", "/v2/models/resnet18/infer", token), _jwks("prod", signing_key)) == 401, (
        why
    )


def test_a_token_signed_by_another_key_is_unauthenticated(signing_key: ECKey) -> None:
    gw = gateway("prod")
    infer, _ = hosts("prod")
    other = ECKey.generate_key("P-256", parameters={"kid": "test-1"})
    token = _token("prod", other, triton_models=["*"])
    assert _decide(gw, Request(infer, "POST", "/v2/models/resnet18/infer", token), _jwks("prod", signing_key)) == 401


def test_grpc_is_authorized_per_deployment(signing_key: ECKey) -> None:
    gw = gateway("prod")
    _, grpc = hosts("prod")
    jwks = _jwks("prod", signing_key)
    token = _token("prod", signing_key, triton_deployments=["large"], triton_models=["*"])

    def call(headers: dict[str, str]) -> Request:
        return Request(grpc, "POST", "/inference.GRPCInferenceService/ModelInfer", headers, source=CLIENT, grpc=True)

    assert _decide(gw, call({**token, routes.DEPLOYMENT_HEADER: "large"}), jwks) == 200
    # The models claim alone opens no gRPC deployment: the model name is inside the protobuf body.
    assert _decide(gw, call({**token, routes.DEPLOYMENT_HEADER: "default"}), jwks) == 403
    assert _decide(gw, call(token), jwks) == 403  # no header: the first deployment, `default`


def test_with_both_methods_a_bearer_token_and_a_key_take_their_own_routes(signing_key: ECKey) -> None:
    gw = gateway("prod")
    infer, _ = hosts("prod")
    path = "/v2/models/resnet18/infer"
    bearer = gw.route(Request(infer, "POST", path, _token("prod", signing_key)))
    key = gw.route(Request(infer, "POST", path, api_key("prod", "search-api")))
    anonymous = gw.route(Request(infer, "POST", path))
    assert (bearer.route, key.route, anonymous.route) == (  # type: ignore[union-attr]
        "triton-model-resnet18-jwt",
        "triton-model-resnet18-api-keys",
        "triton-model-resnet18-api-keys",  # 401 with a Basic challenge, as today
    )
