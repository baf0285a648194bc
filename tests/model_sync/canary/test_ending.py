"""model_sync.canary.ending against a real moto_server: a release ended from outside its run by the
commands that flip the pin under it (`rollback`, `promote --no-canary`)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from model_sync import environments, errors
from model_sync.canary import ending
from model_sync.contract import layout
from model_sync.contract.canary_policy import CanaryPolicy
from model_sync.records import canary_record
from model_sync.records.canary_record import Stored
from model_sync.s3.bucket import Bucket
from tests.support.s3_servers import S3Server


def _running(server: S3Server, bucket: str) -> Bucket:
    """The prod bucket of `server` with a running gray release of m (version 2 against stable 1)."""
    repo = Bucket(environments.Environment("prod", layout.Root(bucket), server.endpoint, "us-east-1"))
    doc = canary_record.new("m", canary_record.new_id(), "default", 1, 2, CanaryPolicy().to_mapping(), "tests",
                            time.time(), 300)  # fmt: skip
    canary_record.write(repo, canary_record.read(repo, "m"), doc)
    return repo


def _the_run_saves(saves: list[Stored], monkeypatch: pytest.MonkeyPatch, *, every_read: bool) -> None:
    """After the first read of the running record (`every_read`: after each one), its run saves it
    (a poll's figures) before the reader writes: what a poll landing between end_running's read
    and its conditional write does. Each save is appended to `saves`."""
    real_read = canary_record.read

    def read_then_the_run_saves(repo: Bucket, model: str) -> Stored:
        stored = real_read(repo, model)
        if (every_read or not saves) and stored.running and stored.doc is not None:
            saves.append(canary_record.write(repo, stored, {**stored.doc, "share_percent": 10 + len(saves)}))
        return stored

    monkeypatch.setattr(canary_record, "read", read_then_the_run_saves)


def test_a_poll_saved_between_the_read_and_the_write_is_read_again_and_the_release_ended(
    moto_s3: S3Server, s3_bucket: str, aws_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run rewrites its record at its polls; one save landing between end_running's read and its
    conditional write refused that write while the record still ran, and `promote --no-canary` failed
    (exit 4) with its pin already flipped. end_running reads it again and ends it."""
    repo = _running(moto_s3, s3_bucket)
    saves: list[Stored] = []
    _the_run_saves(saves, monkeypatch, every_read=False)
    ended = ending.end_running(repo, "m", "tests", "rollback to version 1")
    assert len(saves) == 1  # the run's save did land between the first read and its write
    assert ended is not None and (ended["state"], ended["replicas"]) == ("aborted", []), ended  # noqa: PT018
    assert ended["share_percent"] == 10  # the record as the run saved it, then ended
    monkeypatch.undo()
    assert canary_record.read(repo, "m").doc == ended


def test_a_run_that_saves_at_every_read_is_not_overwritten_and_the_refusal_stands(
    moto_s3: S3Server, s3_bucket: str, aws_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record some writer rewrites every time it is read is never ended by force: after
    END_ATTEMPTS reads and refused writes, the refusal (exit 4) is the answer."""
    repo = _running(moto_s3, s3_bucket)
    saves: list[Stored] = []
    _the_run_saves(saves, monkeypatch, every_read=True)
    with pytest.raises(errors.SyncError, match="changed while this run held it") as e:
        ending.end_running(repo, "m", "tests", "rollback to version 1")
    assert e.value.code == errors.REFUSED
    monkeypatch.undo()
    assert canary_record.read(repo, "m").running
