"""`model-sync prune NAME --env E --keep K [--dry-run]`: delete old unpinned versions.

Kept: the K highest complete version numbers, the pinned version, the previous pin and the
version a default `rollback` would return to (the newest pin-stack entry that still exists).
Debris is removed once older than --stale-hours (default 24): incomplete versions (files
without a manifest: an interrupted push, a failed promote), which never count among the K, and
unfinished multipart uploads under repository/<model>/ (aborted: S3 frees their parts). Deleted for every other
version: repository/<model>/<N>/ and manifests/<model>/<N>.json,
including debris of interrupted pushes. Allocation markers and the audit trail stay, so a
version number is never reused.

Permissions: prune needs s3:DeleteObject, which no CI role has (CI can never delete). Run it
with an operator role that may delete under repository/ and manifests/ (never audit/); a denied
delete exits 5 saying so."""

from __future__ import annotations

import argparse
from typing import Any

from model_sync import errors
from model_sync.commands import _common

NAME = "prune"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="delete old unpinned versions beyond the last K", description=__doc__
    )
    p.add_argument("model", metavar="NAME")
    _common.add_env_options(p, image=False)
    p.add_argument(
        "--keep",
        type=int,
        required=True,
        metavar="K",
        help="how many of the newest versions to keep (>= 1), besides the pinned and previous pin",
    )
    p.add_argument(
        "--stale-hours",
        type=float,
        default=24.0,
        metavar="H",
        help=(
            "an incomplete version (no manifest) or an unfinished multipart upload older than H hours is debris and "
            "removed (default 24; younger ones may be a push in progress)"
        ),
    )
    p.add_argument("--dry-run", action="store_true", help="print `(dryrun) delete: s3://...` lines; delete nothing")
    _common.add_yes(p)
    _common.add_output(p)
    _common.add_quiet(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from model_sync.lifecycle import prune

    _common.check_names(args.model)
    doc = prune.command(args.model, lambda: _common.resolve(args), keep=args.keep, stale_hours=args.stale_hours,
                      dry_run=args.dry_run, quiet=_common.quiet(args),
                      confirm=lambda env, question: _common.confirm(args, env, question))  # fmt: skip
    _common.emit(args, doc)
    return errors.OK
