"""GitHub Actions OIDC: the subject template every CI role trusts and the trust policy's one wildcard."""

from __future__ import annotations

import pytest

from components.iam.github_oidc import GITHUB_OIDC_HOST, GITHUB_SUB_CLAIM_KEYS, github_subject, github_trust_policy

REPO = "example-org/triton-platform"


def _sub(environment: str, workflow: str, ref: str = "refs/heads/main") -> str:
    """The subject GitHub issues under the template repo, context, job_workflow_ref (written out
    here, not built with the code under test)."""
    return f"repo:{REPO}:environment:{environment}:job_workflow_ref:{REPO}/.github/workflows/{workflow}@{ref}"


PREVIEW_DEV = [_sub("preview-dev", "pull-request.yml", "refs/pull/*/merge")]


def test_github_subject_follows_the_customised_template() -> None:
    """GitHub's documented example for include_claim_keys [repo, context, job_workflow_ref]:
    repo:octo-org/octo-repo:environment:prod:job_workflow_ref:octo-org/octo-automation/.github/workflows/oidc.yml@refs/heads/main
    (here the workflow is always the repository's own)."""
    assert GITHUB_SUB_CLAIM_KEYS == ("repo", "context", "job_workflow_ref")
    assert github_subject("octo-org/octo-repo", "oidc.yml", "refs/heads/main", "prod") == (
        "repo:octo-org/octo-repo:environment:prod:job_workflow_ref:"
        "octo-org/octo-repo/.github/workflows/oidc.yml@refs/heads/main"
    )
    assert github_subject("o/r", "pull-request.yml", "refs/pull/*/merge", "preview-dev").endswith(
        "pull-request.yml@refs/pull/*/merge"
    )


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("o", "deploy.yml", "refs/heads/main", "deploy-dev"), r"repository: 'o' is not valid"),
        (("o/r", "../deploy.yml", "refs/heads/main", "deploy-dev"), r"workflow: '../deploy.yml' is not valid"),
        (("o/r", "deploy.yml", "refs/heads/*", "deploy-dev"), r"ref: 'refs/heads/\*' is not valid"),
        (("o/r", "deploy.yml", "main", "deploy-dev"), r"ref: 'main' is not valid"),
        (("o/r", "deploy.yml", "refs/heads/main", "prod:eastus"), r"environment: 'prod:eastus' is not valid"),
    ],
)
def test_github_subject_validation(args: tuple[str, str, str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        github_subject(*args)


def test_github_trust_builder_wildcards_only_the_pull_request_number() -> None:
    exact = github_trust_policy("arn:p", [_sub("deploy-dev", "deploy.yml")])
    assert exact["Statement"][0]["Condition"] == {
        "StringEquals": {
            f"{GITHUB_OIDC_HOST}:aud": "sts.amazonaws.com",
            f"{GITHUB_OIDC_HOST}:sub": [_sub("deploy-dev", "deploy.yml")],
        }
    }
    like = github_trust_policy("arn:p", PREVIEW_DEV)
    assert like["Statement"][0]["Condition"] == {
        "StringEquals": {f"{GITHUB_OIDC_HOST}:aud": "sts.amazonaws.com"},
        "StringLike": {f"{GITHUB_OIDC_HOST}:sub": PREVIEW_DEV},
    }
    for bad in (
        [f"repo:{REPO}:*"],
        [_sub("deploy-dev", "deploy.yml", "refs/heads/*")],
        [_sub("deploy-dev", "deploy.yml").replace("main", "ma?n")],
    ):
        with pytest.raises(ValueError, match=r"has a wildcard; allowed: exact subjects"):
            github_trust_policy("arn:p", bad)
    with pytest.raises(ValueError, match=r"mixes exact and pull-request subjects"):
        github_trust_policy("arn:p", [*PREVIEW_DEV, _sub("deploy-dev", "deploy.yml")])
    with pytest.raises(ValueError, match=r"subjects: \[\] is empty"):
        github_trust_policy("arn:p", [])
