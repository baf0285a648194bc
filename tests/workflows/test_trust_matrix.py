"""The trust matrix, job by job: for every job of every workflow, the OIDC token GitHub would
issue to it (workflow file, triggering ref, the job's environment, under the repository's
subject template `GITHUB_SUB_CLAIM_KEYS`), evaluated against the trust document of every AWS
role every stack records under Pulumi's mocks. Each job must be able to assume exactly the role
its `role-to-assume` names, and nothing else; runs from another branch nothing at all.
The matrix is printed in docs/operations.md ("Who can assume which role"), checked here.

The trust evaluation is written here, independently of components/identities.py: an Allow
statement for `sts:AssumeRoleWithWebIdentity` from the GitHub OIDC provider whose every
StringEquals / StringLike condition on `token.actions.githubusercontent.com:sub|aud` holds.
Any other operator or key fails the test instead of being guessed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components.iam.github_oidc import GITHUB_OIDC_HOST, GITHUB_SUB_CLAIM_KEYS
from components.identities import github_environment
from tests.conftest import STACKS, stack_run
from tests.pulumi_kit import stack_config
from tools import yamlio

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_DIR = ROOT / ".github" / "workflows"
DOC = ROOT / "docs" / "operations.md"
AWS_ACTION = "aws-actions/configure-aws-credentials"
MAIN = "refs/heads/main"
OTHER_BRANCH = "refs/heads/feature"  # any branch but main: a dispatch or push from it
PR_REF = "refs/pull/123/merge"  # the ref of a pull_request run
NONE = "—"  # a doc-table cell: no role of that stack
REPO = stack_config("prod")["triton-platform:githubRepository"]

# Repository variable -> the stack role whose ARN it holds (docs/operations.md, "One-time setup"):
# the stack outputs deployerRoleArn / previewRoleArn / publisherRoleArn / promoterRoleArn.
# AWS_AGENT_IMAGE_ROLE_ARN is the ECR image publisher, created outside the stacks: None.
ROLE_VARIABLES: dict[str, str | None] = {
    **{f"AWS_DEPLOYER_ROLE_ARN_{s.upper()}": f"{s}:deployer" for s in STACKS},
    **{f"AWS_PREVIEW_ROLE_ARN_{s.upper()}": f"{s}:preview" for s in STACKS},
    "AWS_PUBLISHER_ROLE_ARN_STAGING": "staging:publisher",
    "AWS_PROMOTER_ROLE_ARN": "prod:promoter",
    "AWS_AGENT_IMAGE_ROLE_ARN": None,
}


def load(name: str) -> dict[str, Any]:
    doc = yamlio.load((WORKFLOW_DIR / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the `on` key as True
    return doc


WORKFLOWS = sorted(p.name for p in WORKFLOW_DIR.glob("*.yml"))


# ---- what GitHub issues ------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One job (one matrix leg) that can request an OIDC token."""

    label: str  # `<workflow> <job id>[ (<leg>)]`, as the doc table names it
    workflow: str
    environment: str | None
    role_variable: str | None  # the `vars.X` its role-to-assume resolves to
    runs: tuple[tuple[str, str], ...]  # (event, ref) of every run its triggers allow


def _render(value: Any, scope: dict[str, Any]) -> Any:
    """`${{ matrix.x }}` / `${{ env.x }}` replaced from `scope`; `${{ vars.X }}` kept."""
    if not isinstance(value, str):
        return value
    return re.sub(r"\$\{\{\s*(matrix|env)\.(\w+)\s*\}\}", lambda m: str(scope[m.group(1)][m.group(2)]), value)


def _legs(job: dict[str, Any]) -> list[dict[str, Any]]:
    matrix = job.get("strategy", {}).get("matrix")
    if matrix is None:
        return [{}]
    assert set(matrix) == {"include"}, f"model this matrix: {matrix}"
    return list(matrix["include"])


