"""The policy pack over what the REAL program registers, for every shipped stack.

The hand-built resources in test_policies.py prove each rule; this file proves the
program passes them: every resource policy (and the stack policy) runs over every
resource of `build/<stack>/inventory.json`, which `make policy-test` renders first
(`render-all`: the real `__main__.py` under the recording mocks, in the main venv; the
policies run here, in .venv-policy). Any violation fails, naming stack, policy and message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import unknown_checking_proxy

from policy import policies

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
STACKS = ("dev", "staging", "prod")
PROJECT = "triton-platform"
# Inputs the program's resources are made from: a render older than any of them is stale.
SOURCES = [
    ROOT / "__main__.py",
    *sorted((ROOT / "components").glob("*.py")),
    *sorted((ROOT / "stacks").glob("Pulumi.*.yaml")),
]


def _opts() -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=False,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
    )


def _urn(stack: str, entry: dict[str, Any]) -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{entry['type']}::{entry['name']}"


def inventory(stack: str) -> list[dict[str, Any]]:
    path = BUILD / stack / "inventory.json"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make policy-test` (it renders every stack first) or `make render-all`")
    newer = [str(s.relative_to(ROOT)) for s in SOURCES if s.stat().st_mtime > path.stat().st_mtime]
    if newer:
        pytest.fail(
            f"{path} is older than {', '.join(newer[:5])}: re-render with `make render-all` (make policy-test does it)"
        )
    entries = json.loads(path.read_text())
    assert len(entries) > 50, f"{path} holds only {len(entries)} resources"
    return entries


def _resource_violations(stack: str, entries: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for entry in entries:
        args = ResourceValidationArgs(
            entry["type"],
            unknown_checking_proxy(dict(entry["inputs"])),
            _urn(stack, entry),
            entry["name"],
            _opts(),
            None,
        )
        for policy in policies.RESOURCE_POLICIES:
            policy.validate(
                args, lambda message, _urn=None, name=policy.name: found.append(f"{stack}: {name}: {message}")
            )  # type: ignore[misc]
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_every_resource_policy_passes_on_the_real_program(stack: str) -> None:
    entries = inventory(stack)
    types = {e["type"] for e in entries}
    # The policies have something to bite on: the rules' target types were recorded.
    for expected in (
        "aws:s3/bucket:Bucket",
        "aws:eks/cluster:Cluster",
        "aws:kms/key:Key",
        "aws:iam/role:Role",
        "kubernetes:apps/v1:Deployment",
        "kubernetes:helm.sh/v3:Release",
        "kubernetes:core/v1:Secret",
    ):
        assert expected in types, f"{stack}: no {expected} recorded"
    assert _resource_violations(stack, entries) == []


@pytest.mark.parametrize("stack", STACKS)
def test_stack_policy_passes_on_the_real_program(stack: str) -> None:
    resources = [
        PolicyResource(
            e["type"], unknown_checking_proxy(dict(e["inputs"])), _urn(stack, e), e["name"], _opts(), None, None, [], {}
        )
        for e in inventory(stack)
    ]
    found: list[str] = []
    for policy in policies.STACK_POLICIES:
        policy.validate(
            StackValidationArgs(resources),
            lambda message, _urn=None, name=policy.name: found.append(f"{name}: {message}"),
        )  # type: ignore[misc]
    assert found == []


def test_the_check_bites_on_a_real_resource() -> None:
    """The same loop reports a violation when a recorded resource breaks a rule: the prod
    Triton Deployment with its tritonserver image's digest stripped."""
    entries = inventory("prod")
    deployment = next(
        e
        for e in entries
        if e["type"] == "kubernetes:apps/v1:Deployment"
        and any(c["name"] == "tritonserver" for c in e["inputs"]["spec"]["template"]["spec"]["containers"])
    )
    broken = json.loads(json.dumps(deployment))
    for c in broken["inputs"]["spec"]["template"]["spec"]["containers"]:
        if c["name"] == "tritonserver":
            c["image"] = c["image"].split("@", 1)[0]
    found = _resource_violations("prod", [broken])
    assert len(found) == 1, found
    assert found[0].startswith("prod: images-pinned: Deployment"), found
    assert "is not pinned by digest (stack prod)" in found[0]
