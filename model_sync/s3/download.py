"""The download direction: a big object into a file through s3transfer's ranged parallel GETs,
verified as it is written (`HashingFile`: the sha256 follows the file's contiguous prefix while
s3transfer writes the ranges, so no second pass over the file is needed). The agent's downloads.
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Any, Protocol

from model_sync import errors
from model_sync.s3.transfer import IO_CHUNK, MB, TransferSettings, manager

# Downloads into a file fdatasync every WRITEBACK bytes on a helper thread: a 2 GiB download then
# needs no 4 s final fsync (measured here: 6.4-7.0 s in all instead of 9.4-9.6 s).
WRITEBACK = 256 * MB


class Sink(Protocol):
    def write(self, data: bytes) -> int: ...
    def flush(self) -> None: ...


class HashingFile:
    """The file s3transfer downloads into, hashing the bytes in file order as they arrive.

    s3transfer writes each range at its offset (seek + write, on its one I/O thread). A write that
    continues the hashed prefix is hashed at once; one that lands beyond it is only noted, and is
    read back from the file (page cache, `os.pread`) as soon as the gap before it fills. Nothing is
    held in memory. (s3transfer's non-seekable path would keep the order itself, but in 0.19.3 it
    stalls once a download has more ranges than `max_in_memory_download_chunks`: measured here,
    a 2 GiB download in 16 MiB ranges stopped at exactly 64 of them.)
    A plain writer without a file descriptor (`Sink`) is hashed strictly in order: only the
    single-stream path uses one.
    """

    def __init__(self, out: Any, stop: threading.Event | None = None, sync_every: int = 0) -> None:
        self.out = out
        self.stop = stop
        self.sha256 = hashlib.sha256()
        self.hashed = 0  # bytes [0, hashed) are in the digest
        self._pos = 0
        self._ahead: dict[int, int] = {}  # offset -> length written beyond the hashed prefix
        # sync_every > 0: after that many bytes, fdatasync on a helper thread, so the disk writes
        # back while the download goes on and the caller's final fsync has little left to do.
        self.sync_every = sync_every
        self._unsynced = 0
        self._syncing: threading.Thread | None = None

    def seekable(self) -> bool:
        """True for a real file (the ranged path reads it back); False for any other writer."""
        try:
            self.out.fileno()
        except (AttributeError, OSError):
            return False
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = self.out.seek(offset, whence)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def write(self, data: bytes) -> int:
        if self.stop is not None and self.stop.is_set():
            raise errors.Abandoned()
        at = self._pos
        n = self.out.write(data)
        self._pos += n
        self._unsynced += n
        if (
            self.sync_every
            and self._unsynced >= self.sync_every
            and (self._syncing is None or not self._syncing.is_alive())
        ):
            self._unsynced = 0
            self.out.flush()
            self._syncing = threading.Thread(
                target=os.fdatasync, args=(self.out.fileno(),), name="model-sync-writeback", daemon=True
            )
            self._syncing.start()
        if at != self.hashed:
            self._ahead[at] = n
            return n
        self.sha256.update(data)
        self.hashed += n
        if self._ahead:
            self.out.flush()
            while self.hashed in self._ahead:
                length = self._ahead.pop(self.hashed)
                self.sha256.update(os.pread(self.out.fileno(), length, self.hashed))
                self.hashed += length
        return n

    def flush(self) -> None:
        self.out.flush()

    def settle(self) -> None:
        """Wait for the helper's writeback (before the caller closes or fsyncs the file)."""
        if self._syncing is not None:
            self._syncing.join()


def download(client: Any, bucket: str, key: str, out: Sink, size: int, settings: TransferSettings,
             stop: threading.Event | None = None,
             shared: Any = None, sync_every: int = 0) -> tuple[str, int]:  # fmt: skip
    """Download `key` into `out`: (sha256 hex, bytes hashed in order). An object below the
    threshold, or any `out` that is not a file, is one streamed GET; a bigger one, ranged GETs in
    parallel through `shared` (a manager) or a manager made for it, into the file `out` opened for
    writing (and reading back: "w+b"). Errors are botocore's (the caller classifies them)."""
    writer = HashingFile(out, stop, sync_every)
    if size < settings.threshold or not writer.seekable():
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        try:
            while chunk := body.read(IO_CHUNK):
                writer.write(chunk)
        finally:
            writer.settle()
        return writer.sha256.hexdigest(), writer.hashed
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
        writer.settle()
        if own:
            mgr.shutdown()
    return writer.sha256.hexdigest(), writer.hashed
