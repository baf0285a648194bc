"""How big objects move through s3transfer (`TransferSettings`, validated, and `manager`): push's
multipart uploads and copies (model_sync.push.uploads), promote's server-side copies, and the
agent's ranged parallel downloads (model_sync.s3.download, the download direction).

The client is s3transfer's classic TransferManager on the Bucket's botocore client. The AWS
Common Runtime client (awscrt) was tried here (docs/model-sync.md, "S3 layer"): its upload
fails against `rclone serve s3` (AWS_ERROR_S3_MISSING_UPLOAD_ID) and its download was level
with this tuned manager, so model_sync does not use it.

Tuning, measured on the 2 GiB benchmark: s3transfer's default 256 KiB io_chunksize cost a fifth
of the download throughput in Python overhead; 1 MiB brings it level with s5cmd.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MB = 1024 * 1024
IO_CHUNK = 1 * MB


MAX_CONCURRENCY = 128  # parallel requests of one manager
# ref: https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html (parts: 5 MiB to 5 GiB)
MIN_PART = 5 * MB  # the smallest part S3 takes in an upload (but the last); a ranged GET may be smaller
MAX_PART = 5 * 1024 * MB


@dataclass(frozen=True)
class TransferSettings:
    """Multipart threshold and part size (bytes), and parallel requests per manager: the one
    definition of how big objects move, in both directions (push's uploads and copies through
    model_sync.push.push_options, the agent's downloads, promote's copies). Validated on
    construction (TransferSettingError, naming the field)."""

    threshold: int = 16 * MB
    chunksize: int = 16 * MB
    concurrency: int = 16

    def __post_init__(self) -> None:
        for name, high in (("threshold", MAX_PART), ("chunksize", MAX_PART), ("concurrency", MAX_CONCURRENCY)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise TransferSettingError(name, f"TransferSettings.{name}: {value!r}; allowed: an integer 1..{high}")


class TransferSettingError(ValueError):
    """A TransferSettings number out of its bounds; `name`: the field."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def manager(client: Any, settings: TransferSettings) -> Any:
    """An s3transfer TransferManager on `client` (its retries and checksums are the client's)."""
    from s3transfer.manager import TransferConfig, TransferManager

    config = TransferConfig(
        multipart_threshold=settings.threshold,
        multipart_chunksize=settings.chunksize,
        max_request_concurrency=settings.concurrency,
        max_submission_concurrency=settings.concurrency,
        io_chunksize=IO_CHUNK,
    )
    return TransferManager(client, config)
