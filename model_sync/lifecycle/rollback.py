"""`rollback`: flip a model's pin back; nothing is deleted (docs/model-sync.md).

Without a version, the previous pin is taken from the pin history (audit/pins/<model>/): each
flip records the stack of earlier pins, so repeated rollbacks walk back through them (3 -> 2 ->
1), not back and forth; entries whose version was pruned are skipped. The target version must be
one every replica serves (model_sync.versions.pinnable: its manifest lists every file its backend
needs, and every file it lists is present; else exit 4 before anything is written). The flip is
conditional on the pin read (exit 4 if another writer moved it). A running gray release of the
model is aborted first: after a rollback every replica follows the pin."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from model_sync import errors, ui
from model_sync.canary import ending
from model_sync.contract import layout
from model_sync.s3.bucket import Bucket, who
from model_sync.ui import Console
from model_sync.versions import catalog, pinnable

if TYPE_CHECKING:
    from model_sync.environments import Environment
    from model_sync.observation.replicas import Wait


def command(
    model: str,
    to: int | None,
    resolve: Callable[[], Environment],
    *,
    dry_run: bool,
    quiet: bool,
    confirm: ui.Confirm,
    wait: Wait,
) -> dict[str, Any]:
    """`model-sync rollback`: pin `to` (default: the newest existing entry of the pin-history
    stack, popped) after `confirm(env, question)`, then `wait`; returns the JSON document."""

    env = resolve()
    repo = Bucket(env)
    console = Console(quiet)
    pin = catalog.read_pin(repo, model)
    if pin.text is None:
        raise errors.not_found(
            f"model: {model!r} has no pin in {env.name} ({repo.uri(layout.config_key(model))}); allowed: a "
            "published model"
        )
    target, depth = to, 0
    if target is None:
        history = catalog.read_history(repo, model)
        target, depth = catalog.rollback_target(repo, model, pin, history)
        if target is None:
            pruned = (
                f" (earlier pins {history.stack} no longer exist: pruned)"
                if history.stack and history.latest and history.latest["version"] == pin.version
                else ""
            )
            raise errors.refused(
                f"rollback {model}: no previous pin recorded for version {pin.version}{pruned}; allowed: "
                "--model-version N, an existing version (see `model-sync status`)"
            )
    if target == pin.version:
        raise errors.refused(
            f"--model-version: {target} is already pinned for {model} in {env.name}; allowed: another version"
        )
    doc = pinnable.check(repo, model, target, "rollback")  # before any write: what no replica would serve
    out: dict[str, Any] = {
        "env": env.name,
        "model": model,
        "version": target,
        "previous": pin.version,
        "dry_run": dry_run,
    }
    if dry_run:
        console.line(f"(dryrun) pin: {model} version {target} ({repo.uri(layout.config_key(model))})")
        return out
    confirm(env, f"Pin {model} version {target} in {env.name} (now {pin.version})?")
    by = who(env, repo.session)
    catalog.flip_pin(repo, model, target, doc["config_pbtxt"], "rollback", by, pin, pop=depth, warn=console.warn)
    # Then every replica follows the pin: a running gray release ends (its run notices, exit 4).
    ended = ending.end_running(repo, model, by, f"rollback to version {target}")
    if ended is not None:
        console.line(f"aborted: canary {ended['id']} of {model} version {ended['canary_version']} (rollback)")
    console.line(f"pinned: {model} version {target} (was {pin.version}) ({repo.uri(layout.config_key(model))})")
    out["served"] = wait(repo, model, target, console)
    return out
