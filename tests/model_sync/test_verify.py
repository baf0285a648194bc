"""Unit tests of verify's decisions (replica states, tensor specs, output checks). The real
end-to-end verify (replicas READY + HTTP/gRPC smoke inference) is in test_agent_e2e.py."""

from __future__ import annotations

import datetime as dt

import pytest

from model_sync import model_config
from model_sync import verify as vf
from model_sync.commands.verify import default_grpc_url

NOW = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def _doc(serving: list[int], state: str = "READY", age: float = 5.0, model: str = "add") -> dict:
    reported = (NOW - dt.timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"reported_at": reported, "models": {model: {"serving": serving, "state": state, "error": None if state == "READY" else "boom"}}}


def test_replica_states_ready_stale_wrong_version_and_not_serving() -> None:
    docs = {
        "default/a": _doc([3]),
        "default/b": _doc([3], age=500),
        "default/c": _doc([2]),
        "default/d": _doc([3], state="LOADING"),
        "other/e": _doc([1], model="other-model"),  # does not serve `add`: ignored
        "default/f": {"models": {"add": {"serving": [3], "state": "READY"}}},
    }
    states = vf.replica_states(docs, "add", 3, staleness=120, now=NOW)
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


def test_tensor_specs_prepend_the_batch_dimension() -> None:
    cfg = model_config.parse(
        'name: "m" max_batch_size: 8 input [{ name: "x" data_type: TYPE_FP32 dims: [3, -1] }] output [{ name: "y" data_type: TYPE_INT64 dims: [10] }]'
    )
    inputs, outputs = vf.tensor_specs(cfg)
    assert inputs == [vf.TensorSpec("x", "FP32", "float32", (1, 3, -1))]
    assert outputs == [vf.TensorSpec("y", "INT64", "int64", (1, 10))]
    data = vf.smoke_inputs(inputs)
    assert data["x"].shape == (1, 3, 1)
    assert str(data["x"].dtype) == "float32"


def test_check_outputs_reports_missing_wrong_dtype_and_shape() -> None:
    expected = [vf.TensorSpec("y", "FP32", "float32", (1, -1, 4)), vf.TensorSpec("z", "INT64", "int64", (2,))]
    assert vf.check_outputs("http", {"y": ("FP32", (1, 7, 4)), "z": ("INT64", (2,))}, expected) == []
    problems = vf.check_outputs("grpc", {"y": ("FP16", (1, 7, 5))}, expected)
    assert problems == [
        "smoke inference (grpc) output y datatype: FP16; allowed: FP32",
        "smoke inference (grpc) output y shape: [1, 7, 5]; allowed: [1, -1, 4]",
        "smoke inference (grpc) output z: missing; allowed: every output declared in config.pbtxt",
    ]


@pytest.mark.parametrize(("url", "grpc"), [("http://triton:8000", "triton:8001"), ("http://127.0.0.1:8000/", "127.0.0.1:8001"), ("http://h:9000", None), (None, None)])
def test_default_grpc_url(url: str | None, grpc: str | None) -> None:
    assert default_grpc_url(url) == grpc


def test_verify_rejects_bad_version_flag() -> None:
    from model_sync.cli import main

    assert main(["verify", "add", "--env", "x", "--bucket", "s3://models-x", "--version", "0"]) == 2
