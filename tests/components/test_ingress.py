"""Ingress: pinned Traefik + cert-manager, ACME issuer, and only public Triton routes."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

import pytest

from components.gpu import gpu_contract
from components.ingress import (
    ACME_SERVERS,
    GRPC_PUBLIC_METHODS,
    IngressArgs,
    TritonBackend,
    cert_manager_values,
    htpasswd_line,
    htpasswd_users,
    http_rules,
)
from components.kubernetes import naming
from components.stack_config.errors import ConfigError
from components.upstream import versions
from tests.components._helpers import assert_bounded_resources, registered_outputs
from tests.pulumi_kit import Run, run_program

RELEASE = "kubernetes:helm.sh/v3:Release"
ADMIN_PATHS = (
    "/v2/repository/index",
    "/v2/repository/models/resnet18/load",
    "/v2/logging",
    "/v2/trace/setting",
    "/v2/systemsharedmemory/status",
    "/v2/cudasharedmemory/status",
    "/v2/models/resnet18/stats",
    "/metrics",
)


def _cr(run: Run, kind: str, name: str) -> dict[str, Any]:
    found = [
        r.inputs
        for r in run.kubernetes_objects()
        if r.inputs.get("kind") == kind and r.inputs["metadata"]["name"] == name
    ]
    assert len(found) == 1, f"{kind} {name}: {len(found)}"
    return found[0]


def _matches(rule: str, method: str, path: str, host: str) -> bool:
    """Evaluate the subset of Traefik's rule language the component emits."""
    if f"Host(`{host}`)" not in rule or f"Method(`{method}`)" not in rule:
        return False
    exact = re.findall(r"Path\(`([^`]+)`\)", rule)
    regexes = re.findall(r"PathRegexp\(`([^`]+)`\)", rule)
    return path in exact or any(re.fullmatch(rx, path) for rx in regexes)


@pytest.mark.parametrize(
    ("role", "chart"), [("traefik", versions.TRAEFIK_CHART), ("cert-manager", versions.CERT_MANAGER_CHART)]
)
def test_pinned_releases_on_system_nodes(any_stack: Run, role: str, chart: versions.HelmChart) -> None:
    r = any_stack.one(RELEASE, f"ingress-{role}")
    assert (r.inputs["chart"], r.inputs["version"], r.inputs["repositoryOpts"]["repo"]) == (
        chart.chart,
        chart.version,
        chart.repository,
    )
    assert r.inputs["values"]["nodeSelector"] == gpu_contract.system_node_labels()
    assert r.inputs["namespace"] in (naming.INGRESS_NAMESPACE, naming.CERT_MANAGER_NAMESPACE)


def test_traefik_keeps_client_ip_and_no_cross_namespace(prod: Run) -> None:
    values = prod.one(RELEASE, "ingress-traefik").inputs["values"]
    # The chart's `global` block (globalArguments no longer carries these flags).
    assert values["global"] == {"checkNewVersion": False, "sendAnonymousUsage": False}
    assert "globalArguments" not in values
    assert values["service"]["spec"]["externalTrafficPolicy"] == "Local"
    assert values["providers"]["kubernetesCRD"]["allowCrossNamespace"] is False
    assert values["deployment"]["replicas"] == 3
    assert values["podDisruptionBudget"]["enabled"] is True


def test_chart_workloads_have_bounded_resources(prod: Run) -> None:
    traefik = prod.one(RELEASE, "ingress-traefik").inputs["values"]
    assert_bounded_resources("traefik", traefik["resources"])
    cert_manager = prod.one(RELEASE, "ingress-cert-manager").inputs["values"]
    assert_bounded_resources("cert-manager controller", cert_manager["resources"])
    for component in ("webhook", "cainjector", "startupapicheck"):
        assert_bounded_resources(f"cert-manager {component}", cert_manager[component]["resources"])


