"""Unit tests of verify's decisions (replica states, tensor specs, output checks). The real
end-to-end verify (replicas READY + HTTP/gRPC smoke inference) is in test_agent_e2e.py."""

from __future__ import annotations

import datetime as dt

import pytest

from model_sync import model_config
from model_sync import verify as vf
from model_sync.commands.verify import default_grpc_url

NOW = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def _doc(serving: list[int], state: str = "READY", age: float = 5.0, model: str = "add", smoke: dict | None = None) -> dict:
    reported = (NOW - dt.timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    smoke = smoke if smoke is not None else {"ok": True, "version": serving[0] if serving else None, "at": reported, "detail": "ok"}
    return {"reported_at": reported, "models": {model: {"serving": serving, "state": state, "error": None if state == "READY" else "boom", "smoke": smoke}}}


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
    stale = vf.replica_states({"default/a": _doc([3]), "default/b": _doc([3], age=200)}, "add", 3, staleness=120, now=NOW)
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
        "d/bad": _doc([3], smoke={"ok": False, "version": 3, "at": "x", "detail": "smoke inference (agent) output y shape: [2]; allowed: [4]"}),
    }
    states = vf.replica_states(docs, "add", 3, staleness=120, now=NOW)
    assert states["d/ok"] == "READY"
    assert states["d/none"] == "READY, smoke inference of 3: not run yet by the agent"
    assert states["d/old"] == "READY, smoke inference of 3: not run yet by the agent"
    assert states["d/bad"] == "READY, smoke inference of 3 failed: smoke inference (agent) output y shape: [2]; allowed: [4]"


def test_bf16_tensors_are_supported_with_ml_dtypes() -> None:
    import ml_dtypes

    cfg = model_config.parse('name: "m" max_batch_size: 2 input [{ name: "x" data_type: TYPE_BF16 dims: [3] }] output [{ name: "y" data_type: TYPE_BF16 dims: [3] }]')
    inputs, outputs = vf.tensor_specs(cfg)
    assert inputs == [vf.TensorSpec("x", "BF16", "bfloat16", (1, 3))]
    data = vf.smoke_inputs(inputs)
    assert data["x"].dtype == ml_dtypes.bfloat16
    body, header_length = vf.smoke_request(inputs, outputs)
    header = __import__("json").loads(body[:header_length])
    assert header["inputs"] == [{"name": "x", "shape": [1, 3], "datatype": "BF16", "parameters": {"binary_data_size": 6}}]
    assert body[header_length:] == data["x"].tobytes()


def test_a_dtype_without_smoke_support_is_a_one_line_problem_not_a_crash() -> None:
    cfg = model_config.parse('name: "m" input [{ name: "x" data_type: TYPE_INVALID dims: [1] }] output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]')
    with pytest.raises(ValueError, match=r"^config.pbtxt tensor x data_type: TYPE_INVALID; allowed: one of \[.*'TYPE_BF16'"):
        vf.tensor_specs(cfg)

    class Probe:
        def infer(self, *a: object) -> tuple[int, bytes, None]:
            raise AssertionError("no request for an unsupported dtype")

    text = 'name: "m" input [{ name: "x" data_type: TYPE_INVALID dims: [1] }] output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]'
    assert vf.smoke_loopback(Probe(), "m", 1, text) == [
        "smoke inference (agent): config.pbtxt tensor x data_type: TYPE_INVALID; allowed: one of " + str(sorted(vf._DTYPES)) + " (verify cannot build a smoke input for it)"
    ]


def test_bytes_inputs_are_length_prefixed_and_replies_parse_with_or_without_binary_outputs() -> None:
    inputs = [vf.TensorSpec("s", "BYTES", "object", (2,))]
    body, header_length = vf.smoke_request(inputs, [])
    assert body[header_length:] == b"\x05\x00\x00\x00smoke" * 2
    reply = b'{"outputs":[{"name":"y","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}]}'
    assert vf.parse_reply(reply + b"\0" * 16, len(reply)) == {"y": ("FP32", (1, 4))}
    assert vf.parse_reply(reply, None) == {"y": ("FP32", (1, 4))}


def test_departed_must_exceed_staleness(capsys: pytest.CaptureFixture[str]) -> None:
    from model_sync.cli import main

    assert main(["verify", "add", "--env", "x", "--bucket", "s3://models-x", "--model-version", "1", "--staleness", "120", "--departed", "60"]) == 2
    assert "--departed: 60.0; allowed: seconds > --staleness (120)" in capsys.readouterr().err


def test_a_malformed_api_key_is_a_usage_error(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from model_sync.cli import main

    monkeypatch.setenv(vf.API_KEY_ENV, "no-colon")
    assert main(["verify", "add", "--env", "x", "--bucket", "s3://models-x", "--model-version", "1"]) == 2
    assert "$MODEL_SYNC_TRITON_API_KEY: not CLIENT:KEY; allowed: an ingress client name and its API key" in capsys.readouterr().err
    monkeypatch.setenv(vf.API_KEY_ENV, "ci:s3cret")
    assert vf.client_headers() == {"authorization": "Basic Y2k6czNjcmV0"}
