"""Unit tests of verify's decisions (replica states, tensor specs, output checks). The real
end-to-end verify (replicas READY + HTTP/gRPC smoke inference) is in test_agent_e2e.py."""

from __future__ import annotations

import datetime as dt

import pytest

from model_sync.observation import verify as vf
from model_sync.observation.verify import default_grpc_url

NOW = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def _doc(
    serving: list[int], state: str = "READY", age: float = 5.0, model: str = "add", smoke: dict | None = None
) -> dict:
    reported = (NOW - dt.timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    smoke = (
        smoke
        if smoke is not None
        else {"ok": True, "version": serving[0] if serving else None, "at": reported, "detail": "ok"}
    )
    return {
        "reported_at": reported,
        "models": {
            model: {"serving": serving, "state": state, "error": None if state == "READY" else "boom", "smoke": smoke}
        },
    }


def test_replica_states_ready_stale_wrong_version_and_not_serving() -> None:
    docs = {
        "default/a": _doc([3]),
        "default/b": _doc([3], age=500),
        "default/c": _doc([2]),
        "default/d": _doc([3], state="LOADING"),
        "other/e": _doc([1], model="other-model"),  # does not serve `add`: ignored
        "default/f": {"models": {"add": {"serving": [3], "state": "READY"}}},
    }
    states = vf.replica_states(docs, "add", 3, staleness=120, now=NOW, departed=1000)
    assert states["default/a"] == "READY"
    assert states["default/b"].startswith("stale: reported 500s ago")
    assert states["default/c"].startswith("serving [2]")
    assert states["default/d"] == "LOADING: boom"
    assert states["default/f"] == "no reported_at"
    assert "other/e" not in states


def test_verification_passes_only_with_replicas_all_ready_and_smoke_ok() -> None:
    v = vf.Verification("add", 3, replicas={"d/a": "READY"}, smoke_inference=True)
    assert v.passed
    assert not vf.Verification("add", 3, replicas={}, smoke_inference=True).passed
    assert not vf.Verification("add", 3, replicas={"d/a": "READY", "d/b": "LOADING"}, smoke_inference=True).passed
    assert not vf.Verification("add", 3, replicas={"d/a": "READY"}, smoke_inference=False).passed
    assert not vf.Verification("add", 3, replicas={"d/a": "READY"}, smoke_inference=True, problems=["pin"]).passed


@pytest.mark.parametrize(
    ("url", "grpc"),
    [
        ("http://triton:8000", "triton:8001"),
        ("http://127.0.0.1:8000/", "127.0.0.1:8001"),
        ("http://h:9000", None),
        (None, None),
    ],
)
def test_default_grpc_url(url: str | None, grpc: str | None) -> None:
    assert default_grpc_url(url) == grpc


def test_verify_rejects_bad_version_flag() -> None:
    from model_sync.cli import main

    assert main(["verify", "add", "--env", "x", "--bucket", "s3://models-x", "--model-version", "0"]) == 2


def test_departed_replica_is_listed_not_failing_but_a_stale_one_fails() -> None:
    docs = {"default/new-pod": _doc([3]), "default/old-pod": _doc([2], age=301)}
    states = vf.replica_states(docs, "add", 3, staleness=120, now=NOW)  # default departed = 300 s
    assert states == {"default/new-pod": "READY", "default/old-pod": "departed: last reported 301s ago (> 300s)"}
    v = vf.Verification("add", 3, replicas=states, smoke_inference=True)
    assert v.passed
    assert v.ready_replicas == ["default/new-pod"]
    assert "1 departed replica(s) ignored" in vf.summary(v)
    # Within the departed threshold but older than the staleness window: still a failure.
    stale = vf.replica_states(
        {"default/a": _doc([3]), "default/b": _doc([3], age=200)}, "add", 3, staleness=120, now=NOW
    )
    assert stale["default/b"] == "stale: reported 200s ago (> 120s)"
    assert not vf.Verification("add", 3, replicas=stale, smoke_inference=True).passed
    # Only departed replicas: nothing fresh serves the version.
    gone = vf.replica_states({"default/old-pod": _doc([3], age=400)}, "add", 3, staleness=120, now=NOW)
    assert not vf.Verification("add", 3, replicas=gone, smoke_inference=True).passed


def test_ready_needs_the_agents_passing_smoke_inference_of_that_version() -> None:
    docs = {
        "d/ok": _doc([3]),
        "d/none": _doc([3], smoke={}),
        "d/old": _doc([3], smoke={"ok": True, "version": 2, "at": "x", "detail": "ok"}),
        "d/bad": _doc(
            [3],
            smoke={
                "ok": False,
                "version": 3,
                "at": "x",
                "detail": "smoke inference (agent) output y shape: [2]; allowed: [4]",
            },
        ),
    }
    states = vf.replica_states(docs, "add", 3, staleness=120, now=NOW)
    assert states["d/ok"] == "READY"
    assert states["d/none"] == "READY, smoke inference of 3: not run yet by the agent"
    assert states["d/old"] == "READY, smoke inference of 3: not run yet by the agent"
    assert (
        states["d/bad"]
        == "READY, smoke inference of 3 failed: smoke inference (agent) output y shape: [2]; allowed: [4]"
    )


def test_departed_must_exceed_staleness(capsys: pytest.CaptureFixture[str]) -> None:
    from model_sync.cli import main

    assert (
        main(
            [
                "verify",
                "add",
                "--env",
                "x",
                "--bucket",
                "s3://models-x",
                "--model-version",
                "1",
                "--staleness",
                "120",
                "--departed",
                "60",
            ]
        )
        == 2
    )
    assert "--departed: 60.0; allowed: seconds > --staleness (120)" in capsys.readouterr().err