def test_cert_manager_pdb_from_two_replicas_with_the_charts_bound() -> None:
    # No bound set: the chart then renders `minAvailable: 1` (a bound it only documents in
    # comments is not one of its default keys).
    assert cert_manager_values(2)["podDisruptionBudget"] == {"enabled": True}
    assert cert_manager_values(1)["podDisruptionBudget"] == {"enabled": False}
    for component in ("webhook", "cainjector"):
        assert cert_manager_values(2)[component]["podDisruptionBudget"] == {"enabled": True}
        assert cert_manager_values(1)[component]["podDisruptionBudget"] == {"enabled": False}


def test_issuer_and_certificate(staging: Run, dev: Run) -> None:
    issuer = _cr(staging, "ClusterIssuer", "letsencrypt")["spec"]["acme"]
    assert issuer["server"] == ACME_SERVERS["letsencrypt"]
    assert issuer["email"] == "platform-team@example.com"
    assert (
        _cr(dev, "ClusterIssuer", "letsencrypt-staging")["spec"]["acme"]["server"]
        == ACME_SERVERS["letsencrypt-staging"]
    )
    cert = _cr(staging, "Certificate", "triton-tls")
    assert cert["spec"]["dnsNames"] == ["infer.staging.inference.example.com", "grpc.staging.inference.example.com"]
    assert cert["metadata"]["namespace"] == naming.TRITON_NAMESPACE


def test_http_routes_expose_only_inference_metadata_and_health(prod: Run) -> None:
    route = _cr(prod, "IngressRoute", "triton-http")["spec"]
    host = "infer.inference.example.com"
    rules = [(r["match"], r["services"][0]["name"]) for r in route["routes"]]

    def served_by(method: str, path: str) -> set[str]:
        return {svc for rule, svc in rules if _matches(rule, method, path, host)}

    assert served_by("POST", "/v2/models/resnet18/infer") == {"triton-default"}
    assert served_by("POST", "/v2/models/reranker-large/versions/3/infer") == {"triton-large"}
    assert served_by("GET", "/v2/models/text-encoder/config") == {"triton-default"}
    assert served_by("GET", "/v2/models/reranker-large") == {"triton-large"}
    assert served_by("GET", "/v2/health/ready") == {"triton-default"}
    # Per-model readiness is public (health and readiness are, by design).
    assert served_by("GET", "/v2/models/resnet18/ready") == {"triton-default"}
    assert served_by("GET", "/v2/models/reranker-large/versions/12/ready") == {"triton-large"}
    assert served_by("POST", "/v2/models/resnet18/ready") == set()
    assert served_by("GET", "/v2/models/resnet18/versions/x/ready") == set()
    assert served_by("GET", "/v2/models/resnet18/ready/../../../repository/index") == set()
    assert served_by("GET", "/v2/models/resnet18/versions/1/ready/stats") == set()
    for path in ADMIN_PATHS:
        for method in ("GET", "POST"):
            assert served_by(method, path) == set(), f"{method} {path} is routed"
    assert served_by("POST", "/v2/models/resnet18/versions/1/infer/../../../repository/index") == set()
    assert served_by("GET", "/v2/models/resnet18/infer") == set()
    assert route["tls"] == {"secretName": "triton-tls"}
    for r in route["routes"]:
        assert [m["name"] for m in r["middlewares"]] == [
            "triton-allowlist",
            "triton-auth",
            "triton-ratelimit",
            "triton-strip-admin",
            "triton-body-limit",
        ]
        assert r["services"][0]["port"] == 8000


