"""model_sync.canary_record on a real moto_server, and the agents that follow it
(model_sync.agent: RepositoryAgent's pass, placing files only): a record created once and
rewritten If-Match, refused when another writer moved it, archived create-only; the replicas it
lists place the canary version, the others keep the pin, and all of them are back on the pin
when it ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_sync import agent as ag
from model_sync import canary_record, environments, errors, layout, manifest, s3client
from model_sync.s3 import Repo
from tests.model_sync.helpers import python_model, run_cli, write_config
from tests.support.s3_servers import S3Server


def _doc(model: str, replicas: list[str], state: str = "running", canary_version: int = 2) -> dict:
    now = manifest.now()
    return {
        "schema": canary_record.CANARY, "model": model, "id": canary_record.new_id(), "state": state,
        "deployment": "default", "stable_version": 1, "canary_version": canary_version, "replicas": replicas,
        "share_percent": 50, "steps": [], "policy": {}, "started_by": "tests", "started_at": now,
        "deadline_at": now, "updated_at": now, "decision": None,
    }  # fmt: skip


def _repo(server: S3Server, bucket: str) -> Repo:
    return Repo(environments.Environment("prod", layout.Root(bucket), server.endpoint, "us-east-1"))


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
    assert manifest.read(moto_s3.get(s3_bucket, key), canary_record.CANARY) == second.doc
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


def _agent(tmp_path: Path, server: S3Server, bucket: str, replica: str) -> ag.RepositoryAgent:
    settings = ag.AgentSettings(root=layout.Root(bucket), repository=tmp_path / replica / "models",
                                staging=tmp_path / replica / ".staging", deployment="default", replica=replica)  # fmt: skip
    env = environments.Environment("prod", layout.Root(bucket), server.endpoint, "us-east-1")
    agent = ag.RepositoryAgent(settings, Repo(env, s3client.AGENT))
    agent.prepare()
    return agent


def test_listed_replicas_follow_the_canary_and_return_to_the_pin(
    tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    cfg = write_config(tmp_path / "model-sync.yaml", moto_s3, {"prod": f"s3://{s3_bucket}"})
    for version in ("1", "2"):
        src = python_model(tmp_path / f"src{version}", "m", {"model.py": f"# {version}\n".encode()})
        assert run_cli(capsys, "push", str(src), "--env", "prod", "--config", cfg).code == 0
    assert run_cli(capsys, "rollback", "m", "--env", "prod", "--config", cfg, "--yes").code == 0  # pin 1, 2 published
    a, b = (_agent(tmp_path, moto_s3, s3_bucket, r) for r in ("pod-a", "pod-b"))
    try:
        for agent in (a, b):
            agent.sync_once()
        assert a.local.pin("m") == b.local.pin("m")
        assert (a.models["m"].serving, b.models["m"].serving) == ((1,), (1,))
        repo = _repo(moto_s3, s3_bucket)
        stored = canary_record.write(repo, canary_record.Stored(None, None), _doc("m", ["pod-a"]))
        for agent in (a, b):
            agent.sync_once()
        assert (a.models["m"].serving, b.models["m"].serving) == ((2,), (1,))
        assert a.models["m"].pinned == (2,)
        assert "versions: 2" in (a.local.pin("m") or "")  # the canary version's config, from its manifest
        assert a.status_document()["models"]["m"]["serving"] == [2]
        canary_record.write(repo, stored, {**stored.doc, "state": "aborted", "replicas": []})  # type: ignore[dict-item]
        for agent in (a, b):
            agent.sync_once()
        assert (a.models["m"].serving, b.models["m"].serving) == ((1,), (1,))
        assert a.local.versions("m") == [1, 2]  # kept for a quick switch (--keep-versions)
    finally:
        a.close()
        b.close()


def test_a_canary_without_its_manifest_is_reported_failed_and_the_pin_kept(
    tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    cfg = write_config(tmp_path / "model-sync.yaml", moto_s3, {"prod": f"s3://{s3_bucket}"})
    assert run_cli(capsys, "push", str(python_model(tmp_path / "src", "m")), "--env", "prod", "--config", cfg).code == 0
    a = _agent(tmp_path, moto_s3, s3_bucket, "pod-a")
    try:
        canary_record.write(
            _repo(moto_s3, s3_bucket), canary_record.Stored(None, None), _doc("m", ["pod-a"], canary_version=7)
        )
        a.sync_once()
        assert a.models["m"].serving == (1,)
        assert "manifest" in a.models["m"].failed[7]
        assert "missing" in a.models["m"].failed[7]
        assert a.status_document()["models"]["m"]["failed"] == {"7": a.models["m"].failed[7]}
    finally:
        a.close()
