"""Credentials outlast the job that uses them: for every job that assumes an AWS role, job by job
(matrix legs included), `timeout-minutes` <= `role-duration-seconds` of its
configure-aws-credentials step <= the maximum session of the role it assumes, as every stack
records it (the role each job can assume comes from the trust matrix: test_trust_matrix.py).
A job killed by its timeout has held valid credentials to the end; no `pulumi up` dies halfway
because its session expired."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import STACKS, stack_run
from tests.workflows.test_trust_matrix import AWS_ACTION, ROLE_VARIABLES, WORKFLOWS, _legs, _render, load

IAM_DEFAULT_MAX_SESSION = 3600  # a role created without max_session_duration (the ECR image publisher role)
IAM_MIN_DURATION, IAM_MAX_DURATION = 900, 43200


def _max_sessions() -> dict[str, int]:
    """ "<stack>:<role>" -> maxSessionDuration of every CI role every stack records."""
    out = {}
    for stack in STACKS:
        for r in stack_run(stack).of_type("aws:iam/role:Role"):
            name = r.inputs.get("name", r.name).removeprefix(f"triton-platform-{stack}-")
            if f"{stack}:{name}" in ROLE_VARIABLES.values():
                out[f"{stack}:{name}"] = int(r.inputs.get("maxSessionDuration", IAM_DEFAULT_MAX_SESSION))
    return out


def credential_jobs() -> list[tuple[str, int, int, str | None]]:
    """(label, timeout seconds, role-duration-seconds, the stack role it assumes or None)."""
    out = []
    for name in WORKFLOWS:
        for job_id, job in load(name)["jobs"].items():
            aws = [s for s in job.get("steps", []) if str(s.get("uses", "")).startswith(AWS_ACTION + "@")]
            if not aws:
                continue
            for leg in _legs(job):
                scope: dict[str, Any] = {"matrix": leg, "env": {}}
                scope["env"] = {k: _render(v, scope) for k, v in job.get("env", {}).items()}
                (step,) = aws
                variable = _render(step["with"]["role-to-assume"], scope).removeprefix("${{ vars.").removesuffix(" }}")
                assert "timeout-minutes" in job, f"{name} {job_id}: no timeout"
                assert "role-duration-seconds" in step["with"], (
                    f"{name} {job_id}: the action's default (1 h) is not sized to the job"
                )
                label = f"{name} {job_id}" + (f" ({leg['stack']})" if "stack" in leg else "")
                out.append(
                    (
                        label,
                        int(job["timeout-minutes"]) * 60,
                        int(step["with"]["role-duration-seconds"]),
                        ROLE_VARIABLES[variable],
                    )
                )
    return out


@pytest.fixture(scope="module")
def max_sessions() -> dict[str, int]:
    return _max_sessions()


def test_every_job_timeout_fits_its_credentials_and_its_roles_max_session(max_sessions: dict[str, int]) -> None:
    jobs = credential_jobs()
    assert len(jobs) == 15, [
        j[0] for j in jobs
    ]  # 3 up, 1 prod preview, 3 recoveries, 3 PR previews, 2 promote, 2 rollback, 1 image
    assert set(max_sessions) == {r for r in ROLE_VARIABLES.values() if r}
    for label, timeout, duration, role in jobs:
        role_max = max_sessions[role] if role else IAM_DEFAULT_MAX_SESSION
        assert IAM_MIN_DURATION <= duration <= IAM_MAX_DURATION, label
        assert timeout <= duration <= role_max, (
            f"{label}: timeout {timeout} s, credentials {duration} s, {role or 'image publisher'} max session "
            f"{role_max} s"
        )


def test_the_long_jobs_are_the_deploys_and_the_prod_promotion(max_sessions: dict[str, int]) -> None:
    """An EKS upgrade rolling GPU node groups runs past an hour, and so does the prod promotion's
    gray release; a pull request's preview credentials stay at IAM's default, so a PR's code holds
    them no longer than before, and only the deployer and the promoter allow long sessions."""
    longest = {label: duration for label, _, duration, _ in credential_jobs() if duration > 3600}
    assert set(longest) == {
        f"deploy.yml {j}" for j in ("up-dev", "up-staging", "up-prod", "recover-dev", "recover-staging", "recover-prod")
    } | {"model-promote.yml promote"}
    assert {r: s for r, s in max_sessions.items() if s > 3600} == {
        **{f"{s}:deployer": 10800 for s in STACKS},
        "prod:promoter": 7200,
    }


# Copy + re-verify before the canary starts, the canary's load and its promotion or abort after it.
PROMOTION_MARGIN_SECONDS = 1800


def test_the_prod_promotion_outlasts_the_longest_prod_canary_deadline() -> None:
    """`model-sync promote --to prod` runs a gray release up to its deadline
    (tritonDeployments.<d>.canary.deadlineSeconds of the model's deployment): the promote job's
    timeout, hence its credentials, covers the longest prod deadline plus the copy and the rest,
    so no release is cut off by the job (it would be left behind: TritonCanaryStuck)."""
    from components.stack_config.parser import parse
    from tests.pulumi_kit import stack_config

    prod = parse(stack_config("prod"), "prod")
    longest = max(d.canary.deadline_seconds for d in prod.triton_deployments)
    exported = max(p["deadlineSeconds"] for p in stack_run("prod").exports["canaryPolicies"].values())
    assert longest == exported
    (job,) = [j for j in credential_jobs() if j[0] == "model-promote.yml promote"]
    _, timeout, duration, role = job
    assert role == "prod:promoter"
    assert longest + PROMOTION_MARGIN_SECONDS <= timeout <= duration


def test_the_old_one_hour_credentials_would_fail(max_sessions: dict[str, int]) -> None:
    """Today's main: no role-duration-seconds (the action's 3600 s), roles capped at 3600 s, up jobs
    allowed 90-120 minutes: the same rule rejects it."""
    old = [("deploy.yml up-dev", 90 * 60, 3600, 3600), ("deploy.yml up-prod", 120 * 60, 3600, 3600)]
    assert [label for label, timeout, duration, role_max in old if not timeout <= duration <= role_max] == [
        "deploy.yml up-dev",
        "deploy.yml up-prod",
    ]
