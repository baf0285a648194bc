"""Model-level operations on one environment's repository (see layout.py for the keys):
reading pins and manifests, listing versions, allocating version numbers without races,
flipping the pin (the single commit point) and recording pin history."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from model_sync import errors
from model_sync.contract import layout
from model_sync.records import codec
from model_sync.s3.bucket import Bucket, modified_of

MAX_ALLOCATION_ATTEMPTS = 64


@dataclass
class Pin:
    model: str
    version: int | None  # None: no config.pbtxt, or it does not pin exactly one version
    text: str | None
    etag: str | None = None  # of config.pbtxt as read (the flip's If-Match; local pin cache key)
    modified: int | None = None  # its LastModified, epoch seconds (local pin cache key, with the ETag)


@dataclass
class PinHistory:
    latest: dict[str, Any] | None
    stack: list[int] = field(default_factory=list)


def read_pin(repo: Bucket, model: str) -> Pin:
    found = get_pin(repo, model)
    if found is None:
        return Pin(model, None, None)
    data, etag, modified = found
    return parse_pin(repo, model, data, etag, modified)


def get_pin(repo: Bucket, model: str) -> tuple[bytes, str | None, int | None] | None:
    """The pin's bytes, ETag and LastModified (one GET), unparsed; None: the model has no pin."""
    return repo.get_with_meta(layout.config_key(model))


def head_pin(repo: Bucket, model: str) -> tuple[str | None, int | None] | None:
    """The pin's ETag and LastModified (one HEAD: a PUT's response has no LastModified)."""
    return repo.head(layout.config_key(model))


def pin_uri(repo: Bucket, model: str) -> str:
    """s3://bucket/[prefix/]repository/<model>/config.pbtxt, as every command names a pin."""
    return repo.uri(layout.config_key(model))


def parse_pin(repo: Bucket, model: str, data: bytes, etag: str | None = None, modified: int | None = None) -> Pin:

    from model_sync.triton_model import model_config  # protobuf's text_format: loaded only when a config is parsed

    try:
        cfg = model_config.parse(data, repo.uri(layout.config_key(model)))
    except model_config.ConfigPbtxtError as e:
        raise errors.refused(
            f"{e} (the pin is corrupt; fix it with `model-sync rollback {model} --model-version N`)"
        ) from None
    return Pin(model, model_config.pinned_version(cfg), data.decode(), etag, modified)


def read_manifest(repo: Bucket, model: str, version: int, required: bool = True) -> dict[str, Any] | None:
    data = repo.get(layout.manifest_key(model, version))
    if data is None:
        if required:
            raise errors.not_found(
                f"manifest: {repo.uri(layout.manifest_key(model, version))} does not exist; allowed: a version "
                "published by model-sync"
            )
        return None
    try:
        return codec.read_manifest(data, model, version)
    except codec.RecordError as e:
        raise errors.refused(f"{repo.uri(layout.manifest_key(model, version))}: {e}") from None


def write_manifest(repo: Bucket, model: str, version: int, doc: dict[str, Any]) -> None:
    """Write a version's manifest, create-only: a manifest is written once (push and promote, after
    the version's files and before its pin); refused (exit 4) when one already exists."""
    if not repo.put_new(layout.manifest_key(model, version), codec.dumps(doc)):
        raise errors.refused(
            f"manifest: {repo.uri(layout.manifest_key(model, version))} already exists; allowed: a fresh version "
            "(never overwritten)"
        )


def list_models(repo: Bucket) -> list[str]:
    _, prefixes = repo.list(layout.REPOSITORY_PREFIX, "/")
    out = []
    for p in prefixes:
        name = p[len(layout.REPOSITORY_PREFIX) :].rstrip("/")
        if layout.MODEL_NAME_RE.match(name):
            out.append(name)
    return sorted(out)


def list_versions(repo: Bucket, model: str) -> list[int]:
    """Version directories present under repository/<model>/ (complete or not)."""
    _, prefixes = repo.list(layout.model_prefix(model), "/")
    versions = [layout.version_from_dir(p.rsplit("/", 2)[-2]) for p in prefixes]
    return sorted(v for v in versions if v is not None)


def list_manifests(repo: Bucket, model: str) -> list[int]:
    objects, _ = repo.list(layout.manifests_prefix(model))
    return sorted(v for v in (layout.version_from_json_key(o["Key"]) for o in objects) if v is not None)


def version_objects(repo: Bucket, model: str, version: int) -> dict[str, int]:
    """{relative file path: size} of the objects under repository/<model>/<N>/."""
    prefix = layout.version_prefix(model, version)
    objects, _ = repo.list(prefix)
    return {o["Key"][len(prefix) :]: int(o["Size"]) for o in objects}


def is_complete(repo: Bucket, model: str, version: int, doc: dict[str, Any]) -> str | None:
    """None if every manifest file is present with its size; else what is missing."""
    present = version_objects(repo, model, version)
    for path, meta in sorted(doc["files"].items()):
        if path not in present:
            return f"{path} missing"
        if present[path] != meta["size"]:
            return f"{path} has {present[path]} bytes, manifest says {meta['size']}"
    return None


