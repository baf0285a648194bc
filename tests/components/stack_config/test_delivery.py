"""The delivery keys: GitHub refs and repository, the account's OIDC provider and the deployer's policies."""

from __future__ import annotations

import re

import pytest

from tests.components.stack_config._helpers import K, fails, raw


def test_github_refs_have_no_wildcards() -> None:
    cfg = raw("dev")
    cfg[K + "githubDeployRefs"] = ["refs/heads/*"]
    fails(
        cfg,
        r"githubDeployRefs: 'refs/heads/\*' is not valid; allowed: refs/heads/<branch> or refs/tags/<tag> \(no "
        r"wildcards, no environment",
    )
    cfg[K + "githubDeployRefs"] = ["environment:prod"]  # an environment is the role's purpose, not a stack setting
    fails(
        cfg,
        r"githubDeployRefs: 'environment:prod' is not valid; allowed: refs/heads/<branch> or refs/tags/<tag> .* "
        r"e\.g\. deploy-dev",
    )


def test_github_repository_shape() -> None:
    cfg = raw("dev")
    cfg[K + "githubRepository"] = "just-a-name"
    fails(cfg, r"githubRepository: 'just-a-name' is not valid; allowed: a GitHub owner/name")


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::aws:policy/PowerUserAccess",
        "arn:aws:iam::aws:policy/AdministratorAccess",
        "arn:aws:iam::aws:policy/IAMFullAccess",
        "arn:aws:iam::aws:policy/job-function/SystemAdministrator",
    ],
)
def test_deployer_policies_are_an_allow_list(arn: str) -> None:
    cfg = raw("prod")
    cfg[K + "deployerPolicyArns"] = ["arn:aws:iam::444455556666:policy/triton-platform-deployer", arn]
    fails(
        cfg,
        rf"deployerPolicyArns: '{re.escape(arn)}' is an AWS managed policy, not scoped to this stack; allowed: "
        r"customer-managed policies",
    )


def test_every_stack_names_its_accounts_oidc_provider() -> None:
    """The account's bootstrap stack owns the provider (dev and staging share one); a stack file
    without it is refused instead of creating a second owner."""
    cfg = raw("prod")
    del cfg[K + "githubOidcProviderArn"]
    fails(
        cfg,
        r"githubOidcProviderArn: <unset> is missing; allowed: a string value \(The AWS account's GitHub Actions OIDC "
        r"provider",
    )
    cfg[K + "githubOidcProviderArn"] = ""
    fails(
        cfg,
        r"githubOidcProviderArn: '' is not the GitHub OIDC provider; allowed: .* the bootstrap stack's output "
        r"githubOidcProviderArn",
    )
