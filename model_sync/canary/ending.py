"""How a gray release ends from outside its run (docs/architecture.md#gray-release): an operator's
`canary --abort` (`abort`), a pin flipped under it by `rollback` or `promote --no-canary`, which
then end the release (`end_running`), and the lines a run ends with when it notices either at
its next poll (`pin_moved`, `record_moved`): what moved, who moved it, where the replicas went.
"""

from __future__ import annotations

from typing import Any

from model_sync import errors
from model_sync.records import canary_record, codec
from model_sync.records.canary_record import ABORTED, RUNNING, Stored
from model_sync.s3.bucket import Bucket
from model_sync.versions import catalog


def abort(repo: Bucket, model: str, by: str, reason: str = "aborted by an operator") -> dict[str, Any] | None:
    """End a running gray release of `model` (`model-sync canary --abort`): its replicas return to
    stable. None when none is running."""
    stored = canary_record.read(repo, model)
    if not stored.running or stored.doc is None:
        return None
    decision = {"outcome": ABORTED, "reason": reason, "by": by, "at": codec.now()}
    stored = canary_record.write(repo, stored, {**stored.doc, "state": ABORTED, "replicas": [], "decision": decision})
    assert stored.doc is not None
    canary_record.archive(repo, stored.doc)
    return stored.doc


# How many times end_running reads the running record and ends it: the run itself rewrites the record
# at its polls (a step's figures), and one such save landing between abort()'s read and its
# conditional write refuses the write while the record still runs (seen under make test's load:
# `promote --no-canary` failed, exit 4, with its pin already flipped). The run writes once per poll
# (seconds), the read-and-write takes milliseconds: a second attempt meets a save only by chance.
END_ATTEMPTS = 5


def end_running(repo: Bucket, model: str, by: str, reason: str) -> dict[str, Any] | None:
    """End a running gray release after the pin was flipped by someone else (`rollback`, `promote
    --no-canary`): abort() that tolerates the run ending it first (it notices the moved pin at its
    next poll), and reads and ends it again when the run saved a poll in between (END_ATTEMPTS).
    The record it ended, or None when none was running by the time it looked."""
    attempt = 1
    while True:
        try:
            return abort(repo, model, by, reason)
        except errors.SyncError as e:
            if e.code != errors.REFUSED:
                raise
            if not canary_record.read(repo, model).running:
                return None
            if attempt == END_ATTEMPTS:
                raise
            attempt += 1


def pin_moved(repo: Bucket, model: str, stable: int, pin: catalog.Pin) -> tuple[str, str]:
    """(the reason a release comparing with `stable` ends now that the pin is `pin`, naming who
    flipped it from the pin history; the pin as it is now, as words)."""
    latest = catalog.read_history(repo, model).latest or {}
    by = f" ({latest.get('action', 'a flip')} by {latest.get('by', 'someone')})" if latest else ""
    now = "no pin" if pin.version is None else f"version {pin.version}"
    return f"the stable pin moved from {stable} to {now} during the gray release{by}", now


def record_moved(repo: Bucket, model: str, version: int, mine: dict[str, Any], now: Stored) -> str:
    """The line a run of `version` (its record as it last wrote it: `mine`) ends with when the
    record is `now`, written by another writer: what that writer did, and what the replicas follow."""
    doc = now.doc
    if doc is None:
        what, where = "deleted it", "the stable pin"
    elif doc["id"] != mine["id"]:
        what, where = f"started canary {doc['id']} of version {doc['canary_version']}", "that release"
    elif doc["state"] == RUNNING:
        what, where = f"rewrote it (replicas {', '.join(doc['replicas']) or 'none'})", "that record"
    else:
        decided = doc["decision"] or {}
        what = f"ended it {doc['state']} ({decided.get('reason', 'no reason')}, by {decided.get('by', '?')})"
        where = "the stable pin"
    if where == "the stable pin":
        pinned = catalog.read_pin(repo, model).version
        where = f"the stable pin, now version {pinned}" if pinned is not None else where
    return (
        f"canary: {model} version {version}: another writer {what}; this run stops and writes nothing; the "
        f"replicas follow {where}; allowed: one gray release writer at a time (`model-sync status` shows it)"
    )