def changed_since_manifest(repo: Bucket, model: str, version: int, doc: dict[str, Any]) -> str | None:
    """What of `version`'s files is not what its manifest describes, from one listing and one
    HeadObject: a file missing, of another size, or rewritten after the manifest was written (a
    version's files are written before its manifest and never again, so a later LastModified, in
    the server's own whole seconds, is a rewrite); None when nothing shows. A same-size rewrite
    within the manifest's second is not seen here: only re-hashing sees every one (promote does)."""
    prefix = layout.version_prefix(model, version)
    objects, _ = repo.list(prefix)
    present = {o["Key"][len(prefix) :]: o for o in objects}
    head = repo.head(layout.manifest_key(model, version))
    written = head[1] if head is not None else None
    for path, meta in sorted(doc["files"].items()):
        obj = present.get(path)
        if obj is None:
            return f"{path} is missing"
        if int(obj["Size"]) != meta["size"]:
            return f"{path} has {obj['Size']} bytes, its manifest says {meta['size']}"
        modified = modified_of(obj)
        if written is not None and modified is not None and modified > written:
            return f"{path} was rewritten after its manifest"
    return None


def highest_allocated(repo: Bucket, model: str) -> int:
    objects, _ = repo.list(layout.allocations_prefix(model))
    numbers = [v for v in (layout.version_from_json_key(o["Key"]) for o in objects) if v is not None]
    numbers += list_versions(repo, model)  # versions written by other tools count too
    return max(numbers, default=0)


def allocate(
    repo: Bucket, model: str, purpose: str, by: str, preferred: int | None = None, hint: int | None = None
) -> int:
    """Claim a fresh version number with a create-only write of its allocation marker.

    `preferred` (promote: the source version) is tried first; `hint` (push: the pinned version,
    0 for none) spares the two per-model listings, trying hint + 1; otherwise, and on collision,
    the next number after the highest seen. A number claimed from `preferred` or `hint` is only used if its version
    directory is
    still empty (the hint can be stale; a directory written by another tool is never
    overwritten). On servers that ignore If-None-Match the marker is read back and its nonce
    compared, which catches most but not all races (warned by the caller)."""
    enforced = repo.conditional_writes_enforced()
    check_empty = preferred is not None or hint is not None
    if preferred is not None:
        candidate = preferred
    elif hint is not None:
        candidate = hint + 1
    else:
        candidate = highest_allocated(repo, model) + 1
    for _ in range(MAX_ALLOCATION_ATTEMPTS):
        if not enforced and repo.get(layout.allocation_key(model, candidate)) is not None:
            candidate = max(candidate, highest_allocated(repo, model)) + 1
            check_empty = False
            continue
        import uuid

        nonce = uuid.uuid4().hex
        record = {
            "schema": "model-sync.allocation/v1",
            "model": model,
            "version": candidate,
            "purpose": purpose,
            "nonce": nonce,
            "by": by,
            "at": codec.now(),
        }
        if repo.put_new(layout.allocation_key(model, candidate), codec.dumps(record)):
            back = None if enforced else repo.get(layout.allocation_key(model, candidate))
            claimed = enforced or (back is not None and json.loads(back).get("nonce") == nonce)
            if claimed and (not check_empty or repo.is_empty(layout.version_prefix(model, candidate))):
                return candidate
            # claimed but occupied: the marker stays, so the number is simply never used
        candidate = max(candidate, highest_allocated(repo, model)) + 1
        check_empty = False  # a fresh listing: nothing above it exists
    raise errors.refused(
        f"version allocation for {model}: {MAX_ALLOCATION_ATTEMPTS} collisions in a row; allowed: retry when "
        "concurrent publishers finish"
    )


def discard_files(repo: Bucket, model: str, version: int, cause: errors.SyncError | None = None) -> str:
    """After a refusal between allocating `version` and writing its manifest (push: a file changed
    during the upload; promote: a copy that failed): delete the objects under
    repository/<model>/<version>/, which nothing references (no manifest, no pin), and say so, for
    the end of the refusal's one line (errors.with_note). The allocation marker stays: it is an
    audit record (no role may delete under audit/), and a version number is never reused. A role
    that may not delete (the CI publisher and promoter, by design) leaves the files to `prune`,
    which removes versions without a manifest once they are older than its --stale-hours; so does a
    `cause` every request of the run would meet (endpoint, credentials): no request is tried."""
    prefix = layout.version_prefix(model, version)
    kept = f"version {version} stays allocated, never reused"
    try:
        if cause is not None and cause.run_wide:
            raise cause
        objects, _ = repo.list(prefix)
        if objects:
            repo.delete([o["Key"] for o in objects])
    except errors.SyncError as e:
        why = "" if e is cause else f" ({e})"
        return (
            f"its files in {repo.uri(prefix)} could not be deleted{why}; `model-sync prune {model} --env "
            f"{repo.env.name}` removes them ({kept})"
        )
    return f"its {len(objects)} file(s) in {repo.uri(prefix)} were deleted ({kept})"


