"""`push`: the publish protocol (DESIGN.md, "Publish protocol").

Per model, in this order; the pin flip is the only commit point:
  1. validate the local directory (localmodel.load) and sha256 every file;
  2. read the current pin and its manifest; identical files + identical pinned config -> no-op;
  3. allocate N with a create-only write of audit/allocations/<model>/<N>.json (If-None-Match: *);
  4. upload every changed file to repository/<model>/<N>/ through s3transfer (multipart and
     concurrency; ChecksumSHA256 = the manifest digest for single-part files, so S3 itself rejects
     content that differs from what was hashed; ChecksumAlgorithm SHA256 per part otherwise);
     files identical to the pinned version are server-side copied instead of re-uploaded;
  5. re-stat every local file: changed or vanished during the push -> refuse (nothing pinned);
  6. write manifests/<model>/<N>.json (create-only);
  7. rewrite repository/<model>/config.pbtxt pinned to N (one PUT), then append audit/pins/.
A failure before 7 leaves an unpinned, possibly partial version N that nothing points at; a
re-run allocates N+1 and `prune` removes the debris. Versions are never overwritten.
"""

from __future__ import annotations

import os
import socket
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from model_sync import __version__, errors, layout, manifest, repository
from model_sync.localmodel import LocalModel
from model_sync.s3 import Repo, error_code, hex_to_b64, translate
from model_sync.ui import Console, Progress

MB = 1024 * 1024
DIGEST_MISMATCH_CODES = {"BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch", "XAmzContentChecksumMismatch"}


@dataclass(frozen=True)
class PushOptions:
    dry_run: bool = False
    concurrency: int = 16  # parallel S3 requests (s3transfer max_request_concurrency)
    multipart_threshold: int = 16 * MB
    multipart_chunksize: int = 16 * MB
    model_workers: int = 16  # models published in parallel (each mostly waits on small requests)


@dataclass
class PushResult:
    model: str
    action: str  # "up-to-date" | "pushed" | "dry-run" | "failed"
    version: int | None = None
    uploaded: list[str] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)
    error: errors.SyncError | None = None


def hash_files(models: list[LocalModel], workers: int = 4) -> None:
    """sha256 of every file (hashlib releases the GIL: threads scale on big files)."""
    jobs = [(m, f) for m in models for f in m.files.values()]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        digests = list(pool.map(lambda job: manifest.sha256_file(job[1].path), jobs))
    for m in models:
        m.hashes = {}
    for (m, f), digest in zip(jobs, digests, strict=True):
        assert m.hashes is not None
        m.hashes[f.rel] = digest


def file_entries(m: LocalModel) -> dict[str, dict[str, Any]]:
    assert m.hashes is not None
    return {rel: {"sha256": m.hashes[rel], "size": f.size} for rel, f in sorted(m.files.items())}


def build_manifest(m: LocalModel, version: int, by: str) -> dict[str, Any]:
    meta = m.export_meta
    doc = {
        "schema": "model-sync.manifest/v1",
        "model": m.name,
        "version": version,
        "files": file_entries(m),
        "config_pbtxt": m.pinned_text(version),
        "backend": m.cfg.backend,
        "platform": m.cfg.platform,
        "source": {"path": m.dir, "host": socket.gethostname(), "git_commit": os.environ.get("GITHUB_SHA") or meta.get("git_commit"), "promoted_from": None},
        "exporter": {
            "tool": f"model-sync {__version__}",
            "method": meta.get("method"),
            "torch_version": meta.get("torch_version"),
            "torchscript_format_version": meta.get("torchscript_format_version"),
            "target": meta.get("target"),
        },
        "created_by": by,
        "created_at": manifest.now(),
    }
    manifest.validate(doc, "model-sync.manifest/v1")
    return doc


def _subscriber(progress: Progress, task: Any) -> Any:
    from s3transfer.subscribers import BaseSubscriber

    class _Sub(BaseSubscriber):  # type: ignore[misc]
        def on_progress(self, future: Any, bytes_transferred: int, **kwargs: Any) -> None:
            progress.advance(task, bytes_transferred)

    return _Sub()