def test_grpc_routes_only_public_methods(prod: Run) -> None:
    route = _cr(prod, "IngressRoute", "triton-grpc")["spec"]
    paths = set()
    for r in route["routes"]:
        # Traefik's buffering middleware breaks gRPC trailers (traefik#9788): never on gRPC.
        assert [m["name"] for m in r["middlewares"]] == [
            "triton-allowlist",
            "triton-auth",
            "triton-ratelimit",
            "triton-strip-admin",
        ]
        paths |= set(re.findall(r"Path\(`([^`]+)`\)", r["match"]))
        assert r["services"][0]["scheme"] == "h2c"
        assert r["services"][0]["port"] == 8001
    assert paths == {f"/inference.GRPCInferenceService/{m}" for m in GRPC_PUBLIC_METHODS}
    assert not any(
        m.startswith(("Repository", "Log", "Trace", "System", "Cuda", "ModelStatistics")) for m in GRPC_PUBLIC_METHODS
    )
    headers = sorted(
        re.findall(r"Header\(`x-triton-deployment`, `([^`]+)`\)", " ".join(r["match"] for r in route["routes"]))
    )
    assert headers == ["default", "large"]


def test_middlewares_carry_the_stack_limits(staging: Run) -> None:
    allow = _cr(staging, "Middleware", "triton-allowlist")["spec"]["ipAllowList"]["sourceRange"]
    assert allow == ["198.51.100.0/24", "203.0.113.0/24"]
    assert (
        _cr(staging, "Middleware", "triton-body-limit")["spec"]["buffering"]["maxRequestBodyBytes"] == 64 * 1024 * 1024
    )
    rate = _cr(staging, "Middleware", "triton-ratelimit")["spec"]["rateLimit"]
    assert (rate["average"], rate["burst"]) == (200, 400)
    assert _cr(staging, "Middleware", "triton-strip-admin")["spec"]["headers"]["customRequestHeaders"] == {
        "admin-key": "",
        "triton-grpc-protocol-admin-key": "",
    }
    auth = _cr(staging, "Middleware", "triton-auth")["spec"]["basicAuth"]
    assert auth["removeHeader"] is True


def test_one_generated_key_per_configured_client(staging: Run, prod: Run) -> None:
    keys = staging.exports["ingressApiKeys"]
    assert sorted(keys) == ["ci-smoke", "default"]
    assert len(set(keys.values())) == 2
    assert keys["ci-smoke"].startswith("mock-ingress-ci-smoke-api-key-")  # each key is its own RandomPassword's result
    users = _cr(staging, "Secret", "triton-api-keys")["stringData"]["users"].split("\n")
    assert users == [htpasswd_line("ci-smoke", keys["ci-smoke"]), htpasswd_line("default", keys["default"])]
    # The default client keeps its original logical name (its key survives the upgrade).
    passwords = [r for r in prod.of_type("random:index/randomPassword:RandomPassword") if r.name.endswith("-api-key")]
    assert all((r.inputs["length"], r.inputs["special"]) == (48, False) for r in passwords)
    names = sorted(r.name for r in passwords)
    assert names == ["ingress-batch-scoring-api-key", "ingress-default-api-key", "ingress-search-api-api-key"]
    assert sorted(prod.exports["ingressApiKeys"]) == ["batch-scoring", "default", "search-api"]
    assert "ingressDefaultApiKey" not in prod.exports
    assert htpasswd_users({"b": "k2", "a": "k1"}) == f"{htpasswd_line('a', 'k1')}\n{htpasswd_line('b', 'k2')}"


def test_endpoints_exported_from_the_component(dev: Run) -> None:
    assert dev.exports["tritonEndpoints"] == {
        "http": "https://infer.dev.inference.example.com",
        "grpc": "grpc.dev.inference.example.com:443",
    }
    outputs = registered_outputs(dev, dev.one("triton-platform:serving:Ingress", "ingress"))
    assert outputs["httpEndpoint"] == dev.exports["tritonEndpoints"]["http"]
    assert outputs["grpcEndpoint"] == dev.exports["tritonEndpoints"]["grpc"]


