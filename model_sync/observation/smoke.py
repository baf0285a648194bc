"""The smoke inference of a served model version: request tensors of the declared shapes and
dtypes (`tensor_specs`, `smoke_inputs`), and every declared output checked for name, datatype
and shape (`check_outputs`). Three transports: the agent's, over its Triton's loopback
(`smoke_loopback`: stdlib + numpy, the binary tensor extension), and verify's own over HTTP and
gRPC through tritonclient (`smoke_http`, `smoke_grpc`; the ingress credentials from
$MODEL_SYNC_TRITON_TOKEN or $MODEL_SYNC_TRITON_API_KEY)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from model_sync import errors
from model_sync.contract.ingress import DEPLOYMENT_HEADER
from model_sync.triton_model import model_config

# Triton TYPE_* -> (numpy dtype name, KServe v2 datatype)
# ref: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#datatypes
_DTYPES = {
    "TYPE_BOOL": ("bool", "BOOL"),
    "TYPE_UINT8": ("uint8", "UINT8"),
    "TYPE_UINT16": ("uint16", "UINT16"),
    "TYPE_UINT32": ("uint32", "UINT32"),
    "TYPE_UINT64": ("uint64", "UINT64"),
    "TYPE_INT8": ("int8", "INT8"),
    "TYPE_INT16": ("int16", "INT16"),
    "TYPE_INT32": ("int32", "INT32"),
    "TYPE_INT64": ("int64", "INT64"),
    "TYPE_FP16": ("float16", "FP16"),
    "TYPE_FP32": ("float32", "FP32"),
    "TYPE_FP64": ("float64", "FP64"),
    "TYPE_BF16": (
        "bfloat16",
        "BF16",
    ),  # numpy has no bfloat16: ml_dtypes.bfloat16 (what tritonclient expects); binary only over HTTP
    "TYPE_STRING": ("object", "BYTES"),
}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str  # KServe v2 datatype, e.g. FP32
    numpy_dtype: str
    shape: tuple[int, ...]  # full request shape; -1 = any


def tensor_specs(cfg: Any) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Request inputs and expected outputs of a ModelConfig (batch dim 1 prepended when batching)."""
    pb2 = model_config.pb2
    batch = (1,) if cfg.max_batch_size > 0 else ()

    def spec(t: Any) -> TensorSpec:
        type_name = pb2.DataType.Name(t.data_type)
        if type_name not in _DTYPES:
            raise ValueError(
                f"config.pbtxt tensor {t.name} data_type: {type_name}; allowed: one of {sorted(_DTYPES)} (verify "
                "cannot build a smoke input for it)"
            )
        np_dtype, v2 = _DTYPES[type_name]
        return TensorSpec(t.name, v2, np_dtype, batch + tuple(int(d) for d in t.dims))

    return [spec(t) for t in cfg.input], [spec(t) for t in cfg.output]


def smoke_inputs(specs: list[TensorSpec]) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {}
    for s in specs:
        shape = tuple(1 if d < 0 else d for d in s.shape)
        if s.numpy_dtype == "object":
            out[s.name] = np.full(shape, b"smoke", dtype=object)
        elif s.numpy_dtype == "bool":
            out[s.name] = np.zeros(shape, dtype=bool)
        elif s.numpy_dtype == "bfloat16":
            import ml_dtypes

            out[s.name] = np.ones(shape, dtype=ml_dtypes.bfloat16)
        else:
            out[s.name] = np.ones(shape, dtype=s.numpy_dtype)
    return out


def check_outputs(
    protocol: str, outputs: dict[str, tuple[str, tuple[int, ...]]], expected: list[TensorSpec]
) -> list[str]:
    """Problems with what came back: outputs = name -> (datatype, shape)."""
    problems = []
    for s in expected:
        if s.name not in outputs:
            problems.append(
                f"smoke inference ({protocol}) output {s.name}: missing; allowed: every output declared in config.pbtxt"
            )
            continue
        datatype, shape = outputs[s.name]
        if datatype != s.datatype:
            problems.append(f"smoke inference ({protocol}) output {s.name} datatype: {datatype}; allowed: {s.datatype}")
        if len(shape) != len(s.shape) or any(e >= 0 and e != a for e, a in zip(s.shape, shape, strict=False)):
            problems.append(
                f"smoke inference ({protocol}) output {s.name} shape: {list(shape)}; allowed: {list(s.shape)}"
            )
    return problems


API_KEY_ENV = "MODEL_SYNC_TRITON_API_KEY"  # CLIENT:KEY, an ingressApiKeys entry (the ingress's basic auth)
TOKEN_ENV = "MODEL_SYNC_TRITON_TOKEN"  # noqa: S105 (a variable's name): a bearer JWT from the stack's issuer


def client_headers() -> dict[str, str]:
    """The ingress credentials for verify's own smoke inferences: a bearer token from
    $MODEL_SYNC_TRITON_TOKEN or an API key from $MODEL_SYNC_TRITON_API_KEY (never a flag: a command
    line is visible to every user of the machine; never both: the ingress takes one)."""
    import base64
    import os

    value = os.environ.get(API_KEY_ENV, "")
    token = os.environ.get(TOKEN_ENV, "")
    if value and token:
        raise errors.usage(
            f"${API_KEY_ENV} and ${TOKEN_ENV} are both set; allowed: one of them (an API key or a bearer token)"
        )
    if token:
        if token.count(".") != 2 or any(c.isspace() for c in token):
            raise errors.usage(f"${TOKEN_ENV}: not a JWT; allowed: a compact JWT (header.payload.signature)")
        return {"authorization": f"Bearer {token}"}
    if not value:
        return {}
    if ":" not in value:
        raise errors.usage(
            f"${API_KEY_ENV}: not CLIENT:KEY; allowed: an ingress client name and its API key (stack output "
            "ingressApiKeys)"
        )
    return {"authorization": "Basic " + base64.b64encode(value.encode()).decode()}


