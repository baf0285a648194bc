"""End to end: the repository agent (subprocess, the image's ENTRYPOINT command) between a real
S3-protocol server (rclone serve s3, on disk) and the real tritonserver polling a local directory."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from model_sync.contract import layout
from model_sync.sandbox.procs import wait_until
from tests.support.triton import (
    BUCKET,
    LoadGenerator,
    Serving,
    flip_pin,
    pinned_config,
    publish,
    push_version,
    served_version,
    upload_version,
)
from tests.support.triton import serving as serving_fixture
from tests.support.triton import triton_runtime as triton_runtime_fixture

# Fixtures from tests/support/triton.py, registered in this module under their own names.
serving = serving_fixture
triton_runtime = triton_runtime_fixture

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def _latest_record(client, name: str, version: int) -> dict:
    """The newest verification attempt of `name` `version` (one object per attempt)."""
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=layout.verification_attempts_prefix(name, version)).get(
        "Contents", []
    )
    key = max(o["Key"] for o in listed)
    return dict(json.loads(client.get_object(Bucket=BUCKET, Key=key)["Body"].read()))


def _model_state(doc: dict, name: str = "add") -> dict:
    return doc.get("models", {}).get(name, {})


def _ready_on(version: int):
    return lambda doc: _model_state(doc).get("state") == "READY" and _model_state(doc).get("serving") == [version]


def test_publish_second_version_and_rollback_are_served_without_failed_requests(serving: Serving) -> None:
    client = serving.client
    assert publish(serving, "add") == 1
    serving.start_agent()
    serving.wait_served("add", 1)
    doc = serving.wait_status(
        lambda d: _ready_on(1)(d) and (_model_state(d).get("smoke") or {}).get("version") == 1,
        what="status READY + smoke on 1",
    )
    assert _model_state(doc)["smoke"]["ok"] is True, _model_state(doc)["smoke"]
    assert doc["s3_reachable"] is True
    assert doc["deployment"] == "default"
    assert doc["replica"] == "replica-0"

    with LoadGenerator(serving.triton.http_url, "add") as load:
        time.sleep(0.5)
        assert publish(serving, "add") == 2
        serving.wait_served("add", 2)
        serving.wait_status(_ready_on(2), what="status READY on 2")
        flip_pin(serving, "add", 1)  # rollback = flip the pin back
        serving.wait_served("add", 1)
        serving.wait_status(_ready_on(1), what="status READY on 1 after rollback")
        time.sleep(0.5)
    assert load.failed == 0, load.errors
    assert [v for _, v in load.versions] == [1, 2, 1]
    # verify: every replica READY on 1 + smoke inference over HTTP and gRPC; the record promote needs.
    rc, out = serving.cli(
        "verify", "add", "--env", "test", "--model-version", "1", "--grpc-url", serving.triton.grpc_url
    )
    assert rc == 0, out
    record = _latest_record(client, "add", 1)
    assert record["passed"] is True
    assert record["replicas"] == {"default/replica-0": "READY"}
    assert record["smoke_inference"] is True
    assert record["evidence"] == "replica-smoke+direct-http-grpc"
    assert (record["pinned"], record["checks"]) == (True, {"replicas": "passed", "http": "passed", "grpc": "passed"})
    # An HTTP endpoint without a gRPC one: gRPC is "not run", never "failed".
    rc, out = serving.cli("verify", "add", "--env", "test", "--model-version", "1")
    assert rc == 0, out
    assert "checks: replicas passed, http passed, grpc not run" in out
    record = _latest_record(client, "add", 1)
    assert (record["passed"], record["evidence"], record["checks"]["grpc"]) == (
        True,
        "replica-smoke+direct-http",
        "not-run",
    )
    # From CI without network access to the cluster: the replicas' own smoke inferences are the evidence.
    serving.wait_status(
        lambda d: (_model_state(d).get("smoke") or {}).get("version") == 1, what="agent smoke of 1 after rollback"
    )
    rc, out = serving.cli(
        "verify",
        "add",
        "--env",
        "ci",
        "--bucket",
        f"s3://{BUCKET}",
        "--endpoint-url",
        serving.s3.endpoint_url,
        "--region",
        serving.s3.region,
        "--model-version",
        "1",
    )
    assert rc == 0, out
    assert "1 replica(s) READY with a passing agent smoke inference" in out
    record = _latest_record(client, "add", 1)
    assert record["evidence"] == "replica-smoke"
    attempts = client.list_objects_v2(Bucket=BUCKET, Prefix=layout.verification_attempts_prefix("add", 1))["Contents"]
    assert len(attempts) == 3  # one record per attempt, none overwritten
    rc, out = serving.cli(
        "verify", "add", "--env", "test", "--model-version", "2", "--grpc-url", serving.triton.grpc_url, "--no-record"
    )
    assert rc == 6, out
    assert "version 1; allowed: 2" in out
    assert load.ok > 20
    # Only complete version directories ever appeared in the repository; staging is beside it, empty.
    assert {"add/1/model.py", "add/2/model.py", "add/config.pbtxt"} <= set(serving.local_entries())
    assert not any(p.startswith(".") for p in os.listdir(serving.repository))
    assert os.listdir(serving.staging) == []


def test_version_failing_initialize_keeps_old_version_serving_and_is_reported(serving: Serving) -> None:
    client = serving.client
    publish(serving, "add")
    serving.start_agent()
    serving.wait_served("add", 1)
    with LoadGenerator(serving.triton.http_url, "add") as load:
        assert publish(serving, "add", fail=True) == 2
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
    rc, out = serving.cli(
        "verify", "add", "--env", "test", "--model-version", "2", "--grpc-url", serving.triton.grpc_url
    )
    verify_out = out
    assert rc == 6, out
    assert "replica default/replica-0" in out
    assert "FAILED" in out
    record = _latest_record(client, "add", 2)
    assert record["passed"] is False
    assert record["smoke_inference"] is False
    # ... so promote refuses.
    rc, out = serving.cli("promote", "add", "--model-version", "2", "--from", "test", "--to", "prod", "--no-canary")
    assert rc == 4, out
    assert "verification" in out
    assert "FAILED" in out
    # The failure is not retried in a loop: the same pin stays FAILED, the old version serves.
    time.sleep(2)
    assert _model_state(serving.status() or {})["state"] == "FAILED"
    assert served_version(serving.triton.http_url, "add") == 1
    # Item 12: the reason stays one line in `error`, in the agent's log and in verify's output;
    # the full text (Triton's reason spans lines) stays in `failed`.
    assert "\n" not in state["error"]
    assert "initialize failed on purpose" in state["error"]
    log_lines = (serving.tmp / "logs" / "agent-1.log").read_text().splitlines()
    assert all(line[:4].isdigit() for line in log_lines if line.strip()), [
        line for line in log_lines if not line[:4].isdigit()
    ][:3]
    assert all(line.startswith(("replica ", "checks: ", "model-sync: ")) for line in verify_out.strip().splitlines()), (
        verify_out
    )
    # Item 5: status shows what each replica serves, not the pin: version 1, FAILED and why.
    rc, out = serving.cli("status", "--env", "test", "add")
    assert rc == 0, out
    assert "0/1 PIN NOT SERVED" in out
    row = next(line for line in out.splitlines() if "default/replica-0" in line)
    assert row.split()[:5] == ["test", "add", "default/replica-0", "1", "FAILED"], row
    assert "version(s) [2] failed to load:" in row
    assert "initialize failed on purpose" in row
    rc, out = serving.cli("status", "--env", "test", "add", "--output", "json")
    entry = json.loads(out)["test"]["models"][0]
    assert (entry["pinned"], entry["pin_served"]) == (2, False)
    assert entry["replicas"]["default/replica-0"]["serving"] == [1]
    assert entry["replicas"]["default/replica-0"]["state"] == "FAILED"
    # A fixed version published afterwards is picked up.
    assert publish(serving, "add") == 3
    serving.wait_served("add", 3)
    serving.wait_status(_ready_on(3), what="status READY on 3")


@pytest.mark.parametrize("damage", ["corrupted", "missing", "no-manifest"])
def test_missing_or_corrupted_version_is_never_placed_nor_pinned(serving: Serving, damage: str) -> None:
    client = serving.client
    publish(serving, "add")
    serving.start_agent()
    serving.wait_served("add", 1)
    assert push_version(serving, "add", extra={"weights.bin": os.urandom(4096)}) == 2
    key = layout.version_file_key("add", 2, "weights.bin")
    if damage == "corrupted":
        client.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(4096))  # same size, other bytes
    elif damage == "missing":
        client.delete_object(Bucket=BUCKET, Key=key)
    else:
        client.delete_object(Bucket=BUCKET, Key=layout.manifest_key("add", 2))
    flip_pin(serving, "add", 2)
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
    publish(serving, "add")
    serving.start_agent()
    serving.wait_served("add", 1)
    with LoadGenerator(serving.triton.http_url, "add") as load:
        serving.s3.stop()
        outage_started = time.monotonic()
        wait_until(lambda: "s3 unavailable" in serving.agent_log(), 30, what="agent noticing the outage")
        time.sleep(max(0.0, 60 - (time.monotonic() - outage_started)))
        serving.s3.start()
        outage = time.monotonic() - outage_started
        assert publish(serving, "add") == 2
        serving.wait_served("add", 2, timeout=60)
        time.sleep(0.3)
    assert outage >= 60
    assert load.failed == 0, load.errors
    assert [v for _, v in load.versions] == [1, 2]
    doc = serving.wait_status(_ready_on(2), what="status READY on 2 after the outage")
    assert doc["s3_reachable"] is True


def test_agent_killed_or_stopped_mid_download_leaves_no_partial_version(serving: Serving) -> None:
    publish(serving, "add")
    serving.start_agent()
    serving.wait_served("add", 1)
    assert (
        push_version(serving, "add", extra={"weights.bin": os.urandom(128 * 1024 * 1024)}) == 2
    )  # big enough to catch the download in flight

    def downloading() -> bool:
        return any(p.name == "weights.bin" and p.stat().st_size > 0 for p in serving.staging.rglob("weights.bin"))

    placed = serving.repository / "add" / "2"

    def whole_if_visible() -> bool:
        """The invariant: version 2 is either absent from the repository or complete. (On a
        fast machine the signal can land after the verified rename: then it must be whole.)"""
        if not placed.exists():
            return False
        assert (placed / "weights.bin").stat().st_size == 128 * 1024 * 1024
        assert sorted(p.name for p in placed.iterdir()) == sorted(
            [*(p.name for p in (serving.repository / "add" / "1").iterdir()), "weights.bin"]
        )
        return True

    # 1. SIGKILL mid-download: the partial file stays in staging only, never in the repository.
    flip_pin(serving, "add", 2)
    wait_until(downloading, 60, interval=0.02, what="weights.bin download in staging")
    assert serving.agent is not None
    serving.agent.kill()
    if not whole_if_visible():
        assert any(serving.staging.iterdir())  # the killed run left its staging dir behind
        assert "versions: 1" in (serving.repository / "add" / "config.pbtxt").read_text()
        assert served_version(serving.triton.http_url, "add") == 1

    # 2. Restarted, then SIGTERM mid-download: leftovers discarded, current staging abandoned, exit 0.
    agent = serving.start_agent()
    wait_until(
        lambda: "discarded 1 leftover staging entries" in agent.log_tail(200), 30, what="leftover staging discarded"
    )
    wait_until(downloading, 60, interval=0.02, what="weights.bin download restarted")
    assert serving.status() is not None
    agent.signal(signal.SIGTERM)
    assert agent.popen is not None
    assert agent.popen.wait(timeout=30) == 0
    whole_if_visible()
    assert list(serving.staging.iterdir()) == []
    assert serving.status() is None  # a clean exit deletes the replica's report (no stale replica for verify)

    # 3. Restarted again: the version is placed whole and served.
    serving.start_agent()
    serving.wait_served("add", 2, timeout=90)
    assert (serving.repository / "add" / "2" / "weights.bin").stat().st_size == 128 * 1024 * 1024


def test_once_places_pins_without_triton_then_sidecar_confirms(serving: Serving) -> None:
    """The init container path: Triton is not up yet; --once places and pins, exits 0."""
    assert publish(serving, "add") == 1
    serving.triton.stop()
    for p in serving.repository.iterdir():
        raise AssertionError(f"repository not empty: {p}")
    argv = [a for a in serving.agent_argv("--once") if True]
    i = argv.index("--triton-url")
    del argv[i : i + 2]
    from model_sync.sandbox.procs import Process

    proc = Process("init", argv, serving.tmp / "logs" / "init.log", env=serving.agent_env()).start()
    assert proc.popen is not None
    assert proc.popen.wait(timeout=60) == 0, proc.log_tail()
    assert (serving.repository / "add" / "1" / "model.py").exists()
    assert "versions: 1" in (serving.repository / "add" / "config.pbtxt").read_text()
    assert serving.status() is not None
    assert _model_state(serving.status() or {})["state"] == "PLACED"
    serving.triton.start()
    serving.triton.wait_version_ready("add", 1)
    serving.start_agent()
    doc = serving.wait_status(
        lambda d: _ready_on(1)(d) and _model_state(d).get("smoke") is not None,
        what="sidecar confirms READY on 1 + smoke",
    )
    assert _model_state(doc)["smoke"]["ok"] is True


def test_a_version_without_its_backends_files_never_reaches_a_running_triton(serving: Serving) -> None:
    """On a running replica: a manifest written past `push` lists only model.pt
    for the python-backend `add`. tritonserver 2.51 would stay LOADING on it and its poller would
    stop, so a good push of another model would never load. The agent refuses the version before
    a byte reaches Triton: `add` keeps serving 1 under load, `other` loads, and `status` says why."""
    publish(serving, "add")
    serving.start_agent()
    serving.wait_served("add", 1)
    with LoadGenerator(serving.triton.http_url, "add") as load:
        pin_text = pinned_config("add", 2)
        upload_version(serving.client, BUCKET, "add", 2, {"model.pt": b"weights"}, pin_text)
        flip_pin(serving, "add", 2, config_text=pin_text)
        assert publish(serving, "other") == 1
        serving.wait_served("other", 1, timeout=60)
        doc = serving.wait_status(
            lambda d: _model_state(d).get("state") == "FAILED" and _model_state(d, "other").get("state") == "READY",
            what="add FAILED, other READY",
        )  # one status document holds both: `other` is confirmed a pass after it is served
    assert load.failed == 0, load.errors
    assert {v for _, v in load.versions} == {1}
    assert served_version(serving.triton.http_url, "add") == 1
    assert not (serving.repository / "add" / "2").exists()
    assert "versions: 1" in (serving.repository / "add" / "config.pbtxt").read_text()
    reason = _model_state(doc)["error"]
    assert "version 2 rejected: manifest manifests/add/2.json: lists no model.py" in reason, reason
    assert _model_state(doc, "other")["state"] == "READY"
    rc, out = serving.cli("status", "--env", "test")
    assert rc == 0, out
    row = next(line for line in out.splitlines() if "default/replica-0" in line and " add " in line)
    assert row.split()[:5] == ["test", "add", "default/replica-0", "1", "FAILED"], row
    assert "lists no model.py" in row
    assert "0/1 PIN NOT SERVED" in out


def test_new_model_failing_to_load_is_removed_and_the_replica_stays_ready(serving: Serving) -> None:
    """A NEW model (no previous version) whose initialize() raises must not stay in the repository
    (Triton would retry loading it, and it would stay in the index as UNAVAILABLE); the other model
    keeps serving with 0 failed requests. Both paths: a pin applied by the sidecar, and a version
    the init container placed before Triton started.

    Measured on tritonserver 2.51 (poll mode, --strict-readiness=true, its default): once any load
    has failed, /v2/health/ready stays 400 even after the model directory is removed (and after a
    failed version is pinned back); only a restart clears it. So the replica's readiness must not
    rest on Triton's strict readiness alone: docs/agent.md, "Readiness"."""
    from model_sync.sandbox.procs import http_status

    ready_file = serving.tmp / "agent-ready"  # what the pod's readiness probe checks
    publish(serving, "add")
    serving.start_agent("--ready-file", str(ready_file))
    serving.wait_served("add", 1)
    add_ready = serving.triton.http_url + "/v2/models/add/versions/1/ready"
    deadline = time.monotonic() + 30
    while not ready_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ready_file.exists(), "the agent never declared the replica ready with `add` READY"

    def broken(doc: dict) -> dict:
        return doc.get("models", {}).get("broken", {})

    with LoadGenerator(serving.triton.http_url, "add") as load:
        publish(serving, "broken", fail=True)
        doc = serving.wait_status(lambda d: broken(d).get("state") == "FAILED", what="broken FAILED")
        time.sleep(2.5)  # two Triton polls after the removal
        assert http_status(add_ready) == 200
    assert load.failed == 0, load.errors
    assert {v for _, v in load.versions} == {1}
    assert "initialize failed on purpose" in broken(doc)["failed"]["1"]
    assert broken(doc)["serving"] == []
    assert not (serving.repository / "broken").exists()
    assert os.listdir(serving.staging) == []
    assert http_status(serving.triton.http_url + "/v2/models/broken/ready") != 200
    # Triton's strict readiness latched not-ready; the agent's gate did not.
    assert http_status(serving.triton.http_url + "/v2/health/ready") != 200
    assert ready_file.exists(), "one failed new model took the replica out of service"

    # Init container path: --once places what verifies (both models) and exits 0; the sidecar then
    # confirms the adopted versions: `broken` fails to load and is removed, `add` is READY.
    assert serving.agent is not None
    serving.agent.signal(signal.SIGTERM)
    assert serving.agent.popen is not None
    assert serving.agent.popen.wait(timeout=30) == 0
    rc, log = serving.run_agent_once()
    assert rc == 0, log
    assert (serving.repository / "broken" / "1" / "model.py").exists()  # placed before "Triton started"
    assert not ready_file.exists(), "a stopped agent must withdraw the replica's readiness"
    serving.start_agent("--ready-file", str(ready_file))
    doc = serving.wait_status(
        lambda d: broken(d).get("state") == "FAILED" and _model_state(d).get("state") == "READY",
        what="adopted broken FAILED, add READY",
    )
    assert "initialize failed on purpose" in broken(doc)["error"]
    assert not (serving.repository / "broken").exists()
    assert http_status(add_ready) == 200
    assert served_version(serving.triton.http_url, "add") == 1


