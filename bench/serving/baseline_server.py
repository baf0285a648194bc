"""The baseline: the "Flask + torch" pattern, one request at a time. A single-threaded
`http.server` loads the same model.pt that Triton serves, runs every request as its own batch of 1
on the same device and answers in the same KServe v2 binary-tensor format Triton uses, so
`bench.serving.loadgen` drives both identically. Nothing is batched or overlapped: each request
is decoded, copied to the GPU, run, copied back and answered before the next one is read.
With --threaded (the consolidation benchmark's open-loop clients open many connections) each
connection has a thread, as Flask's own server does, and the model still runs one request at a time.

    python -m bench.serving.baseline_server --model-pt repo/resnet18/1/model.pt --port 8500 --device cuda
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import Any

from bench.serving import protocol

LOOPBACK = "127.0.0.1"
# The model runs one request at a time, also when a thread serves each connection (--threaded).
ONE_AT_A_TIME = threading.Lock()


def describe(model_name: str, input_shape: tuple[int, ...], output_shape: tuple[int, ...]) -> dict[str, bytes]:
    """The KServe v2 model metadata and Triton-style config perf_analyzer reads before it sends: one
    FP32 input and output, no batching (max_batch_size 0: every request is one batch of 1)."""
    metadata = {"name": model_name, "versions": ["1"], "platform": "baseline",
                "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, *input_shape]}],
                "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": list(output_shape)}]}  # fmt: skip
    config = {"name": model_name, "platform": "baseline", "max_batch_size": 0,
              "input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [1, *input_shape]}],
              "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": list(output_shape)}]}  # fmt: skip
    return {
        "/v2": json.dumps({"name": "baseline", "version": "0", "extensions": []}).encode(),
        f"/v2/models/{model_name}": json.dumps(metadata).encode(),
        f"/v2/models/{model_name}/config": json.dumps(config).encode(),
    }


def make_handler(
    model: Any, device: str, model_name: str, described: dict[str, bytes] | None = None
) -> type[BaseHTTPRequestHandler]:
    import numpy as np
    import torch

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like Triton's HTTP endpoint
        disable_nagle_algorithm = True  # TCP_NODELAY: headers and body are separate writes (else +40 ms delayed ACK)

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, body: bytes, header_length: int | None = None) -> None:
            self.send_response(status)
            self.send_header(
                "Content-Type", "application/octet-stream" if header_length is not None else "application/json"
            )
            self.send_header("Content-Length", str(len(body)))
            if header_length is not None:
                self.send_header(protocol.HEADER_LENGTH, str(header_length))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path in ("/v2/health/ready", "/v2/health/live"):
                self._send(200, b"")
            elif described and self.path.split("?")[0] in described:
                self._send(200, described[self.path.split("?")[0]])
            else:
                self._send(404, b'{"error":"not found"}')

        def do_POST(self) -> None:
            if self.path != f"/v2/models/{model_name}/infer":
                self._send(404, b'{"error":"unknown model"}')
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                hl = self.headers.get(protocol.HEADER_LENGTH)
                tensor = protocol.decode_request(body, int(hl) if hl is not None else None)
            except (protocol.ProtocolError, ValueError) as e:
                self._send(400, json.dumps({"error": str(e)}).encode())
                return
            x = torch.from_numpy(np.frombuffer(tensor.data, dtype=np.float32).reshape(tensor.shape).copy()).to(device)
            with ONE_AT_A_TIME, torch.inference_mode():
                y = model(x)
            out = y.detach().cpu().numpy().astype(np.float32)
            payload, header_length = protocol.encode_response(
                model_name,
                protocol.Tensor("OUTPUT__0", tuple(out.shape), out.tobytes()),
                protocol.request_id(body, int(hl) if hl is not None else None),
            )
            self._send(200, payload, header_length)

    return Handler


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.serving.baseline_server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model-pt", required=True, help="TorchScript file (the model.pt export wrote)")
    p.add_argument("--model-name", default="resnet18")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--device", default="cuda", help="torch device (cuda or cpu)")
    p.add_argument(
        "--threaded",
        action="store_true",
        help="a thread per connection (Flask's default), the model still run one request at a time: clients "
        "that open several connections (perf_analyzer) are not held back until the first one closes",
    )
    p.add_argument(
        "--input-shape",
        default="",
        help="one input's shape without the batch (e.g. 3,224,224): also answer perf_analyzer's model metadata "
        "and config requests, for that shape",
    )
    a = p.parse_args(argv)
    import torch

    model = torch.jit.load(a.model_pt, map_location=a.device).eval()
    described = None
    if a.input_shape:
        shape = tuple(int(x) for x in a.input_shape.split(","))
        with torch.inference_mode():
            out = model(torch.zeros((1, *shape), device=a.device))
        described = describe(a.model_name, shape, tuple(out.shape))
    server_class = ThreadingHTTPServer if a.threaded else HTTPServer
    server = server_class((LOOPBACK, a.port), make_handler(model, a.device, a.model_name, described))
    print(f"baseline serving {a.model_name} on http://{LOOPBACK}:{a.port} ({a.device})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
