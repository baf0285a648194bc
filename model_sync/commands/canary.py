"""`model-sync canary NAME --env ENV --model-version N [--dry-run]`: a gray release of a published,
unpinned version, unattended. Its policy's steps put it on a growing share of the replicas serving
NAME (their agents follow the canary; the others keep the stable pin), each step's canary and
stable figures (error ratio, p99, queue time from Triton's metrics) are compared, and it ends
promoted (the stable pin flipped, exit 0) or aborted (the replicas back on stable, exit 6). A
re-run resumes an interrupted one (exit 8); `--abort` ends it. `promote --to prod` runs it by
default (docs/model-sync.md#canary, docs/architecture.md#gray-release)."""

from __future__ import annotations

import argparse
from typing import Any

from model_sync import errors
from model_sync.commands import _common

NAME = "canary"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="release a version to a growing share of the replicas, then promote or abort it",
        description=__doc__,
    )  # fmt: skip
    p.add_argument("model", metavar="NAME")
    _common.add_env_options(p, image=False)
    p.add_argument("--model-version", dest="version", type=int, default=None, metavar="N",
                   help="the published version to release (not pinned yet)")  # fmt: skip
    p.add_argument("--abort", action="store_true", help="end the running gray release of NAME: back to stable")
    p.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    _common.add_output(p)
    _common.add_quiet(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from model_sync.canary import launch

    _common.check_names(args.model, version=args.version)
    doc = launch.command(args.model, args.version, lambda: _common.resolve(args), abort=args.abort,
                                        dry_run_only=args.dry_run, quiet=_common.quiet(args))  # fmt: skip
    _common.emit(args, doc)
    return errors.OK
