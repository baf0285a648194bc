"""Shared assertions for the AWS-foundation component tests."""

from __future__ import annotations

import json
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
    assert all(v not in (None, "", [], {}) for v in outputs.values()), f"{comp.name}: empty registered output in {outputs}"
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
