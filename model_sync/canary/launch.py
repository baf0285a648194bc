"""`model-sync canary` and the gray release `promote` runs: the environment's policy and metrics,
one `GrayRelease` run (or an abort), and the JSON document (docs/model-sync.md#canary)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from model_sync import errors
from model_sync.canary import ending, metrics
from model_sync.canary.gray_release import GrayRelease
from model_sync.contract import layout
from model_sync.environments import Environment
from model_sync.records import canary_record
from model_sync.s3.bucket import Bucket, who
from model_sync.ui import Console
from model_sync.versions import catalog, pinnable


def summary(doc: dict[str, Any]) -> dict[str, Any]:
    """The JSON document's view of a canary record: what was decided, on which figures."""
    return {
        "id": doc["id"],
        "state": doc["state"],
        "stable_version": doc["stable_version"],
        "canary_version": doc["canary_version"],
        "steps": doc["steps"],
        "decision": doc["decision"],
        "record": layout.canary_audit_key(doc["model"], doc["id"]),
    }


def dry_run(repo: Bucket, model: str, version: int, console: Console) -> dict[str, Any]:
    """What a gray release would do, reading only."""
    policy, pin, running = (
        repo.env.canary_policy(model),
        catalog.read_pin(repo, model),
        canary_record.read(repo, model),
    )
    pinnable.check(repo, model, version, "canary")  # what the run refuses first (exit 3 or 4), read only
    metrics.for_environment(repo.env, model)  # exit 2 without metrics
    if running.running and running.doc is not None:
        console.line(f"(dryrun) resume: canary {running.doc['id']} of {model} version {running.doc['canary_version']}")
    console.line(
        f"(dryrun) canary: {model} version {version} against stable {pin.version} in {repo.env.name}, steps "
        f"{list(policy.steps)} % of the replicas, {policy.step_seconds}s each, deadline {policy.deadline_seconds}s; "
        f"then pin {version} ({repo.uri(layout.config_key(model))})"
    )
    return {"dry_run": True, "policy": policy.to_mapping(), "stable_version": pin.version}


def gray_release(
    repo: Bucket, model: str, version: int, console: Console, by: str, canary_id: str | None = None
) -> dict[str, Any]:
    """Run (or resume) the gray release of `version` to its decision; the summary. Exit 6 when it
    aborts, 8 when interrupted (the record keeps running: re-run or abort). It polls every 2 s, or
    four times a step when steps are shorter than 8 s."""
    policy = repo.env.canary_policy(model)
    poll = min(2.0, max(0.25, policy.step_seconds / 4))
    release = GrayRelease(repo, model, version, policy,
                                 metrics.for_environment(repo.env, model), console=console, by=by,
                                 canary_id=canary_id, poll=poll)  # fmt: skip
    try:
        return summary(release.run())
    except KeyboardInterrupt:
        raise errors.SyncError(
            errors.INTERRUPTED,
            f"canary: interrupted; {model} version {version} keeps its canary replicas in {repo.env.name}; allowed: "
            f"re-run to resume, or `model-sync canary {model} --env {repo.env.name} --abort`",
        ) from None


def command(
    model: str,
    version: int | None,
    resolve: Callable[[], Environment],
    *,
    abort: bool,
    dry_run_only: bool,
    quiet: bool,
) -> dict[str, Any]:
    """`model-sync canary`: run a gray release of `version`, or `abort` the running one."""

    env = resolve()
    repo, console = Bucket(env), Console(quiet)
    by = who(env, repo.session)
    if abort:
        if dry_run_only:
            stored = canary_record.read(repo, model)
            console.line(f"(dryrun) abort: {stored.doc['id'] if stored.running and stored.doc else 'nothing running'}")
            return {"model": model, "dry_run": True}
        ended = ending.abort(repo, model, by)
        if ended is None:
            console.line(f"no gray release of {model} is running in {env.name}: nothing to abort")
            return {"model": model, "canary": None}
        console.line(f"aborted: canary {ended['id']} of {model} version {ended['canary_version']}; replicas back on "
                     f"stable {ended['stable_version']}")  # fmt: skip
        return {"model": model, "canary": summary(ended)}
    if version is None:
        raise errors.usage("--model-version: missing; allowed: the version to release (or --abort)")
    if dry_run_only:
        return {"model": model, **dry_run(repo, model, version, console)}
    return {"model": model, "canary": gray_release(repo, model, version, console, by)}
