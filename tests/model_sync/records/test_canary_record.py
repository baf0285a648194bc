"""model_sync.records.canary_record on a real moto_server: a record created once and rewritten If-Match,
refused when another writer moved it, archived create-only, and which version a replica serves
for it. The agents that follow it: test_agent_canaries.py."""

from __future__ import annotations

import pytest

from model_sync import environments, errors
from model_sync.contract import layout
from model_sync.records import canary_record, codec
from model_sync.s3.bucket import Bucket
from tests.support.s3_servers import S3Server


def _doc(model: str, replicas: list[str], state: str = "running", canary_version: int = 2) -> dict:
    now = codec.now()
    return {
        "schema": canary_record.CANARY, "model": model, "id": canary_record.new_id(), "state": state,
        "deployment": "default", "stable_version": 1, "canary_version": canary_version, "replicas": replicas,
        "share_percent": 50, "steps": [], "policy": {}, "started_by": "tests", "started_at": now,
        "deadline_at": now, "updated_at": now, "decision": None,
    }  # fmt: skip


def _repo(server: S3Server, bucket: str) -> Bucket:
    return Bucket(environments.Environment("prod", layout.Root(bucket), server.endpoint, "us-east-1"))


def test_the_record_is_written_conditionally_and_archived_once(moto_s3: S3Server, s3_bucket: str, aws_env) -> None:
    repo = _repo(moto_s3, s3_bucket)
    assert canary_record.read(repo, "m") == canary_record.Stored(None, None)
    first = canary_record.write(repo, canary_record.Stored(None, None), _doc("m", ["pod-a"]))
    assert first.running
    assert canary_record.read(repo, "m").etag == first.etag
    second = canary_record.write(repo, first, {**first.doc, "replicas": ["pod-a", "pod-b"]})  # type: ignore[dict-item]
    with pytest.raises(errors.SyncError, match=r"^canary record: s3://.*/manifests/_canary/m\.json changed while") as e:
        canary_record.write(repo, first, first.doc)  # type: ignore[arg-type]  (a stale ETag)
    assert e.value.code == errors.REFUSED
    with pytest.raises(errors.SyncError, match=r"changed while this run held it, now running"):
        canary_record.write(repo, canary_record.Stored(None, None), _doc("m", []))  # a second "first" writer
    assert canary_record.read(repo, "m").doc == second.doc
    key = canary_record.archive(repo, second.doc)  # type: ignore[arg-type]
    assert key == layout.canary_audit_key("m", second.doc["id"])  # type: ignore[index]
    assert codec.read(moto_s3.get(s3_bucket, key), canary_record.CANARY) == second.doc
    assert not repo.put_new(key, b"{}")  # create-only: never overwritten
    repo.put(layout.canary_key("m"), b'{"schema": "model-sync.canary/v1"}')
    with pytest.raises(errors.SyncError, match=r"^canary record s3://.*: model-sync.canary/v1 model: missing"):
        canary_record.read(repo, "m")


@pytest.mark.parametrize(
    ("state", "deployment", "replica", "expected"),
    [("running", "default", "pod-a", 2), ("running", "default", "pod-c", None), ("running", "other", "pod-a", None),
     ("aborted", "default", "pod-a", None), ("promoted", "default", "pod-a", None)],
)  # fmt: skip
def test_serving_canary(state: str, deployment: str, replica: str, expected: int | None) -> None:
    assert canary_record.serving_canary(_doc("m", ["pod-a", "pod-b"], state), deployment, replica) == expected
    assert canary_record.serving_canary(None, "default", "pod-a") is None
