"""Pod Security: every pod of the whole rendered cluster (the program's workloads and every
chart's) is admitted by the Pod Security level its namespace enforces, and every namespace
the platform owns enforces the strictest level its pods admit (tests/manifests/_pod_security.py
has the Pod Security Standards' checks)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import STACKS
from tests.manifests._cluster import Cluster, cluster, pod_spec
from tests.manifests._pod_security import LEVELS, strictest_level, violations

WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Pod")
ENFORCE = "pod-security.kubernetes.io/enforce"
# Namespaces the platform does not own: EKS' own (no Pod Security label: privileged).
NOT_OURS = {"kube-system": "privileged"}
# What each platform namespace must enforce, and why where it is not `restricted`.
EXPECTED = {
    "triton": "restricted",
    "monitoring": "restricted",
    "logging": "restricted",
    "ingress": "restricted",
    "cert-manager": "restricted",
    "node-exporter": "privileged",  # hostNetwork, hostPID, hostPath (node metrics)
    "gpu-operators": "privileged",  # device-plugin hostPath, dcgm-exporter SYS_ADMIN + hostPath
}


def _levels(c: Cluster) -> dict[str, str]:
    out = dict(NOT_OURS)
    for ns in c.of_kind("Namespace"):
        out[ns.name] = (ns.doc["metadata"].get("labels") or {}).get(ENFORCE, "privileged")
    return out


def _pods(c: Cluster) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (str(o), o.namespace or "default", spec) for o in c.of_kind(*WORKLOADS) if (spec := pod_spec(o.doc)) is not None
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_is_admitted_by_its_namespace_level(stack: str) -> None:
    c = cluster(stack)
    levels = _levels(c)
    pods = _pods(c)
    assert len(pods) > 15
    assert {ns for _, ns, _ in pods} >= {
        "triton",
        "monitoring",
        "node-exporter",
        "logging",
        "ingress",
        "cert-manager",
        "gpu-operators",
    }
    problems = [
        f"{where} in {ns} ({levels.get(ns)}): {v}"
        for where, ns, spec in pods
        for v in violations(spec, levels.get(ns, "restricted"))
    ]
    assert problems == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_platform_namespace_enforces_the_strictest_level_its_pods_admit(stack: str) -> None:
    c = cluster(stack)
    levels = _levels(c)
    assert {k: v for k, v in levels.items() if k in EXPECTED} == EXPECTED
    strictest: dict[str, int] = {}
    for _, ns, spec in _pods(c):
        strictest[ns] = max(strictest.get(ns, 0), LEVELS.index(strictest_level(spec)))
    looser = {
        ns: (levels[ns], LEVELS[i]) for ns, i in strictest.items() if ns in EXPECTED and LEVELS.index(levels[ns]) > i
    }
    assert looser == {}, "namespace level (enforced, strictest its pods admit)"
    # The operator-run pods (Prometheus, Alertmanager) take their pod context from the custom
    # resource: non-root under RuntimeDefault, no host namespaces.
    for o in c.of_kind("Prometheus", "Alertmanager"):
        ctx = o.doc["spec"].get("securityContext") or {}
        assert ctx.get("runAsNonRoot") is True, f"{o}: {ctx}"
        assert ctx.get("seccompProfile") == {"type": "RuntimeDefault"}, f"{o}: {ctx}"
        assert not o.doc["spec"].get("hostNetwork"), str(o)


def test_the_checks_catch_what_each_level_refuses() -> None:
    restricted_pod = {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {"name": "c", "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
        ],
        "volumes": [{"name": "v", "emptyDir": {}}],
    }
    assert strictest_level(restricted_pod) == "restricted"
    host = {**restricted_pod, "hostNetwork": True}
    assert strictest_level(host) == "privileged"
    assert violations(host, "baseline") == ["hostNetwork: true"]
    path = {**restricted_pod, "volumes": [{"name": "sock", "hostPath": {"path": "/var/run"}}]}
    assert strictest_level(path) == "privileged"
    root = {**restricted_pod, "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}
    assert strictest_level(root) == "baseline"
    assert violations(root, "restricted") == ["c: runAsNonRoot not true"]
    sys_admin = {
        **restricted_pod,
        "containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}],
    }
    assert strictest_level(sys_admin) == "privileged"
    escalation = {
        **restricted_pod,
        "containers": [{"name": "c", "securityContext": {"capabilities": {"drop": ["ALL"]}}}],
    }
    assert violations(escalation, "restricted") == ["c: allowPrivilegeEscalation not false"]
    no_seccomp = {**restricted_pod, "securityContext": {"runAsNonRoot": True}}
    assert violations(no_seccomp, "restricted") == ["c: seccompProfile None, not RuntimeDefault or Localhost"]