def _runs(on: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    runs: list[tuple[str, str]] = []
    for event, spec in on.items():
        if event == "push":
            assert set(spec or {}) <= {"branches", "paths"}, f"model this push filter: {spec}"
            branches = (spec or {}).get("branches")
            runs += (
                [("push", f"refs/heads/{b}") for b in branches]
                if branches
                else [("push", MAIN), ("push", OTHER_BRANCH)]
            )
        elif event == "workflow_dispatch":  # dispatched from any branch the dispatcher picks
            runs += [("workflow_dispatch", MAIN), ("workflow_dispatch", OTHER_BRANCH)]
        elif event == "pull_request":
            runs.append(("pull_request", PR_REF))
        else:
            pytest.fail(f"model the OIDC subject of event {event!r}")
    return tuple(runs)


def jobs() -> list[Job]:
    out = []
    for name in WORKFLOWS:
        wf = load(name)
        runs = _runs(wf["on"])
        for job_id, job in wf["jobs"].items():
            if job.get("permissions", {}).get("id-token") != "write":
                assert not [s for s in job.get("steps", []) if str(s.get("uses", "")).startswith(AWS_ACTION + "@")], (
                    job_id
                )
                continue  # no token can be requested
            for leg in _legs(job):
                scope = {"matrix": leg, "env": {}}
                scope["env"] = {k: _render(v, scope) for k, v in job.get("env", {}).items()}
                [aws] = [s for s in job["steps"] if str(s.get("uses", "")).startswith(AWS_ACTION + "@")]
                role = _render(aws["with"]["role-to-assume"], scope)
                m = re.fullmatch(r"\$\{\{\s*vars\.(\w+)\s*\}\}", role)
                assert m, f"{name} {job_id}: role-to-assume {role!r} must resolve to a repository variable"
                named = [str(v) for v in leg.values() if "${{" not in str(v)]  # the leg's plain values (stack)
                label = f"{name} {job_id}" + (f" ({', '.join(named)})" if named else "")
                out.append(Job(label, name, _render(job.get("environment"), scope), m.group(1), runs))
    return out


def subject(job: Job, event: str, ref: str, template: tuple[str, ...]) -> str:
    """The `sub` of the job's token for one run: GitHub's default template (repo, context) or
    the customised one; `context` is `environment:<name>` for a job with an environment, else
    `pull_request` for pull_request runs, else `ref:<ref>`."""
    context = (
        f"environment:{job.environment}"
        if job.environment
        else ("pull_request" if event == "pull_request" else f"ref:{ref}")
    )
    claims = {"repo": REPO, "context": context, "job_workflow_ref": f"{REPO}/.github/workflows/{job.workflow}@{ref}"}
    parts = []
    for key in template:
        parts.append(claims[key] if key == "context" else f"{key}:{claims[key]}")
    return ":".join(parts)


# ---- what AWS accepts --------------------------------------------------------------------------


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(operator: str, pattern: str, value: str) -> bool:
    if operator == "StringEquals":
        return pattern == value
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)  # StringLike
    return re.fullmatch(regex, value) is not None


def accepts(trust: dict[str, Any], sub: str) -> bool:
    """Would STS let a GitHub token with this `sub` (aud sts.amazonaws.com) assume the role?"""
    claims = {"sub": sub, "aud": "sts.amazonaws.com"}
    for st in trust["Statement"]:
        assert st["Effect"] == "Allow", st  # no Deny statements to model
        federated = st["Principal"].get("Federated", "")
        if "sts:AssumeRoleWithWebIdentity" not in _as_list(st["Action"]) or not federated.endswith(
            f":oidc-provider/{GITHUB_OIDC_HOST}"
        ):
            continue
        ok = True
        for operator, conditions in st.get("Condition", {}).items():
            assert operator in ("StringEquals", "StringLike"), f"model condition operator {operator}"
            for key, wanted in conditions.items():
                host, _, claim = key.partition(":")
                assert host == GITHUB_OIDC_HOST, f"model condition key {key}"
                assert claim in claims, f"model condition key {key}"
                ok = ok and any(_matches(operator, w, claims[claim]) for w in _as_list(wanted))
        if ok:
            return True
    return False


Roles = dict[str, dict[str, Any]]  # "<stack>:<role>" -> trust document


def recorded_roles() -> Roles:
    roles: Roles = {}
    for stack in STACKS:
        recorded = stack_run(stack).of_type("aws:iam/role:Role")
        assert recorded, f"{stack}: no IAM role recorded"
        for r in recorded:  # every role of the stack (node, add-on, serving, CI), by its IAM name or logical name
            name = r.inputs.get("name", r.name).removeprefix(f"triton-platform-{stack}-")
            assert f"{stack}:{name}" not in roles, name
            roles[f"{stack}:{name}"] = json.loads(r.inputs["assumeRolePolicy"])
    return roles


def matrix(roles: Roles, all_jobs: list[Job], template: tuple[str, ...], refs: set[str]) -> dict[str, list[str]]:
    """job label -> every role some run of the job from `refs` can assume."""
    return {
        j.label: sorted(
            name
            for name, trust in roles.items()
            if any(accepts(trust, subject(j, event, ref, template)) for event, ref in j.runs if ref in refs)
        )
        for j in all_jobs
    }


def intended(all_jobs: list[Job]) -> dict[str, list[str]]:
    out = {}
    for j in all_jobs:
        assert j.role_variable in ROLE_VARIABLES, f"{j.label}: map {j.role_variable} in ROLE_VARIABLES"
        role = ROLE_VARIABLES[j.role_variable]
        out[j.label] = [role] if role else []
    return out