def test_pins_of_one_pass_are_all_placed_before_any_is_confirmed(serving: Serving) -> None:
    """Triton loads the models of one pass concurrently. Every pin the pass saw is
    placed and pinned locally before the agent waits for the first READY (it used to place, wait
    and confirm one model after another); one model failing among them is rolled back alone."""
    names = ["m0", "m1", "m2", "m3"]
    for name in names:
        push_version(serving, name, fail=name == "m2")
    for name in names:  # before the agent starts: its first pass sees all four
        flip_pin(serving, name, 1)
    serving.start_agent()
    doc = serving.wait_status(
        lambda d: all(_model_state(d, n).get("state") in ("READY", "FAILED") for n in names), what="every model settled"
    )
    assert {n: _model_state(doc, n)["state"] for n in names} == {
        "m0": "READY",
        "m1": "READY",
        "m2": "FAILED",
        "m3": "READY",
    }
    assert "initialize failed on purpose" in _model_state(doc, "m2")["error"]
    lines = (serving.tmp / "logs" / "agent-1.log").read_text().splitlines()
    pinned = [i for i, line in enumerate(lines) if "locally (was none)" in line]
    confirmed = [i for i, line in enumerate(lines) if " READY" in line or "failed to load" in line]
    assert len(pinned) == 4, lines[-20:]
    assert confirmed, lines[-20:]
    assert max(pinned) < min(confirmed), "a model was confirmed before every pin of the pass was placed"
    for name in ("m0", "m1", "m3"):
        assert served_version(serving.triton.http_url, name) == 1


