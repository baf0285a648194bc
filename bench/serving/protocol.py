"""The KServe v2 HTTP inference protocol with Triton's binary tensor extension, the subset the
benchmark needs: one FP32 input, one FP32 output, both as raw bytes after a JSON header whose
length is sent in `Inference-Header-Content-Length`. Both the load generator and the baseline
server speak it, so the baseline and Triton are driven by the same client over the same wire format.
ref: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HEADER_LENGTH = "Inference-Header-Content-Length"
FP32_BYTES = 4


class ProtocolError(ValueError):
    """A request or response that is not the binary-tensor form expected (one line)."""


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    data: bytes  # FP32, C order

    def __post_init__(self) -> None:
        n = 1
        for d in self.shape:
            n *= d
        if len(self.data) != n * FP32_BYTES:
            raise ProtocolError(
                f"tensor {self.name}: {len(self.data)} bytes for shape {list(self.shape)}; allowed: {n * FP32_BYTES} "
                "(FP32)"
            )


def _pack(header: Mapping[str, object], data: bytes) -> tuple[bytes, int]:
    head = json.dumps(header, separators=(",", ":")).encode()
    return head + data, len(head)


def encode_request(tensor: Tensor, output: str, binary_output: bool = True) -> tuple[bytes, int]:
    """Body and JSON-header length of an infer request asking for `output` as binary data (or, with
    `binary_output` False, as a JSON `data` array)."""
    header = {
        "inputs": [
            {
                "name": tensor.name,
                "shape": list(tensor.shape),
                "datatype": "FP32",
                "parameters": {"binary_data_size": len(tensor.data)},
            }
        ],
        "outputs": [{"name": output, "parameters": {"binary_data": binary_output}}],
    }
    return _pack(header, tensor.data)


def encode_response(model: str, tensor: Tensor, request_id: str | None = None) -> tuple[bytes, int]:
    """A response carrying `tensor` in binary, echoing the request's `id` when it had one (perf_analyzer's
    asynchronous HTTP client matches responses to requests by it)."""
    header: dict[str, object] = {
        "model_name": model,
        "model_version": "1",
        "outputs": [
            {
                "name": tensor.name,
                "shape": list(tensor.shape),
                "datatype": "FP32",
                "parameters": {"binary_data_size": len(tensor.data)},
            }
        ],
    }
    if request_id is not None:
        header["id"] = request_id
    return _pack(header, tensor.data)


def request_id(body: bytes, header_length: int | None) -> str | None:
    """The `id` of an infer request's JSON header (None: none given, or no readable header)."""
    try:
        head = json.loads(body[:header_length] if header_length is not None else body)
    except ValueError:
        return None
    value = head.get("id") if isinstance(head, dict) else None
    return str(value) if value is not None else None


def _split(body: bytes, header_length: int | None, key: str) -> Tensor:
    if header_length is None:
        raise ProtocolError(
            f"{HEADER_LENGTH}: missing; allowed: the JSON header length in bytes (binary tensor extension)"
        )
    if not 0 < header_length <= len(body):
        raise ProtocolError(f"{HEADER_LENGTH}: {header_length} for a {len(body)}-byte body; allowed: 1..{len(body)}")
    try:
        header = json.loads(body[:header_length])
        (entry,) = header[key]
        size = int(entry["parameters"]["binary_data_size"])
        shape = tuple(int(d) for d in entry["shape"])
        dtype = entry["datatype"]
    except (ValueError, KeyError, TypeError) as e:
        raise ProtocolError(
            f"JSON header: not one binary {key[:-1]} tensor ({type(e).__name__}: {e}); allowed: the binary tensor "
            "extension form"
        ) from None
    if dtype != "FP32":
        raise ProtocolError(f"{key[:-1]} datatype: {dtype!r}; allowed: 'FP32'")
    data = body[header_length:]
    if len(data) != size:
        raise ProtocolError(
            f"binary_data_size: {size}, body carries {len(data)} bytes after the header; allowed: equal"
        )
    return Tensor(str(entry["name"]), shape, data)


def decode_request(body: bytes, header_length: int | None) -> Tensor:
    return _split(body, header_length, "inputs")


def decode_response(body: bytes, header_length: int | None) -> Tensor:
    return _split(body, header_length, "outputs")


def decode_json_response(body: bytes) -> tuple[str, int]:
    """(output name, element count) of a response whose one output came as a JSON `data` array."""
    try:
        (entry,) = json.loads(body)["outputs"]
        return str(entry["name"]), len(entry["data"])
    except (ValueError, KeyError, TypeError) as e:
        raise ProtocolError(
            f"JSON response: not one output with a `data` array ({type(e).__name__}: {e}); allowed: the JSON "
            "tensor form"
        ) from None


def shape_of(text: str) -> tuple[int, ...]:
    dims = tuple(int(x) for x in text.split(","))
    if not dims or any(d < 1 for d in dims):
        raise ProtocolError(f"shape: {text!r}; allowed: positive integers separated by commas")
    return dims


def nbytes(shape: Sequence[int]) -> int:
    n = FP32_BYTES
    for d in shape:
        n *= d
    return n
