"""model_sync.agent.replica_record: the replica status record (validated by the strict reader
model_sync.records.codec.read_replica_status), written to status/<deployment>/<replica>.json on a real
S3 server when it changes and every heartbeat, deleted on a clean exit; and the readiness file."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import botocore.session
import pytest

from model_sync import environments
from model_sync.agent.bucket import AgentBucket
from model_sync.agent.replica_record import STATUS_SCHEMA, ReadyFile, StatusReport, document
from model_sync.agent.settings import AgentSettings
from model_sync.agent.state import ModelState
from model_sync.contract import layout
from model_sync.records import codec
from model_sync.records.codec import ReplicaState
from model_sync.s3 import clients
from model_sync.s3.bucket import Bucket
from tests.support.s3_servers import KEY, SECRET, S3Server

T0 = 1_790_000_000.0  # the agent's clock in these tests (POSIX seconds)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _settings(tmp_path: Path, bucket: str) -> AgentSettings:
    return AgentSettings(
        root=layout.Root(bucket),
        repository=tmp_path / "models",
        staging=tmp_path / ".staging",
        env="test",
        deployment="default",
        replica="replica-0",
        triton_url="http://127.0.0.1:8000",
        heartbeat=30.0,
    )


def _report(tmp_path: Path, server: S3Server, bucket: str, secret: str = SECRET) -> tuple[StatusReport, Clock]:
    session = clients.share_data_loader(botocore.session.get_session())
    session.set_credentials(KEY, secret)
    repo = Bucket(
        environments.Environment("test", layout.Root(bucket), server.endpoint, "us-east-1"),
        clients.AGENT,
        session=session,
    )
    settings = _settings(tmp_path, bucket)
    clock = Clock()
    return StatusReport(settings, AgentBucket(repo, settings, threading.Event()), clock), clock


def _models() -> dict[str, ModelState]:
    smoke = {"ok": True, "version": 2, "at": codec.format_time(T0), "detail": "ok", "_at": T0}
    return {
        "add": ModelState(pin_etag="e2", pinned=(2,), serving=(2,), state=ReplicaState.READY, smoke=smoke),
        "bad": ModelState(
            pin_etag="e5",
            pinned=(5,),
            state=ReplicaState.FAILED,
            error="version(s) [5] failed to load: boom",
            failed={5: "boom\n  Traceback ..."},
        ),
    }


def _doc(tmp_path: Path, bucket: str, models: dict[str, ModelState], **overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "s3_reachable": True,
        "last_s3_ok_at": T0,
        "last_error": None,
        "started_at": T0 - 60,
    } | overrides
    return document(_settings(tmp_path, bucket), models, lambda name: {"add": [1, 2], "bad": []}[name], **kwargs)


def _status_puts(server: S3Server, bucket: str, since: int) -> int:
    return sum(r.startswith(f"PUT /{bucket}/status/default/replica-0.json") for r in server.requests()[since:])


def _read_back(server: S3Server, bucket: str) -> dict[str, Any]:
    body = server.client().get_object(Bucket=bucket, Key=layout.status_key("default", "replica-0"))["Body"].read()
    return codec.read_replica_status(body)


def test_the_report_written_is_a_valid_replica_status_record(tmp_path: Path, moto_s3: S3Server, s3_bucket: str) -> None:
    report, _ = _report(tmp_path, moto_s3, s3_bucket)
    report.report(_doc(tmp_path, s3_bucket, _models()), force=False)
    assert moto_s3.keys(s3_bucket) == ["status/default/replica-0.json"]
    doc = _read_back(moto_s3, s3_bucket)
    assert doc["schema"] == STATUS_SCHEMA
    assert (doc["env"], doc["deployment"], doc["replica"], doc["bucket_uri"]) == (
        "test",
        "default",
        "replica-0",
        f"s3://{s3_bucket}/",
    )
    assert (doc["triton_url"], doc["heartbeat_seconds"], doc["s3_reachable"]) == ("http://127.0.0.1:8000", 30.0, True)
    assert (doc["reported_at"], doc["last_s3_ok_at"], doc["agent_started_at"]) == tuple(
        codec.format_time(t) for t in (T0, T0, T0 - 60)
    )
    assert doc["models"]["add"] == {
        "pinned": [2],
        "serving": [2],
        "state": "READY",
        "error": None,
        "failed": {},
        "local_versions": [1, 2],
        "smoke": {"ok": True, "version": 2, "at": codec.format_time(T0), "detail": "ok"},
    }
    assert doc["models"]["bad"]["state"] == "FAILED"
    assert doc["models"]["bad"]["failed"] == {"5": "boom\n  Traceback ..."}
    assert doc["models"]["bad"]["smoke"] is None


def test_an_unchanged_report_is_written_once_per_heartbeat(tmp_path: Path, moto_s3: S3Server, s3_bucket: str) -> None:
    report, clock = _report(tmp_path, moto_s3, s3_bucket)
    models = _models()
    before = len(moto_s3.requests())
    report.report(_doc(tmp_path, s3_bucket, models), force=False)
    clock.now += 10
    moved = _doc(tmp_path, s3_bucket, models, last_s3_ok_at=clock.now)  # only the last contact moved
    report.report(moved, force=False)
    assert _status_puts(moto_s3, s3_bucket, before) == 1
    assert _read_back(moto_s3, s3_bucket)["reported_at"] == codec.format_time(T0)
    report.report(_doc(tmp_path, s3_bucket, models), force=True)
    assert _status_puts(moto_s3, s3_bucket, before) == 2
    clock.now += 5
    models["bad"].transition(ReplicaState.LOADING, error=None)  # a change is written at once
    report.report(_doc(tmp_path, s3_bucket, models), force=False)
    assert _status_puts(moto_s3, s3_bucket, before) == 3
    assert _read_back(moto_s3, s3_bucket)["models"]["bad"]["state"] == "LOADING"
    clock.now += 30  # a heartbeat later, nothing changed
    report.report(_doc(tmp_path, s3_bucket, models), force=False)
    assert _status_puts(moto_s3, s3_bucket, before) == 4
    assert _read_back(moto_s3, s3_bucket)["reported_at"] == codec.format_time(clock.now)


def test_delete_removes_the_replicas_status_object(tmp_path: Path, moto_s3: S3Server, s3_bucket: str) -> None:
    moto_s3.client().put_object(Bucket=s3_bucket, Key=layout.status_key("default", "replica-1"), Body=b"{}")
    report, _ = _report(tmp_path, moto_s3, s3_bucket)
    report.report(_doc(tmp_path, s3_bucket, _models()), force=True)
    assert moto_s3.keys(s3_bucket, "status/") == ["status/default/replica-0.json", "status/default/replica-1.json"]
    report.delete()
    assert moto_s3.keys(s3_bucket, "status/") == ["status/default/replica-1.json"]  # another replica's stays
    report.delete()  # already gone: no error


def test_a_denied_write_never_raises_and_is_retried_on_the_next_report(tmp_path: Path, rclone_s3: S3Server) -> None:
    bucket = rclone_s3.make_bucket("models-status")
    denied, _ = _report(tmp_path, rclone_s3, bucket, secret="wrong-secret")
    doc = _doc(tmp_path, bucket, _models())
    denied.report(dict(doc), force=False)
    denied.delete()
    assert rclone_s3.keys(bucket) == []
    denied.bucket.s3 = _report(tmp_path, rclone_s3, bucket)[0].bucket.s3  # credentials fixed
    denied.report(dict(doc), force=False)  # the same document: not skipped as already written
    assert (
        json.loads(rclone_s3.get(bucket, layout.status_key("default", "replica-0")))["models"]["add"]["state"]
        == "READY"
    )


def test_document_is_rejected_by_the_strict_reader_without_reported_at(tmp_path: Path) -> None:
    """`document` leaves `reported_at` to the writer: the record is only valid as written."""
    doc = _doc(tmp_path, "models-test", _models())
    with pytest.raises(codec.RecordError, match="reported_at"):
        codec.read_replica_status(json.dumps(doc))
    doc["reported_at"] = codec.format_time(T0)
    assert codec.read_replica_status(json.dumps(doc))["models"]["bad"]["error"] == "version(s) [5] failed to load: boom"


def test_the_ready_file_exists_exactly_while_the_check_passes(tmp_path: Path) -> None:
    path = tmp_path / "ready"
    ready = ReadyFile(path)
    ready.update(lambda: True)
    assert path.read_text() == "ready\n"
    ready.update(lambda: False)
    assert not path.exists()
    ready.update(lambda: True)

    def broken() -> bool:
        raise ConnectionError("triton unreachable")

    ready.update(broken)  # the check itself failed: not ready, and no exception
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file left
    ReadyFile(None).update(lambda: True)  # no path: nothing written
    assert list(tmp_path.iterdir()) == []
