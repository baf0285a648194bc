"""Every Kubernetes object the program creates, rendered by tools/render.py for each stack:
the kinds each stack needs, named and unique; and the validators tests/manifests/test_cluster.py
runs over the whole cluster catch what they are meant to catch."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from kubernetes_validate.utils import ValidationError

from tests.conftest import STACKS, stack_run
from tests.manifests._cluster import cluster
from tests.manifests._validators import CrdSchemas, validate_builtin

# Kinds the serving plane must render in every stack (monitoring and logging are on in all three).
EXPECTED = {
    "Namespace",
    "ServiceAccount",
    "Secret",
    "Deployment",
    "Service",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "NetworkPolicy",
    "ServiceMonitor",
    "PodMonitor",
    "PrometheusRule",
    "ConfigMap",
    "ClusterIssuer",
    "Certificate",
    "GatewayClass",
    "Gateway",
    "EnvoyProxy",
    "HTTPRoute",
    "GRPCRoute",
    "SecurityPolicy",
    "BackendTrafficPolicy",
    "ClientTrafficPolicy",
}


@pytest.mark.parametrize("stack", STACKS)
def test_every_expected_kind_is_rendered_with_a_name(stack: str) -> None:
    docs = cluster(stack).program
    kinds = {d["kind"] for d in docs}
    assert kinds >= EXPECTED, f"{stack}: missing {EXPECTED - kinds}"
    names = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs]
    assert len(names) == len(set(names)), f"{stack}: duplicate objects"


@pytest.fixture
def cached_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's program runs come from the per-worker cache (the program itself is the same)."""
    import tests.pulumi_kit

    monkeypatch.setattr(tests.pulumi_kit, "run_program", lambda stack, stack_file=None: stack_run(stack))


@pytest.mark.usefixtures("cached_runs")
def test_render_cli_writes_manifests(tmp_path: Path) -> None:
    from tools.render import main

    assert main(["dev", "--out", str(tmp_path)]) == 0
    assert len(list((tmp_path / "dev" / "manifests").glob("*-deployment-triton-triton-default.yaml"))) == 1
    assert (tmp_path / "dev" / "helm" / "monitoring-kube-prometheus-stack.yaml").exists()
    assert not (tmp_path / "dev" / "charts").exists()


@pytest.mark.usefixtures("cached_runs")
def test_render_cli_renders_the_charts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tools.render import main

    assert main(["prod", "--out", str(tmp_path), "--charts"]) == 0
    charts = sorted(p.stem for p in (tmp_path / "prod" / "charts").glob("*.yaml"))
    assert charts == sorted(cluster("prod").releases)
    crds = {p.stem: p.read_text() for p in (tmp_path / "prod" / "crds").glob("*.yaml")}
    assert set(crds) == {
        "ingress-cert-manager",
        "ingress-envoy-gateway",
        "log-shipping-alloy",
        "monitoring-kube-prometheus-stack",
    }
    assert all("kind: CustomResourceDefinition" in text for text in crds.values())
    assert not any(
        "kind: CustomResourceDefinition" in p.read_text() for p in (tmp_path / "prod" / "charts").glob("*.yaml")
    )
    assert "objects from 9 charts (Kubernetes 1.33)" in capsys.readouterr().out


# ---- the validators catch what they are meant to catch --------------------------------


def test_builtin_validator_rejects_unknown_fields() -> None:
    doc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"prots": [{"port": 1}]}}
    with pytest.raises(ValidationError, match="prots"):
        validate_builtin(doc, "1.33")


def _program_cr(kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in cluster("prod").program if d["kind"] == kind and d["metadata"]["name"] == name]
    return copy.deepcopy(doc)


@pytest.fixture(scope="module")
def schemas() -> CrdSchemas:
    return CrdSchemas(cluster("prod").crds())


