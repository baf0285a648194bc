"""`promote`: copy a verified, pinned version from one environment (staging) to another (prod).

  1. the version must be the one pinned in the source env and its latest verification attempt
     made while it was pinned (audit/verifications/<model>/<N>/, verify.gate_record) must have
     passed, for the source manifest (manifest_sha256), unless
     --skip-verification, which is recorded in the provenance;
  2. target version number: the SAME N when it is free in the target (staging v7 is prod v7, easy
     to trace), else the next free number; allocated with the same create-only marker as push;
     a target version already promoted from the same source version is reused (idempotent re-run);
  3. the source's files checked against its manifest (as in 4) before anything is written to the
     target: a version whose object was rewritten is refused (exit 4) with nothing copied or allocated;
     then server-side copy of every file (s3transfer managed copy: CopyObject, or UploadPartCopy for big
     files) when both environments share an endpoint, else a streamed GET -> upload;
  4. checksums re-verified in the target (a mismatch or a failed copy deletes what was copied:
     model_sync.versions.catalog.discard_files): on AWS S3, HeadObject(ChecksumMode=ENABLED) SHA256 when it
     is a full-object SHA256; otherwise, and ALWAYS against custom endpoints (moto and rclone store a
     client-sent checksum without verifying it, measured), the object is re-read and hashed;
  5. target manifest and provenance (audit/promotions/<model>/<N'>.json) written, the pin flipped last,
     conditional on the target pin read at the start (If-Match): a rollback or push in the target
     meanwhile refuses the flip (exit 4; N' stays published, unpinned) instead of being undone.
     To prod (by default; `--canary`/`--no-canary` choose, recorded in the provenance) the flip is
     a gray release's (model_sync.canary.gray_release): N' serves a growing share of the replicas first and
     is pinned only when every step's analysis passed (exit 6 when it aborts).

Version alignment (model_sync/admission/alignment.py, per export format) is checked right after step 1, before anything is
written to the target: a pytorch_libtorch model whose exporting torch is newer than the LibTorch
in the TARGET's Triton image is refused (exit 7) unless --allow-version-skew; the target
manifest and the promotion record carry the `compatibility` verdict for the target image.
GPU memory planning (model_sync/admission/gpu_plan.py) comes next, against the TARGET's `tritonGpus` and
the versions pinned there: a version that would overcommit its deployment's GPU is refused
(exit 7). The target manifest is schema v3 and keeps the source's GPU memory record (a v1/v2
source: null, unknown) with the config's instance groups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from model_sync import environments, errors
from model_sync.admission import alignment, gpu_plan
from model_sync.canary import ending, launch, metrics
from model_sync.contract import layout
from model_sync.observation import verify
from model_sync.records import canary_record, codec
from model_sync.s3 import download, transfer
from model_sync.s3.bucket import Bucket, b64_sha256_to_hex, who
from model_sync.s3.clients import aws_hosted
from model_sync.s3.failures import translate
from model_sync.triton_model import instance_groups
from model_sync.ui import Console
from model_sync.versions import catalog, pinnable

if TYPE_CHECKING:
    from model_sync.observation.replicas import Wait

# Server-side copies: one CopyObject per file up to S3's 5 GiB limit, so that S3 computes the
# copy's full-object SHA256 (the target is then verified with one HeadObject on AWS S3, where a
# multipart copy has only a composite checksum and would have to be read back), and so that
# servers without UploadPartCopy (rclone serve s3 answers it without an ETag) can promote big
# files; bigger files are copied in 64 MiB parts, 16 at a time. The read-back (S3-compatible
# servers) is one streamed GET per file, hashed as it arrives: nothing is written locally.
# A gray release in the target: (target repo, target version, canary id or None) -> its summary.
GrayRun = Callable[[Bucket, int, str | None], dict[str, Any]]
# Environments whose promotions go through a gray release unless --no-canary.
CANARY_ENVS = ("prod",)
COPY = transfer.TransferSettings(threshold=5 * 1024 * transfer.MB, chunksize=64 * transfer.MB, concurrency=16)


def _check_source(
    src: Bucket, model: str, version: int, skip_verification: bool
) -> tuple[dict[str, Any], bytes, str | None]:
    pin = catalog.read_pin(src, model)
    raw = src.get(layout.manifest_key(model, version))
    if raw is None and pin.version != version:  # no such version: exit 3, not "not pinned"
        raise errors.not_found(
            f"version: {model} {version} does not exist in {src.env.name} (no "
            f"{src.uri(layout.manifest_key(model, version))}; pinned: {pin.version}); allowed: a published "
            "version"
        )
    if pin.version != version:
        raise errors.refused(
            f"version: {model} {version} is not pinned in {src.env.name} (pinned: {pin.version}); allowed: the "
            "pinned version, verified there"
        )
    if raw is None:
        raise errors.not_found(
            f"manifest: {src.uri(layout.manifest_key(model, version))} does not exist; allowed: a version "
            "published by model-sync push"
        )
    try:
        doc = codec.read_manifest(raw, model, version)
    except codec.RecordError as e:
        raise errors.refused(f"{src.uri(layout.manifest_key(model, version))}: {e}") from None
    pinnable.check(src, model, version, "promote", doc)  # what no replica would serve: even unverified
    if skip_verification:
        return doc, raw, None

    try:
        found = verify.gate_record(src, model, version)
    except codec.RecordError as e:
        raise errors.refused(f"verification record of {model} {version} in {src.env.name}: {e}") from None
    if found is None:
        raise errors.refused(
            f"verification: {model} {version} has no record in {src.env.name} "
            f"({src.uri(layout.verification_attempts_prefix(model, version))}); "
            "allowed: run `model-sync verify` there first, or --skip-verification (recorded)"
        )
    record_key, rec = found
    if not rec["passed"]:
        raise errors.refused(
            f"verification: {model} {version} FAILED in {src.env.name} "
            f"({errors.one_line(str(rec.get('detail', '')))}); allowed: a version whose latest verify passed"
        )
    if rec["manifest_sha256"] != codec.sha256_bytes(raw):
        raise errors.refused(
            f"verification: {src.uri(record_key)} is for another manifest; allowed: a record of the current "
            "manifest (re-run verify)"
        )
    return doc, raw, record_key


def _reusable(dst: Bucket, model: str, candidate: int, src_env: str, src_uri: str, doc: dict[str, Any]) -> bool:
    existing = catalog.read_manifest(dst, model, candidate, required=False)
    if existing is None:
        return False
    origin = existing["source"]["promoted_from"]
    same = (
        origin == {"env": src_env, "bucket_uri": src_uri, "version": doc["version"]}
        and existing["files"] == doc["files"]
    )
    return same and catalog.is_complete(dst, model, candidate, existing) is None


class _Discard:
    """A sink for bytes that are only hashed."""

    def write(self, data: bytes) -> int:
        return len(data)

    def flush(self) -> None:
        pass


def _verify_files(repo: Bucket, model: str, version: int, files: dict[str, Any], outcome: str) -> str:
    """Every file of `version` in `repo` against the manifest's sha256 and size: the source before
    anything is copied, the target after the copy. A mismatch is refused (exit 4), its line ending
    with `outcome` (what was, and was not, done). Returns how it was checked."""
    methods: set[str] = set()
    for rel, meta in sorted(files.items()):
        key = repo.key(layout.version_file_key(model, version, rel))
        try:
            head = repo.client.head_object(Bucket=repo.root.bucket, Key=key, ChecksumMode="ENABLED")
            # Only AWS S3 verifies a stored checksum against the body; S3-compatible servers (moto,
            # rclone) keep whatever the client sent, so against a custom endpoint we always re-hash.
            digest = b64_sha256_to_hex(head.get("ChecksumSHA256", "")) if aws_hosted(repo.env) else None
            if digest is None:  # read back and hashed as it streams in (download.download)
                digest, size = download.download(
                    repo.client, repo.root.bucket, key, _Discard(), int(head["ContentLength"]), COPY
                )
                methods.add("rehash")
            else:
                size = int(head["ContentLength"])
                methods.add("s3-checksum")
        except Exception as e:
            raise translate(e, repo.env, layout.version_file_key(model, version, rel)) from None
        if digest != meta["sha256"] or size != meta["size"]:
            raise errors.refused(
                f"checksum: {repo.uri(layout.version_file_key(model, version, rel))} is {digest}/{size} bytes, "
                f"manifest says {meta['sha256']}/{meta['size']}; {outcome}"
            )
    return methods.pop() if len(methods) == 1 else "mixed"


def _copy(
    src: Bucket, dst: Bucket, model: str, src_version: int, version: int, files: dict[str, Any], console: Console
) -> None:
    manager = transfer.manager(dst.client, COPY)
    same_endpoint = src.env.endpoint_url == dst.env.endpoint_url
    futures = []
    try:
        for rel in sorted(files):
            src_key = src.key(layout.version_file_key(model, src_version, rel))
            dst_key = dst.key(layout.version_file_key(model, version, rel))
            if same_endpoint:
                fut = manager.copy(
                    {"Bucket": src.root.bucket, "Key": src_key},
                    dst.root.bucket,
                    dst_key,
                    extra_args={"ChecksumAlgorithm": "SHA256"},
                    source_client=src.client,
                )
            else:  # another endpoint: stream the source through this process; its errors name the SOURCE
                try:
                    body = src.client.get_object(Bucket=src.root.bucket, Key=src_key)["Body"]
                except Exception as e:
                    raise translate(e, src.env, layout.version_file_key(model, src_version, rel)) from None
                fut = manager.upload(body, dst.root.bucket, dst_key, extra_args={"ChecksumAlgorithm": "SHA256"})
            futures.append((rel, fut))
        for rel, fut in futures:
            try:
                fut.result()
            except Exception as e:
                raise translate(e, dst.env, layout.version_file_key(model, version, rel)) from None
            console.line(
                f"copy: {src.uri(layout.version_file_key(model, src_version, rel))} to "
                f"{dst.uri(layout.version_file_key(model, version, rel))}"
            )
    finally:
        manager.shutdown()


def check_alignment(
    doc: dict[str, Any], dst: Bucket, allow_skew: bool, allow_local_target: bool = False
) -> dict[str, Any]:
    """The compatibility record of a source manifest against the TARGET's Triton image and GPUs, per
    export format (exit 7), including a `--target local` model refused for an NGC image."""
    return alignment.of_manifest(doc, dst.env, allow_skew, allow_local_target)


def check_gpu_memory(doc: dict[str, Any], dst: Bucket) -> list[str]:
    """GPU memory planning of the source version `doc` in the TARGET (exit 7 when it would overcommit
    its deployment's GPU there); the lines to print."""
    new = gpu_plan.Need.from_manifest(doc, f"{doc['model']} (promoted v{doc['version']})")
    return gpu_plan.check(dst, [doc["model"]], lambda _model: new, lambda _models: f"{doc['model']} version "
                          f"{doc['version']}")  # fmt: skip


def _pin_copied(dst: Bucket, model: str, candidate: int, target_pin: catalog.Pin, notes: list[str], *,
                dry_run: bool, console: Console, by: str, canary: GrayRun | None) -> int:  # fmt: skip
    """A version promoted from the same source version before: pinned at once (or by its gray
    release), nothing copied again; up to date when the target already pins it."""
    if target_pin.version == candidate:
        console.line(f"up to date: {model} version {candidate} already promoted and pinned in {dst.env.name}")
        return candidate
    for line in notes:
        console.line(line)
    if dry_run:
        console.line(f"(dryrun) pin: {model} version {candidate} ({dst.uri(layout.config_key(model))})")
        return candidate
    existing = catalog.read_manifest(dst, model, candidate)
    assert existing is not None
    if canary is not None:
        canary(dst, candidate, None)
        return candidate
    catalog.flip_pin(dst, model, candidate, existing["config_pbtxt"], "promote", by, target_pin, warn=console.warn)
    _end_gray_release(dst, model, candidate, by, console)
    console.line(f"pinned: {model} version {candidate} in {dst.env.name} (already copied)")
    return candidate


def _dry_run_copy(src: Bucket, dst: Bucket, model: str, version: int, doc: dict[str, Any], console: Console,
                  canary: GrayRun | None) -> int:  # fmt: skip
    """What a promotion would copy and pin, written nowhere; the target version it would take."""
    free = dst.get(layout.allocation_key(model, version)) is None and version not in catalog.list_versions(dst, model)
    target = version if free else catalog.highest_allocated(dst, model) + 1
    for rel in sorted(doc["files"]):
        console.line(
            f"(dryrun) copy: {src.uri(layout.version_file_key(model, version, rel))} to "
            f"{dst.uri(layout.version_file_key(model, target, rel))}"
        )
    how = "gray release, then pin" if canary is not None else "pin"
    console.line(f"(dryrun) {how}: {model} version {target} ({dst.uri(layout.config_key(model))})")
    return target


def _copy_checked(src: Bucket, dst: Bucket, model: str, version: int, doc: dict[str, Any], console: Console,
                  by: str) -> tuple[int, str]:  # fmt: skip
    """Steps 2 to 4: the source's files checked, a target version allocated, every file copied and
    checked there; (the target version, how its checksums were verified). A failure or an
    interruption leaves no copied file behind."""
    # the source's files first: a version that no longer matches its manifest writes nothing to the target
    _verify_files(src, model, version, doc["files"], f"nothing was copied to {dst.env.name}; allowed: a version "
                  "whose files match its manifest (push it again)")  # fmt: skip
    ignored = None if dst.env.unenforced_writes_accepted else dst.ignored_conditions()
    if ignored:
        console.warn(f"{dst.env.endpoint_url or 'S3'} ignores {ignored}: concurrent promotions of {model} can race")
    target = catalog.allocate(dst, model, "promote", by, preferred=version)
    try:
        _copy(src, dst, model, version, target, doc["files"], console)
        return target, _verify_files(dst, model, target, doc["files"], "nothing was pinned")
    except Exception as e:  # a failed copy or check: nothing copied may stay
        error = e if isinstance(e, errors.SyncError) else translate(e, dst.env, layout.version_prefix(model, target))
        raise errors.with_note(error, catalog.discard_files(dst, model, target, error)) from None
    except BaseException:  # interrupted (SIGINT) mid-copy: the same cleanup, then the interruption's own line
        catalog.discard_files(dst, model, target)
        raise


def _target_manifest(src: Bucket, model: str, version: int, target: int, doc: dict[str, Any],
                     compatibility: dict[str, Any], by: str) -> dict[str, Any]:  # fmt: skip
    """The target's manifest (schema v3): the source's, with the target's version and pinned config,
    its provenance and the compatibility verdict for the target's image."""
    from model_sync.triton_model import model_config  # protobuf's text_format: loaded only when a config is parsed

    cfg = model_config.parse(doc["config_pbtxt"], src.uri(layout.manifest_key(model, version)))
    new_doc = codec.upgrade_manifest(doc, compatibility, instance_groups.of(cfg))
    new_doc.update(
        version=target,
        config_pbtxt=model_config.pinned_text(cfg, target, model),
        source={**doc["source"], "promoted_from": {"env": src.env.name, "bucket_uri": src.env.uri, "version": version}},
        created_by=by,
        created_at=codec.now(),
    )
    return new_doc


def promote(
    src: Bucket,
    dst: Bucket,
    model: str,
    version: int,
    *,
    skip_verification: bool,
    dry_run: bool,
    console: Console,
    by: str,
    allow_version_skew: bool = False,
    allow_local_target: bool = False,
    canary: GrayRun | None = None,
) -> int:
    """Returns the target version number. With `canary`, the target pin is flipped by a gray
    release (canary(dst, target, canary id) runs it to its decision) instead of at once."""
    layout.check_model_name(model)
    doc, _raw, record_key = _check_source(src, model, version, skip_verification)
    compatibility = check_alignment(doc, dst, allow_version_skew, allow_local_target)
    notes = check_gpu_memory(doc, dst)  # before anything is written to the target
    target_pin = catalog.read_pin(dst, model)
    for candidate in {version, target_pin.version} - {None}:
        assert candidate is not None
        if _reusable(dst, model, candidate, src.env.name, src.env.uri, doc):
            return _pin_copied(dst, model, candidate, target_pin, notes, dry_run=dry_run, console=console, by=by,
                               canary=canary)  # fmt: skip
    for line in notes:
        console.line(line)
    if dry_run:
        return _dry_run_copy(src, dst, model, version, doc, console, canary)
    target, method = _copy_checked(src, dst, model, version, doc, console, by)
    new_doc = _target_manifest(src, model, version, target, doc, compatibility, by)
    catalog.write_manifest(dst, model, target, new_doc)
    canary_id = canary_record.new_id() if canary is not None else None
    record = {
        "schema": codec.PROMOTION_V3,
        "model": model,
        "version": target,
        "source": {"env": src.env.name, "bucket_uri": src.env.uri, "version": version},
        "target": {"env": dst.env.name, "bucket_uri": dst.env.uri},
        "verification": {"skipped": skip_verification, "record_key": record_key},
        "files": doc["files"],
        "checksums_verified": method,
        "compatibility": compatibility,
        "promoted_by": by,
        "promoted_at": codec.now(),
        "canary": {"skipped": canary is None, "id": canary_id},
    }
    dst.put_new(layout.promotion_key(model, target), codec.dumps(record))
    if canary is not None:
        console.line(f"copied: {model} version {target} in {dst.env.name}; its gray release decides the pin")
        canary(dst, target, canary_id)
        return target
    catalog.flip_pin(dst, model, target, new_doc["config_pbtxt"], "promote", by, target_pin, warn=console.warn)
    _end_gray_release(dst, model, target, by, console)
    console.line(f"pinned: {model} version {target} in {dst.env.name} (promoted from {src.env.name} version {version})")
    return target


def _end_gray_release(dst: Bucket, model: str, version: int, by: str, console: Console) -> None:
    """A pin flipped without a gray release ends the one running (as `rollback` does), after the
    flip, so that the run, which notices at its next poll (exit 4), reads where the replicas went:
    every replica follows the new pin."""
    ended = ending.end_running(dst, model, by, f"promote --no-canary pinned version {version}")
    if ended is not None:
        console.line(
            f"aborted: canary {ended['id']} of {model} version {ended['canary_version']} (promote --no-canary)"
        )


def command(
    model: str, version: int, source: str, target: str, config: str | None, *, skip_verification: bool, dry_run: bool,
    allow_version_skew: bool,
    allow_local_target: bool, quiet: bool, wait: Wait, canary: bool | None = None,
) -> dict[str, Any]:  # fmt: skip
    """`model-sync promote`: the two environments (two different repositories), promote() (through
    a gray release when `canary`, None: when the target is one of CANARY_ENVS), then `wait` in the
    target; returns the JSON document."""

    if source == target:
        raise errors.usage(f"--to: {target!r} equals --from; allowed: two different environments")
    src_env = environments.resolve(source, config)
    dst_env = environments.resolve(target, config)
    if src_env.root == dst_env.root and src_env.endpoint_url == dst_env.endpoint_url:
        raise errors.usage(
            f"--to: {target!r} has the same repository as {source!r} ({dst_env.uri}); allowed: two different "
            "repositories"
        )
    dst = Bucket(dst_env)
    console = Console(quiet)
    by = who(dst_env, dst.session)
    released: dict[str, Any] = {}
    run: GrayRun | None = None
    if canary or (canary is None and dst_env.name in CANARY_ENVS):
        metrics.for_environment(dst_env, model)  # exit 2 before anything is copied: no metrics, no analysis

        def run(repo: Bucket, target_version: int, canary_id: str | None) -> dict[str, Any]:
            released.update(launch.gray_release(repo, model, target_version, console, by, canary_id))
            return released

    pinned = promote(Bucket(src_env), dst, model, version, skip_verification=skip_verification, dry_run=dry_run,
                     console=console, by=by, allow_version_skew=allow_version_skew,
                     allow_local_target=allow_local_target, canary=run)  # fmt: skip
    doc: dict[str, Any] = {
        "model": model,
        "from": {"env": src_env.name, "version": version},
        "to": {"env": dst_env.name, "version": pinned},
        "dry_run": dry_run,
        "canary": released or None,
    }
    if not dry_run:
        doc["served"] = wait(dst, model, pinned, console)
    return doc
