"""The account bootstrap's configuration (the `triton-platform-bootstrap` project in
bootstrap/): read once, validated, frozen, like the stacks' (components/stack_config/), with the same readers.

One bootstrap stack per AWS account, deployed before any environment stack of that account:
it owns what every stack of the account shares (the GitHub OIDC provider, one per account)
and what no stack may own (the agent image repository and the role that pushes to it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.iam.github_oidc import GIT_REF, GITHUB_REPO
from components.stack_config.errors import ConfigError
from components.stack_config.readers import read_bool, read_list, read_str
from components.stack_config.vocabulary import AWS_REGION

PROJECT = "triton-platform-bootstrap"
# An ECR repository name. ref: https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_CreateRepository.html
ECR_REPOSITORY_NAME = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
KEYS = ("githubRepository", "agentImageRepository", "agentImagePushRole", "agentImageRefs")


@dataclass(frozen=True)
class BootstrapConfig:
    stack: str
    region: str
    github_repository: str
    agent_image_repository: str  # "" = this account hosts no agent image
    agent_image_refs: tuple[str, ...]
    agent_image_push_role: bool  # CI pushes here (the account where agent-image.yml runs)


def _key(name: str) -> str:
    return f"{PROJECT}:{name}"


def parse(raw: Mapping[str, Any], stack: str) -> BootstrapConfig:
    """Validate `raw` (`namespace:key -> value`); ConfigError (one line) on anything wrong."""
    values: dict[str, Any] = {}
    for full_key, value in raw.items():
        namespace, _, name = full_key.partition(":")
        if namespace == PROJECT:
            if name not in KEYS:
                raise ConfigError(full_key, value, "is an unknown config key", ", ".join(KEYS))
            values[name] = value
    region = read_str("aws:region", raw.get("aws:region"), AWS_REGION, "an AWS region such as us-east-1")
    repo = read_str(_key("githubRepository"), values.get("githubRepository"), GITHUB_REPO, "a GitHub owner/name")
    image_repo = values.get("agentImageRepository", "triton-platform/model-sync-agent")
    if image_repo != "":
        read_str(
            _key("agentImageRepository"),
            image_repo,
            ECR_REPOSITORY_NAME,
            "an ECR repository name such as triton-platform/model-sync-agent, or empty for none",
        )
    refs = read_list(_key("agentImageRefs"), values.get("agentImageRefs", ["refs/heads/main"]))
    if not refs:
        raise ConfigError(_key("agentImageRefs"), refs, "is empty", "at least one ref such as refs/heads/main")
    for ref in refs:
        read_str(_key("agentImageRefs"), ref, GIT_REF, "refs/heads/<branch> or refs/tags/<tag> (no wildcards)")
    push = read_bool(_key("agentImagePushRole"), values.get("agentImagePushRole", True))
    if push and not image_repo:
        raise ConfigError(
            _key("agentImagePushRole"), True, "is set without an agentImageRepository", "false, or name the repository"
        )
    return BootstrapConfig(
        stack=stack,
        region=region,
        github_repository=repo,
        agent_image_repository=str(image_repo),
        agent_image_refs=tuple(refs),
        agent_image_push_role=push,
    )


def load_from_pulumi() -> BootstrapConfig:
    """Read this bootstrap stack's config from the Pulumi runtime (its program's only config read)."""
    import pulumi
    from pulumi.runtime.config import CONFIG, get_config_env

    return parse({**get_config_env(), **CONFIG.get()}, pulumi.get_stack())
