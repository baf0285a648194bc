"""What the serving replicas report: their status records (status/<deployment>/<replica>.json,
written by the repository agents, read with model_sync.records.codec's strict reader), what each
serves (`served`, shown by `status`), and --wait's poll until every replica serves a version
READY (`wait_served`). Whether that passes as verification is model_sync.observation.verify's call."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from model_sync import errors
from model_sync.contract import layout
from model_sync.records import codec
from model_sync.records.codec import ReplicaState

if TYPE_CHECKING:
    from model_sync.s3.bucket import Bucket
    from model_sync.ui import Console

DEFAULT_DEPARTED = (
    300.0  # seconds = 10 x the agents' default 30 s heartbeat: a replica silent this long is gone (pod replaced)
)

Wait = Callable[
    ["Bucket", str, int, "Console"], Any
]  # --wait: (repo, model, version, console) -> what each replica serves (None without --wait)


def read_status_docs(repo: Any, deployments: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    objects, _ = repo.list(layout.STATUS_PREFIX)
    docs: dict[str, dict[str, Any]] = {}
    for obj in objects:
        rel = obj["Key"][len(layout.STATUS_PREFIX) :]
        if not rel.endswith(".json") or rel.count("/") != 1:
            continue
        deployment, replica = rel[:-5].split("/")
        if deployments and deployment not in deployments:
            continue
        data = repo.get(obj["Key"])
        if data is None:
            continue
        try:
            docs[f"{deployment}/{replica}"] = codec.read_replica_status(data)
        except codec.RecordError:
            docs[f"{deployment}/{replica}"] = {}  # unreadable: serves nothing (as a replica that reports no model)
    return docs


def reported_at(doc: dict[str, Any]) -> _dt.datetime | None:
    """When a replica status record was written (manifest.parse_time); None when it does not say."""
    value = doc.get("reported_at")
    try:
        return codec.parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def served(
    status_docs: dict[str, dict[str, Any]], model: str, now: _dt.datetime, departed: float = DEFAULT_DEPARTED
) -> dict[str, dict[str, Any]]:
    """'<deployment>/<replica>' -> {serving, state, error, failed (versions)} for every replica that reported `model`
    within `departed` seconds (what `status` shows: what is served, not what is pinned)."""
    out: dict[str, dict[str, Any]] = {}
    for key, doc in sorted(status_docs.items()):
        entry = (doc.get("models") or {}).get(model)
        reported = reported_at(doc)
        if not isinstance(entry, dict) or reported is None or (now - reported).total_seconds() > departed:
            continue
        serving = entry.get("serving") if isinstance(entry.get("serving"), list) else []
        error = errors.one_line(str(entry.get("error") or "")) or None
        failed = (
            sorted(int(v) for v in (entry.get("failed") or {}) if str(v).isdigit())
            if isinstance(entry.get("failed"), dict)
            else []
        )
        out[key] = {"serving": serving, "state": str(entry.get("state")), "error": error, "failed": failed}
    return out


def serves(replica: dict[str, Any], version: int | None) -> bool:
    """A replica (an entry of served()) serves exactly `version`, READY."""
    return replica["serving"] == [version] and replica["state"] == ReplicaState.READY


def wait_served(
    repo: Any, model: str, version: int, timeout: float, console: Any, interval: float = 2.0
) -> dict[str, str]:
    """Poll the replicas' status reports until every replica serving `model` (reported within
    DEFAULT_DEPARTED) serves `version` READY, at least one; '<deployment>/<replica>' -> 'READY'.
    A replica that reports the version failed ends the wait at once. Raises CHECK_FAILED (exit 6)
    naming the replicas that do not serve it."""
    import time

    deadline = time.monotonic() + timeout
    console.line(f"waiting: {model} version {version} on every replica (up to {timeout:.0f}s)")
    while True:
        replicas = served(read_status_docs(repo), model, _dt.datetime.now(_dt.UTC))
        states = {key: ReplicaState.READY.value if serves(r, version)
                  else f"serving {r['serving'] or 'nothing'} ({r['state']}: {r['error'] or 'not switched yet'})"
                  for key, r in replicas.items()}  # fmt: skip
        lagging = {k: v for k, v in states.items() if v != ReplicaState.READY}
        failed = {k: v for k, v in lagging.items() if version in replicas[k]["failed"]}
        if states and not lagging:
            console.line(f"served: {model} version {version} READY on {len(states)} replica(s)")
            return states
        if failed or time.monotonic() >= deadline:
            why = "; ".join(f"{k}: {v}" for k, v in (failed or lagging).items()) or f"no replica reports {model}"
            raise errors.SyncError(
                errors.CHECK_FAILED,
                f"wait: {model} version {version} is not served by every replica ({why}); allowed: replicas that "
                "load it (see `model-sync status`)",
            )
        time.sleep(interval)
