"""model_sync.agent.canaries through RepositoryAgent's pass (placing files only) on a real
moto_server: the replicas a gray release lists place the canary version, the others keep the pin,
and all of them are back on the pin when it ends; a canary without its manifest is reported."""

from __future__ import annotations

from pathlib import Path

from model_sync import agent as ag
from model_sync import environments
from model_sync.contract import layout
from model_sync.records import canary_record
from model_sync.s3 import clients
from model_sync.s3.bucket import Bucket
from tests.model_sync.helpers import python_model, run_cli, write_config
from tests.model_sync.records.test_canary_record import _doc, _repo
from tests.support.s3_servers import S3Server


def _agent(tmp_path: Path, server: S3Server, bucket: str, replica: str) -> ag.RepositoryAgent:
    settings = ag.AgentSettings(root=layout.Root(bucket), repository=tmp_path / replica / "models",
                                staging=tmp_path / replica / ".staging", deployment="default", replica=replica)  # fmt: skip
    env = environments.Environment("prod", layout.Root(bucket), server.endpoint, "us-east-1")
    agent = ag.RepositoryAgent(settings, Bucket(env, clients.AGENT))
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