def _smoke(protocol: str, lib: Any, connect: Callable[[], Any], model: str, version: int, inputs: list[TensorSpec],
           outputs: list[TensorSpec],
           tensor_args: dict[str, Any], infer_args: dict[str, Any],
           headers: dict[str, str] | None = None) -> list[str]:  # fmt: skip
    """One smoke inference through tritonclient's `lib` (http or grpc): problems (empty: passed)."""
    data = smoke_inputs(inputs)
    try:
        client = connect()
        reqs = []
        for s in inputs:
            t = lib.InferInput(s.name, list(data[s.name].shape), s.datatype)
            t.set_data_from_numpy(data[s.name], **tensor_args)
            reqs.append(t)
        result = client.infer(model, reqs, model_version=str(version),
                              outputs=[lib.InferRequestedOutput(o.name, **tensor_args) for o in outputs],
                              headers={**client_headers(), **(headers or {})}, **infer_args)  # fmt: skip
        got = {}
        for o in outputs:
            meta = result.get_output(o.name)  # http: a dict; grpc: a protobuf message
            if meta is not None:
                datatype, shape = (
                    (meta["datatype"], meta["shape"]) if isinstance(meta, dict) else (meta.datatype, meta.shape)
                )
                got[o.name] = (str(datatype), tuple(int(d) for d in shape))
        client.close()
    except Exception as e:
        return [
            f"smoke inference ({protocol}) {model} {version}: {type(e).__name__}: "
            f"{' '.join(str(e).split())[:200]}; allowed: a successful inference"
        ]
    return check_outputs(protocol, got, outputs)


def smoke_http(
    url: str, model: str, version: int, inputs: list[TensorSpec], outputs: list[TensorSpec], timeout: float = 30.0
) -> list[str]:
    import tritonclient.http as httpclient

    host = url.split("://", 1)[-1].rstrip("/")

    def connect() -> Any:
        return httpclient.InferenceServerClient(
            host, ssl=url.startswith("https://"), connection_timeout=timeout, network_timeout=timeout
        )

    return _smoke("http", httpclient, connect, model, version, inputs, outputs, {"binary_data": True}, {})


def smoke_grpc(
    url: str,
    model: str,
    version: int,
    inputs: list[TensorSpec],
    outputs: list[TensorSpec],
    timeout: float = 30.0,
    deployment: str | None = None,
) -> list[str]:
    """`deployment`: the Triton deployment serving the model, sent as `x-triton-deployment` (the gRPC
    ingress routes on it: the model name is inside the protobuf body)."""
    import tritonclient.grpc as grpcclient

    def connect() -> Any:
        return grpcclient.InferenceServerClient(
            url, ssl=url.endswith(":443")
        )  # the ingress serves gRPC over TLS on :443

    selector = {DEPLOYMENT_HEADER: deployment} if deployment else {}
    return _smoke(
        "grpc", grpcclient, connect, model, version, inputs, outputs, {}, {"client_timeout": timeout}, selector
    )


def _tensor_bytes(array: Any) -> bytes:
    """Raw binary-extension bytes of a smoke input: BYTES elements are 4-byte little-endian length + data."""
    import struct

    if array.dtype == object:
        return b"".join(struct.pack("<I", len(x)) + x for x in array.reshape(-1))
    return bytes(array.tobytes())


def smoke_request(inputs: list[TensorSpec], outputs: list[TensorSpec]) -> tuple[bytes, int]:
    """A binary-tensor inference request body and its JSON header length (stdlib + numpy only:
    the agent image has neither tritonclient[http] nor gRPC)."""
    # ref: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md
    data = smoke_inputs(inputs)
    raw = {s.name: _tensor_bytes(data[s.name]) for s in inputs}
    header = {
        "inputs": [
            {
                "name": s.name,
                "shape": list(data[s.name].shape),
                "datatype": s.datatype,
                "parameters": {"binary_data_size": len(raw[s.name])},
            }
            for s in inputs
        ],
        "outputs": [{"name": o.name, "parameters": {"binary_data": True}} for o in outputs],
    }
    head = json.dumps(header).encode()
    return head + b"".join(raw[s.name] for s in inputs), len(head)


def parse_reply(body: bytes, header_length: int | None) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (datatype, shape) of the outputs of a (binary-extension) inference reply."""
    doc = json.loads(body[:header_length] if header_length else body)
    return {str(o["name"]): (str(o["datatype"]), tuple(int(d) for d in o["shape"])) for o in doc.get("outputs", [])}


def smoke_loopback(probe: Any, model: str, version: int, config_text: str) -> list[str]:
    """The agent's smoke inference of `model` `version` through its TritonProbe (loopback HTTP);
    inputs and expected outputs from the pinned config text. Problems (empty: passed)."""
    cfg = model_config.parse(config_text, f"{model} config.pbtxt")
    try:
        inputs, outputs = tensor_specs(cfg)
    except ValueError as e:
        return [f"smoke inference (agent): {e}"]
    body, header_length = smoke_request(inputs, outputs)
    code, reply, reply_header = probe.infer(model, version, body, header_length)
    if code != 200:
        return [
            f"smoke inference (agent) {model} {version}: HTTP {code} "
            f"{' '.join(reply.decode(errors='replace').split())[:200]}; allowed: a successful inference"
        ]
    try:
        got = parse_reply(reply, reply_header)
    except (ValueError, KeyError, TypeError) as e:
        return [
            f"smoke inference (agent) {model} {version}: unreadable reply ({e}); allowed: a KServe v2 inference "
            "response"
        ]
    return check_outputs("agent", got, outputs)