@pytest.fixture(scope="module")
def roles() -> Roles:
    return recorded_roles()


# ---- the matrix ----------------------------------------------------------------------------------


def test_every_job_can_assume_exactly_the_role_it_uses(roles: Roles) -> None:
    all_jobs = jobs()
    assert len(all_jobs) == 15, [
        j.label for j in all_jobs
    ]  # 3 up, 1 prod preview, 3 recoveries, 3 PR previews, 2 promote, 2 rollback, 1 image
    computed = matrix(roles, all_jobs, GITHUB_SUB_CLAIM_KEYS, {MAIN, PR_REF})
    assert computed == intended(all_jobs)
    # Every CI role of every stack is some job's, and only that job's.
    ci_roles = {name for name, trust in roles.items() if "Federated" in trust["Statement"][0]["Principal"]}
    assert ci_roles == {
        "dev:deployer",
        "dev:preview",
        "staging:deployer",
        "staging:preview",
        "staging:publisher",
        "prod:deployer",
        "prod:preview",
        "prod:promoter",
    }
    assert {r for rs in computed.values() for r in rs} == ci_roles  # no role is nobody's: each one is used
    # The same check rejects today's main (before this trust design): see _todays_matrix.
    assert _todays_matrix() != intended(TODAY_JOBS)


def test_each_job_runs_in_its_purposes_environment() -> None:
    """The environment is part of every subject a role trusts (components/identities.py)."""
    for j in jobs():
        role = ROLE_VARIABLES[j.role_variable or ""]
        expected = github_environment(role.split(":")[1], role.split(":")[0]) if role else "agent-image"
        assert j.environment == expected, j.label


@pytest.mark.parametrize("template", [GITHUB_SUB_CLAIM_KEYS, ("repo", "context")], ids=["customised", "default"])
def test_runs_from_any_other_branch_assume_nothing(roles: Roles, template: tuple[str, ...]) -> None:
    """A dispatch (or push) from any branch but main gets no role, whichever subject template the
    repository has: the ref is in every trusted subject, not left to the environments' branch rules."""
    all_jobs = jobs()
    assert any(ref == OTHER_BRANCH for j in all_jobs for _, ref in j.runs)  # the dispatchable workflows
    assert matrix(roles, all_jobs, template, {OTHER_BRANCH}) == {j.label: [] for j in all_jobs}


def test_without_the_customised_subject_template_nothing_can_be_assumed(roles: Roles) -> None:
    """Until the repository's template is applied GitHub issues `repo:<r>:<context>` subjects: no
    role accepts one (the control fails closed), whatever the ref."""
    all_jobs = jobs()
    assert matrix(roles, all_jobs, ("repo", "context"), {MAIN, PR_REF, OTHER_BRANCH}) == {j.label: [] for j in all_jobs}


def test_a_job_moved_to_another_environment_or_workflow_loses_its_role(roles: Roles) -> None:
    """The trust documents tell the jobs of one workflow apart by environment, and the workflows
    of one environment by file: swap either and the role is gone."""
    [up_dev] = [j for j in jobs() if j.label == "deploy.yml up-dev"]
    assert matrix(roles, [up_dev], GITHUB_SUB_CLAIM_KEYS, {MAIN}) == {up_dev.label: ["dev:deployer"]}
    moved = Job(up_dev.label, up_dev.workflow, "deploy-staging", up_dev.role_variable, up_dev.runs)
    assert matrix(roles, [moved], GITHUB_SUB_CLAIM_KEYS, {MAIN}) == {up_dev.label: ["staging:deployer"]}
    other_file = Job(up_dev.label, "agent-image.yml", "deploy-dev", up_dev.role_variable, up_dev.runs)
    assert matrix(roles, [other_file], GITHUB_SUB_CLAIM_KEYS, {MAIN}) == {up_dev.label: []}


# ---- today's main, for contrast: the checker finds what it was written for --------------------

