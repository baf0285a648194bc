"""The files of `push`: sha256 of every local file (`hash_files`, reusing the local hash cache),
and their transfer to repository/<model>/<N>/ (`Uploader`): files below the multipart threshold
as ONE PutObject / CopyObject each on a shared I/O pool, bigger ones through s3transfer
(multipart upload / UploadPartCopy, concurrency). ChecksumSHA256 = the manifest digest for
single-part files, so AWS S3 itself rejects content that differs from what was hashed;
ChecksumAlgorithm SHA256 per part otherwise. Files identical to the pinned version are copied
server-side instead of re-uploaded."""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

from model_sync import errors
from model_sync.contract import layout
from model_sync.push import skip_cache
from model_sync.records import codec
from model_sync.s3 import transfer
from model_sync.s3.bucket import Bucket
from model_sync.s3.failures import Kind, classify, translate
from model_sync.triton_model.model_directory import LocalModel
from model_sync.ui import Console, Progress

if TYPE_CHECKING:  # concurrent.futures is imported where files are hashed or sent: not by a no-op push
    from concurrent.futures import Future, ThreadPoolExecutor

    from model_sync.push.push_options import PushOptions
    from model_sync.push.result import PushResult


def vanished(path: str | None) -> errors.SyncError:
    """A local file gone during the push (exit 4): nothing was pinned."""
    return errors.refused(
        f"file vanished during push: {path}; nothing was pinned, re-run push when the model directory is stable"
    )


def hash_files(models: list[LocalModel], workers: int = 4, hashes: skip_cache.HashCache | None = None) -> None:
    """sha256 of every file (hashlib releases the GIL: threads scale on big files). A file whose
    (size, mtime, ctime, inode, device) match the local hash cache is not read again. A file that
    vanished or cannot be read: SyncError (exit 4 / 2), nothing written."""
    hashes = hashes or skip_cache.HashCache(None)
    jobs = [(m, f) for m in models for f in m.files.values()]

    def one(job: tuple[LocalModel, Any]) -> str:
        f = job[1]
        key = f.stat_key
        hit = hashes.get(f.path, key)
        if hit is not None:
            return hit
        started = time.time_ns()
        try:
            digest = codec.sha256_file(f.path)
        except FileNotFoundError:
            raise vanished(f.path) from None
        except OSError as e:
            raise errors.usage(
                f"model file: {f.path} cannot be read ({e.strerror}); allowed: readable regular files"
            ) from None
        try:
            still = skip_cache.stat_key(os.stat(f.path))
        except OSError:
            still = None
        if still == key:  # unchanged while it was read: the digest belongs to this stat
            hashes.put(f.path, key, digest, started)
        return digest

    uncached = sum(1 for _, f in jobs if hashes.get(f.path, f.stat_key) is None)
    if uncached <= 1:
        digests = [one(job) for job in jobs]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(workers, uncached)) as pool:
            digests = list(pool.map(one, jobs))
    for m in models:
        m.hashes = {}
    for (m, f), digest in zip(jobs, digests, strict=True):
        assert m.hashes is not None
        m.hashes[f.rel] = digest


def _subscriber(progress: Progress, task: Any) -> Any:
    from s3transfer.subscribers import BaseSubscriber

    class _Sub(BaseSubscriber):  # type: ignore[misc]
        def on_progress(self, future: Any, bytes_transferred: int, **kwargs: Any) -> None:
            progress.advance(task, bytes_transferred)

    return _Sub()


