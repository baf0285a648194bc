"""The canary record (manifests/_canary/<model>.json, "model-sync.canary/v1", model_sync.records.schemas)
read strictly and written conditionally, with the same discipline as the pin: created with
If-None-Match: * (or If-Match over an ended record), every rewrite If-Match on the ETag read, so
two runs (or a run and an `--abort`) never silently overwrite each other. The final record is
also written once, create-only, to audit/canaries/<model>/<id>.json. The record is never
deleted: an ended one (promoted, aborted) is what `status` shows of the last gray release."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from model_sync import errors
from model_sync.contract import layout
from model_sync.records import codec
from model_sync.records.schemas import CANARY
from model_sync.s3.bucket import Bucket

__all__ = [
    "ABORTED", "CANARY", "PROMOTED", "RUNNING", "Stored", "archive", "effective_percent", "new", "new_id", "new_step", "read",
    "serving_canary", "write",
]  # fmt: skip

RUNNING, PROMOTED, ABORTED = "running", "promoted", "aborted"


def new_id() -> str:
    return f"{codec.stamp()}-{secrets.token_hex(4)}"


def new(model: str, canary_id: str, deployment: str, stable: int, version: int, policy: dict[str, Any], by: str,
        now: float, deadline_seconds: int) -> dict[str, Any]:  # fmt: skip
    """A running record with no step yet: `version` against `stable` on `deployment`, started at
    `now` (epoch seconds) by `by`, past its deadline `deadline_seconds` later."""
    return {
        "schema": CANARY, "model": model, "id": canary_id, "state": RUNNING, "deployment": deployment,
        "stable_version": stable, "canary_version": version, "replicas": [], "share_percent": 0, "steps": [],
        "policy": policy, "started_by": by, "started_at": codec.format_time(now),
        "deadline_at": codec.format_time(now + deadline_seconds), "updated_at": codec.format_time(now),
        "decision": None,
    }  # fmt: skip


def effective_percent(chosen: int, fleet: int) -> float:
    """The share of the traffic `chosen` of `fleet` replicas take, in percent (2 decimals)."""
    return round(100 * chosen / max(1, fleet), 2)


def new_step(share: int, replicas: int, fleet: int, started_at: str) -> dict[str, Any]:
    """A step at `share` percent on `replicas` of `fleet` live replicas, started at `started_at`,
    its replicas listed now (listed_at: started_at), not judged yet."""
    return {
        "share_percent": share, "replicas": replicas, "fleet": fleet,
        "effective_percent": effective_percent(replicas, fleet), "started_at": started_at,
        "listed_at": started_at, "restarts": 0, "window_from": None, "ended_at": None, "verdict": None,
        "reason": None, "figures": None, "observed_percent": None,
    }  # fmt: skip


@dataclass
class Stored:
    """A canary record as read (doc None: none yet) and the ETag its next write is conditional on."""

    doc: dict[str, Any] | None
    etag: str | None

    @property
    def running(self) -> bool:
        return self.doc is not None and self.doc["state"] == RUNNING


def read(repo: Bucket, model: str) -> Stored:
    found = repo.get_with_etag(layout.canary_key(model))
    if found is None:
        return Stored(None, None)
    data, etag = found
    try:
        return Stored(codec.read(data, CANARY, model=model), etag)
    except codec.RecordError as e:
        raise errors.refused(
            f"canary record {repo.uri(layout.canary_key(model))}: {e}; allowed: a model-sync.canary/v1 record "
            "(`model-sync canary --abort` rewrites it)"
        ) from None


def write(repo: Bucket, stored: Stored, doc: dict[str, Any]) -> Stored:
    """Rewrite the record conditionally on `stored` (If-Match its ETag; If-None-Match: * when
    there was none). Exit 4 when another writer changed it since it was read."""
    doc = {**doc, "updated_at": codec.now()}
    key = layout.canary_key(doc["model"])
    if not repo.if_match_enforced() and read(repo, doc["model"]).etag != stored.etag:
        raise moved(repo, doc["model"])
    written, etag = repo.put_if(key, codec.dumps(doc), stored.etag)
    if not written:
        raise moved(repo, doc["model"])
    return Stored(doc, etag)


def moved(repo: Bucket, model: str) -> errors.SyncError:
    now = read(repo, model).doc
    state = "gone" if now is None else f"{now['state']} (canary {now['id']}, version {now['canary_version']})"
    return errors.refused(
        f"canary record: {repo.uri(layout.canary_key(model))} changed while this run held it, now {state}; "
        "allowed: one gray release writer at a time (`model-sync status` shows it)"
    )


def archive(repo: Bucket, doc: dict[str, Any]) -> str:
    """The final record, create-only, as the gray release's audit record; its key."""
    key = layout.canary_audit_key(doc["model"], doc["id"])
    repo.put_new(key, codec.dumps(doc))
    return key


def serving_canary(doc: dict[str, Any] | None, deployment: str, replica: str) -> int | None:
    """The version this replica serves for the record's model: the canary version when the record
    is running and lists it, else None (the stable pin). What every agent decides (model_sync.agent)."""
    if doc is None or doc["state"] != RUNNING or doc["deployment"] != deployment or replica not in doc["replicas"]:
        return None
    return int(doc["canary_version"])