def read_history(repo: Bucket, model: str) -> PinHistory:
    objects, _ = repo.list(layout.pins_prefix(model))
    keys = sorted(o["Key"] for o in objects if o["Key"].endswith(".json"))
    if not keys:
        return PinHistory(None, [])
    data = repo.get(keys[-1])
    if data is None:
        return PinHistory(None, [])
    try:
        doc = codec.read(data, "model-sync.pin/v1", model=model)
    except codec.RecordError as e:
        raise errors.refused(f"{repo.uri(keys[-1])}: {e}") from None
    return PinHistory(doc, list(doc["stack"]))


def rollback_target(
    repo: Bucket, model: str, pin: Pin, history: PinHistory, manifests: set[int] | None = None
) -> tuple[int | None, int]:
    """(version, depth): what a default rollback pins, the newest entry of the pin stack that still
    has its manifest (prune may have removed older ones), and how many entries it pops; (None, 0)
    when there is none, or when the history's latest record is not the current pin."""
    if not history.latest or history.latest["version"] != pin.version:
        return None, 0
    existing = set(list_manifests(repo, model)) if manifests is None else manifests
    for depth, version in enumerate(reversed(history.stack), start=1):
        if version in existing:
            return version, depth
    return None, 0


@dataclass(frozen=True)
class Flip:
    record: dict[str, Any]  # the pin-history record written
    etag: str | None  # of the new config.pbtxt (local pin cache key)


def pin_moved(repo: Bucket, model: str, version: int, action: str, current: Pin) -> errors.SyncError:
    """Exit 4 after a refused flip: the pin is no longer the one this run read."""
    now = read_pin(repo, model)
    moved = f"pin: {model} in {repo.env.name} moved from {current.version} to {now.version} while this {action} ran"
    if action == "rollback":
        return errors.refused(f"{moved}; allowed: re-run rollback (nothing was changed)")
    return errors.refused(
        f"{moved}; allowed: re-run {action} (version {version} is published but NOT pinned; `model-sync rollback "
        f"{model} --env {repo.env.name} --model-version {version}` pins it)"
    )


def flip_pin(repo: Bucket, model: str, version: int, config_text: str, action: str, by: str, current: Pin, *,
             pop: int = 0,
             warn: Callable[[str], None] | None = None) -> Flip:  # fmt: skip
    """Rewrite repository/<model>/config.pbtxt (THE commit point), then append the pin history
    and rewrite the model's pin-index entry (manifests/_pins/<model>.json: what agents list).

    The rewrite is conditional on the pin `current` (If-Match: its ETag; If-None-Match: * when
    there was none): if another push, promote or rollback flipped it since it was read, nothing
    is written and pin_moved() refuses (exit 4), so a later allocation or a rollback is never
    silently undone and the history stays a faithful chain. Servers that ignore If-Match (rclone)
    get a re-read just before the write instead: most but not all races are caught.
    The history stack gets the previous pin pushed (push, promote, rollback --model-version) or its top
    `pop` entries popped (default rollback: the target and any pruned entries above it)."""

    from model_sync.triton_model import model_config  # protobuf's text_format: loaded only when a config is parsed

    cfg = model_config.parse(config_text, f"pin text for {model} v{version}")
    if model_config.pinned_version(cfg) != version:
        raise errors.SyncError(
            errors.UNEXPECTED, f"pin text for {model}: pins {model_config.pinned_version(cfg)}; allowed: {version}"
        )
    # A history whose latest record is not the current pin (pin edited by hand) is not trusted;
    # with no current pin there is nothing to stack (and nothing to read).
    history = read_history(repo, model) if current.version is not None else PinHistory(None, [])
    stack = history.stack if history.latest and history.latest["version"] == current.version else []
    if pop:
        stack = stack[:-pop]
    elif current.version is not None and current.version != version:
        stack = [*stack, current.version][-codec.STACK_MAX :]
    if not repo.if_match_enforced() and read_pin(repo, model).etag != current.etag:
        raise pin_moved(repo, model, version, action, current)
    written, etag = repo.put_if(layout.config_key(model), config_text.encode(), current.etag, "text/plain")
    if not written:
        raise pin_moved(repo, model, version, action, current)
    record = {
        "schema": "model-sync.pin/v1",
        "model": model,
        "version": version,
        "previous": current.version,
        "action": action,
        "stack": stack,
        "by": by,
        "at": codec.now(),
    }
    repo.put_new(layout.pin_record_key(model, codec.stamp(), version), codec.dumps(record))
    try:
        repo.put(layout.pin_index_key(model), codec.pin_index(model, version))
    except errors.SyncError as e:  # the flip is committed: agents still see it at their next full resync
        if warn is not None:
            warn(
                f"pin index: {repo.uri(layout.pin_index_key(model))} not updated ({e}); agents pick the new pin "
                "up at their next full resync (--full-resync)"
            )
    return Flip(record, etag)