class Uploader:
    """The transfers of one push run: an s3transfer manager and a pool for single requests, both
    created on first use (a no-op push creates neither) and shared by every model."""

    def __init__(self, repo: Bucket, console: Console, options: PushOptions) -> None:
        self.repo = repo
        self.console = console
        self.options = options
        self.progress: Progress | None = None
        self._lock = threading.Lock()
        self._manager: Any = None
        self._io: ThreadPoolExecutor | None = None

    @property
    def manager(self) -> Any:
        with self._lock:
            if self._manager is None:
                o = self.options
                self._manager = transfer.manager(
                    self.repo.client,
                    o.transfer,
                )
            return self._manager

    @property
    def io(self) -> ThreadPoolExecutor:
        """Shared pool for single-request transfers of files below the multipart threshold."""
        with self._lock:
            if self._io is None:
                from concurrent.futures import ThreadPoolExecutor

                self._io = ThreadPoolExecutor(max_workers=self.options.concurrency, thread_name_prefix="model-sync-io")
            return self._io

    def close(self) -> None:
        if self._io is not None:
            self._io.shutdown()
        if self._manager is not None:
            self._manager.shutdown()

    def transfer(self, m: LocalModel, version: int, reuse: set[str], previous: int | None, result: PushResult) -> None:
        """Every file of `m` to version `version`: the ones in `reuse` copied from `previous`, the
        others uploaded; each done file printed and added to `result`. The first failure is raised
        once every transfer has ended."""
        assert m.hashes is not None
        bucket = self.repo.root.bucket
        futures: list[tuple[str, str, Future[Any] | Any]] = []
        upload_bytes = sum(f.size for rel, f in m.files.items() if rel not in reuse)
        task = self.progress.task(m.name, upload_bytes) if self.progress else None
        subs = [_subscriber(self.progress, task)] if self.progress and task is not None else []
        for rel, f in sorted(m.files.items()):
            key = self.repo.key(layout.version_file_key(m.name, version, rel))
            small = f.size < self.options.multipart_threshold
            if rel in reuse and previous:
                source = {"Bucket": bucket, "Key": self.repo.key(layout.version_file_key(m.name, previous, rel))}
                if small:
                    fut = self.io.submit(
                        self.repo.copy,
                        layout.version_file_key(m.name, previous, rel),
                        layout.version_file_key(m.name, version, rel),
                    )
                else:
                    fut = self.manager.copy(source, bucket, key, extra_args={"ChecksumAlgorithm": "SHA256"})
                futures.append(("copy", rel, fut))
                continue
            if small:
                # AWS S3 verifies the body against the manifest digest (moto and rclone store it unverified).
                futures.append(
                    (
                        "upload",
                        rel,
                        self.io.submit(
                            self._put_file,
                            f.path,
                            layout.version_file_key(m.name, version, rel),
                            m.hashes[rel],
                            f.size,
                            task,
                        ),
                    )
                )
            else:
                futures.append(
                    (
                        "upload",
                        rel,
                        self.manager.upload(
                            f.path, bucket, key, extra_args={"ChecksumAlgorithm": "SHA256"}, subscribers=subs
                        ),
                    )
                )
        failure: errors.SyncError | None = None
        for op, rel, fut in futures:
            try:
                fut.result()
            except FileNotFoundError as e:
                failure = failure or vanished(e.filename)
            except Exception as e:
                failure = failure or self._transfer_error(e, m, rel)
            else:
                dest = self.repo.uri(layout.version_file_key(m.name, version, rel))
                if op == "copy":
                    result.copied.append(rel)
                    self.console.line(
                        f"copy: {self.repo.uri(layout.version_file_key(m.name, previous or 0, rel))} to {dest}"
                    )
                else:
                    result.uploaded.append(rel)
                    self.console.line(f"upload: {m.files[rel].path} to {dest}")
        if failure:
            raise failure

    def _put_file(self, path: str, rel: str, sha256_hex: str, size: int, task: Any) -> None:
        """One streamed PutObject whose stored checksum is the manifest digest: AWS S3 rejects a
        body that differs from what was hashed (Kind.DIGEST, for _transfer_error to name the file)."""
        self.repo.put_file(rel, path, sha256_hex)
        if self.progress is not None and task is not None:
            self.progress.advance(task, size)

    def _transfer_error(self, e: BaseException, m: LocalModel, rel: str) -> errors.SyncError:
        if classify(e) is Kind.DIGEST:
            return errors.refused(
                f"file changed during push: {m.files[rel].path} (S3 rejected it: its SHA256 differs from the one "
                "hashed); nothing was pinned, re-run push"
            )
        return translate(e, self.repo.env, layout.model_prefix(m.name) + rel)
