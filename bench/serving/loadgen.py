"""Closed-loop HTTP load generator (KServe v2 + binary tensors, stdlib only): `concurrency` requests
in flight, spread over several processes so that one Python interpreter (the GIL) is not the bound
(the earlier single-process 64-thread client was: docs/gpu-benchmark.md, "What bounds each
configuration"). Each thread keeps one HTTP/1.1 keep-alive connection and sends the next request
as soon as the previous one answers.

Only requests that start after the warm-up and finish before the end of the window are counted;
throughput = counted requests / window. Every response is decoded and its output size checked.

    python -m bench.serving.loadgen --port 8000 --model resnet18 --concurrency 64 --duration 10
"""

from __future__ import annotations

import argparse
import array
import http.client
import json
import multiprocessing as mp
import os
import random
import resource
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from bench.serving import protocol, stats

DEFAULT_SHAPE = (1, 3, 224, 224)


@dataclass(frozen=True)
class LoadSpec:
    host: str
    port: int
    model: str
    input_name: str = "INPUT__0"
    output_name: str = "OUTPUT__0"
    shape: tuple[int, ...] = DEFAULT_SHAPE
    output_elems: int = 1000
    concurrency: int = 1
    duration_s: float = 10.0
    warmup_s: float = 2.0
    processes: int = 0  # 0: min(concurrency, cpu_count // 2)
    binary_output: bool = True  # the output as binary data (False: as a JSON `data` array)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency: {self.concurrency}; allowed: >= 1")
        if self.duration_s <= 0 or self.warmup_s < 0:
            raise ValueError(f"duration_s/warmup_s: {self.duration_s}/{self.warmup_s}; allowed: > 0 / >= 0")

    def process_count(self) -> int:
        wanted = self.processes or max(1, (os.cpu_count() or 2) // 2)
        return max(1, min(self.concurrency, wanted))


def payload(shape: tuple[int, ...], seed: int = 0) -> bytes:
    """Random FP32 values in [0, 1) (never zeros: they can run faster than real data)."""
    rnd = random.Random(seed)
    n = protocol.nbytes(shape) // protocol.FP32_BYTES
    return array.array("f", (rnd.random() for _ in range(n))).tobytes()


def _connect(spec: LoadSpec) -> http.client.HTTPConnection:
    """A keep-alive connection with Nagle off: http.client writes headers and body separately, and
    Nagle + delayed ACK would add ~40 ms to every request (seen in the first GPU run's baseline)."""
    conn = http.client.HTTPConnection(spec.host, spec.port, timeout=60)
    conn.connect()
    assert conn.sock is not None
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def _thread(
    spec: LoadSpec, body: bytes, header_len: int, start: float, end: float, out: list[float], errors: list[str]
) -> None:
    conn = _connect(spec)
    path = f"/v2/models/{spec.model}/infer"
    headers = {"Content-Type": "application/octet-stream", protocol.HEADER_LENGTH: str(header_len)}
    expected = spec.output_elems * protocol.FP32_BYTES
    while True:
        t0 = time.perf_counter()
        if t0 >= end:
            break
        try:
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise protocol.ProtocolError(f"HTTP {resp.status}: {data[:200]!r}")
            hl = resp.getheader(protocol.HEADER_LENGTH)
            try:
                if spec.binary_output:
                    tensor = protocol.decode_response(data, int(hl) if hl is not None else None)
                    name, size = tensor.name, len(tensor.data)
                else:
                    name, count = protocol.decode_json_response(data)
                    size = count * protocol.FP32_BYTES
            except protocol.ProtocolError as e:
                raise protocol.ProtocolError(f"{e} (headers {resp.getheaders()}, body {data[:160]!r})") from None
            if size != expected:
                raise protocol.ProtocolError(f"output {name}: {size} bytes; allowed: {expected}")
        except (OSError, http.client.HTTPException, protocol.ProtocolError) as e:
            errors.append(f"{type(e).__name__}: {e}"[:300])
            conn.close()
            time.sleep(0.01)
            conn = _connect(spec)
            continue
        t1 = time.perf_counter()
        if t0 >= start and t1 <= end:
            out.append(t1 - t0)
    conn.close()


def _worker(spec: LoadSpec, threads: int, start_wall: float, queue: Any) -> None:
    tensor = protocol.Tensor(spec.input_name, spec.shape, payload(spec.shape, seed=os.getpid()))
    body, header_len = protocol.encode_request(tensor, spec.output_name, spec.binary_output)
    # Convert the shared wall-clock schedule into this process's perf_counter timeline.
    offset = time.perf_counter() - time.time()
    start = start_wall + spec.warmup_s + offset
    end = start + spec.duration_s
    lat: list[float] = []
    errs: list[str] = []
    pool = [
        threading.Thread(target=_thread, args=(spec, body, header_len, start, end, lat, errs), daemon=True)
        for _ in range(threads)
    ]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    queue.put((array.array("d", lat).tobytes(), errs[:20], len(errs)))


def probe(spec: LoadSpec) -> dict[str, Any]:
    """One request in the spec's output form: the HTTP status, the response headers, the body's size
    and its first 300 bytes, and whether its output decoded to the expected size (`ok`)."""
    tensor = protocol.Tensor(spec.input_name, spec.shape, payload(spec.shape))
    body, header_len = protocol.encode_request(tensor, spec.output_name, spec.binary_output)
    conn = _connect(spec)
    try:
        conn.request("POST", f"/v2/models/{spec.model}/infer", body=body,
                     headers={"Content-Type": "application/octet-stream", protocol.HEADER_LENGTH: str(header_len)})  # fmt: skip
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    out: dict[str, Any] = {"binary_output": spec.binary_output, "status": resp.status,
                           "headers": [list(h) for h in resp.getheaders()], "body_bytes": len(data),
                           "body_head": data[:300].decode("latin-1")}  # fmt: skip
    try:
        if spec.binary_output:
            hl = resp.getheader(protocol.HEADER_LENGTH)
            size = len(protocol.decode_response(data, int(hl) if hl is not None else None).data)
        else:
            size = protocol.decode_json_response(data)[1] * protocol.FP32_BYTES
        out["ok"] = resp.status == 200 and size == spec.output_elems * protocol.FP32_BYTES
    except protocol.ProtocolError as e:
        out.update(ok=False, error=str(e)[:300])
    return out


def run(spec: LoadSpec) -> dict[str, Any]:
    """Drive the server; returns stats.latency_summary + errors, processes, client CPU cores used."""
    procs = spec.process_count()
    shares = [spec.concurrency // procs + (1 if i < spec.concurrency % procs else 0) for i in range(procs)]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    start_wall = time.time() + 1.5 + 0.02 * procs  # every worker is up before the warm-up starts
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers = [ctx.Process(target=_worker, args=(spec, n, start_wall, queue), daemon=True) for n in shares if n]
    for w in workers:
        w.start()
    lat: list[float] = []
    samples: list[str] = []
    errors = 0
    for _ in workers:
        data, errs, n = queue.get(timeout=spec.warmup_s + spec.duration_s + 120)
        lat.extend(array.array("d", data))
        samples.extend(errs)
        errors += n
    for w in workers:
        w.join(timeout=30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary: dict[str, Any] = dict(stats.latency_summary(lat, spec.duration_s, errors))
    summary.update(
        concurrency=spec.concurrency,
        processes=len(workers),
        client_cpu_cores=cpu / (spec.warmup_s + spec.duration_s + 1.5),
        error_samples=samples[:5],
    )
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.serving.loadgen",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", required=True)
    p.add_argument(
        "--shape", type=protocol.shape_of, default=DEFAULT_SHAPE, help="input shape incl. batch (default 1,3,224,224)"
    )
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--processes", type=int, default=0)
    a = p.parse_args(argv)
    result = run(
        LoadSpec(
            a.host,
            a.port,
            a.model,
            shape=a.shape,
            concurrency=a.concurrency,
            duration_s=a.duration,
            warmup_s=a.warmup,
            processes=a.processes,
        )
    )
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0 if result["requests"] and not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
