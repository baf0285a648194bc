"""The image keys: the Triton server image and the repository agent's, pinned by digest outside dev."""

from __future__ import annotations

from typing import Any

from components.stack_config.errors import ConfigError
from components.stack_config.readers import read_str
from components.stack_config.vocabulary import IMAGE_PINNED, IMAGE_TAGGED, TRITON_IMAGE, config_key
from model_sync.contract.compat import TRITON_RELEASES


def read_agent_image(value: Any, environment: str) -> str:
    """`agentImage`: registry/repo:tag, or pinned by digest, in dev; pinned by digest in staging and prod;
    never `latest`."""
    key = config_key("agentImage")
    if environment == "dev":
        agent_image = read_str(key, value)
        if not (IMAGE_TAGGED.match(agent_image) or IMAGE_PINNED.match(agent_image)):
            raise ConfigError(key, agent_image, "is not valid", "registry/repo:tag[@sha256:<64 hex>] in dev; "
                              "registry/repo:tag@sha256:<64 hex> in staging and prod")  # fmt: skip
    else:
        agent_image = read_str(key, value, IMAGE_PINNED, "an image pinned by digest: registry/repo:tag@sha256:<64 hex>")
    if agent_image.endswith(":latest"):
        raise ConfigError(
            key, agent_image, "uses the mutable latest tag", "a version tag, pinned by digest outside dev"
        )
    return agent_image


def read_triton_image(value: Any, environment: str) -> str:
    """`tritonImage`: an NGC-style tritonserver reference whose release model_sync knows,
    pinned by digest outside dev (the policy pack's images-pinned rule)."""
    key = config_key("tritonImage")
    m = TRITON_IMAGE.match(value) if isinstance(value, str) else None
    if m is None:
        raise ConfigError(
            key,
            value,
            "is not a tritonserver image reference",
            "<registry>[/<path>]/tritonserver:<YY.MM>-py3[-<variant>][@sha256:<64 hex>]",
        )
    if m.group("release") not in TRITON_RELEASES:
        raise ConfigError(
            key,
            value,
            f"has release {m.group('release')} with no LibTorch entry in model_sync/contract/compat.py",
            f"releases {', '.join(TRITON_RELEASES)}",
        )
    if environment != "dev" and not m.group("digest"):
        raise ConfigError(
            key,
            value,
            f"is not pinned by digest in {environment}",
            "<registry>/.../tritonserver:<YY.MM>-py3@sha256:<64 hex> outside dev",
        )
    return str(value)
