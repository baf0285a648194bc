"""`push`: the publish protocol (docs/architecture.md#the-publish-protocol numbers the same steps;
the command: docs/model-sync.md).

Per model, in this order; the pin flip (8) is the version's commit point:
  1. check alignment: before any S3 request, a version the target's Triton cannot load in its export
     format is refused (exit 7, model_sync/admission/alignment.py: a pytorch_libtorch model exported with a
     newer torch than the image's LibTorch, a .pt2 of another torch or GPU architecture, an ONNX opset
     or IR version above the image's ONNX Runtime's) unless
     --allow-version-skew (recorded in the manifest's `compatibility`); before any write, GPU
     memory planning (model_sync/admission/gpu_plan.py) refuses new versions that would overcommit
     their deployment's GPU (the environment's `tritonGpus`, exit 7), the plan, or why it was not
     checked, printed once; a python-backend model.py that answers with
     `InferenceResponse(error=...)` is named in a warning (model_sync/push/error_responses.py:
     Triton counts those responses as successes), never refused;
  2. hash: validate the local directory (model_sync.triton_model.model_directory.load) and sha256
     every file (reused from the local hash cache while size, mtime, ctime, inode and device are
     unchanged: model_sync/push/skip_cache.py);
  3. read the pin: one GetObject of repository/<model>/config.pbtxt, and its manifest; identical
     files + identical pinned config -> no-op. The pinned manifest comes from the local pin cache
     when the pin's ETag and LastModified are the ones it was cached under, else one more GET.
     (Pins are read one by one, not from a listing of repository/: a listing returns every
     version's files, which some servers must hash to answer, e.g. rclone's first listing after a
     push, ~0.2 s for 100 MiB, and which grows with every version kept);
  4. allocate: parse and check config.pbtxt if the config cache spared load() that; allocate N
     with a create-only write of audit/allocations/<model>/<N>.json (If-None-Match: *), first
     trying the pinned version + 1 (no listing), used only if repository/<model>/<N>/ is still
     empty; on a collision, the next number after the highest allocated (two listings);
  5. upload: every changed file to repository/<model>/<N>/ through s3transfer (multipart and
     concurrency; ChecksumSHA256 = the manifest digest for single-part files, so S3 itself rejects
     content that differs from what was hashed; ChecksumAlgorithm SHA256 per part otherwise);
     files identical to the pinned version are server-side copied instead of re-uploaded;
  6. re-check the files: re-stat every local file (also before 4: a change since hashing is refused
     before anything is written); changed or vanished during the push -> refuse (nothing pinned);
  7. write the manifest: manifests/<model>/<N>.json, create-only (its document:
     model_sync/records/version_manifest.py);
  8. flip the pin: rewrite repository/<model>/config.pbtxt pinned to N (one PUT, conditional on
     the pin read in 3: If-Match its ETag, If-None-Match: * when there was none). If another
     publisher moved the pin meanwhile: refused (exit 4), N stays published but unpinned (the
     message says how to pin it); the later allocation is never silently lost;
  9. record the flip: append audit/pins/<model>/<stamp>-<N>.json (the stack of earlier pins);
 10. signal the agents: rewrite manifests/_pins/<model>.json (a failure only warns: the flip is
     committed, and the agents' full resync finds it).
A refusal or failure in 5-6 deletes what this push wrote under repository/<model>/<N>/
(model_sync.versions.catalog.discard_files; the allocation marker stays, so N is never reused),
said at the end of its one line; a role that may not delete (the CI publisher), an S3 failure
every request would hit, or a killed process leaves the files to `prune`. A failure in 7-8 leaves
an unpinned version N that nothing points at. Versions are never overwritten.
Models are published concurrently (PushOptions.model_workers threads sharing one Bucket and its
botocore client: single requests for small files, s3transfer for multipart ones; the options and
their bounds: model_sync/push/push_options.py). The first S3 failure of a kind every model would hit
(endpoint, credentials: exit 5) skips the models not started yet ("skipped"), and `push`
reports it once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from model_sync import errors
from model_sync.admission import alignment, gpu_plan
from model_sync.contract import layout
from model_sync.environments import Environment
from model_sync.parallel import Background, parallel_map
from model_sync.push import error_responses, skip_cache
from model_sync.push.push_options import PushOptions
from model_sync.push.result import PushResult
from model_sync.push.uploads import Uploader, hash_files, vanished
from model_sync.records import compatibility as compatibility_record
from model_sync.records.version_manifest import build_manifest, file_entries, gpu_memory_of
from model_sync.s3 import clients
from model_sync.s3.bucket import Bucket, who
from model_sync.s3.failures import translate
from model_sync.triton_model import instance_groups, model_directory
from model_sync.triton_model.model_directory import LocalModel
from model_sync.ui import Console, error
from model_sync.versions import catalog

if TYPE_CHECKING:
    from model_sync.observation.replicas import Wait


def check_alignment(
    models: list[LocalModel], env: Environment, allow_skew: bool, allow_local_target: bool = False
) -> dict[str, dict[str, Any]]:
    """{model: compatibility record} for env's Triton image and GPUs, per export format
    (model_sync/admission/alignment.py); raises exit 7 (INCOMPATIBLE) naming the model, the environment
    and what does not match. Runs before any S3 request."""
    records: dict[str, dict[str, Any]] = {}

    def kinds(m: LocalModel) -> Callable[[], list[str]]:
        return lambda: [g["kind"] for g in instance_groups.of(m.cfg)]  # parsed only for a .pt2

    for m in models:
        try:
            records[m.name] = alignment.assess(
                platform=m.platform, backend=m.backend, exporter=m.export_meta, image=env.triton_image,
                kinds=kinds(m),
                gpus=env.deployment_of(m.name), allow_skew=allow_skew, allow_local_target=allow_local_target,
            )  # fmt: skip
        except ValueError as e:  # one line each: compat's and alignment's errors
            raise errors.incompatible(f"{m.name} -> {env.name}: {e}") from None
    return records


def check_gpu_memory(repo: Bucket, models: list[LocalModel]) -> list[str]:
    """GPU memory planning of the new versions (model_sync/admission/gpu_plan.py): export.json's gpu_memory
    of every model read strictly (exit 2, before any request), then exit 7 when one would
    overcommit its deployment's GPU; else the lines to print. Reads the other models' pins only
    for an environment with `tritonGpus`, and parses config.pbtxt only for models it plans."""
    for m in models:
        gpu_memory_of(m)
    local = {m.name: m for m in models}

    def need(name: str) -> gpu_plan.Need:
        m = local[name]
        known = gpu_memory_of(m)
        return gpu_plan.Need(name, f"{name} (this push)", known["bytes_per_instance"] if known else None,
                             tuple(instance_groups.of(m.cfg)), backend=m.cfg.platform or m.cfg.backend or None)  # fmt: skip

    return gpu_plan.check(repo, list(local), need, ", ".join)


class Publisher:
    def __init__(
        self,
        repo: Bucket,
        console: Console,
        options: PushOptions,
        by: str | Callable[[], str],
        pins: skip_cache.PinCache | None = None,
    ) -> None:
        self.repo = repo
        self.console = console
        self.options = options
        self._by = by
        self._by_value: str | None = by if isinstance(by, str) else None
        self.pins = pins or skip_cache.PinCache(None, repo.identity)
        self.compatibility: dict[str, dict[str, Any]] = {}
        self.abort: errors.SyncError | None = (
            None  # a run-wide S3 failure (endpoint, credentials): models not started yet are skipped
        )
        self.stop = threading.Event()  # set on an interrupt: no model starts, none allocates or flips its pin any more
        self.hashing: Background | None = None  # hash_files of the models, running while pins are read
        self.uploader = Uploader(repo, console, options)  # the file transfers, shared by every model
        self.warned = False
        self.notes: list[str] = []  # printed once, before the first model publishes (the GPU memory plan)
        self._lock = threading.Lock()

    @property
    def by(self) -> str:
        """Who publishes (STS on AWS): resolved on the first write only, so a no-op never asks."""
        with self._lock:
            if self._by_value is None:
                assert callable(self._by)
                self._by_value = self._by()
            return self._by_value

    # ---- reading the current pin --------------------------------------------------------

    def _from_cache(
        self, name: str, etag: str | None, modified: int | None
    ) -> tuple[catalog.Pin, dict[str, Any]] | None:
        """The cached (pin, manifest) for exactly this pin ETag + LastModified. Only the fields the
        no-op decision reads are checked (a malformed entry is a miss); a hit is only ever used
        when it says the local model is identical, never as a source of files."""
        entry = self.pins.get(name, etag, modified)
        if entry is None:
            return None
        doc, version, text = entry.get("manifest"), entry.get("version"), entry.get("pin_text")
        if not (isinstance(doc, dict) and isinstance(version, int) and isinstance(text, str)
                and doc.get("model") == name and doc.get("version") == version
                and isinstance(doc.get("files"), dict) and isinstance(doc.get("config_pbtxt"), str)):  # fmt: skip
            return None
        return catalog.Pin(name, version, text, etag, modified), doc

    def read_pinned(self, m: LocalModel) -> tuple[catalog.Pin, dict[str, Any] | None]:
        """The current pin and its manifest (None: no pin, or a pin without a manifest).

        The local pin cache only ever SKIPS the manifest GET, and only when its entry (same pin
        ETag and LastModified) says the local model is identical; anything else is read from S3.
        A cache hit whose pin text is the one just read is not parsed again. The pin GET overlaps
        the hashing of the local files (`hashing`)."""
        name = m.name
        found = catalog.get_pin(self.repo, name)
        if self.hashing is not None:
            self.hashing.result()
        if found is None:
            return catalog.Pin(name, None, None), None
        data, etag, modified = found
        hit = self._from_cache(name, etag, modified)
        if hit is not None and (hit[0].text or "").encode() == data and self._identical(m, hit[1]):
            return hit
        pin = catalog.parse_pin(self.repo, name, data, etag, modified)
        if pin.version is None:
            return pin, None
        pinned = catalog.read_manifest(self.repo, name, pin.version, required=False)
        if pinned is not None and pin.text is not None:
            self.pins.put(name, pin.etag, pin.modified, pin.version, pin.text, pinned)
        return pin, pinned

    # ---- one model ----------------------------------------------------------------------

    @staticmethod
    def _identical(m: LocalModel, pinned: dict[str, Any] | None) -> bool:
        return (
            pinned is not None
            and pinned["files"] == file_entries(m)
            and pinned["config_pbtxt"] == m.pinned_text(pinned["version"])
        )

    def _up_to_date(self, m: LocalModel, pin: catalog.Pin, pinned: dict[str, Any] | None) -> PushResult | None:
        if not self._identical(m, pinned):
            return None
        self.console.line(f"up to date: {m.name} version {pin.version} ({catalog.pin_uri(self.repo, m.name)})")
        return PushResult(m.name, "up-to-date", pin.version)

    def push_model(self, m: LocalModel) -> PushResult:
        """The publish protocol's steps 2-10 for one model (the module docstring numbers them)."""
        repo, name = self.repo, m.name
        pin, pinned = self.read_pinned(m)  # 2-3: hashed (in the background) and the pin read
        done = self._up_to_date(m, pin, pinned)
        if done is not None:
            return done
        reuse = self._reusable(m, pinned)
        self._check_before_writing(m)
        if self.options.dry_run:
            return self._dry_run(m, catalog.highest_allocated(repo, name) + 1, reuse, pin.version)
        self._warn_unenforced()
        version = catalog.allocate(repo, name, "push", self.by, hint=pin.version or 0)  # 4: pinned + 1 first
        result = PushResult(name, "pushed", version)
        doc = self._upload(m, version, reuse, pin, result)  # 5-6, and the manifest's document
        catalog.write_manifest(repo, name, version, doc)  # 7
        # 8-10: the conditional flip (the commit point), its history record, the agents' signal
        flip = catalog.flip_pin(repo, name, version, doc["config_pbtxt"], "push", self.by, pin, warn=self.console.warn)
        self._cache_pin(name, flip, version, doc)
        self.console.line(f"pinned: {name} version {version} ({catalog.pin_uri(repo, name)})")
        return result

    @staticmethod
    def _reusable(m: LocalModel, pinned: dict[str, Any] | None) -> set[str]:
        """The files identical to the pinned version's: copied server-side, not uploaded."""
        entries = file_entries(m)
        return {rel for rel, e in entries.items() if pinned and pinned["files"].get(rel) == e}

    def _check_before_writing(self, m: LocalModel) -> None:
        """Bad input fails before any write: the config parsed and checked now (the config cache may
        have spared load() the parse), an interrupt, a file changed since it was hashed."""
        m.cfg  # noqa: B018
        self._check_stop(m)
        self._check_unchanged(m)
        self._print_notes()

    def _warn_unenforced(self) -> None:
        """Once per run: the server ignores conditional writes, so concurrent pushes can race."""
        repo = self.repo
        ignored = None if repo.env.unenforced_writes_accepted else repo.ignored_conditions()
        if ignored and not self.warned:
            self.warned = True
            self.console.warn(
                f"{repo.env.endpoint_url or 'S3'} ignores {ignored} (e.g. rclone serve s3): concurrent pushes "
                "can race; AWS S3 and moto enforce both"
            )

    def _upload(
        self, m: LocalModel, version: int, reuse: set[str], pin: catalog.Pin, result: PushResult
    ) -> dict[str, Any]:
        """Steps 5-6: the files of `version` uploaded (or copied) and re-checked, and its manifest's
        document. A refusal or failure deletes what was written under the version (nothing may stay
        of a version refused before its manifest; the allocation marker stays)."""
        try:
            self.uploader.transfer(m, version, reuse, pin.version, result)
            self._check_unchanged(m)
            doc = build_manifest(m, version, self.by, self.compatibility[m.name])
            self._check_stop(m)
        except Exception as e:
            error = e if isinstance(e, errors.SyncError) else translate(e, self.repo.env, layout.model_prefix(m.name))
            raise errors.with_note(error, catalog.discard_files(self.repo, m.name, version, error)) from None
        return doc

    def _cache_pin(self, name: str, flip: catalog.Flip, version: int, doc: dict[str, Any]) -> None:
        """The new pin in the local pin cache, keyed by its ETag and LastModified (one HEAD: the PUT's
        response has no LastModified); nothing when the cache is off."""
        if self.pins.path is None:
            return
        head = catalog.head_pin(self.repo, name)
        if head is not None and head[0] == flip.etag:
            self.pins.put(name, flip.etag, head[1], version, doc["config_pbtxt"], doc)

    def _print_notes(self) -> None:
        with self._lock:
            notes, self.notes = self.notes, []
        for line in notes:
            self.console.line(line)

    def _check_stop(self, m: LocalModel) -> None:
        if self.stop.is_set():
            raise errors.refused(
                f"{m.name}: interrupted before its pin flip; nothing pinned was changed for it, re-run push"
            )

    def _dry_run(self, m: LocalModel, version: int, reuse: set[str], previous: int | None) -> PushResult:
        result = PushResult(m.name, "dry-run", version)
        for rel, f in sorted(m.files.items()):
            dest = self.repo.uri(layout.version_file_key(m.name, version, rel))
            if rel in reuse and previous:
                self.console.line(
                    f"(dryrun) copy: {self.repo.uri(layout.version_file_key(m.name, previous, rel))} to {dest}"
                )
                result.copied.append(rel)
            else:
                self.console.line(f"(dryrun) upload: {f.path} to {dest}")
                result.uploaded.append(rel)
        self.console.line(f"(dryrun) pin: {m.name} version {version} ({catalog.pin_uri(self.repo, m.name)})")
        return result

    def _check_unchanged(self, m: LocalModel) -> None:
        for f in m.files.values():
            try:
                st = os.stat(f.path)
            except FileNotFoundError:
                raise vanished(f.path) from None
            if skip_cache.stat_key(st) != f.stat_key:
                raise errors.refused(
                    f"file changed during push: {f.path}; nothing was pinned, re-run push when the model "
                    "directory is stable"
                )


