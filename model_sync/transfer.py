"""Big objects through s3transfer, in both directions: push's multipart uploads and copies,
promote's server-side copies, the agent's ranged parallel downloads.

The client is s3transfer's classic TransferManager on the Repo's botocore client. The AWS
Common Runtime client (awscrt) was measured here (bench/transfer, docs/model-sync.md): its
upload fails against `rclone serve s3` (AWS_ERROR_S3_MISSING_UPLOAD_ID) and its download was
level with this tuned manager, so model_sync does not use it.

Tuning, measured on the 2 GiB benchmark: s3transfer's default 256 KiB io_chunksize cost a fifth
of the download throughput in Python overhead; 1 MiB brings it level with s5cmd.

Downloads are verified as they are written: the manager gets a non-seekable writer, so s3transfer
writes the ranges in order (buffering at most MAX_BUFFERED_CHUNKS io chunks) and the sha256 is
computed on the way; no second read of the file.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any, Protocol

MB = 1024 * 1024
IO_CHUNK = 1 * MB
MAX_BUFFERED_CHUNKS = 64  # out-of-order download chunks held in memory (64 MiB)


@dataclass(frozen=True)
class TransferSettings:
    """Multipart threshold and part size (bytes), and parallel requests per manager."""

    threshold: int = 16 * MB
    chunksize: int = 16 * MB
    concurrency: int = 16


def manager(client: Any, settings: TransferSettings) -> Any:
    """An s3transfer TransferManager on `client` (its retries and checksums are the client's)."""
    from s3transfer.manager import TransferConfig, TransferManager

    config = TransferConfig(
        multipart_threshold=settings.threshold,
        multipart_chunksize=settings.chunksize,
        max_request_concurrency=settings.concurrency,
        max_submission_concurrency=settings.concurrency,
        io_chunksize=IO_CHUNK,
        max_in_memory_download_chunks=MAX_BUFFERED_CHUNKS,
    )
    return TransferManager(client, config)


class Sink(Protocol):
    def write(self, data: bytes) -> int: ...
    def flush(self) -> None: ...


class Abandoned(Exception):
    """A download stopped because its `stop` event was set."""


class HashingWriter:
    """A write-only, non-seekable file: sha256 and size of what passes through to `out`."""

    def __init__(self, out: Sink, stop: threading.Event | None = None) -> None:
        self.out = out
        self.stop = stop
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        if self.stop is not None and self.stop.is_set():
            raise Abandoned()
        self.sha256.update(data)
        self.size += len(data)
        return self.out.write(data)

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:
        self.out.flush()


def download(client: Any, bucket: str, key: str, out: Sink, size: int, settings: TransferSettings, stop: threading.Event | None = None,
             shared: Any = None) -> tuple[str, int]:  # fmt: skip
    """Download `key` into `out`: (sha256 hex, bytes). An object below the threshold is one
    streamed GET; a bigger one, ranged GETs in parallel through `shared` (a manager) or a manager
    made for it. Errors are botocore's (the caller classifies them)."""
    writer = HashingWriter(out, stop)
    if size < settings.threshold:
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        while chunk := body.read(IO_CHUNK):
            writer.write(chunk)
        return writer.sha256.hexdigest(), writer.size
    from s3transfer.subscribers import BaseSubscriber

    class KnownSize(BaseSubscriber):  # type: ignore[misc]
        """Hands s3transfer the size from the manifest: no HeadObject before the ranged GETs."""

        def on_queued(self, future: Any, **kwargs: Any) -> None:
            future.meta.provide_transfer_size(size)

    own = shared is None
    mgr = manager(client, settings) if own else shared
    try:
        mgr.download(bucket, key, writer, extra_args={}, subscribers=[KnownSize()]).result()
    finally:
        if own:
            mgr.shutdown()
    return writer.sha256.hexdigest(), writer.size