def test_rate_limit_is_per_client_per_traefik_replica(prod: Run) -> None:
    rate = _cr(prod, "Middleware", "triton-ratelimit")["spec"]["rateLimit"]
    assert rate["sourceCriterion"] == {"requestHeaderName": "X-Triton-Client"}
    replicas = prod.one(RELEASE, "ingress-traefik").inputs["values"]["deployment"]["replicas"]
    assert (
        _args(rate_limit_rps=rate["average"], replicas=replicas).aggregate_rate_limit_rps == rate["average"] * replicas
    )


@pytest.mark.parametrize(
    ("clients", "match"),
    [
        ([], r"triton-platform:ingressClients: \[\] is empty; allowed: at least one client"),
        (["default", "default"], r"ingressClients: .* has duplicate names; allowed: each client name once"),
        (["Team_A"], r"ingressClients: 'Team_A' is not valid; allowed: a DNS label"),
    ],
)
def test_ingress_clients_stack_config_validation(clients: list[str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        run_program("dev", overrides={"triton-platform:ingressClients": clients})


def test_htpasswd_is_apache_sha() -> None:
    assert htpasswd_line("c", "secret") == "c:{SHA}" + base64.b64encode(hashlib.sha1(b"secret").digest()).decode()  # noqa: S324


def _args(**overrides: Any) -> IngressArgs:
    base: dict[str, Any] = {
        "domain": "example.com",
        "acme_email": "a@example.com",
        "backends": (TritonBackend("default", "triton-default", ("m1",)),),
        "allowed_cidrs": ("0.0.0.0/0",),
    }
    return IngressArgs(**{**base, **overrides})


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"domain": "Example"}, r"IngressArgs\.domain: 'Example' is not allowed"),
        ({"acme_email": "nobody"}, r"IngressArgs\.acme_email: 'nobody' is not allowed"),
        (
            {"tls_issuer": "zerossl"},
            r"IngressArgs\.tls_issuer: 'zerossl' is not allowed; allowed: letsencrypt \| letsencrypt-staging",
        ),
        ({"backends": ()}, r"IngressArgs\.backends: \(\) is not allowed"),
        (
            {"backends": (TritonBackend("a", "triton-a", ("m",)), TritonBackend("b", "triton-b", ("m",)))},
            r"model 'm' is served by both 'a' and 'b'",
        ),
        ({"backends": (TritonBackend("a", "triton-a", ("M`)",)),)}, r"models: 'M`\)' is not allowed"),
        ({"allowed_cidrs": ()}, r"IngressArgs\.allowed_cidrs: \(\) is not allowed"),
        ({"allowed_cidrs": ("10.0.0.1/8",)}, r"IngressArgs\.allowed_cidrs: '10\.0\.0\.1/8' is not allowed"),
        (
            {"allowed_cidrs": ("0.0.0.0/1", "128.0.0.0/1")},
            (
                r"IngressArgs\.allowed_cidrs: 0\.0\.0\.0/1, 128\.0\.0\.0/1 \(their union 0\.0\.0\.0/0: 100% of "
                r"IPv4\) lets \(almost\) every client through"
            ),
        ),
        ({"request_body_limit_mib": 0}, r"request_body_limit_mib: 0 is out of range; allowed: 1 to 1024"),
        ({"rate_limit_rps": 100_001}, r"rate_limit_rps: 100001 is out of range"),
        ({"replicas": 0}, r"IngressArgs\.replicas: 0 is not allowed"),
        ({"vpc_cidr": "::/0"}, r"IngressArgs\.vpc_cidr: '::/0' is not allowed; allowed: the VPC's IPv4 CIDR"),
        ({"clients": ()}, r"IngressArgs\.clients: \(\) is not allowed"),
        ({"clients": ("a:b",)}, r"IngressArgs\.clients: 'a:b' is not allowed; allowed: a DNS label"),
        ({"clients": ("a", "a")}, r"IngressArgs\.clients: \['a', 'a'\] has duplicates"),
    ],
)
def test_args_validation(overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _args(**overrides)
    assert len(http_rules(_args())) == 3
