"""GitHub Actions OIDC: the subjects GitHub issues to a workflow's jobs and the IAM trust that accepts exactly them.

Shared by the stacks' CI roles (components/identities.py) and the account bootstrap's agent
image push role (components/account_bootstrap.py), so every role assumed from GitHub trusts
the same subject template. AWS IAM evaluates only `aud` and `sub` of GitHub's token as
condition keys ("Support for custom claims for OIDC is unavailable in AWS", GitHub's AWS OIDC
guide), so the workflow is put INTO `sub`: the repository's subject template is customised to
`GITHUB_SUB_CLAIM_KEYS` = repo, context, job_workflow_ref, which makes every job's subject
`repo:<owner/name>:environment:<env>:job_workflow_ref:<owner/name>/.github/workflows/<file>@<ref>`
(docs/operations.md, "One-time setup", applies it). Until it is applied GitHub issues the
default `repo:<owner/name>:environment:<env>` subjects, which no role accepts: the control
fails closed.
ref: https://docs.github.com/en/actions/reference/security/oidc (customizing the subject claims)
ref: https://docs.github.com/en/actions/how-tos/secure-your-work/security-harden-deployments/oidc-in-aws
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# A branch or tag ref the CI roles' workflows may run from (no wildcards, no environments).
GIT_REF = re.compile(r"^refs/(heads|tags)/[\w./-]+$")
GITHUB_REPO = re.compile(r"^[A-Za-z0-9-]{1,39}/[A-Za-z0-9._-]{1,100}$")
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
GITHUB_OIDC_AUDIENCE = "sts.amazonaws.com"
# The repository's OIDC subject template (PUT /repos/{owner}/{repo}/actions/oidc/customization/sub
# with {"use_default": false, "include_claim_keys": [...]}; docs/operations.md, "One-time setup").
GITHUB_SUB_CLAIM_KEYS = ("repo", "context", "job_workflow_ref")
WORKFLOW_DIR = ".github/workflows"
# The ref of every pull_request run (`refs/pull/<number>/merge`); `*` stands for the number.
PULL_REQUEST_REF = "refs/pull/*/merge"

_WORKFLOW_FILE = re.compile(r"^[a-z0-9][a-z0-9-]*\.yml$")


def github_subject(repository: str, workflow: str, ref: str, environment: str) -> str:
    """The `sub` GitHub issues, under GITHUB_SUB_CLAIM_KEYS, to a job of `workflow` (a file in
    .github/workflows) run from `ref` in GitHub environment `environment`."""
    if not GITHUB_REPO.match(repository):
        raise ValueError(f"repository: {repository!r} is not valid; allowed: a GitHub owner/name")
    if not _WORKFLOW_FILE.match(workflow):
        raise ValueError(
            f"workflow: {workflow!r} is not valid; allowed: a file name in {WORKFLOW_DIR} such as deploy.yml"
        )
    if not (GIT_REF.match(ref) or ref == PULL_REQUEST_REF):
        raise ValueError(
            f"ref: {ref!r} is not valid; allowed: refs/heads/<branch>, refs/tags/<tag> or {PULL_REQUEST_REF}"
        )
    if not re.match(r"^[a-z0-9][a-z0-9-]{0,62}$", environment):
        raise ValueError(f"environment: {environment!r} is not valid; allowed: a GitHub environment name of a-z 0-9 -")
    return f"repo:{repository}:environment:{environment}:job_workflow_ref:{repository}/{WORKFLOW_DIR}/{workflow}@{ref}"


def github_trust_policy(provider_arn: str, subjects: Sequence[str]) -> dict[str, Any]:
    """The trust policy of a role assumed through OIDC provider `provider_arn` by exactly `subjects`:
    StringEquals, or StringLike when a subject holds `*` (only PULL_REQUEST_REF's pull-request number may)."""
    if not subjects:
        raise ValueError("subjects: [] is empty; allowed: one or more GitHub OIDC subjects")
    wild = [s for s in subjects if "*" in s or "?" in s]
    for s in wild:
        if "?" in s or s.count("*") != 1 or not s.endswith("@" + PULL_REQUEST_REF):
            raise ValueError(
                f"subjects: {s!r} has a wildcard; allowed: exact subjects, or a `*` only as the pull-request number "
                f"of {PULL_REQUEST_REF}"
            )
    if wild and len(wild) != len(subjects):
        raise ValueError(
            f"subjects: {list(subjects)!r} mixes exact and pull-request subjects; allowed: one kind per role"
        )
    operator = "StringLike" if wild else "StringEquals"
    condition: dict[str, Any] = {"StringEquals": {f"{GITHUB_OIDC_HOST}:aud": GITHUB_OIDC_AUDIENCE}}
    condition.setdefault(operator, {})[f"{GITHUB_OIDC_HOST}:sub"] = sorted(subjects)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "GitHubActionsOidc",
                "Effect": "Allow",
                "Principal": {"Federated": provider_arn},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": condition,
            }
        ],
    }
