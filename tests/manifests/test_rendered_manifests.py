"""Every Kubernetes object the program creates, rendered by tools/render.py for each
stack, validated strictly: built-in kinds against the stack's Kubernetes version,
custom resources against models generated from their CRDs (plus unknown-key checks)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml
from kubernetes_validate.utils import ValidationError

from tests.conftest import STACKS, stack_run
from tests.manifests._validators import (
    crd_model,
    node_available,
    unknown_fields,
    validate_builtin,
    validate_crd,
    validate_traefik,
)
from tests.pulumi_kit import stack_config
from tools.render import write_render

# Kinds the serving plane must render in every stack (monitoring and logging are on in all three).
EXPECTED = {"Namespace", "ServiceAccount", "Secret", "Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler",
            "NetworkPolicy", "ServiceMonitor", "PrometheusRule", "ConfigMap", "ClusterIssuer", "Certificate", "IngressRoute", "Middleware"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    root = tmp_path_factory.mktemp("build")
    for stack in STACKS:
        counts = write_render(stack_run(stack), root / stack)
        files = sorted((root / stack / "manifests").glob("*.yaml"))
        assert counts["manifests"] == len(files) > 0
        out[stack] = [yaml.safe_load(f.read_text()) for f in files]
    return out


def _version(stack: str) -> str:
    return str(stack_config(stack)["triton-platform:kubernetesVersion"])


@pytest.mark.parametrize("stack", STACKS)
def test_builtin_kinds_validate_strictly(rendered: dict[str, list[dict[str, Any]]], stack: str) -> None:
    builtin = [d for d in rendered[stack] if crd_model(d) is None and not d["apiVersion"].startswith("traefik.io/")]
    assert len(builtin) >= 15
    for doc in builtin:
        validate_builtin(doc, _version(stack))


@pytest.mark.parametrize("stack", STACKS)
def test_prometheus_and_cert_manager_resources_match_their_crds(rendered: dict[str, list[dict[str, Any]]], stack: str) -> None:
    crs = [d for d in rendered[stack] if crd_model(d) is not None]
    assert {d["kind"] for d in crs} >= {"ServiceMonitor", "PrometheusRule", "Certificate", "ClusterIssuer"}
    for doc in crs:
        assert validate_crd(doc) == [], f"{doc['kind']} {doc['metadata']['name']}: unknown fields"


def test_traefik_resources_match_their_crds(rendered: dict[str, list[dict[str, Any]]]) -> None:
    assert node_available(), "Traefik models missing: run `make manifest-models` (npm ci in tests/manifests/node)"
    docs = [d for stack in STACKS for d in rendered[stack] if d["apiVersion"].startswith("traefik.io/")]
    assert Counter(d["kind"] for d in docs) == {"Middleware": 15, "IngressRoute": 6}
    assert validate_traefik(docs) == []


def test_every_expected_kind_is_rendered_with_a_name(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for stack in STACKS:
        kinds = {d["kind"] for d in rendered[stack]}
        assert kinds >= EXPECTED, f"{stack}: missing {EXPECTED - kinds}"
        names = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in rendered[stack]]
        assert len(names) == len(set(names)), f"{stack}: duplicate objects"


# ---- the validators catch what they are meant to catch --------------------------------


def test_builtin_validator_rejects_unknown_fields() -> None:
    doc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"prots": [{"port": 1}]}}
    with pytest.raises(ValidationError, match="prots"):
        validate_builtin(doc, "1.33")


def test_crd_validators_reject_bad_types_and_unknown_fields() -> None:
    from cloudcoil.models.prometheus_operator.v1 import ServiceMonitor

    typo = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "x"},
            "spec": {"selector": {}, "endpoints": [{"port": "metrics", "intervall": "15s"}]}}
    assert validate_crd(typo) == ["spec.endpoints[0].intervall"]
    assert unknown_fields(ServiceMonitor, {"spec": {"selectr": {}}}) == ["spec.selectr"]
    bad = {**typo, "spec": {"selector": {}, "endpoints": [{"port": 8002}]}}
    with pytest.raises(pydantic.ValidationError):
        validate_crd(bad)


def test_traefik_validator_rejects_bad_types_and_unknown_fields() -> None:
    assert node_available(), "run `make manifest-models`"
    docs = [
        {"apiVersion": "traefik.io/v1alpha1", "kind": "Middleware", "metadata": {"name": "typo"},
         "spec": {"rateLimit": {"average": 5, "bursst": 3}}},
        {"apiVersion": "traefik.io/v1alpha1", "kind": "Middleware", "metadata": {"name": "type"},
         "spec": {"ipAllowList": {"sourceRange": "10.0.0.0/8"}}},
    ]
    problems = validate_traefik(docs)
    assert any("bursst" in p for p in problems)
    assert any("sourceRange" in p for p in problems)


def test_render_cli_writes_manifests(tmp_path: Path) -> None:
    from tools.render import main

    assert main(["dev", "--out", str(tmp_path)]) == 0
    assert len(list((tmp_path / "dev" / "manifests").glob("*-deployment-triton-triton-default.yaml"))) == 1
    assert (tmp_path / "dev" / "helm" / "monitoring-kube-prometheus-stack.yaml").exists()
