"""Shared assertions for the AWS-foundation component tests."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.pulumi_kit import Resource, Run


def component(run: Run, token: str, name: str) -> Resource:
    return run.one(token, name)


def assert_children_prefixed(run: Run, comp: Resource, min_children: int) -> list[Resource]:
    """Every descendant is under `comp` and named `<comp name>-...`; returns the direct children."""
    children = run.children_of(comp)
    assert len(children) >= min_children, f"{comp.name}: {len(children)} children recorded"
    for r in run.descendants_of(comp):
        assert r.name.startswith(f"{comp.name}-"), f"{r.type} {r.name} is not prefixed with {comp.name}-"
    return children


def registered_outputs(run: Run, comp: Resource) -> dict[str, Any]:
    outputs = run.component_outputs.get(comp.urn)
    assert outputs, f"{comp.type} {comp.name} registered no outputs"
    assert all(v not in (None, "", [], {}) for v in outputs.values()), (
        f"{comp.name}: empty registered output in {outputs}"
    )
    return outputs


def policy(resource: Resource, field: str = "policy") -> dict[str, Any]:
    doc = json.loads(resource.inputs[field])
    assert doc["Version"] == "2012-10-17"
    return doc


def statements(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Statements keyed by Sid (every statement must have one, and each only once)."""
    sids = [s["Sid"] for s in doc["Statement"]]
    assert len(set(sids)) == len(sids), sids
    return {s["Sid"]: s for s in doc["Statement"]}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def assert_no_wildcards(doc: dict[str, Any]) -> None:
    """No `*` action and no `*` resource in an Allow statement."""
    for s in doc["Statement"]:
        if s["Effect"] != "Allow":
            continue
        for a in as_list(s["Action"]):
            assert "*" not in a, f"{s['Sid']}: wildcard action {a}"
        for r in as_list(s["Resource"]):
            assert r != "*", f"{s['Sid']}: wildcard resource {r}"
            assert not r.endswith(":*"), f"{s['Sid']}: wildcard resource {r}"


_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|Mi|Gi)?$")
_SCALE = {None: 1.0, "m": 1e-3, "Mi": 2.0**20, "Gi": 2.0**30}


def quantity(value: str) -> float:
    """A Kubernetes CPU or memory quantity as a number (cores, bytes); only the suffixes the
    components use."""
    m = _QUANTITY.match(str(value))
    assert m, f"unexpected quantity {value!r}"
    return float(m.group(1)) * _SCALE[m.group(2)]


def assert_bounded_resources(where: str, resources: dict[str, Any]) -> None:
    """CPU and memory requests and limits as every chart workload gets them: the memory limit
    2-4x the request (room to grow, and an OOM kill of the container before the node's), the
    CPU limit at least 4x the request (a ceiling for bursts, never a throttle at steady use)."""
    assert sorted(resources) == ["limits", "requests"], f"{where}: {resources}"
    for bound in ("requests", "limits"):
        assert sorted(resources[bound]) == ["cpu", "memory"], f"{where}.{bound}: {resources[bound]}"
    memory = quantity(resources["limits"]["memory"]) / quantity(resources["requests"]["memory"])
    cpu = quantity(resources["limits"]["cpu"]) / quantity(resources["requests"]["cpu"])
    assert 2 <= memory <= 4, f"{where}: memory limit {memory:.1f}x the request"
    assert cpu >= 4, f"{where}: CPU limit {cpu:.1f}x the request"


def assert_restricted_container(where: str, context: dict[str, Any]) -> None:
    """A container context of the restricted Pod Security profile, plus a read-only root."""
    assert context["allowPrivilegeEscalation"] is False, where
    assert context["readOnlyRootFilesystem"] is True, where
    assert context["capabilities"] == {"drop": ["ALL"]}, where
    assert context.get("privileged", False) is False, where


def assert_restricted_pod(where: str, context: dict[str, Any]) -> None:
    """A pod context that runs non-root under the runtime's default seccomp profile."""
    assert context["runAsNonRoot"] is True, where
    assert context["runAsUser"] > 0, where
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
