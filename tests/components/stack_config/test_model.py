"""The frozen model: a parsed stack cannot be changed."""

from __future__ import annotations

import pytest

from tests.components.stack_config._helpers import parse, raw


def test_config_is_frozen() -> None:
    cfg = parse(raw("dev"))
    with pytest.raises(AttributeError):
        cfg.environment = "prod"  # type: ignore[misc]
