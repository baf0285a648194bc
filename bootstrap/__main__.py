"""triton-platform-bootstrap: one stack per AWS account, deployed before its environment stacks.

Wiring only (components/account_bootstrap.py; config: components/account/bootstrap_config.py). The
order from an empty account is in docs/bootstrap.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: components/

import pulumi

from components.account.bootstrap_config import load_from_pulumi
from components.account_bootstrap import AccountBootstrap, AccountBootstrapArgs

config = load_from_pulumi()
account = AccountBootstrap(
    "account",
    AccountBootstrapArgs(
        github_repository=config.github_repository,
        agent_image_repository=config.agent_image_repository,
        agent_image_refs=config.agent_image_refs,
        agent_image_push_role=config.agent_image_push_role,
        tags={"triton-platform.io/stack": f"bootstrap-{config.stack}", "managed-by": "pulumi"},
    ),
)
pulumi.export("githubOidcProviderArn", account.github_oidc_provider_arn)  # every stack's githubOidcProviderArn
pulumi.export("agentImageRepositoryUrl", account.agent_image_repository_url)  # the AGENT_IMAGE_REPOSITORY variable
pulumi.export("agentImageRoleArn", account.agent_image_role_arn)  # the AWS_AGENT_IMAGE_ROLE_ARN variable