def push(
    repo: Bucket, models: list[LocalModel], console: Console, options: PushOptions, by: str | Callable[[], str]
) -> list[PushResult]:
    compatibility = check_alignment(
        models, repo.env, options.allow_version_skew, options.allow_local_target
    )  # before any S3 request
    for name, record in sorted(compatibility.items()):
        if str(record.get("detail") or "").startswith("published with --allow-local-target"):
            console.warn(f"{name} -> {repo.env.name}: {record['detail']} (recorded in the manifest)")
        if record["result"] == compatibility_record.Result.SKEW_ALLOWED:
            console.warn(
                f"{name} -> {repo.env.name}: {record['detail']} (published anyway: --allow-version-skew, "
                "recorded in the manifest)"
            )
    for line in filter(None, map(error_responses.warning, models)):
        console.warn(line)
    notes = check_gpu_memory(repo, models)  # before any write (exit 7 on an overcommitted GPU)
    directory = skip_cache.cache_dir() if options.use_cache else None
    hashes = skip_cache.HashCache(directory)
    publisher = Publisher(repo, console, options, by, skip_cache.PinCache(directory, repo.identity))
    publisher.compatibility = compatibility
    publisher.notes = notes
    results: list[PushResult] = []
    publisher.hashing = Background(hash_files, models, 4, hashes, name="model-sync-hash")
    try:
        with console.progress() as progress:
            publisher.uploader.progress = progress if not options.dry_run else None

            def one(m: LocalModel) -> PushResult:
                if publisher.abort is not None:
                    return PushResult(m.name, "skipped", error=publisher.abort)
                try:
                    return publisher.push_model(m)
                except Exception as e:
                    error = (
                        e if isinstance(e, errors.SyncError) else translate(e, repo.env, layout.model_prefix(m.name))
                    )
                    if (
                        error.run_wide and publisher.abort is None
                    ):  # unreachable, credentials, clock, bucket: the same for every model
                        publisher.abort = error
                    return PushResult(m.name, "failed", error=error)

            if len(models) == 1:
                results = [one(models[0])]
            else:
                results = parallel_map(one, models, options.model_workers, publisher.stop)
        failed_hashing = publisher.hashing.exception()
        if failed_hashing is not None:  # every model waited for it before any write: one error, not one per model
            raise failed_hashing
    finally:
        publisher.hashing.exception()  # joined: the hash cache is saved complete
        publisher.uploader.close()
        publisher.pins.save()
        hashes.save()
    return results