# The trust documents the program recorded before this change (one subject list per role) ...
_SUB = "token.actions.githubusercontent.com:sub"
_OLD_REF, _OLD_ENV, _OLD_PR = (
    f"repo:{REPO}:ref:refs/heads/main",
    f"repo:{REPO}:environment:prod",
    f"repo:{REPO}:pull_request",
)
TODAY_TRUST = {
    name: {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": f"arn:aws:iam::111122223333:oidc-provider/{GITHUB_OIDC_HOST}"},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {"StringEquals": {f"{GITHUB_OIDC_HOST}:aud": "sts.amazonaws.com", _SUB: [sub]}},
            }
        ]
    }
    for name, sub in {
        "dev:deployer": _OLD_REF,
        "dev:preview": _OLD_PR,
        "staging:deployer": _OLD_REF,
        "staging:preview": _OLD_PR,
        "staging:publisher": _OLD_REF,
        "prod:deployer": _OLD_ENV,
        "prod:preview": _OLD_PR,
        "prod:promoter": _OLD_ENV,
    }.items()
}
# ... and the jobs of the workflows then: (label, workflow, environment, role variable, trigger).
TODAY_JOBS = [
    Job("agent-image.yml build-push", "agent-image.yml", None, "AWS_AGENT_IMAGE_ROLE_ARN", (("push", MAIN),)),
    Job("deploy.yml up-dev", "deploy.yml", None, "AWS_DEPLOYER_ROLE_ARN_DEV", (("push", MAIN),)),
    Job("deploy.yml up-staging", "deploy.yml", None, "AWS_DEPLOYER_ROLE_ARN_STAGING", (("push", MAIN),)),
    Job("deploy.yml up-prod", "deploy.yml", "prod", "AWS_DEPLOYER_ROLE_ARN_PROD", (("push", MAIN),)),
    Job(
        "model-promote.yml verify-staging",
        "model-promote.yml",
        None,
        "AWS_PUBLISHER_ROLE_ARN_STAGING",
        (("workflow_dispatch", MAIN),),
    ),
    Job(
        "model-promote.yml promote",
        "model-promote.yml",
        "prod",
        "AWS_PROMOTER_ROLE_ARN",
        (("workflow_dispatch", MAIN),),
    ),
    Job(
        "model-rollback.yml rollback-staging",
        "model-rollback.yml",
        None,
        "AWS_PUBLISHER_ROLE_ARN_STAGING",
        (("workflow_dispatch", MAIN),),
    ),
    Job(
        "model-rollback.yml rollback-prod",
        "model-rollback.yml",
        "prod",
        "AWS_PROMOTER_ROLE_ARN",
        (("workflow_dispatch", MAIN),),
    ),
    *(
        Job(
            f"pull-request.yml preview ({s})",
            "pull-request.yml",
            None,
            f"AWS_PREVIEW_ROLE_ARN_{s.upper()}",
            (("pull_request", PR_REF),),
        )
        for s in STACKS
    ),
]


def _todays_matrix() -> dict[str, list[str]]:
    """Today's main under GitHub's default template, as the checker sees it: every job on main can
    assume the staging deployer (cluster admin), the agent-image job included; promote and
    rollback can assume the prod deployer; every preview leg can assume every stack's preview role."""
    today = matrix(TODAY_TRUST, TODAY_JOBS, ("repo", "context"), {MAIN, PR_REF})
    on_main = ["dev:deployer", "staging:deployer", "staging:publisher"]
    in_prod = ["prod:deployer", "prod:promoter"]
    previews = [f"{s}:preview" for s in STACKS]
    assert today == {
        "agent-image.yml build-push": on_main,
        "deploy.yml up-dev": on_main,
        "deploy.yml up-staging": on_main,
        "deploy.yml up-prod": in_prod,
        "model-promote.yml verify-staging": on_main,
        "model-promote.yml promote": in_prod,
        "model-rollback.yml rollback-staging": on_main,
        "model-rollback.yml rollback-prod": in_prod,
        **{f"pull-request.yml preview ({s})": sorted(previews) for s in STACKS},
    }
    return today


# ---- the table in docs/operations.md ---------------------------------------------------------------


def _doc_rows() -> Iterator[list[str]]:
    text = DOC.read_text()
    m = re.search(r"<!-- trust-matrix:start -->\n(.*?)<!-- trust-matrix:end -->", text, flags=re.S)
    assert m, "docs/operations.md: the trust matrix table (between trust-matrix markers) is missing"
    lines = [ln for ln in m.group(1).splitlines() if ln.startswith("|")]
    assert [c.strip() for c in lines[0].strip("|").split("|")] == ["Workflow job", "Environment", *STACKS]
    for ln in lines[2:]:
        yield [c.strip().replace("`", "") for c in ln.strip("|").split("|")]


def test_the_doc_table_is_the_computed_matrix(roles: Roles) -> None:
    all_jobs = jobs()
    computed = matrix(roles, all_jobs, GITHUB_SUB_CLAIM_KEYS, {MAIN, PR_REF})
    expected = [
        [
            j.label,
            j.environment or NONE,
            *(", ".join(r.split(":")[1] for r in computed[j.label] if r.startswith(f"{s}:")) or NONE for s in STACKS),
        ]
        for j in all_jobs
    ]
    assert list(_doc_rows()) == expected
