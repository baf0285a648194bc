"""One perf_analyzer point against the running tritonserver (gRPC, the tensors in system or CUDA
shared memory, one concurrency), with what the server did meanwhile: the batches Triton executed
(/metrics), GPU utilisation and memory, and the server's and the client's CPU."""

from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.serving import stats
from bench.serving.instruments import GpuSampler, metrics_text, session_cpu_seconds
from bench.serving.state import RunState
from model_sync.sandbox.procs import LOOPBACK


def perf_point(
    state: RunState,
    model: str,
    grpc: int,
    metrics: int,
    sid: int,
    c: int,
    measure_ms: int,
    shm: str = "system",
    batch: int = 1,
) -> dict[str, Any]:
    """`batch` > 1: each request carries that many images (perf_analyzer -b); throughput is images/s."""
    csv_path = state.work / f"pa-{model}-{c}-{shm}-b{batch}.csv"
    cmd = [
        state.a.perf_analyzer,
        "-m",
        model,
        "-u",
        f"{LOOPBACK}:{grpc}",
        "-i",
        "grpc",
        "--async",
        "--shared-memory",
        shm,
        "--output-shared-memory-size",
        str(65536 * batch),
        "-b",
        str(batch),
        "--concurrency-range",
        f"{c}:{c}",
        "--measurement-interval",
        str(measure_ms),
        "--stability-percentage",
        "100",
        "--max-trials",
        "6",
        "-f",
        str(csv_path),
    ]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(Path(state.a.perf_analyzer).parent.parent / "lib"), env.get("LD_LIBRARY_PATH", "")) if p
    )
    before = metrics_text(metrics)
    cpu0 = session_cpu_seconds(sid)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with GpuSampler() as gpu:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=max(60, measure_ms / 1000 * 12), check=False
        )
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu1 = session_cpu_seconds(sid)
    after = metrics_text(metrics)
    if proc.returncode != 0 or not csv_path.exists():
        raise RuntimeError(
            f"perf_analyzer c={c}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-500:]}"
        )
    row = stats.parse_perf_analyzer_csv(csv_path.read_text())[0]
    point: dict[str, Any] = dict(row)
    point.update(stats.batch_stats(before, after, model))
    point.update(
        gpu_util_pct=gpu.mean,
        gpu_memory_used_mib=gpu.peak_memory_mib,
        server_cpu_cores=(cpu1 - cpu0) / wall,
        client_cpu_cores=((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)) / wall,
        errors=0,
        client_batch=batch,
    )
    return point
