"""`model-sync rollback NAME --env E [--model-version N] [--dry-run]`: flip the pin back. Nothing is deleted.

Without --model-version, the previous pin is taken from the pin history (audit/pins/<model>/): each flip
records the stack of earlier pins, so repeated rollbacks walk back through them (3 -> 2 -> 1),
not back and forth; entries whose version was pruned are skipped. The target version must have a manifest and all
its files present."""

from __future__ import annotations

import argparse
from typing import Any

from model_sync import errors
from model_sync.commands import _common

NAME = "rollback"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME, help="pin a previous version again (default: the previous pin)", description=__doc__
    )
    p.add_argument("model", metavar="NAME")
    _common.add_env_options(p, image=False)
    p.add_argument(
        "--model-version",
        dest="to",
        type=int,
        default=None,
        metavar="N",
        help="model version to pin (default: the previous pin from the pin history)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the pin flip; write nothing")
    _common.add_yes(p)
    _common.add_wait(p)
    _common.add_output(p)
    _common.add_quiet(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from model_sync.lifecycle import rollback

    _common.check_names(args.model, version=args.to)
    doc = rollback.command(args.model, args.to, lambda: _common.resolve(args), dry_run=args.dry_run,
                            quiet=_common.quiet(args),
                            confirm=lambda env, question: _common.confirm(args, env, question),
                            wait=lambda repo, model, version, console: _common.wait(
                                args, repo, model, version, console))  # fmt: skip
    _common.emit(args, doc)
    return errors.OK