def test_push_and_rollback_wait_for_every_replica_and_say_what_they_did_in_json(serving: Serving) -> None:
    """`push --output json` prints the version it allocated; `--wait` returns
    once every replica serves it READY, or fails (exit 6) naming the replica that does not."""
    from tests.support.triton import ADD_CONFIG, add_model_files

    def model_dir(version: int, fail: bool = False) -> str:
        src = serving.tmp / "src" / f"cli-{version}-{fail}" / "add"
        (src / "1").mkdir(parents=True)
        (src / "config.pbtxt").write_text(ADD_CONFIG.format(name="add"))
        (src / "1" / "model.py").write_bytes(add_model_files(version, fail)["model.py"])
        return str(src)

    serving.start_agent()
    rc, out = serving.cli("push", model_dir(1), "--env", "test", "--output", "json", "--wait", "--wait-timeout", "60")
    assert rc == 0, out
    doc = json.JSONDecoder().raw_decode(out[out.index("{") :])[0]  # stderr's warnings follow
    assert doc["models"] == [{"model": "add", "action": "pushed", "version": 1, "error": None}]
    assert doc["served"] == {"add": {"default/replica-0": "READY"}}
    assert served_version(serving.triton.http_url, "add") == 1  # it returned after the switch
    rc, out = serving.cli("push", model_dir(2, fail=True), "--env", "test", "--wait", "--wait-timeout", "60")
    assert rc == 6, out
    assert (
        "wait: add version 2 is not served by every replica (default/replica-0: serving [1] (FAILED: version(s) "
        "[2] failed to load:"
    ) in out
    rc, out = serving.cli("rollback", "add", "--env", "test", "--output", "json", "--wait", "--wait-timeout", "60")
    assert rc == 0, out
    doc = json.JSONDecoder().raw_decode(out[out.index("{") :])[0]  # stderr's warnings follow
    assert (doc["version"], doc["previous"], doc["served"]) == (1, 2, {"default/replica-0": "READY"})
