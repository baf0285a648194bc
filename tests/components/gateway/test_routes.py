"""The public surface of every stack, derived from the rendered HTTPRoute and GRPCRoute rules: exactly
the documented inference, metadata, readiness and health calls; each model to the deployment that
serves it; the admin APIs unreachable; the admin key and the client's credentials never reach Triton;
plain HTTP only redirects."""

from __future__ import annotations

import re

import pytest

from components.gateway import routes
from tests.components.gateway._helpers import api_key, config, gateway, hosts
from tests.conftest import STACKS
from tests.support.gateway_api import Gateway, Request, apply_filters, normalise_path

# The documented public surface (docs/serving-plane.md, components/gateway/routes.py), per model `m`
# and version `n`, and the gRPC methods.
MODEL_CALLS = (
    ("POST", "/v2/models/{m}/infer"),
    ("POST", "/v2/models/{m}/versions/{n}/infer"),
    ("GET", "/v2/models/{m}"),
    ("GET", "/v2/models/{m}/versions/{n}"),
    ("GET", "/v2/models/{m}/config"),
    ("GET", "/v2/models/{m}/ready"),
    ("GET", "/v2/models/{m}/versions/{n}/ready"),
)
HEALTH_CALLS = (("GET", "/v2/health/ready"), ("GET", "/v2/health/live"))
GRPC_METHODS = ("ModelInfer", "ModelMetadata", "ModelConfig", "ModelReady", "ServerLive", "ServerReady")
ADMIN_PATHS = (
    "/v2/repository/index",
    "/v2/repository/models/resnet18/load",
    "/v2/logging",
    "/v2/trace/setting",
    "/v2/systemsharedmemory/status",
    "/v2/cudasharedmemory/status",
    "/v2/models/resnet18/stats",
    "/v2/models/resnet18/trace/setting",
    "/metrics",
    "/v2",
    "/",
)
ADMIN_RPCS = (
    "RepositoryIndex",
    "RepositoryModelLoad",
    "RepositoryModelUnload",
    "ModelStatistics",
    "TraceSetting",
    "LogSettings",
    "SystemSharedMemoryStatus",
    "CudaSharedMemoryRegister",
    "ModelStreamInfer",
)


def _template(match: dict[str, object], model_names: list[str]) -> str:
    """A rule's path as the surface list writes it: versions as {n}, the model's name as {m}."""
    path = match["path"]  # type: ignore[index]
    value: str = path["value"]  # type: ignore[index]
    if path["type"] == "RegularExpression":  # type: ignore[index]
        assert value.startswith("^"), f"{value}: an unanchored expression"
        assert value.endswith("$"), f"{value}: an unanchored expression"
        value = value[1:-1].replace("[0-9]+", "{n}")
        assert not re.search(r"[\\.*+?()|\[\]]", value.replace("{n}", "")), f"{value}: more than a version number"
    for m in sorted(model_names, key=len, reverse=True):
        value = value.replace(f"/v2/models/{m}/", "/v2/models/{m}/")
        if value == f"/v2/models/{m}":
            value = "/v2/models/{m}"
    return value


def _surface(gw: Gateway, stack: str) -> set[tuple[str, str, str, str]]:
    """(host, method, path, model) of every public route rule match, read from the render."""
    models = [m for ms in config(stack)["models"].values() for m in ms]
    out = set()
    for route in gw.routes:
        if route["metadata"]["name"] == routes.REDIRECT_ROUTE:
            continue
        (host,) = route["spec"]["hostnames"]
        for rule in route["spec"]["rules"]:
            for match in rule["matches"]:
                if route["kind"] == "GRPCRoute":
                    method = match["method"]
                    out.add((host, "POST", f"/{method['service']}/{method['method']}", "-"))
                    continue
                path = match["path"]["value"]
                model = next((m for m in models if path.startswith((f"/v2/models/{m}/", f"^/v2/models/{m}/"))), None)
                model = model or next((m for m in models if path == f"/v2/models/{m}"), "-")
                out.add((host, match.get("method", "*"), _template(match, models), model))
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_the_reachable_surface_is_exactly_the_documented_list(stack: str) -> None:
    gw = gateway(stack)
    infer, grpc = hosts(stack)
    expected = {
        (infer, method, path, m) for ms in config(stack)["models"].values() for m in ms for method, path in MODEL_CALLS
    }
    expected |= {(infer, method, path, "-") for method, path in HEALTH_CALLS}
    expected |= {(grpc, "POST", f"/inference.GRPCInferenceService/{m}", "-") for m in GRPC_METHODS}
    # The port-80 redirect is the one rule without a match: every path, to https.
    (redirect,) = [r for r in gw.routes if r["metadata"]["name"] == routes.REDIRECT_ROUTE]
    assert redirect["spec"]["rules"] == [
        {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}]}
    ]
    assert _surface(gw, stack) == expected


