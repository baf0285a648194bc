"""Warm-up: the first requests after a hot reload, with `model_warmup` against without.

One real tritonserver (the local runtime tests use: poll mode, 1 s) serves two models exported
from the same factory (default: bench.serving.resnet:build, ResNet-18, --target local, KIND_CPU,
max batch 8, preferred batch 8; `--instance-kind KIND_GPU --triton-root W/triton` on a GPU host,
from bench/serving/device.sh): `warm` (export's default, warm-up samples at batch 1 and 8) and
`cold` (`--no-warmup`). Each repetition hot-reloads both, one after the other (the order alternates):
a new version directory is renamed into the repository and config.pbtxt re-pinned to it, the way
the agent places a version; then

  ready_s        placement -> /v2/models/<m>/versions/<N>/ready answers 200 (includes up to one
                 poll interval, the same for both models);
  load_s         Triton's own log: "loading: <m>:<N>" -> the next "successfully loaded '<m>'"
                 (python stub start, torch.jit.load, and the warm-up samples when there are any);
  first_ms       the first --first requests at batch 1, one after another, right after READY;
  batch_ms       then one request at the largest preferred batch (its first at that shape);
  steady_ms      then --steady more batch-1 requests: the warm latency to compare against.

Latencies are client-side (KServe v2 HTTP with binary tensors, bench.serving.protocol over one
keep-alive http.client connection: the GPU host has no tritonclient). Medians with min/max over the
repetitions are reported per scenario.

    .venv/bin/python -m bench.warmup.run [--repeat 5] [--out bench/results/warmup.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.serving import protocol, pytorch_backend
from model_sync.sandbox.procs import LOOPBACK, http_status
from model_sync.sandbox.runtime import (
    TRITONSERVER_VERSION,
    TritonRuntime,
    TritonServer,
    ensure_tritonserver,
)
from model_sync.triton_model import model_config

SCENARIOS = {"warmup": "warm", "no-warmup": "cold"}  # scenario -> model name
# Triton's default log prefix: 'I1202 13:29:50.123456 <pid> <file>:<line>] "<message>"'
_LOG_TIME = r"^I\d{4} (\d\d):(\d\d):(\d\d\.\d+) .*?\] \""


def _export(
    factory: str, repo: Path, name: str, shape: tuple[int, ...], max_batch: int, preferred: int, warmup: bool, kind: str,
    target: str,
) -> None:  # fmt: skip
    from model_sync.cli import main

    args = ["export", factory, "--name", name, "--output", str(repo),
            "--example-shape", ",".join(map(str, (2, *shape))), "--target", target,
            "--max-batch-size", str(max_batch), "--preferred-batch-size", str(preferred),
            "--instance-kind", kind, "--instance-count", "1", "--quiet"]  # fmt: skip
    if not warmup:
        args.append("--no-warmup")
    rc = main(args)
    if rc != 0:
        raise RuntimeError(f"export {name} exited {rc}")


def _place(repo: Path, name: str, version: int) -> float:
    """What the agent does: the version directory renamed in whole, then the pin rewritten
    atomically. Returns the monotonic time of the pin write."""
    model = repo / name
    tmp = repo / f".{name}.{version}.staging"
    shutil.copytree(model / "1", tmp)
    os.rename(tmp, model / str(version))
    cfg = model_config.read_file(str(model / "config.pbtxt"))
    model_config.write_file(str(model / "config.pbtxt"), model_config.pin(cfg, version))
    return time.monotonic()


def _wait_ready(server: TritonServer, name: str, version: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    url = f"{server.http_url}/v2/models/{name}/versions/{version}/ready"
    while time.monotonic() < deadline:
        if http_status(url) == 200:
            return time.monotonic()
        time.sleep(0.01)
    raise TimeoutError(f"{name} version {version} not READY within {timeout:.0f}s (log {server.log_path})")


def _log_seconds(m: re.Match[str]) -> float:
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))


def _load_s(log: str, name: str, version: int) -> float | None:
    """Triton 2.51 logs "loading: <m>:<N>" and then "successfully loaded '<m>'" (no version)."""
    start = re.search(_LOG_TIME + rf"loading: {name}:{version}\"", log, re.M)
    done = re.compile(_LOG_TIME + rf"successfully loaded '{name}'\"", re.M).search(log, start.end()) if start else None
    return round(_log_seconds(done) - _log_seconds(start), 3) if start and done else None


def _infer_ms(conn: http.client.HTTPConnection, name: str, batch: Any) -> float:
    body, header_length = protocol.encode_request(
        protocol.Tensor("INPUT__0", tuple(batch.shape), batch.tobytes()), "OUTPUT__0"
    )
    headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(header_length)}
    t0 = time.perf_counter()
    conn.request("POST", f"/v2/models/{name}/infer", body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    elapsed = (time.perf_counter() - t0) * 1000
    if response.status != 200:
        raise RuntimeError(f"{name}: HTTP {response.status}: {data[:300]!r}")
    return elapsed


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2), "max": round(max(values), 2)}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    first = len(runs[0]["first_ms"])
    return {
        "ready_s": _spread([r["ready_s"] for r in runs]),
        "load_s": _spread([r["load_s"] for r in runs if r["load_s"] is not None])
        if any(r["load_s"] is not None for r in runs)
        else None,
        "first_request_ms": _spread([r["first_ms"][0] for r in runs]),
        "first_requests_ms_by_index": [_spread([r["first_ms"][i] for r in runs]) for i in range(first)],
        "first_batch_ms": _spread([r["batch_ms"] for r in runs]),
        "steady_median_ms": _spread([statistics.median(r["steady_ms"]) for r in runs]),
    }


BACKENDS = {
    "local": "python backend (export --target local's wrapper)",
    "cloud": "pytorch_libtorch: Triton's PyTorch backend (r24.10, built from the pinned sources)",
}


def _machine(kind: str, target: str) -> str:
    if kind == "KIND_GPU":
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
        return (
            f"{gpu} ({os.cpu_count()} vCPUs), torch {torch.__version__}, tritonserver {TRITONSERVER_VERSION} "
            f"{BACKENDS[target]}"
        )
    return (
        f"CPU only: {os.cpu_count()} shared cores (other jobs running), tritonserver {TRITONSERVER_VERSION} "
        "from nvidia-pytriton"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.warmup.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--factory",
        default="bench.serving.resnet:build",
        help="MODULE:FACTORY exported (default bench.serving.resnet:build, ResNet-18)",
    )
    parser.add_argument(
        "--shape", default="3,224,224", help="one input's shape without the batch dimension (default 3,224,224)"
    )
    parser.add_argument("--max-batch-size", type=int, default=8, help="export --max-batch-size (default 8)")
    parser.add_argument(
        "--preferred", type=int, default=8, help="export --preferred-batch-size: the warm-up's large batch (default 8)"
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="hot reloads of each model, alternating order (default 5)"
    )
    parser.add_argument("--first", type=int, default=5, help="batch-1 requests timed right after READY (default 5)")
    parser.add_argument(
        "--steady", type=int, default=10, help="batch-1 requests timed after those, the warm reference (default 10)"
    )
    parser.add_argument(
        "--timeout", type=float, default=180.0, help="seconds to wait for a version READY (default 180)"
    )
    parser.add_argument(
        "--instance-kind", default="KIND_CPU", choices=("KIND_CPU", "KIND_GPU"), help="export --instance-kind"
    )
    parser.add_argument(
        "--triton-root",
        type=Path,
        help="an extracted tritonserver (bench/serving/device.sh); default: the local runtime",
    )
    parser.add_argument(
        "--stub-python", default="", help="the python3 (numpy<2) whose site-packages the python backend stub uses"
    )
    parser.add_argument(
        "--target",
        default="local",
        choices=sorted(BACKENDS),
        help="export --target: local (the python-backend wrapper) or cloud (platform pytorch_libtorch: Triton's "
        "PyTorch backend, built by bench.serving.pytorch_backend into --triton-root's backends/)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("bench/results/warmup.json"),
        help="result JSON (default bench/results/warmup.json)",
    )
    args = parser.parse_args(argv)

    import numpy as np

    shape = tuple(int(x) for x in args.shape.split(","))
    rng = np.random.default_rng(0)
    one = rng.standard_normal((1, *shape), dtype=np.float32)
    big = rng.standard_normal((args.preferred, *shape), dtype=np.float32)
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SCENARIOS}
    with tempfile.TemporaryDirectory(prefix="bench-warmup-") as tmp_name:
        tmp = Path(tmp_name)
        repo = tmp / "models"
        for scenario, name in SCENARIOS.items():
            _export(
                args.factory,
                repo,
                name,
                shape,
                args.max_batch_size,
                args.preferred,
                scenario == "warmup",
                args.instance_kind,
                args.target,
            )
        for name in SCENARIOS.values():
            model_config.write_file(
                str(repo / name / "config.pbtxt"),
                model_config.pin(model_config.read_file(str(repo / name / "config.pbtxt")), 1),
            )
        runtime = TritonRuntime(args.triton_root) if args.triton_root else ensure_tritonserver()
        extra = pytorch_backend.runtime_env({}, runtime.backends) if args.target == "cloud" else {}
        server = TritonServer(repo, tmp / "triton.log", runtime=runtime, stub_python=args.stub_python or sys.executable,
                              extra_env=extra)  # fmt: skip
        try:
            server.start(timeout=args.timeout)
            for name in SCENARIOS.values():
                _wait_ready(server, name, 1, args.timeout)
            client = http.client.HTTPConnection(LOOPBACK, server.http_port, timeout=120)
            for rep in range(args.repeat):
                version = rep + 2
                order = list(SCENARIOS.items()) if rep % 2 == 0 else list(SCENARIOS.items())[::-1]
                for scenario, name in order:
                    placed = _place(repo, name, version)
                    ready = _wait_ready(server, name, version, args.timeout)
                    first = [_infer_ms(client, name, one) for _ in range(args.first)]
                    batch = _infer_ms(client, name, big)
                    steady = [_infer_ms(client, name, one) for _ in range(args.steady)]
                    time.sleep(1.5)  # let Triton unload the previous version before the next reload
                    run = {"version": version, "ready_s": round(ready - placed, 3),
                           "load_s": _load_s(server.log_path.read_text(), name, version),
                           "first_ms": [round(x, 2) for x in first], "batch_ms": round(batch, 2),
                           "steady_ms": [round(x, 2) for x in steady]}  # fmt: skip
                    runs[scenario].append(run)
                    print(scenario, json.dumps(run), flush=True)
        finally:
            server.stop()
            if args.triton_root:  # on the GPU host the log comes back beside the result
                args.out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(server.log_path, args.out.with_suffix(".triton.log"))
    doc = {
        "benchmark": "warm-up: first requests after a hot reload, model_warmup (export default) vs --no-warmup",
        "scenario": (
            f"{args.factory} exported --target {args.target} ({BACKENDS[args.target]}, {args.instance_kind}, 1 instance, "
            f"max batch {args.max_batch_size}, preferred {args.preferred}); warm-up samples batch 1 and "
            f"{args.preferred}, zero_data; a new version renamed into the repository + pin rewritten, poll 1 s; "
            f"{args.first} batch-1 requests then one batch-{args.preferred} then "
            f"{args.steady} batch-1, sequential, HTTP binary"
        ),
        "repetitions": args.repeat,
        "summary": {scenario: _summary(rs) for scenario, rs in runs.items()},
        "runs": runs,
        "measured_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "backend": BACKENDS[args.target],
        "machine": _machine(args.instance_kind, args.target),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
