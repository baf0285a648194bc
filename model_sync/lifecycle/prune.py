"""`prune`: delete old unpinned versions of a model (docs/model-sync.md, `model-sync prune --help`).

Kept: the K highest complete version numbers, the pinned version, the previous pin and the
version a default `rollback` would return to. Debris older than the stale age is removed:
incomplete versions (files without a manifest) and unfinished multipart uploads. Allocation
markers and the audit trail stay, so a version number is never reused. Needs a role that may
delete under repository/ and manifests/; a denied delete exits 5 saying so."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from model_sync import errors, ui
from model_sync.contract import layout
from model_sync.records import canary_record
from model_sync.s3.bucket import Bucket, modified_of
from model_sync.s3.failures import Kind
from model_sync.ui import Console
from model_sync.versions import catalog

if TYPE_CHECKING:
    from model_sync.environments import Environment


def plan(
    versions: list[int], keep: int, protected: set[int], complete: set[int] | None = None, stale: set[int] | None = None
) -> list[int]:
    """The versions to delete: all but the `keep` highest COMPLETE ones and the protected ones.
    An incomplete version (no manifest: an interrupted push, a failed promote) never counts
    among the kept; it is deleted once `stale` (older than the safe age), else left alone (a push
    may still be writing it). Without `complete`, every version counts as complete."""
    complete = set(versions) if complete is None else complete
    newest = set(sorted(v for v in versions if v in complete)[-keep:]) if keep else set()
    return sorted(
        v for v in versions if v not in newest and v not in protected and (v in complete or v in (stale or set()))
    )


def delete(repo: Any, model: str, keys: list[str]) -> None:
    """repo.delete(), with a denied delete explained (exit 5): the role, not the credentials, is wrong."""

    try:
        repo.delete(keys)
    except errors.SyncError as e:
        if e.s3_kind is Kind.DENIED:
            raise errors.s3(
                f"prune {model}: s3:DeleteObject denied on {repo.uri(keys[0])}; allowed: run prune with an "
                "operator role that may delete "
                "under repository/ and manifests/ (never audit/); CI publisher and promoter roles cannot delete, "
                "by design"
            ) from None
        raise


def command(
    model: str,
    resolve: Callable[[], Environment],
    *,
    keep: int,
    stale_hours: float,
    dry_run: bool,
    quiet: bool,
    confirm: ui.Confirm,
) -> dict[str, Any]:
    """`model-sync prune`: delete what plan() dooms and abort stale unfinished uploads, after
    `confirm(env, question)`; returns the run's JSON document."""

    if keep < 1:
        raise errors.usage(f"--keep: {keep}; allowed: an integer >= 1")
    if stale_hours < 0:
        raise errors.usage(f"--stale-hours: {stale_hours:g}; allowed: hours >= 0")
    env = resolve()
    repo = Bucket(env)
    console = Console(quiet)
    pin = catalog.read_pin(repo, model)
    history = catalog.read_history(repo, model)
    protected = {v for v in (pin.version,) if v is not None}
    if history.latest:
        protected |= set(history.stack[-1:]) | ({history.latest["previous"]} if history.latest["previous"] else set())
    running = canary_record.read(repo, model)
    if running.running and running.doc is not None:  # a gray release's canary and stable versions are served
        protected |= {running.doc["canary_version"], running.doc["stable_version"]}
    target, _ = catalog.rollback_target(repo, model, pin, history)
    if target is not None:  # what `rollback` (and `status` PREVIOUS) would return to
        protected.add(target)
    if pin.text is not None and pin.version is None:
        raise errors.refused(
            f"prune {model}: its config.pbtxt pins no single version; allowed: a model pinned by model-sync"
        )
    manifests = set(catalog.list_manifests(repo, model))
    versions = sorted(set(catalog.list_versions(repo, model)) | manifests)
    cutoff = time.time() - stale_hours * 3600
    listed = {v: repo.list(layout.version_prefix(model, v))[0] for v in versions if v not in manifests}
    stale = {v for v, objects in listed.items() if all(_older(o, cutoff) for o in objects)}
    doomed = plan(versions, keep, protected, manifests, stale)
    uploads = [u for u in repo.list_uploads(layout.model_prefix(model)) if _older(u, cutoff, "Initiated")]
    if doomed or uploads:
        confirm(
            env,
            f"Delete {model} version(s) {', '.join(map(str, doomed)) or 'none'} and {len(uploads)} unfinished "
            f"upload(s) from {env.name}?",
        )
    for v in doomed:
        objects, _ = repo.list(layout.version_prefix(model, v))
        keys = [o["Key"] for o in objects]
        if repo.get(layout.manifest_key(model, v)) is not None:
            keys.append(layout.manifest_key(model, v))
        for k in keys:
            console.line(f"{'(dryrun) ' if dry_run else ''}delete: {repo.uri(k)}")
        if not dry_run:
            # Version files first, manifest last: a half-pruned version has no manifest-less files a reader trusts.
            delete(repo, model, [k for k in keys if not k.startswith(layout.MANIFESTS_PREFIX)])
            delete(repo, model, [k for k in keys if k.startswith(layout.MANIFESTS_PREFIX)])
    for u in uploads:  # parts of interrupted multipart uploads: stored (and billed) until aborted
        console.line(f"{'(dryrun) ' if dry_run else ''}abort upload: {repo.uri(u['Key'])} (started {u['Initiated']})")
        if not dry_run:
            repo.abort_upload(u["Key"], u["UploadId"])
    young = sorted(set(listed) - stale)
    if young:
        console.line(
            f"kept incomplete version(s) {young}: younger than --stale-hours {stale_hours:g} (a push may still "
            "be writing them)"
        )
    if not doomed and not uploads:
        console.line(
            f"nothing to prune: {model} has {len(versions)} versions, keeping {keep} + pinned {sorted(protected)}"
        )
    return {"env": env.name, "model": model, "deleted": doomed, "aborted_uploads": [u["Key"] for u in uploads],
            "kept_incomplete": young,
            "protected": sorted(protected), "dry_run": dry_run}  # fmt: skip


def _older(obj: dict[str, Any], cutoff: float, field: str = "LastModified") -> bool:
    """Older than `cutoff` (epoch seconds); an unreadable time is never old (nothing is deleted on a guess)."""

    when = modified_of(obj, field)
    return when is not None and when < cutoff
