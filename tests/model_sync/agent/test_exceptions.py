"""model_sync.agent.exceptions: the agent's error classes (what stops it, what keeps serving)."""

from __future__ import annotations

import pytest

from model_sync.agent.exceptions import (
    AgentError,
    PassError,
    S3AccessDenied,
    S3Unavailable,
    VersionRejected,
)
from model_sync.errors import Abandoned


def test_access_denied_is_handled_as_unavailable_and_the_other_errors_are_not() -> None:
    """The agent keeps serving and backs off on `except S3Unavailable`: a denial must be caught there."""
    with pytest.raises(S3Unavailable, match="403"):
        raise S3AccessDenied("list pin index: 403 AccessDenied")
    for cls in (AgentError, PassError, VersionRejected, Abandoned):
        assert not issubclass(cls, S3Unavailable), cls
    assert not issubclass(S3Unavailable, S3AccessDenied)