def test_crd_validator_accepts_the_program_resources(schemas: CrdSchemas) -> None:
    for kind, name in (
        ("ServiceMonitor", "triton-default"),
        ("PodMonitor", "triton-default-agent"),
        ("SecurityPolicy", "triton-model-resnet18-jwt"),
        ("BackendTrafficPolicy", "triton-http"),
        ("Certificate", "triton-tls"),
    ):
        assert schemas.validate(_program_cr(kind, name), "1.33") == []


def test_crd_validator_rejects_unknown_fields_bad_types_and_scope(schemas: CrdSchemas) -> None:
    monitor = _program_cr("ServiceMonitor", "triton-default")
    monitor["spec"]["endpoints"][0]["intervall"] = "15s"
    assert any("intervall" in p for p in schemas.validate(monitor, "1.33"))
    monitor = _program_cr("ServiceMonitor", "triton-default")
    monitor["spec"]["endpoints"][0]["port"] = 8002  # a port NAME, not a number
    assert any("endpoints.0.port" in p for p in schemas.validate(monitor, "1.33"))
    pods = _program_cr("PodMonitor", "triton-default-agent")
    pods["spec"]["podMetricsEndpoints"][0]["prot"] = "agent-metrics"
    assert any("prot" in p for p in schemas.validate(pods, "1.33"))

    limit = _program_cr("BackendTrafficPolicy", "triton-http")
    limit["spec"]["rateLimit"]["local"]["rules"][0]["limit"]["bursst"] = 3
    assert any("bursst" in p for p in schemas.validate(limit, "1.33"))
    access = _program_cr("SecurityPolicy", "triton-model-resnet18-api-keys")
    access["spec"]["authorization"]["rules"][0]["principal"]["clientCIDRs"] = "10.0.0.0/8"  # a list
    assert any("clientCIDRs" in p for p in schemas.validate(access, "1.33"))

    issuer = _program_cr("ClusterIssuer", "letsencrypt")
    issuer["metadata"]["namespace"] = "triton"
    assert any("not allowed for a cluster-scoped ClusterIssuer" in p for p in schemas.validate(issuer, "1.33"))
    cert = _program_cr("Certificate", "triton-tls")
    cert["metadata"]["lables"] = {"app": "x"}  # ObjectMeta, strict
    assert any(p.startswith("metadata:") and "lables" in p for p in schemas.validate(cert, "1.33"))


def test_crd_validator_rejects_kinds_no_release_installs(schemas: CrdSchemas) -> None:
    doc = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "x"}}
    assert schemas.validate(doc, "1.33") == ["no CRD in the render serves example.com/v1 Widget"]


def test_crd_validator_runs_the_crds_cel_rules_with_defaults_applied(schemas: CrdSchemas) -> None:
    """The CEL rules (x-kubernetes-validations) of the charts' CRDs are evaluated: a policy with two
    kinds of target, a claim rule without a JWT provider, a redirect with a backend are refused."""
    policy = _program_cr("SecurityPolicy", "triton-model-resnet18-api-keys")
    assert schemas.validate(policy, "1.33") == []
    both = copy.deepcopy(policy)
    both["spec"]["targetRef"] = both["spec"]["targetRefs"][0]
    assert "spec: either targetRef or targetRefs must be used" in schemas.validate(both, "1.33")
    claims = copy.deepcopy(policy)
    claims["spec"]["authorization"]["rules"][0]["principal"]["jwt"] = {
        "provider": "oidc",
        "claims": [{"name": "triton_models", "values": ["resnet18"]}],
    }
    assert "spec: if authorization.rules.principal.jwt is used, jwt must be defined" in schemas.validate(claims, "1.33")
    route = _program_cr("HTTPRoute", "triton-https-redirect")
    route["spec"]["rules"][0]["backendRefs"] = [{"name": "triton-default", "port": 8000}]
    assert schemas.validate(route, "1.33") == [
        "spec.rules.0: RequestRedirect filter must not be used together with backendRefs"
    ]
