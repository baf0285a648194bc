"""The account bootstrap (bootstrap/): what each account's stack records under the mocks, and its
config and Args rules."""

from __future__ import annotations

from typing import Any

import pytest

from components.account import bootstrap_config
from components.account_bootstrap import PUSH_ACTIONS, AccountBootstrapArgs
from components.iam.github_oidc import GITHUB_OIDC_HOST
from components.stack_config.errors import ConfigError
from tests.components._helpers import assert_children_prefixed, policy
from tests.pulumi_kit import ROOT, Run, run_program, stack_config

PROGRAM = ROOT / "bootstrap" / "__main__.py"
K = "triton-platform-bootstrap:"


def bootstrap(account: str, overrides: dict[str, Any] | None = None) -> Run:
    return run_program(
        account,
        overrides,
        program=PROGRAM,
        stack_file=ROOT / "bootstrap" / f"Pulumi.{account}.yaml",
        project=bootstrap_config.PROJECT,
    )


@pytest.fixture(scope="module")
def nonprod() -> Run:
    return bootstrap("nonprod")


def test_the_oidc_provider_is_the_accounts_and_protected(nonprod: Run) -> None:
    [provider] = nonprod.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    assert provider.inputs["url"] == f"https://{GITHUB_OIDC_HOST}"
    assert provider.inputs["clientIdLists"] == ["sts.amazonaws.com"]
    assert "thumbprintLists" not in provider.inputs  # IAM validates GitHub's certificate itself
    assert provider.protect  # every stack of the account trusts it: destroy must be a decision
    assert nonprod.exports["githubOidcProviderArn"] == provider.state["arn"]
    assert_children_prefixed(nonprod, nonprod.one("triton-platform:bootstrap:AccountBootstrap", "account"), 4)


def test_the_agent_image_repository_never_overwrites_a_tag(nonprod: Run) -> None:
    [repo] = nonprod.of_type("aws:ecr/repository:Repository")
    assert repo.inputs["name"] == "triton-platform/model-sync-agent"
    assert repo.inputs["imageTagMutability"] == "IMMUTABLE"
    assert repo.inputs["imageScanningConfiguration"] == {"scanOnPush": True}
    assert repo.inputs["forceDelete"] is False
    assert nonprod.exports["agentImageRepositoryUrl"] == repo.state["repositoryUrl"]


def test_only_agent_image_yml_on_main_in_its_environment_can_push(nonprod: Run) -> None:
    [role] = nonprod.of_type("aws:iam/role:Role")
    [st] = policy(role, "assumeRolePolicy")["Statement"]
    assert st["Condition"] == {
        "StringEquals": {
            f"{GITHUB_OIDC_HOST}:aud": "sts.amazonaws.com",
            f"{GITHUB_OIDC_HOST}:sub": [
                "repo:example-org/triton-platform:environment:agent-image:job_workflow_ref:"
                "example-org/triton-platform/.github/workflows/agent-image.yml@refs/heads/main"
            ],
        }
    }
    [push] = nonprod.of_type("aws:iam/rolePolicy:RolePolicy")
    statements = {s["Sid"]: s for s in policy(push)["Statement"]}
    assert statements["Login"] == {
        "Sid": "Login",
        "Effect": "Allow",
        "Action": "ecr:GetAuthorizationToken",
        "Resource": "*",
    }
    assert statements["PushAgentImage"]["Action"] == list(PUSH_ACTIONS)
    assert statements["PushAgentImage"]["Resource"] == nonprod.one("aws:ecr/repository:Repository").state["arn"]
    assert "ecr:BatchDeleteImage" not in PUSH_ACTIONS
    assert nonprod.exports["agentImageRoleArn"] == role.state["arn"]


def test_the_prod_account_receives_images_without_a_push_role() -> None:
    run = bootstrap("prod")
    assert len(run.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")) == 1
    assert len(run.of_type("aws:ecr/repository:Repository")) == 1
    assert run.of_type("aws:iam/role:Role") == []
    assert run.exports["agentImageRoleArn"] == ""


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (
            {K + "githubRepository": "nope"},
            r"triton-platform-bootstrap:githubRepository: 'nope' is not valid; allowed: a GitHub owner/name",
        ),
        ({K + "agentImageRepository": "Bad Name"}, r"agentImageRepository: 'Bad Name' is not valid"),
        (
            {K + "agentImageRepository": ""},
            r"agentImagePushRole: true is set without an agentImageRepository; allowed: false",
        ),
        ({K + "agentImageRefs": ["refs/heads/*"]}, r"agentImageRefs: 'refs/heads/\*' is not valid"),
        ({K + "colour": "blue"}, r"triton-platform-bootstrap:colour: 'blue' is an unknown config key"),
    ],
)
def test_config_rules(overrides: dict[str, Any], match: str) -> None:
    cfg = {**stack_config("nonprod", ROOT / "bootstrap" / "Pulumi.nonprod.yaml"), **overrides}
    with pytest.raises(ConfigError, match=match):
        bootstrap_config.parse(cfg, "nonprod")


def test_args_rules() -> None:
    with pytest.raises(ValueError, match=r"agent_image_push_role: True without agent_image_repository"):
        AccountBootstrapArgs(github_repository="o/r")
    with pytest.raises(ValueError, match=r"ref: 'main' is not valid"):
        AccountBootstrapArgs(github_repository="o/r", agent_image_repository="r", agent_image_refs=["main"])
    assert AccountBootstrapArgs(github_repository="o/r", agent_image_push_role=False).agent_image_repository == ""
