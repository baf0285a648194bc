"""The agent's exceptions, each with a one-line message: what stops the agent, what keeps serving
and backs off, what fails one version or one pass (docs/architecture.md#the-agents-pass)."""

from __future__ import annotations


class AgentError(Exception):
    """Configuration or environment problem that stops the agent (one line)."""


class S3Unavailable(Exception):
    """The bucket could not be reached (connection refused, timeout, 5xx): keep serving, back off."""


class S3AccessDenied(S3Unavailable):
    """403 / credentials / KMS denied / NoSuchBucket: for serving, the same as unreachable."""


class PassError(Exception):
    """An unclassified error in one pass (ENOSPC, a bug...): logged, recorded, retried with backoff."""


class VersionRejected(Exception):
    """A pinned version that must not be placed: missing/corrupt files, bad manifest (one line)."""
