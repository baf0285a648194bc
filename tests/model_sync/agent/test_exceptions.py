"""model_sync.agent.exceptions: the agent's error classes (what stops it, what keeps serving) and
`one_line`, the form in which the agent logs and records an error."""

from __future__ import annotations

import pytest

from model_sync.agent.exceptions import (
    Abandoned,
    AgentError,
    PassError,
    S3AccessDenied,
    S3Unavailable,
    VersionRejected,
    one_line,
)


def test_one_line_folds_a_multi_line_reason_and_names_the_type() -> None:
    err = VersionRejected("load failed:\n  Traceback (most recent call last):\n\tRuntimeError: boom\n")
    assert one_line(err) == "VersionRejected: load failed: Traceback (most recent call last): RuntimeError: boom"


def test_one_line_caps_a_long_message_at_300_characters() -> None:
    text = one_line(PassError("x" * 400))
    assert text == "PassError: " + "x" * 297 + "..."
    assert "\n" not in text


def test_one_line_of_an_exception_without_a_message() -> None:
    assert one_line(Abandoned()) == "Abandoned: "
    assert one_line(OSError(28, "No space left on device")) == "OSError: [Errno 28] No space left on device"


def test_access_denied_is_handled_as_unavailable_and_the_other_errors_are_not() -> None:
    """The agent keeps serving and backs off on `except S3Unavailable`: a denial must be caught there."""
    with pytest.raises(S3Unavailable, match="403"):
        raise S3AccessDenied("list pin index: 403 AccessDenied")
    for cls in (AgentError, PassError, VersionRejected, Abandoned):
        assert not issubclass(cls, S3Unavailable), cls
    assert not issubclass(S3Unavailable, S3AccessDenied)
