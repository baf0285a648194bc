"""Unit tests of the smoke inference (model_sync.observation.smoke): tensor specs, smoke inputs, output
checks, the agent's binary request and reply, and verify's ingress credentials. The real smoke
inferences (agent loopback, HTTP and gRPC against tritonserver) are in test_agent_e2e.py."""

from __future__ import annotations

import pytest

from model_sync.observation import smoke as vf
from model_sync.triton_model import model_config


def test_tensor_specs_prepend_the_batch_dimension() -> None:
    cfg = model_config.parse(
        'name: "m" max_batch_size: 8 input [{ name: "x" data_type: TYPE_FP32 dims: [3, -1] }] output [{ name: '
        '"y" data_type: TYPE_INT64 dims: [10] }]'
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


def test_bf16_tensors_are_supported_with_ml_dtypes() -> None:
    import ml_dtypes

    cfg = model_config.parse(
        'name: "m" max_batch_size: 2 input [{ name: "x" data_type: TYPE_BF16 dims: [3] }] output [{ name: "y" '
        "data_type: TYPE_BF16 dims: [3] }]"
    )
    inputs, outputs = vf.tensor_specs(cfg)
    assert inputs == [vf.TensorSpec("x", "BF16", "bfloat16", (1, 3))]
    data = vf.smoke_inputs(inputs)
    assert data["x"].dtype == ml_dtypes.bfloat16
    body, header_length = vf.smoke_request(inputs, outputs)
    header = __import__("json").loads(body[:header_length])
    assert header["inputs"] == [
        {"name": "x", "shape": [1, 3], "datatype": "BF16", "parameters": {"binary_data_size": 6}}
    ]
    assert body[header_length:] == data["x"].tobytes()


def test_a_dtype_without_smoke_support_is_a_one_line_problem_not_a_crash() -> None:
    cfg = model_config.parse(
        'name: "m" input [{ name: "x" data_type: TYPE_INVALID dims: [1] }] output [{ name: "y" data_type: TYPE_FP32 '
        "dims: [1] }]"
    )
    with pytest.raises(
        ValueError, match=r"^config.pbtxt tensor x data_type: TYPE_INVALID; allowed: one of \[.*'TYPE_BF16'"
    ):
        vf.tensor_specs(cfg)

    class Probe:
        def infer(self, *a: object) -> tuple[int, bytes, None]:
            raise AssertionError("no request for an unsupported dtype")

    text = (
        'name: "m" input [{ name: "x" data_type: TYPE_INVALID dims: [1] }] output [{ name: "y" data_type: TYPE_FP32 '
        "dims: [1] }]"
    )
    assert vf.smoke_loopback(Probe(), "m", 1, text) == [
        "smoke inference (agent): config.pbtxt tensor x data_type: TYPE_INVALID; allowed: one of "
        + str(sorted(vf._DTYPES))
        + " (verify cannot build a smoke input for it)"
    ]


def test_bytes_inputs_are_length_prefixed_and_replies_parse_with_or_without_binary_outputs() -> None:
    inputs = [vf.TensorSpec("s", "BYTES", "object", (2,))]
    body, header_length = vf.smoke_request(inputs, [])
    assert body[header_length:] == b"\x05\x00\x00\x00smoke" * 2
    reply = b'{"outputs":[{"name":"y","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}]}'
    assert vf.parse_reply(reply + b"\0" * 16, len(reply)) == {"y": ("FP32", (1, 4))}
    assert vf.parse_reply(reply, None) == {"y": ("FP32", (1, 4))}


def test_a_malformed_api_key_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from model_sync.cli import main

    monkeypatch.setenv(vf.API_KEY_ENV, "no-colon")
    assert main(["verify", "add", "--env", "x", "--bucket", "s3://models-x", "--model-version", "1"]) == 2
    assert (
        "$MODEL_SYNC_TRITON_API_KEY: not CLIENT:KEY; allowed: an ingress client name and its API key"
        in capsys.readouterr().err
    )
    monkeypatch.setenv(vf.API_KEY_ENV, "ci:s3cret")
    assert vf.client_headers() == {"authorization": "Basic Y2k6czNjcmV0"}


def test_a_bearer_token_from_the_environment_is_sent_and_never_beside_an_api_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from model_sync.cli import main

    monkeypatch.delenv(vf.API_KEY_ENV, raising=False)
    monkeypatch.setenv(vf.TOKEN_ENV, "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJjaSJ9.c2ln")
    assert vf.client_headers() == {"authorization": "Bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJjaSJ9.c2ln"}
    monkeypatch.setenv(vf.TOKEN_ENV, "not a token")
    assert main(["verify", "add", "--env", "x", "--bucket", "s3://models-x", "--model-version", "1"]) == 2
    assert "$MODEL_SYNC_TRITON_TOKEN: not a JWT; allowed: a compact JWT" in capsys.readouterr().err
    monkeypatch.setenv(vf.TOKEN_ENV, "a.b.c")
    monkeypatch.setenv(vf.API_KEY_ENV, "ci:s3cret")
    assert main(["verify", "add", "--env", "x", "--bucket", "s3://models-x", "--model-version", "1"]) == 2
    err = capsys.readouterr().err
    assert "$MODEL_SYNC_TRITON_API_KEY and $MODEL_SYNC_TRITON_TOKEN are both set; allowed: one of them" in err