@pytest.mark.parametrize("stack", STACKS)
def test_each_model_goes_to_the_deployment_that_serves_it(stack: str) -> None:
    gw = gateway(stack)
    infer, _ = hosts(stack)
    auth = api_key(stack, config(stack)["clients"][0]) if config(stack)["authentication"] != "jwt" else {}
    for deployment, models in config(stack)["models"].items():
        for m in models:
            for method, path in MODEL_CALLS:
                got = gw.route(Request(infer, method, path.format(m=m, n=12), auth))
                assert got is not None, (method, path, m)
                assert got.backend == (f"triton-{deployment}", 8000), (method, path, m)
            # The wrong method, a non-numeric version, anything below a public path: no route.
            assert gw.route(Request(infer, "GET", f"/v2/models/{m}/infer", auth)) is None
            assert gw.route(Request(infer, "POST", f"/v2/models/{m}/ready", auth)) is None
            assert gw.route(Request(infer, "GET", f"/v2/models/{m}/versions/x/ready", auth)) is None
            assert gw.route(Request(infer, "GET", f"/v2/models/{m}/versions/1/ready/stats", auth)) is None
    first = next(iter(config(stack)["models"]))
    for method, path in HEALTH_CALLS:
        got = gw.route(Request(infer, method, path, auth))
        assert got is not None
        assert got.backend == (f"triton-{first}", 8000)


@pytest.mark.parametrize("stack", STACKS)
def test_the_deployment_header_selects_the_grpc_deployment(stack: str) -> None:
    gw = gateway(stack)
    _, grpc = hosts(stack)
    deployments = list(config(stack)["models"])
    for method in GRPC_METHODS:
        path = f"/inference.GRPCInferenceService/{method}"
        for d in deployments:
            got = gw.route(Request(grpc, "POST", path, {routes.DEPLOYMENT_HEADER: d}, grpc=True))
            assert got is not None
            assert got.backend == (f"triton-{d}", 8001)
        got = gw.route(Request(grpc, "POST", path, grpc=True))
        assert got is not None
        assert got.backend == (f"triton-{deployments[0]}", 8001)
        unknown = gw.route(Request(grpc, "POST", path, {routes.DEPLOYMENT_HEADER: "nope"}, grpc=True))
        assert unknown is not None
        assert unknown.backend == (f"triton-{deployments[0]}", 8001)


@pytest.mark.parametrize("stack", STACKS)
def test_the_admin_apis_have_no_route(stack: str) -> None:
    gw = gateway(stack)
    infer, grpc = hosts(stack)
    for path in ADMIN_PATHS:
        for method in ("GET", "POST", "PUT", "DELETE"):
            assert gw.route(Request(infer, method, path)) is None, f"{method} {path} is routed"
    for path in (
        "/v2/models/resnet18/ready/../../../repository/index",
        "/v2/models/resnet18/versions/1/infer/../../../repository/index",
        "/v2/models/resnet18//../../repository/index",
        "/v2/health/ready/../../repository/index",
    ):
        assert gw.route(Request(infer, "GET", path)) is None, path
        assert gw.route(Request(infer, "POST", path)) is None, path
    for rpc in ADMIN_RPCS:
        path = f"/inference.GRPCInferenceService/{rpc}"
        assert gw.route(Request(grpc, "POST", path, grpc=True)) is None, rpc
        assert gw.route(Request(grpc, "POST", path, {routes.DEPLOYMENT_HEADER: "default"}, grpc=True)) is None
    # The HTTP API is not served on the gRPC host, nor gRPC on the HTTP host; other hosts get nothing.
    assert gw.route(Request(grpc, "GET", "/v2/health/ready")) is None
    assert gw.route(Request(infer, "POST", "/inference.GRPCInferenceService/ModelInfer", grpc=True)) is None
    assert gw.route(Request("infer.example.org", "GET", "/v2/health/ready")) is None
    # Port 8002 (metrics) is no listener at all.
    assert gw.route(Request(infer, "GET", "/metrics", port=8002)) is None