class Publisher:
    def __init__(self, repo: Repo, console: Console, options: PushOptions, by: str) -> None:
        from s3transfer.manager import TransferConfig, TransferManager

        self.repo = repo
        self.console = console
        self.options = options
        self.by = by
        self.config = TransferConfig(
            multipart_threshold=options.multipart_threshold,
            multipart_chunksize=options.multipart_chunksize,
            max_request_concurrency=options.concurrency,
            max_submission_concurrency=options.concurrency,
        )
        self.manager = TransferManager(repo.client, self.config)
        self.progress: Progress | None = None
        self.warned = False

    def close(self) -> None:
        self.manager.shutdown()

    def push_model(self, m: LocalModel) -> PushResult:
        repo, name = self.repo, m.name
        pin = repository.read_pin(repo, name)
        pinned = repository.read_manifest(repo, name, pin.version, required=False) if pin.version else None
        entries = file_entries(m)
        if pinned and pinned["files"] == entries and pinned["config_pbtxt"] == m.pinned_text(pinned["version"]):
            self.console.line(f"up to date: {name} version {pin.version} ({repo.uri(layout.config_key(name))})")
            return PushResult(name, "up-to-date", pin.version)
        reuse = {rel for rel, e in entries.items() if pinned and pinned["files"].get(rel) == e}
        if self.options.dry_run:
            version = repository.highest_allocated(repo, name) + 1
            return self._dry_run(m, version, reuse, pin.version)
        if not repo.conditional_writes_enforced() and not self.warned:
            self.warned = True
            self.console.warn(f"{repo.env.endpoint_url or 'S3'} ignores If-None-Match (e.g. rclone serve s3): concurrent pushes can race; AWS S3 and moto enforce it")
        version = repository.allocate(repo, name, "push", self.by)
        result = PushResult(name, "pushed", version)
        self._transfer(m, version, reuse, pin.version, result)
        self._check_unchanged(m)
        doc = build_manifest(m, version, self.by)
        if not repo.put_new(layout.manifest_key(name, version), manifest.dumps(doc)):
            raise errors.refused(f"manifest: {repo.uri(layout.manifest_key(name, version))} already exists; allowed: a fresh version (never overwritten)")
        repository.flip_pin(repo, name, version, doc["config_pbtxt"], "push", self.by, pin)
        self.console.line(f"pinned: {name} version {version} ({repo.uri(layout.config_key(name))})")
        return result

    def _dry_run(self, m: LocalModel, version: int, reuse: set[str], previous: int | None) -> PushResult:
        result = PushResult(m.name, "dry-run", version)
        for rel, f in sorted(m.files.items()):
            dest = self.repo.uri(layout.version_file_key(m.name, version, rel))
            if rel in reuse and previous:
                self.console.line(f"(dryrun) copy: {self.repo.uri(layout.version_file_key(m.name, previous, rel))} to {dest}")
                result.copied.append(rel)
            else:
                self.console.line(f"(dryrun) upload: {f.path} to {dest}")
                result.uploaded.append(rel)
        self.console.line(f"(dryrun) pin: {m.name} version {version} ({self.repo.uri(layout.config_key(m.name))})")
        return result

    def _transfer(self, m: LocalModel, version: int, reuse: set[str], previous: int | None, result: PushResult) -> None:
        assert m.hashes is not None
        bucket = self.repo.root.bucket
        futures: list[tuple[str, str, Future[Any] | Any]] = []
        upload_bytes = sum(f.size for rel, f in m.files.items() if rel not in reuse)
        task = self.progress.task(m.name, upload_bytes) if self.progress else None
        subs = [_subscriber(self.progress, task)] if self.progress and task is not None else []
        for rel, f in sorted(m.files.items()):
            key = self.repo.key(layout.version_file_key(m.name, version, rel))
            if rel in reuse and previous:
                src = self.repo.key(layout.version_file_key(m.name, previous, rel))
                fut = self.manager.copy({"Bucket": bucket, "Key": src}, bucket, key, extra_args={"ChecksumAlgorithm": "SHA256"})
                futures.append(("copy", rel, fut))
                continue
            extra: dict[str, Any] = {"ChecksumAlgorithm": "SHA256"}
            if f.size < self.config.multipart_threshold:
                # AWS S3 verifies the body against the manifest digest (moto and rclone store it unverified).
                extra["ChecksumSHA256"] = hex_to_b64(m.hashes[rel])
            futures.append(("upload", rel, self.manager.upload(f.path, bucket, key, extra_args=extra, subscribers=subs)))
        failure: errors.SyncError | None = None
        for op, rel, fut in futures:
            try:
                fut.result()
            except FileNotFoundError as e:
                failure = failure or errors.refused(f"file vanished during push: {e.filename}; nothing was pinned, re-run push when the model directory is stable")
            except Exception as e:
                failure = failure or self._transfer_error(e, m, rel)
            else:
                dest = self.repo.uri(layout.version_file_key(m.name, version, rel))
                if op == "copy":
                    result.copied.append(rel)
                    self.console.line(f"copy: {self.repo.uri(layout.version_file_key(m.name, previous or 0, rel))} to {dest}")
                else:
                    result.uploaded.append(rel)
                    self.console.line(f"upload: {m.files[rel].path} to {dest}")
        if failure:
            raise failure

    def _transfer_error(self, e: BaseException, m: LocalModel, rel: str) -> errors.SyncError:
        if error_code(e) in DIGEST_MISMATCH_CODES:
            return errors.refused(f"file changed during push: {m.files[rel].path} (S3 rejected it: its SHA256 differs from the one hashed); nothing was pinned, re-run push")
        return translate(e, self.repo.env, layout.model_prefix(m.name) + rel)

    def _check_unchanged(self, m: LocalModel) -> None:
        for f in m.files.values():
            try:
                st = os.stat(f.path)
            except FileNotFoundError:
                raise errors.refused(f"file vanished during push: {f.path}; nothing was pinned, re-run push when the model directory is stable") from None
            if (st.st_size, st.st_mtime_ns) != (f.size, f.mtime_ns):
                raise errors.refused(f"file changed during push: {f.path}; nothing was pinned, re-run push when the model directory is stable")


def push(repo: Repo, models: list[LocalModel], console: Console, options: PushOptions, by: str) -> list[PushResult]:
    hash_files(models)
    publisher = Publisher(repo, console, options, by)
    results: list[PushResult] = []
    try:
        with console.progress() as progress:
            publisher.progress = progress if not options.dry_run else None

            def one(m: LocalModel) -> PushResult:
                try:
                    return publisher.push_model(m)
                except errors.SyncError as e:
                    return PushResult(m.name, "failed", error=e)
                except Exception as e:
                    return PushResult(m.name, "failed", error=translate(e, repo.env, layout.model_prefix(m.name)))

            if len(models) == 1:
                results = [one(models[0])]
            else:
                with ThreadPoolExecutor(max_workers=min(options.model_workers, len(models))) as pool:
                    results = list(pool.map(one, models))
    finally:
        publisher.close()
    return results
