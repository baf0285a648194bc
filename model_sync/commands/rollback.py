"""`model-sync rollback NAME --env E [--model-version N] [--dry-run]`: flip the pin back. Nothing is deleted.

Without --model-version, the previous pin is taken from the pin history (audit/pins/<model>/): each flip
records the stack of earlier pins, so repeated rollbacks walk back through them (3 -> 2 -> 1),
not back and forth; entries whose version was pruned are skipped. The target version must have a manifest and all its files present."""

from __future__ import annotations

import argparse
from typing import Any

from model_sync import errors, layout
from model_sync.commands import _common

NAME = "rollback"


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(NAME, help="pin a previous version again (default: the previous pin)", description=__doc__)
    p.add_argument("model", metavar="NAME")
    _common.add_env_options(p, image=False)
    p.add_argument("--model-version", dest="to", type=int, default=None, metavar="N",
                   help="model version to pin (default: the previous pin from the pin history)")
    p.add_argument("--dry-run", action="store_true", help="print the pin flip; write nothing")
    _common.add_yes(p)
    _common.add_wait(p)
    _common.add_output(p)
    _common.add_quiet(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from model_sync import repository
    from model_sync.s3 import Repo, who
    from model_sync.ui import Console

    try:
        layout.check_model_name(args.model)
        if args.to is not None:
            layout.check_version(args.to)
    except layout.LayoutError as e:
        raise errors.usage(str(e)) from None
    env = _common.resolve(args)
    repo = Repo(env)
    console = Console(_common.quiet(args))
    pin = repository.read_pin(repo, args.model)
    if pin.text is None:
        raise errors.not_found(f"model: {args.model!r} has no pin in {env.name} ({repo.uri(layout.config_key(args.model))}); allowed: a published model")
    target, depth = args.to, 0
    if target is None:
        history = repository.read_history(repo, args.model)
        target, depth = repository.rollback_target(repo, args.model, pin, history)
        if target is None:
            pruned = f" (earlier pins {history.stack} no longer exist: pruned)" if history.stack and history.latest and history.latest["version"] == pin.version else ""
            raise errors.refused(f"rollback {args.model}: no previous pin recorded for version {pin.version}{pruned}; allowed: --model-version N, an existing version (see `model-sync status`)")
    if target == pin.version:
        raise errors.refused(f"--model-version: {target} is already pinned for {args.model} in {env.name}; allowed: another version")
    doc = repository.read_manifest(repo, args.model, target)
    assert doc is not None
    missing = repository.is_complete(repo, args.model, target, doc)
    if missing:
        raise errors.refused(f"version: {args.model} {target} is incomplete ({missing}); allowed: a complete version (see `model-sync status`)")
    out: dict[str, Any] = {"env": env.name, "model": args.model, "version": target, "previous": pin.version, "dry_run": args.dry_run}
    if args.dry_run:
        console.line(f"(dryrun) pin: {args.model} version {target} ({repo.uri(layout.config_key(args.model))})")
        _common.emit(args, out)
        return errors.OK
    _common.confirm(args, env, f"Pin {args.model} version {target} in {env.name} (now {pin.version})?")
    repository.flip_pin(repo, args.model, target, doc["config_pbtxt"], "rollback", who(env, repo.session), pin, pop=depth, warn=console.warn)
    console.line(f"pinned: {args.model} version {target} (was {pin.version}) ({repo.uri(layout.config_key(args.model))})")
    out["served"] = _common.wait(args, repo, args.model, target, console)
    _common.emit(args, out)
    return errors.OK
