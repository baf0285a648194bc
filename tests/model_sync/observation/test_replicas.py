"""model_sync.observation.replicas against a real moto_server: the replicas' status records read strictly
(an unreadable one serves nothing), what each serves, and --wait's wait_served."""

from __future__ import annotations

import time

import pytest

from model_sync.records import codec
from tests.model_sync.helpers import python_model, run_cli, write_config


def _report(model: str, serving: list[int], state: str = "READY", failed: dict[str, str] | None = None) -> bytes:
    """A replica status record as the agent writes it, reported now."""
    entry = {"pinned": serving, "serving": serving, "state": state,
             "error": None if state == "READY" else "load failed:\nboom", "failed": failed or {},
             "local_versions": serving, "smoke": None}  # fmt: skip
    return codec.dumps({"schema": codec.REPLICA_STATUS, "env": "staging", "deployment": "triton",
                           "replica": "pod-0", "bucket_uri": "s3://b",
                           "triton_url": None, "heartbeat_seconds": 30, "s3_reachable": True, "last_s3_ok_at": None,
                           "last_error": None,
                           "agent_started_at": codec.format_time(time.time()),
                           "reported_at": codec.format_time(time.time()),
                           "models": {model: entry}})  # fmt: skip


def two_versions(tmp_path, capsys, moto_s3):
    """(client, bucket, Bucket) of a staging bucket where `simple` versions 1 and 2 were pushed (2 pinned)."""
    from model_sync import environments
    from model_sync.s3.bucket import Bucket

    bucket = moto_s3.make_bucket()
    cfg = write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{bucket}"})
    for content in ("one", "two"):
        model = python_model(
            tmp_path / f"src-{content}", "simple", {"model.py": content.encode(), "model.pt": content.encode() * 100}
        )
        assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    return moto_s3.client(), bucket, Bucket(environments.resolve("staging", cfg))


@pytest.fixture
def pushed(tmp_path, capsys, moto_s3, aws_env):
    return two_versions(tmp_path, capsys, moto_s3)


def test_wait_served_returns_once_served_and_fails_on_a_failed_load(pushed) -> None:
    from model_sync import errors
    from model_sync.observation import replicas
    from model_sync.ui import Console

    client, bucket, repo = pushed
    client.put_object(Bucket=bucket, Key="status/triton/pod-0.json", Body=_report("simple", [2]))
    assert replicas.wait_served(repo, "simple", 2, 5.0, Console(quiet=True), interval=0.1) == {"triton/pod-0": "READY"}
    client.put_object(
        Bucket=bucket, Key="status/triton/pod-0.json", Body=_report("simple", [1], "FAILED", {"2": "boom"})
    )
    with pytest.raises(
        errors.SyncError,
        match=(
            r"^wait: simple version 2 is not served by every replica \(triton/pod-0: serving \[1\] \(FAILED: load "
            r"failed: boom\)\)"
        ),
    ) as e:
        replicas.wait_served(repo, "simple", 2, 5.0, Console(quiet=True), interval=0.1)
    assert e.value.code == errors.CHECK_FAILED


def test_status_records_are_read_strictly(pushed) -> None:
    from model_sync.observation import replicas

    client, bucket, repo = pushed
    client.put_object(Bucket=bucket, Key="status/triton/pod-0.json", Body=_report("simple", [2]))
    client.put_object(
        Bucket=bucket,
        Key="status/triton/pod-1.json",
        Body=b'{"reported_at": "2026-01-01T00:00:00.000000Z", "models": {}}',
    )  # no schema
    client.put_object(Bucket=bucket, Key="status/triton/notes.txt", Body=b"not a record")
    docs = replicas.read_status_docs(repo)
    assert sorted(docs) == ["triton/pod-0", "triton/pod-1"]
    assert docs["triton/pod-1"] == {}
    assert docs["triton/pod-0"]["models"]["simple"]["serving"] == [2]
    assert replicas.reported_at(docs["triton/pod-0"]) == codec.parse_time(docs["triton/pod-0"]["reported_at"])
    assert replicas.read_status_docs(repo, ("other",)) == {}
