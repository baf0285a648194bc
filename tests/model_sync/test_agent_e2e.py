"""End to end: the repository agent (subprocess, the image's ENTRYPOINT command) between a real
S3-protocol server (rclone serve s3, on disk) and the real tritonserver polling a local directory."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from model_sync import layout
from model_sync.local.procs import wait_until
from tests.support.triton import (
    BUCKET,
    LoadGenerator,
    Serving,
    add_model_files,
    flip_pin,
    pinned_config,
    publish,
    served_version,
    upload_version,
)
from tests.support.triton import serving as serving_fixture
from tests.support.triton import triton_runtime as triton_runtime_fixture

# Fixtures from tests/support/triton.py, registered in this module under their own names.
serving = serving_fixture
triton_runtime = triton_runtime_fixture

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def _model_state(doc: dict, name: str = "add") -> dict:
    return doc.get("models", {}).get(name, {})


def _ready_on(version: int):
    return lambda doc: _model_state(doc).get("state") == "READY" and _model_state(doc).get("serving") == [version]


def test_publish_second_version_and_rollback_are_served_without_failed_requests(serving: Serving) -> None:
    client = serving.client
    publish(client, BUCKET, "add", 1)
    serving.start_agent()
    serving.wait_served("add", 1)
    doc = serving.wait_status(_ready_on(1), what="status READY on 1")
    assert doc["s3_reachable"] is True
    assert doc["deployment"] == "default"
    assert doc["replica"] == "replica-0"

    with LoadGenerator(serving.triton.http_url, "add") as load:
        time.sleep(0.5)
        publish(client, BUCKET, "add", 2)
        serving.wait_served("add", 2)
        serving.wait_status(_ready_on(2), what="status READY on 2")
        flip_pin(client, BUCKET, "add", 1)  # rollback = flip the pin back
        serving.wait_served("add", 1)
        serving.wait_status(_ready_on(1), what="status READY on 1 after rollback")
        time.sleep(0.5)
    assert load.failed == 0, load.errors
    assert [v for _, v in load.versions] == [1, 2, 1]
    # verify: every replica READY on 1 + smoke inference over HTTP and gRPC; the record promote needs.
    rc, out = serving.cli("verify", "add", "--env", "test", "--version", "1", "--grpc-url", serving.triton.grpc_url)
    assert rc == 0, out
    record = json.loads(client.get_object(Bucket=BUCKET, Key=layout.verification_key("add", 1))["Body"].read())
    assert record["passed"] is True
    assert record["replicas"] == {"default/replica-0": "READY"}
    assert record["smoke_inference"] is True
    rc, out = serving.cli("verify", "add", "--env", "test", "--version", "2", "--grpc-url", serving.triton.grpc_url, "--no-record")
    assert rc == 6, out
    assert "version 1; allowed: 2" in out
    assert load.ok > 20
    # Only complete version directories ever appeared in the repository; staging is beside it, empty.
    assert {"add/1/model.py", "add/2/model.py", "add/config.pbtxt"} <= set(serving.local_entries())
    assert not any(p.startswith(".") for p in os.listdir(serving.repository))
    assert os.listdir(serving.staging) == []


def test_version_failing_initialize_keeps_old_version_serving_and_is_reported(serving: Serving) -> None:
    client = serving.client
    publish(client, BUCKET, "add", 1)
    serving.start_agent()
    serving.wait_served("add", 1)
    with LoadGenerator(serving.triton.http_url, "add") as load:
        publish(client, BUCKET, "add", 2, fail=True)
        doc = serving.wait_status(lambda d: _model_state(d).get("state") == "FAILED", what="status FAILED")
        time.sleep(2.5)  # Triton's poller has seen the local pin back on 1 by now
    assert load.failed == 0, load.errors
    assert {v for _, v in load.versions} == {1}
    state = _model_state(doc)
    assert state["serving"] == [1]
    assert state["pinned"] == [2]
    assert "initialize failed on purpose" in state["failed"]["2"]
    assert "version 2" not in (serving.repository / "add" / "config.pbtxt").read_text()
    assert "versions: 1" in (serving.repository / "add" / "config.pbtxt").read_text()
    # verify fails (replica not READY on 2: the smoke inference of version 2 fails too) and records it.
    rc, out = serving.cli("verify", "add", "--env", "test", "--version", "2", "--grpc-url", serving.triton.grpc_url)
    assert rc == 6, out
    assert "replica default/replica-0" in out
    assert "FAILED" in out
    record = json.loads(client.get_object(Bucket=BUCKET, Key=layout.verification_key("add", 2))["Body"].read())
    assert record["passed"] is False
    assert record["smoke_inference"] is False
    # ... so promote refuses.
    rc, out = serving.cli("promote", "add", "--version", "2", "--from", "test", "--to", "prod")
    assert rc == 4, out
    assert "verification" in out
    assert "FAILED" in out
    # The failure is not retried in a loop: the same pin stays FAILED, the old version serves.
    time.sleep(2)
    assert _model_state(serving.status() or {})["state"] == "FAILED"
    assert served_version(serving.triton.http_url, "add") == 1
    # A fixed version published afterwards is picked up.
    publish(client, BUCKET, "add", 3)
    serving.wait_served("add", 3)
    serving.wait_status(_ready_on(3), what="status READY on 3")


@pytest.mark.parametrize("damage", ["corrupted", "missing", "no-manifest"])
def test_missing_or_corrupted_version_is_never_placed_nor_pinned(serving: Serving, damage: str) -> None:
    client = serving.client
    publish(client, BUCKET, "add", 1)
    serving.start_agent()
    serving.wait_served("add", 1)
    files = add_model_files(2)
    files["weights.bin"] = os.urandom(4096)
    upload_version(client, BUCKET, "add", 2, files, pinned_config("add", 2))
    key = layout.version_file_key("add", 2, "weights.bin")
    if damage == "corrupted":
        client.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(4096))  # same size, other bytes
    elif damage == "missing":
        client.delete_object(Bucket=BUCKET, Key=key)
    else:
        client.delete_object(Bucket=BUCKET, Key=layout.manifest_key("add", 2))
    flip_pin(client, BUCKET, "add", 2)
    doc = serving.wait_status(lambda d: _model_state(d).get("state") == "FAILED", what="status FAILED")
    reason = _model_state(doc)["error"]
    expected = {"corrupted": "sha256", "missing": "missing in the bucket", "no-manifest": "manifest"}[damage]
    assert expected in reason
    assert "add/2" not in serving.local_entries()
    assert not any(e.startswith("add/2/") for e in serving.local_entries())
    assert "versions: 1" in (serving.repository / "add" / "config.pbtxt").read_text()
    assert os.listdir(serving.staging) == []
    assert served_version(serving.triton.http_url, "add") == 1


def test_s3_outage_of_60s_under_load_fails_no_request_and_agent_catches_up(serving: Serving) -> None:
    client = serving.client
    publish(client, BUCKET, "add", 1)
    serving.start_agent()
    serving.wait_served("add", 1)
    with LoadGenerator(serving.triton.http_url, "add") as load:
        serving.s3.stop()
        outage_started = time.monotonic()
        wait_until(lambda: "s3 unavailable" in serving.agent_log(), 30, what="agent noticing the outage")
        time.sleep(max(0.0, 60 - (time.monotonic() - outage_started)))
        serving.s3.start()
        outage = time.monotonic() - outage_started
        publish(s3_client := serving.client, BUCKET, "add", 2)
        serving.wait_served("add", 2, timeout=60)
        time.sleep(0.3)
    assert outage >= 60
    assert load.failed == 0, load.errors
    assert [v for _, v in load.versions] == [1, 2]
    doc = serving.wait_status(_ready_on(2), what="status READY on 2 after the outage")
    assert doc["s3_reachable"] is True
    assert s3_client is not None


def test_agent_killed_or_stopped_mid_download_leaves_no_partial_version(serving: Serving) -> None:
    client = serving.client
    publish(client, BUCKET, "add", 1)
    serving.start_agent()
    serving.wait_served("add", 1)
    files = add_model_files(2)
    files["weights.bin"] = os.urandom(128 * 1024 * 1024)  # big enough to catch the download in flight
    upload_version(client, BUCKET, "add", 2, files, pinned_config("add", 2))
    del files

    def downloading() -> bool:
        return any(p.name == "weights.bin" and p.stat().st_size > 0 for p in serving.staging.rglob("weights.bin"))

    # 1. SIGKILL mid-download: the partial file stays in staging only, never in the repository.
    flip_pin(client, BUCKET, "add", 2)
    wait_until(downloading, 60, interval=0.02, what="weights.bin download in staging")
    assert serving.agent is not None
    serving.agent.kill()
    assert not (serving.repository / "add" / "2").exists()
    assert any(serving.staging.iterdir())  # the killed run left its staging dir behind
    assert "versions: 1" in (serving.repository / "add" / "config.pbtxt").read_text()
    assert served_version(serving.triton.http_url, "add") == 1

    # 2. Restarted, then SIGTERM mid-download: leftovers discarded, current staging abandoned, exit 0.
    agent = serving.start_agent()
    wait_until(lambda: "discarded 1 leftover staging entries" in agent.log_tail(200), 30, what="leftover staging discarded")
    wait_until(downloading, 60, interval=0.02, what="weights.bin download restarted")
    agent.signal(signal.SIGTERM)
    assert agent.popen is not None
    assert agent.popen.wait(timeout=30) == 0
    assert not (serving.repository / "add" / "2").exists()
    assert list(serving.staging.iterdir()) == []

    # 3. Restarted again: the version is placed whole and served.
    serving.start_agent()
    serving.wait_served("add", 2, timeout=90)
    assert (serving.repository / "add" / "2" / "weights.bin").stat().st_size == 128 * 1024 * 1024


def test_once_places_pins_without_triton_then_sidecar_confirms(serving: Serving) -> None:
    """The init container path: Triton is not up yet; --once places and pins, exits 0."""
    client = serving.client
    publish(client, BUCKET, "add", 4)
    serving.triton.stop()
    for p in serving.repository.iterdir():
        raise AssertionError(f"repository not empty: {p}")
    argv = [a for a in serving.agent_argv("--once") if True]
    i = argv.index("--triton-url")
    del argv[i : i + 2]
    from model_sync.local.procs import Process

    proc = Process("init", argv, serving.tmp / "logs" / "init.log", env=serving.agent_env()).start()
    assert proc.popen is not None
    assert proc.popen.wait(timeout=60) == 0, proc.log_tail()
    assert (serving.repository / "add" / "4" / "model.py").exists()
    assert "versions: 4" in (serving.repository / "add" / "config.pbtxt").read_text()
    assert serving.status() is not None
    assert _model_state(serving.status() or {})["state"] == "PLACED"
    serving.triton.start()
    serving.triton.wait_version_ready("add", 4)
    serving.start_agent()
    serving.wait_status(_ready_on(4), what="sidecar reports READY on 4")