def command(
    model_dir: str,
    name: str | None,
    resolve: Callable[[], Environment],
    options: PushOptions,
    *,
    quiet: bool,
    wait: Wait | None = None,
) -> tuple[dict[str, Any], errors.SyncError | None]:
    """`model-sync push`: discover the models of `model_dir`, check their alignment with the
    environment (`resolve`d only after the local checks), push them and, with `wait`, wait until
    they are served. Returns the run's JSON document and the error to exit with (None: all
    pushed); every other model's distinct error is printed on its own line first."""

    configs = skip_cache.ConfigCache(
        skip_cache.cache_dir() if options.use_cache else None
    )  # parsed config.pbtxt facts (model_sync/push/skip_cache.py)
    models = model_directory.discover(model_dir, name, configs)
    env = resolve()
    check_alignment(
        models, env, options.allow_version_skew, options.allow_local_target
    )  # refuse before creating a client
    # connections: file transfers (--concurrency) + the small requests of concurrent models
    repo = Bucket(env, clients.CLI.pooled(options.concurrency + PushOptions.model_workers + 4))
    console = Console(quiet=quiet)
    try:
        results = push(repo, models, console, options, lambda: who(env, repo.session))
    finally:
        configs.save()
    doc: dict[str, Any] = {
        "env": env.name,
        "models": [
            {"model": r.model, "action": r.action, "version": r.version, "error": str(r.error) if r.error else None}
            for r in results
        ],
    }
    # One line per distinct error (models failing alike while a run-wide failure was found share
    # its message); the models that failure kept from starting are named on the last line.
    failed = list({str(r.error): r for r in results if r.error is not None and r.action == "failed"}.values())
    skipped = [r.model for r in results if r.action == "skipped"]
    for r in failed[:-1]:
        error(f"{r.model}: {r.error}")
    if failed:
        last = failed[-1]
        note = (
            f" ({len(skipped)} more not started: {', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''})"
            if skipped
            else ""
        )
        return doc, errors.SyncError(
            min(r.error.code for r in failed if r.error),
            (f"{last.model}: {last.error}" if len(models) > 1 else str(last.error)) + note,
        )
    if wait is not None and not options.dry_run:
        doc["served"] = {r.model: wait(repo, r.model, r.version, console) for r in results if r.version is not None}
    return doc, None