@pytest.mark.parametrize("stack", STACKS)
def test_plain_http_only_redirects_to_https(stack: str) -> None:
    gw = gateway(stack)
    for host in hosts(stack):
        for path in ("/v2/models/resnet18/infer", "/v2/repository/index", "/"):
            got = gw.route(Request(host, "POST", path, port=80))
            assert got is not None
            assert got.redirect == {"scheme": "https", "statusCode": 301}
            assert got.backend is None


@pytest.mark.parametrize("stack", STACKS)
def test_the_admin_key_and_credentials_never_reach_triton(stack: str) -> None:
    gw = gateway(stack)
    infer, grpc = hosts(stack)
    sent = {"admin-key": "guess", "triton-grpc-protocol-admin-key": "guess", "authorization": "Basic eDp5"}
    for route in gw.routes:
        for rule in route["spec"]["rules"]:
            if rule.get("backendRefs"):
                assert apply_filters(rule.get("filters") or [], dict(sent)) == {}, route["metadata"]["name"]
    # And end to end, on both protocols, through the rule each request really matches.
    http = gw.route(Request(infer, "POST", "/v2/models/resnet18/infer", sent))
    rpc = gw.route(Request(grpc, "POST", "/inference.GRPCInferenceService/ModelInfer", sent, grpc=True))
    assert http is not None
    assert rpc is not None
    assert not {"admin-key", "triton-grpc-protocol-admin-key", "authorization"} & (set(http.headers) | set(rpc.headers))


@pytest.mark.parametrize("stack", STACKS)
def test_https_answers_carry_hsts(stack: str) -> None:
    for route in gateway(stack).routes:
        if route["kind"] != "HTTPRoute" or route["metadata"]["name"] == routes.REDIRECT_ROUTE:
            continue
        for rule in route["spec"]["rules"]:
            (hsts,) = [f for f in rule["filters"] if f["type"] == "ResponseHeaderModifier"]
            assert hsts["responseHeaderModifier"]["set"] == [
                {"name": "Strict-Transport-Security", "value": "max-age=31536000; includeSubDomains"}
            ]


def test_paths_are_normalised_as_envoy_gateway_does_before_matching() -> None:
    assert normalise_path("/v2/models/m/ready/../../../repository/index") == "/v2/repository/index"
    assert normalise_path("/v2//models/./m/infer") == "/v2/models/m/infer"
    assert normalise_path("/v2/models/m/infer?x=1") == "/v2/models/m/infer"


def test_the_matcher_applies_precedence_as_the_spec_states() -> None:
    """Exact beats a regular expression beats a prefix; more header matches win; then the route name."""

    def route(name: str, match: dict[str, object], service: str) -> dict[str, object]:
        return {
            "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": "t"},
            "spec": {
                "parentRefs": [{"name": "gw", "namespace": "t"}],
                "hostnames": ["h"],
                "rules": [{"matches": [match], "backendRefs": [{"name": service, "port": 1}]}],
            },
        }

    gw = Gateway(
        [
            {
                "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": "t"},
                "spec": {"listeners": [{"name": "l", "port": 443}]},
            },
            route("a", {"path": {"type": "PathPrefix", "value": "/v2"}}, "prefix"),
            route("b", {"path": {"type": "RegularExpression", "value": "^/v2/x$"}}, "regex"),
            route("c", {"path": {"type": "Exact", "value": "/v2/x"}}, "exact"),
            route("d", {"path": {"type": "Exact", "value": "/v2/y"}}, "y"),
            route("e", {"path": {"type": "Exact", "value": "/v2/y"}, "headers": [{"name": "k", "value": "v"}]}, "y-k"),
        ],
        name="gw",
    )
    assert gw.route(Request("h", "GET", "/v2/x")).backend == ("exact", 1)  # type: ignore[union-attr]
    assert gw.route(Request("h", "GET", "/v2/z")).backend == ("prefix", 1)  # type: ignore[union-attr]
    assert gw.route(Request("h", "GET", "/v2y")) is None  # a prefix matches whole path elements
    assert gw.route(Request("h", "GET", "/v2/y", {"K": "v"})).backend == ("y-k", 1)  # type: ignore[union-attr]
    assert gw.route(Request("h", "GET", "/v2/y")).backend == ("y", 1)  # type: ignore[union-attr]
