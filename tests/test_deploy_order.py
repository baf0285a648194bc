"""From an empty account the stacks deploy in one order (docs/bootstrap.md): each account's
bootstrap, then dev, staging, prod. AWS refuses a policy whose principal does not exist yet,
so no stack may name, as a principal, anything a stack deployed after it creates (the GitHub
OIDC provider, the prod promoter role, ...). Read from what every stack records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from components.account import bootstrap_config
from tests.conftest import stack_run
from tests.pulumi_kit import ROOT, Run, run_program, stack_config

BOOTSTRAP_ACCOUNTS = {"nonprod": "111122223333", "prod": "444455556666"}  # bootstrap/Pulumi.<name>.yaml headers
ORDER = ("bootstrap/nonprod", "bootstrap/prod", "dev", "staging", "prod")


def _account(step: str) -> str:
    if step.startswith("bootstrap/"):
        return BOOTSTRAP_ACCOUNTS[step.split("/", 1)[1]]
    return str(stack_config(step)["triton-platform:githubOidcProviderArn"]).split(":")[4]  # the stack's own account


def _run(step: str) -> Run:
    if step.startswith("bootstrap/"):
        name = step.split("/", 1)[1]
        return run_program(
            name,
            program=ROOT / "bootstrap" / "__main__.py",
            stack_file=ROOT / "bootstrap" / f"Pulumi.{name}.yaml",
            project=bootstrap_config.PROJECT,
        )
    return stack_run(step)


def created(run: Run, account: str) -> set[str]:
    """ARNs of the principals a run creates, in its real account (the mocks use one account)."""
    out = {
        f"arn:aws:iam::{account}:role/{r.inputs['name']}"
        for r in run.of_type("aws:iam/role:Role")
        if r.inputs.get("name")
    }
    out |= {
        f"arn:aws:iam::{account}:oidc-provider/{str(p.inputs['url']).removeprefix('https://')}"
        for p in run.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    }
    return out


def _documents(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, str) and value.lstrip().startswith("{") and '"Statement"' in value:
        yield json.loads(value)
    elif isinstance(value, dict):
        if "Statement" in value:
            yield value
        for v in value.values():
            yield from _documents(v)
    elif isinstance(value, list):
        for v in value:
            yield from _documents(v)


def named_principals(run: Run) -> set[str]:
    """Every principal ARN any policy document of the run names (conditions excluded: a condition
    names an ARN without AWS resolving it)."""
    out: set[str] = set()
    for r in run.resources:
        for doc in _documents(r.inputs):
            for st in doc["Statement"] if isinstance(doc["Statement"], list) else [doc["Statement"]]:
                principal = st.get("Principal")
                if isinstance(principal, dict):
                    for v in principal.values():
                        out |= set(v) if isinstance(v, list) else {v}
    return out


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    return {step: _run(step) for step in ORDER}


def test_no_stack_names_a_principal_created_after_it(runs: dict[str, Run]) -> None:
    later: set[str] = set()
    problems = []
    for step in reversed(ORDER):
        early = named_principals(runs[step]) & later
        problems += [f"{step} names {arn}, created by a later step" for arn in sorted(early)]
        later |= created(runs[step], _account(step))
    assert problems == []


def test_the_order_is_real(runs: dict[str, Run]) -> None:
    """The check sees what it guards: principals named across stacks and the creators of each."""
    assert "arn:aws:iam::111122223333:oidc-provider/token.actions.githubusercontent.com" in created(
        runs["bootstrap/nonprod"], "111122223333"
    )
    assert "arn:aws:iam::444455556666:role/triton-platform-prod-promoter" in created(runs["prod"], "444455556666")
    # dev names the provider the nonprod bootstrap created (earlier: allowed).
    assert "arn:aws:iam::111122223333:oidc-provider/token.actions.githubusercontent.com" in named_principals(
        runs["dev"]
    )
    # staging grants prod's account root, narrowed to the promoter by a condition.
    assert "arn:aws:iam::444455556666:root" in named_principals(runs["staging"])
    assert "arn:aws:iam::444455556666:role/triton-platform-prod-promoter" not in named_principals(runs["staging"])
