"""model_sync.agent.triton against the real tritonserver (tests/support/triton.py's `serving`):
TritonProbe (liveness, readiness, the repository index, a binary-protocol inference), load
confirmation through the index with Triton's reason for a failed load, the smoke inference and
the replica's readiness. The models are the python-backend add model, placed as the agent does
(assembled beside the repository root, renamed in)."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from model_sync.agent import triton
from model_sync.agent.state import ModelState
from model_sync.contract import layout
from model_sync.records.codec import ReplicaState
from tests.support.triton import Serving, add_model_files, pinned_config
from tests.support.triton import serving as serving_fixture
from tests.support.triton import triton_runtime as triton_runtime_fixture

serving = serving_fixture
triton_runtime = triton_runtime_fixture

DEAD = "http://127.0.0.1:1"  # nothing listens on port 1


def place_model(stack: Serving, name: str, version: int, fail: bool = False) -> str:
    """Assemble `name` (one version and its pin) in staging, rename it into the repository; its pin."""
    build = stack.staging / f"{name}.build"
    (build / str(version)).mkdir(parents=True)
    for rel, data in add_model_files(version, fail).items():
        (build / str(version) / rel).write_bytes(data)
    text = pinned_config(name, version)
    (build / layout.CONFIG_FILE).write_text(text)
    os.rename(build, stack.repository / name)
    return text


def _infer_json(probe: triton.TritonProbe, name: str, version: int) -> tuple[int, bytes, int | None]:
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}).encode()
    return probe.infer(name, version, body, len(body))  # a JSON-only request: the header is the whole body


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_the_probe_against_a_served_and_a_failed_python_model(serving: Serving) -> None:
    stack = serving
    stack.staging.mkdir(parents=True)
    add_pin = place_model(stack, "add", 3)
    place_model(stack, "broken", 1, fail=True)
    probe = triton.TritonProbe(stack.triton.http_url)
    started = time.monotonic() - 5.0  # placed "a while ago": the index's failures are trusted at once
    outcome = triton.await_loads(
        probe, {"add": ((3,), started), "broken": ((1,), started)}, 60.0, 60.0, threading.Event(), lambda: None
    )
    assert outcome["add"] is None
    assert "initialize failed on purpose (test model)" in (outcome["broken"] or ""), outcome

    assert probe.live()
    states = probe.version_states()
    assert states is not None
    assert states[("add", 3)] == ("READY", "")
    assert states[("broken", 1)][0] == "UNAVAILABLE"
    assert triton.failure_reason(states[("broken", 1)]) == states[("broken", 1)][1] == outcome["broken"]
    assert (probe.version_ready("add", 3), probe.version_ready("broken", 1), probe.version_ready("add", 1)) == (
        True,
        False,
        False,
    )

    code, body, header_length = _infer_json(probe, "add", 3)
    assert code == 200, body
    reply = json.loads(body[:header_length] if header_length else body)
    assert reply["outputs"][0]["name"] == "OUTPUT0"
    assert reply["outputs"][0]["data"] == [4.0, 5.0, 6.0, 7.0]  # INPUT0 + 3: version 3 answered
    code, body, _ = _infer_json(probe, "broken", 1)
    assert code >= 400, (code, body)
    assert b"broken" in body

    clock = lambda: 1_790_000_000.0  # noqa: E731
    record = triton.smoke(probe, "add", 3, add_pin, clock)
    assert (record["ok"], record["version"], record["detail"], record["_at"]) == (True, 3, "ok", clock())
    failed = triton.smoke(probe, "broken", 1, pinned_config("broken", 1), clock)
    assert failed["ok"] is False
    assert failed["detail"].startswith("smoke inference (agent) broken 1: HTTP 503 "), failed
    assert "is not at ready state" in failed["detail"]  # Triton's own words
    assert triton.smoke(probe, "add", 3, None, clock)["detail"] == (
        "smoke inference (agent) add 3: VersionRejected: config.pbtxt: missing locally"
    )

    ready = ModelState(pinned=(3,), serving=(3,), state=ReplicaState.READY)
    removed = ModelState(pinned=(1,), state=ReplicaState.FAILED)  # a failed new model: no version in place
    assert triton.serving_ready(probe, {"add": ready, "broken": removed})
    assert not triton.serving_ready(
        probe, {"add": ready, "other": ModelState(serving=(1,), state=ReplicaState.LOADING)}
    )
    assert not triton.serving_ready(probe, {"broken": removed})  # nothing served at all
    assert not triton.serving_ready(triton.TritonProbe(DEAD), {"add": ready})
    assert not triton.serving_ready(None, {"add": ready})


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_await_loads_times_out_a_version_triton_never_shows(serving: Serving) -> None:
    probe = triton.TritonProbe(serving.triton.http_url)
    beats: list[float] = []
    began = time.monotonic()
    outcome = triton.await_loads(
        probe, {"ghost": ((1,), began)}, None, 1.5, threading.Event(), lambda: beats.append(time.monotonic())
    )
    assert outcome == {"ghost": "not READY within 2s"}
    assert time.monotonic() - began >= 1.5
    assert len(beats) >= 1  # the status heartbeat ran while waiting
    stop = threading.Event()
    stop.set()
    assert triton.await_loads(probe, {"ghost": ((1,), time.monotonic())}, None, 60.0, stop, lambda: None) == {}


def test_a_probe_of_a_server_that_is_not_there_reports_nothing() -> None:
    probe = triton.TritonProbe(DEAD + "/", headers=[("triton-repository-key", "k")], timeout=0.5)
    assert probe.url == DEAD
    assert probe.live() is False
    assert probe.index() is None
    assert probe.version_states() is None
    assert probe.version_ready("add", 1) is False
    code, body, length = probe.infer("add", 1, b"{}", 2)
    assert (code, length) == (0, None)
    assert b"refused" in body.lower(), body


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (None, None),
        (("READY", ""), None),
        (("UNAVAILABLE", "unloaded"), None),  # unloaded, not a failed load
        (("UNAVAILABLE", ""), None),
        (("UNAVAILABLE", "initialize failed"), "initialize failed"),
        (("LOADING", "x"), None),
    ],
)
def test_failure_reason_is_a_failed_load_only(entry: tuple[str, str] | None, reason: str | None) -> None:
    assert triton.failure_reason(entry) == reason


def test_smoke_is_due_once_per_served_version_and_again_a_heartbeat_after_a_failure() -> None:
    st = ModelState(serving=(2,))
    assert triton.smoke_due(st, 100.0, 30.0)
    st.transition(smoke={"ok": True, "version": 2, "_at": 100.0})
    assert not triton.smoke_due(st, 1e9, 30.0)
    st.transition(serving=(3,))
    assert triton.smoke_due(st, 100.0, 30.0)  # a new version
    st.transition(smoke={"ok": False, "version": 3, "_at": 100.0})
    assert not triton.smoke_due(st, 129.0, 30.0)
    assert triton.smoke_due(st, 130.0, 30.0)
    assert not triton.smoke_due(ModelState(serving=(1, 2)), 0.0, 30.0)  # multi-version pins are not smoke-tested
    assert not triton.smoke_due(ModelState(), 0.0, 30.0)
