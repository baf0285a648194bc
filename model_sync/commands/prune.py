"""`model-sync prune NAME --env E --keep K [--dry-run]`: delete old unpinned versions.

Kept: the K highest complete version numbers, the pinned version, the previous pin and the
version a default `rollback` would return to (the newest pin-stack entry that still exists).
Debris is removed once older than --stale-hours (default 24): incomplete versions (files
without a manifest: an interrupted push, a failed promote), which never count among the K, and
unfinished multipart uploads under repository/<model>/ (aborted: S3 frees their parts). Deleted for every other version: repository/<model>/<N>/ and manifests/<model>/<N>.json,
including debris of interrupted pushes. Allocation markers and the audit trail stay, so a
version number is never reused.

Permissions: prune needs s3:DeleteObject, which no CI role has (CI can never delete). Run it
with an operator role that may delete under repository/ and manifests/ (never audit/); a denied
delete exits 5 saying so."""

from __future__ import annotations

import argparse
import time
from typing import Any

from model_sync import errors, layout
from model_sync.commands import _common

NAME = "prune"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(NAME, help="delete old unpinned versions beyond the last K", description=__doc__)
    p.add_argument("model", metavar="NAME")
    _common.add_env_options(p, image=False)
    p.add_argument("--keep", type=int, required=True, metavar="K", help="how many of the newest versions to keep (>= 1), besides the pinned and previous pin")
    p.add_argument("--stale-hours", type=float, default=24.0, metavar="H",
                   help="an incomplete version (no manifest) or an unfinished multipart upload older than H hours is debris and removed (default 24; younger ones may be a push in progress)")
    p.add_argument("--dry-run", action="store_true", help="print `(dryrun) delete: s3://...` lines; delete nothing")
    _common.add_yes(p)
    _common.add_output(p)
    _common.add_quiet(p)
    p.set_defaults(func=run)
    return p


def plan(versions: list[int], keep: int, protected: set[int], complete: set[int] | None = None, stale: set[int] | None = None) -> list[int]:
    """The versions to delete: all but the `keep` highest COMPLETE ones and the protected ones.
    An incomplete version (no manifest: an interrupted push, a failed promote) never counts
    among the kept; it is deleted once `stale` (older than the safe age), else left alone (a push
    may still be writing it). Without `complete`, every version counts as complete."""
    complete = set(versions) if complete is None else complete
    newest = set(sorted(v for v in versions if v in complete)[-keep:]) if keep else set()
    return sorted(v for v in versions if v not in newest and v not in protected and (v in complete or v in (stale or set())))


def delete(repo: Any, model: str, keys: list[str]) -> None:
    """repo.delete(), with a denied delete explained (exit 5): the role, not the credentials, is wrong."""
    from model_sync.s3errors import Kind

    try:
        repo.delete(keys)
    except errors.SyncError as e:
        if e.s3_kind is Kind.DENIED:
            raise errors.s3(
                f"prune {model}: s3:DeleteObject denied on {repo.uri(keys[0])}; allowed: run prune with an operator role that may delete "
                "under repository/ and manifests/ (never audit/); CI publisher and promoter roles cannot delete, by design"
            ) from None
        raise


def run(args: argparse.Namespace) -> int:
    from model_sync import repository
    from model_sync.s3 import Repo
    from model_sync.ui import Console

    try:
        layout.check_model_name(args.model)
    except layout.LayoutError as e:
        raise errors.usage(str(e)) from None
    if args.keep < 1:
        raise errors.usage(f"--keep: {args.keep}; allowed: an integer >= 1")
    if args.stale_hours < 0:
        raise errors.usage(f"--stale-hours: {args.stale_hours:g}; allowed: hours >= 0")
    env = _common.resolve(args)
    repo = Repo(env)
    console = Console(_common.quiet(args))
    pin = repository.read_pin(repo, args.model)
    history = repository.read_history(repo, args.model)
    protected = {v for v in (pin.version,) if v is not None}
    if history.latest:
        protected |= set(history.stack[-1:]) | ({history.latest["previous"]} if history.latest["previous"] else set())
    target, _ = repository.rollback_target(repo, args.model, pin, history)
    if target is not None:  # what `rollback` (and `status` PREVIOUS) would return to
        protected.add(target)
    if pin.text is not None and pin.version is None:
        raise errors.refused(f"prune {args.model}: its config.pbtxt pins no single version; allowed: a model pinned by model-sync")
    manifests = set(repository.list_manifests(repo, args.model))
    versions = sorted(set(repository.list_versions(repo, args.model)) | manifests)
    cutoff = time.time() - args.stale_hours * 3600
    listed = {v: repo.list(layout.version_prefix(args.model, v))[0] for v in versions if v not in manifests}
    stale = {v for v, objects in listed.items() if all(_older(o, cutoff) for o in objects)}
    doomed = plan(versions, args.keep, protected, manifests, stale)
    uploads = [u for u in repo.list_uploads(layout.model_prefix(args.model)) if _older(u, cutoff, "Initiated")]
    if doomed or uploads:
        _common.confirm(args, env, f"Delete {args.model} version(s) {', '.join(map(str, doomed)) or 'none'} and {len(uploads)} unfinished upload(s) from {env.name}?")
    for v in doomed:
        objects, _ = repo.list(layout.version_prefix(args.model, v))
        keys = [o["Key"] for o in objects]
        if repo.get(layout.manifest_key(args.model, v)) is not None:
            keys.append(layout.manifest_key(args.model, v))
        for k in keys:
            console.line(f"{'(dryrun) ' if args.dry_run else ''}delete: {repo.uri(k)}")
        if not args.dry_run:
            # Version files first, manifest last: a half-pruned version has no manifest-less files a reader trusts.
            delete(repo, args.model, [k for k in keys if not k.startswith(layout.MANIFESTS_PREFIX)])
            delete(repo, args.model, [k for k in keys if k.startswith(layout.MANIFESTS_PREFIX)])
    for u in uploads:  # parts of interrupted multipart uploads: stored (and billed) until aborted
        console.line(f"{'(dryrun) ' if args.dry_run else ''}abort upload: {repo.uri(u['Key'])} (started {u['Initiated']})")
        if not args.dry_run:
            repo.abort_upload(u["Key"], u["UploadId"])
    young = sorted(set(listed) - stale)
    if young:
        console.line(f"kept incomplete version(s) {young}: younger than --stale-hours {args.stale_hours:g} (a push may still be writing them)")
    if not doomed and not uploads:
        console.line(f"nothing to prune: {args.model} has {len(versions)} versions, keeping {args.keep} + pinned {sorted(protected)}")
    _common.emit(args, {"env": env.name, "model": args.model, "deleted": doomed, "aborted_uploads": [u["Key"] for u in uploads], "kept_incomplete": young,
                        "protected": sorted(protected), "dry_run": args.dry_run})  # fmt: skip
    return errors.OK


def _older(obj: dict[str, Any], cutoff: float, field: str = "LastModified") -> bool:
    """Older than `cutoff` (epoch seconds); an unreadable time is never old (nothing is deleted on a guess)."""
    from model_sync.s3 import modified_of

    when = modified_of(obj, field)
    return when is not None and when < cutoff
