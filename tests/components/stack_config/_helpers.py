"""What every stack-config test shares: a shipped stack's config to mutate, and the assertion that a
mistake is refused by parse() with one line naming the key, the bad value and what is allowed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.stack_config import parser
from components.stack_config.errors import ConfigError
from components.stack_config.model import StackConfig
from tests.pulumi_kit import stack_config as stack_file

K = "triton-platform:"


def raw(stack: str) -> dict[str, Any]:
    """The stack file's config (the two maps are structured YAML), copied for mutation."""
    return copy.deepcopy(stack_file(stack))


def parse(cfg: dict[str, Any], stack: str = "x") -> StackConfig:
    return parser.parse(cfg, stack)


def fails(cfg: dict[str, Any], match: str) -> ConfigError:
    with pytest.raises(ConfigError, match=match) as info:
        parse(cfg)
    message = str(info.value)
    assert "\n" not in message
    assert "allowed:" in message
    return info.value
