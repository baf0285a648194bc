"""What one AWS account needs before any environment stack of it is deployed.

- The GitHub Actions OIDC provider (IAM allows one per URL per account). Every stack's CI
  roles trust it (`githubOidcProviderArn`); when two stacks share an account (dev and
  staging), neither may own it, or destroying one would cut the other's CI off. Protected:
  `pulumi destroy` refuses it until the protection is lifted on purpose.
- Optionally the agent image repository (ECR) with IMMUTABLE tags, so a pushed
  `<repository>:<commit sha>` can never be overwritten (the digest staging and prod pin stays
  valid), and scan on push; and the role `agent-image.yml` assumes to push to it, trusting only
  that workflow on the given refs in the GitHub environment `agent-image` (the same subject
  template as the stacks' CI roles: components/iam/github_oidc.py).
  ref: https://docs.aws.amazon.com/AmazonECR/latest/userguide/image-tag-mutability.html
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from components.account.bootstrap_config import ECR_REPOSITORY_NAME
from components.iam.github_oidc import GITHUB_OIDC_AUDIENCE, GITHUB_OIDC_HOST, github_subject, github_trust_policy

IMAGE_WORKFLOW = "agent-image.yml"
IMAGE_ENVIRONMENT = "agent-image"
IMAGE_ROLE_NAME = "triton-platform-agent-image"
# The push role's longest session: agent-image.yml's job (timeout 30 minutes) fits in it.
IMAGE_SESSION_SECONDS = 3600
# What pushing one image needs (docker push / buildx): the layer upload calls and PutImage;
# DescribeImages lets the workflow see that a tag already exists before it builds.
# ref: https://docs.aws.amazon.com/AmazonECR/latest/userguide/image-push-iam.html
PUSH_ACTIONS = (
    "ecr:BatchCheckLayerAvailability",
    "ecr:InitiateLayerUpload",
    "ecr:UploadLayerPart",
    "ecr:CompleteLayerUpload",
    "ecr:PutImage",
    "ecr:BatchGetImage",
    "ecr:DescribeImages",
)


@dataclass(frozen=True)
class AccountBootstrapArgs:
    """Inputs of `AccountBootstrap`.

    github_repository: `owner/name` whose agent-image workflow may push (required).
    agent_image_repository: ECR repository name; "" (default) = no image repository in this account.
    agent_image_refs: refs `agent-image.yml` may push from (default `refs/heads/main`; no wildcards).
    agent_image_push_role: create the role agent-image.yml pushes with (default True; False where
        images only arrive by ECR replication, e.g. a separate prod account).
    tags: extra tags on every resource (default none).
    """

    github_repository: str
    agent_image_repository: str = ""
    agent_image_refs: Sequence[str] = ("refs/heads/main",)
    agent_image_push_role: bool = True
    tags: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.agent_image_repository and not ECR_REPOSITORY_NAME.match(self.agent_image_repository):
            raise ValueError(
                f"AccountBootstrapArgs.agent_image_repository: {self.agent_image_repository!r} is not valid; "
                "allowed: an ECR repository name or ''"
            )
        if self.agent_image_push_role and not self.agent_image_repository:
            raise ValueError(
                "AccountBootstrapArgs.agent_image_push_role: True without agent_image_repository; allowed: False, or "
                "name the repository"
            )
        if not self.agent_image_refs:
            raise ValueError(
                "AccountBootstrapArgs.agent_image_refs: [] is empty; allowed: at least one ref such as refs/heads/main"
            )
        for ref in self.agent_image_refs:  # github_subject validates the repository and the refs
            github_subject(self.github_repository, IMAGE_WORKFLOW, ref, IMAGE_ENVIRONMENT)


def image_subjects(args: AccountBootstrapArgs) -> list[str]:
    return sorted(
        github_subject(args.github_repository, IMAGE_WORKFLOW, ref, IMAGE_ENVIRONMENT) for ref in args.agent_image_refs
    )


def _build_push_policy(repository_arn: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            # GetAuthorizationToken has no resource-level permission.
            {"Sid": "Login", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
            {"Sid": "PushAgentImage", "Effect": "Allow", "Action": list(PUSH_ACTIONS), "Resource": repository_arn},
        ],
    }


class AccountBootstrap(pulumi.ComponentResource):
    """The account's GitHub OIDC provider, and optionally the agent image repository and its push role."""

    github_oidc_provider_arn: pulumi.Output[str]
    agent_image_repository_url: pulumi.Output[str]
    agent_image_role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: AccountBootstrapArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:bootstrap:AccountBootstrap", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        provider = aws.iam.OpenIdConnectProvider(
            f"{name}-github-oidc",
            url=f"https://{GITHUB_OIDC_HOST}",
            client_id_lists=[GITHUB_OIDC_AUDIENCE],
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, protect=True),
        )  # every stack of the account trusts it
        self.github_oidc_provider_arn = provider.arn
        self.agent_image_repository_url = pulumi.Output.from_input("")
        self.agent_image_role_arn = pulumi.Output.from_input("")
        if args.agent_image_repository:
            repository = aws.ecr.Repository(
                f"{name}-agent-repository",
                name=args.agent_image_repository,
                image_tag_mutability="IMMUTABLE",
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
                encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="KMS")],
                force_delete=False,
                tags=tags,
                opts=child,
            )
            self.agent_image_repository_url = repository.repository_url
        if args.agent_image_repository and args.agent_image_push_role:
            subjects = image_subjects(args)
            role = aws.iam.Role(
                f"{name}-agent-image-role",
                name=IMAGE_ROLE_NAME,
                description="CI: push the agent image (agent-image.yml)",
                assume_role_policy=provider.arn.apply(lambda arn: json.dumps(github_trust_policy(arn, subjects))),
                max_session_duration=IMAGE_SESSION_SECONDS,
                tags=tags,
                opts=child,
            )
            aws.iam.RolePolicy(
                f"{name}-agent-image-push",
                role=role.id,
                policy=repository.arn.apply(lambda arn: json.dumps(_build_push_policy(arn))),
                opts=child,
            )
            self.agent_image_role_arn = role.arn
        self.register_outputs(
            {
                "githubOidcProviderArn": self.github_oidc_provider_arn,
                "agentImageRepositoryUrl": self.agent_image_repository_url,
                "agentImageRoleArn": self.agent_image_role_arn,
            }
        )
