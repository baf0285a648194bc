"""The agent's exceptions, each with a one-line message: what stops the agent, what keeps serving
and backs off, what fails one version or one pass (docs/architecture.md#the-agents-pass); and the
bounded reasons a pinned version is not served here (`Rejection`, a label of the agent's metrics)."""

from __future__ import annotations

import enum

from model_sync.records.servable import Reason


class Rejection(enum.StrEnum):
    """Why a pinned version is not served on this replica: rejected before it was placed (the
    servable rule's reasons, then what the bucket says), or placed and failed to load."""

    PIN_INVALID = Reason.PIN_INVALID.value
    CONFIG_MISMATCH = Reason.CONFIG_MISMATCH.value
    BACKEND_FILES_MISSING = Reason.BACKEND_FILES_MISSING.value
    MANIFEST_MISSING = "manifest_missing"
    MANIFEST_INVALID = "manifest_invalid"
    FILE_MISSING = "file_missing"  # a file the manifest lists is not in the bucket
    CHECKSUM_MISMATCH = "checksum_mismatch"  # a downloaded file's sha256 or size is not the manifest's
    LOAD_FAILED = "load_failed"  # placed; Triton reported the load failed
    LOAD_TIMEOUT = "load_timeout"  # placed; not READY within --ready-timeout

    @property
    def placed(self) -> bool:
        """True for a version that was placed and failed to load (FAILED), False for one rejected
        before it was placed (REJECTED)."""
        return self in (Rejection.LOAD_FAILED, Rejection.LOAD_TIMEOUT)


class AgentError(Exception):
    """Configuration or environment problem that stops the agent (one line)."""


class S3Unavailable(Exception):
    """The bucket could not be reached (connection refused, timeout, 5xx): keep serving, back off.
    `kind`: model_sync.s3.failures.Kind's value (the agent's metrics count failed passes by it)."""

    def __init__(self, message: str, kind: str = "unavailable") -> None:
        super().__init__(message)
        self.kind = kind


class S3AccessDenied(S3Unavailable):
    """403 / credentials / KMS denied / NoSuchBucket: for serving, the same as unreachable."""


class PassError(Exception):
    """An unclassified error in one pass (ENOSPC, a bug...): logged, recorded, retried with backoff."""


class VersionRejected(Exception):
    """A pinned version that must not be placed: missing/corrupt files, bad manifest (one line),
    and why (`reason`, bounded)."""

    def __init__(self, message: str, reason: Rejection = Rejection.MANIFEST_INVALID) -> None:
        super().__init__(message)
        self.reason = reason
