"""The delivery keys: GitHub refs and repository, the account's OIDC provider and the deployer's policies."""

from __future__ import annotations

import re

import pytest

from components.stack_config.errors import ConfigError
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


def test_a_deployer_policy_listed_twice_is_refused_before_any_resource() -> None:
    """The same policy ARN twice reached the Pulumi engine as a duplicate resource name (the attachment is
    named after the policy); the parser refuses it, and any other spelling of the same policy."""
    from tests.pulumi_kit import run_program

    cfg = raw("prod")  # account 444455556666
    arn = "arn:aws:iam::444455556666:policy/triton-platform-deployer"
    cfg[K + "deployerPolicyArns"] = [arn, "arn:aws:iam::444455556666:policy/triton-platform-guard", arn]
    err = fails(
        cfg,
        r"^triton-platform:deployerPolicyArns: 'arn:aws:iam::444455556666:policy/triton-platform-deployer' is listed "
        r"twice; allowed: each policy ARN once$",
    )
    assert err.key == K + "deployerPolicyArns"
    cfg[K + "deployerPolicyArns"] = [arn, "arn:aws:iam::444455556666:policy/team/Triton-Platform-Deployer"]
    fails(
        cfg,
        r"deployerPolicyArns: 'arn:aws:iam::444455556666:policy/team/Triton-Platform-Deployer' names the same policy "
        r"as 'arn:aws:iam::444455556666:policy/triton-platform-deployer' \(one account, one name\); allowed: each "
        r"policy ARN once$",
    )
    with pytest.raises(ConfigError, match=r"deployerPolicyArns: .* is listed twice"):
        run_program("prod", {K + "deployerPolicyArns": [arn, arn]})
