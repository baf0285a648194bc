"""The canary record as the run of its gray release holds it (`OwnedRecord`): every write conditional
on the ETag the run holds, the changes of other writers that end the run (the record rewritten by
an abort or a rollback, the stable pin moved: exit 4), and the run's own end (the record ended and
archived to audit/canaries/)."""

from __future__ import annotations

from typing import Any, NoReturn

from model_sync import errors
from model_sync.canary import ending
from model_sync.contract import layout
from model_sync.records import canary_record, codec
from model_sync.records.canary_record import ABORTED, Stored
from model_sync.s3.bucket import Bucket
from model_sync.versions import catalog

EXIT_MOVED = errors.REFUSED  # the stable pin or the record moved under the run: another writer decided


class OwnedRecord:
    """The record of `model`'s gray release of `version`, written by `by`."""

    def __init__(self, repo: Bucket, model: str, version: int, by: str) -> None:
        self.repo, self.model, self.version, self.by = repo, model, version, by
        self.stored = Stored(None, None)

    @property
    def doc(self) -> dict[str, Any]:
        assert self.stored.doc is not None
        return self.stored.doc

    def load(self) -> Stored:
        self.stored = canary_record.read(self.repo, self.model)
        return self.stored

    def create(self, doc: dict[str, Any]) -> None:
        """Write a new release's record (create-only when none exists, else over the ended one)."""
        self.stored = canary_record.write(self.repo, self.stored, doc)

    def save(self, **changes: Any) -> None:
        """Rewrite the record (conditional on the ETag this run holds); another writer's change in
        between ends the run here (record_moved)."""
        try:
            self.stored = canary_record.write(self.repo, self.stored, {**self.doc, **changes})
        except errors.SyncError as e:
            if e.code != errors.REFUSED:
                raise
            self.record_moved(canary_record.read(self.repo, self.model))

    def end(self, outcome: str, reason: str) -> None:
        decision = {"outcome": outcome, "reason": errors.one_line(reason), "by": self.by, "at": codec.now()}
        self.save(state=outcome, replicas=[], decision=decision)
        canary_record.archive(self.repo, self.doc)

    def unmoved(self) -> catalog.Pin:
        """The stable pin, once the record and the pin are as this run left them; else the run
        ends here (exit 4): another writer moved one of them."""
        now = canary_record.read(self.repo, self.model)
        if now.etag != self.stored.etag:
            self.record_moved(now)
        pin = catalog.read_pin(self.repo, self.model)
        if pin.version != self.doc["stable_version"]:
            self.pin_moved(pin)
        return pin

    def pin_moved(self, pin: catalog.Pin) -> NoReturn:
        """The stable pin is no longer the one this release compares with: end it (its replicas
        follow the pin as it is now), exit 4."""
        reason, now = ending.pin_moved(self.repo, self.model, self.doc["stable_version"], pin)
        self.end(ABORTED, reason)  # the mover may have ended it first (rollback, promote --no-canary): save
        raise errors.SyncError(
            EXIT_MOVED,
            f"canary: {self.model} version {self.version} ended: {reason}; every replica follows the pin, now "
            f"{now}; allowed: one writer of the pin at a time (the record is "
            f"{self.repo.uri(layout.canary_audit_key(self.model, self.doc['id']))})",
        )

    def record_moved(self, now: Stored) -> NoReturn:
        """Another writer changed the record (an abort, a rollback): it decided; nothing is
        written back. Exit 4 naming what it did and where the replicas went."""
        raise errors.SyncError(EXIT_MOVED, ending.record_moved(self.repo, self.model, self.version, self.doc, now))
