"""ConfigError: what `pulumi preview` / `up` print of a stack mistake."""

from __future__ import annotations

from components.stack_config.errors import ConfigError


def test_config_error_is_a_run_error() -> None:
    """Under `pulumi preview` / `up` a RunError prints its one line, without a traceback."""
    import pulumi

    assert issubclass(ConfigError, pulumi.RunError)
