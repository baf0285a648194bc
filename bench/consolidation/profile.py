"""Each model's serving profile on one GPU (bench/serving/device.sh, PROFILES=1): what a planner of
deployments needs to know of a model, measured alone.

For every model of bench.zoo (or --models): exported by `model-sync export --target cloud` with ONE
GPU instance (the config of bench.consolidation.run otherwise: max batch 32, preferred 16 and 32,
2 ms queue delay), served alone by one tritonserver with Triton's own PyTorch backend
(`pytorch_libtorch`), and driven by one open-loop perf_analyzer stream (Poisson arrivals, HTTP) whose
rate doubles until a step fails, then is bisected (bench.consolidation.run's search: a step passes
when the model's p99 <= --p99-ms and it served >= SERVED_SHARE of the offered rate). Every step is
kept: a model's curve of (offered rate, served, p99) on one instance, from which the highest rate
that meets any p99 target at or above a measured one can be read. With the GPU memory export
measured per instance and the device memory the server held at its best step.

    python3 -m bench.consolidation.profile --triton-root W/triton --perf-analyzer W/triton/perf/bin/perf_analyzer \
        --out OUT/model-profiles.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import zoo
from bench.consolidation import run as consolidation
from bench.serving.instruments import log, process_gpu_bytes
from model_sync.sandbox.procs import LOOPBACK

SCHEMA = "triton-platform/bench-model-profiles/v1"
CONFIG: dict[str, Any] = {**consolidation.CONFIG, "instances": 1}


def export_one(name: str, repo: Path, kind: str, instances: int = 1) -> dict[str, Any]:
    """`model-sync export --target cloud` of zoo model `name` with `instances` (one: a profile); what it measured."""
    args = zoo.export_args(name, repo, max_batch=CONFIG["max_batch"], preferred=CONFIG["preferred"],
                           delay_us=CONFIG["delay_us"], instances=instances, kind=kind)  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "model_sync", "export", *args], capture_output=True, text=True,
                          cwd=consolidation.ROOT, timeout=900, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"export {name}: exit {proc.returncode}: {proc.stderr.strip()[-400:]}")
    meta = json.loads((repo / name / "export.json").read_text())
    return {"factory": zoo.ZOO[name].factory, "input_shape": list(zoo.ZOO[name].shape),
            "bytes_per_instance": meta["gpu_memory"]["bytes_per_instance"],
            "export_command": "model-sync export " + " ".join(args).replace(str(repo), "REPO")}  # fmt: skip


def export_all(a: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Every model exported into a repository of its own (a.work/<model>/repository), four at a time."""

    def one(name: str) -> tuple[str, dict[str, Any]]:
        repo = a.work / name / "repository"
        repo.mkdir(parents=True)
        return name, export_one(name, repo, a.instance_kind)

    with ThreadPoolExecutor(4) as pool:
        return dict(pool.map(one, a.models))


def profile_one(a: argparse.Namespace, name: str, exported: dict[str, Any], deadline: float) -> dict[str, Any]:
    """Model `name` alone on one tritonserver: serve its export, search its rate; its curve and best step."""
    work = a.work / name
    repo = work / "repository"
    out = dict(exported)
    before = process_gpu_bytes(None) if a.device == "cuda" else 0
    one = argparse.Namespace(**{**vars(a), "models": [name]})
    server = consolidation.triton_arm(one, repo, work)
    try:
        idle = process_gpu_bytes(None) - before if a.device == "cuda" else None
        target = consolidation.Target(name, f"{LOOPBACK}:{server.http_port}", "http")
        result = consolidation.search(one, [target], work, deadline)
    finally:
        server.stop()
    curve = sorted(
        ({"rate": s["rate_per_model"], "passed": s["passed"], "gpu_util_pct": s["gpu_util_pct"]}
         | {k: s["models"][name].get(k) for k in ("throughput", "p50_ms", "p99_ms")} for s in result["steps"]),
        key=lambda p: p["rate"],
    )  # fmt: skip
    best = result["best"]
    top = best and {"rate": best["rate_per_model"], "gpu_util_pct": best["gpu_util_pct"]} | {
        k: best["models"][name][k] for k in ("throughput", "p99_ms")
    }
    out.update(
        curve=curve,
        complete=result["complete"],
        best=top,
        gpu_memory_idle_mib=idle and round(idle / 2**20, 1),
        gpu_memory_mib=best and best["gpu_memory_used_mib"] and round(best["gpu_memory_used_mib"] - before / 2**20, 1),
    )
    log(f"{name}: best {out['best']}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = consolidation.server_parser("bench.consolidation.profile", __doc__, "/tmp/bench-profiles")
    p.add_argument("--models", nargs="+", default=list(zoo.ZOO), choices=list(zoo.ZOO))
    p.add_argument("--p99-ms", type=float, default=80.0, help="a step fails above this p99")
    p.add_argument("--start-rate", type=float, default=200.0, help="requests/s of the first step")
    p.add_argument("--resolution", type=float, default=0.15, help="bisect until the bracket is this share of the rate")
    p.add_argument("--window-ms", type=int, default=1500, help="perf_analyzer's measurement window (3 per step)")
    p.add_argument("--model-seconds", type=float, default=35, help="time budget of one model's search")
    a = p.parse_args(argv)
    shutil.rmtree(a.work, ignore_errors=True)
    doc: dict[str, Any] = {"schema": SCHEMA, "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                           "scenario": __doc__.split("\n\n")[1].strip(), "config": CONFIG, "p99_ms": a.p99_ms,
                           "served_share": consolidation.SERVED_SHARE, "gpu": consolidation.gpu_name(a.device),
                           "device": a.device,
                           "backend": "pytorch_libtorch: Triton's PyTorch backend (r24.10, built from the pinned "
                                      "sources), tritonserver 2.51",
                           "client": "perf_analyzer http, Poisson arrivals, one stream", "models": {},
                           "errors": []}  # fmt: skip
    try:
        exported = export_all(a)
    except Exception as e:
        exported = {}
        doc["errors"].append(f"export: {type(e).__name__}: {str(e)[:400]}")
    for name in exported:
        try:
            doc["models"][name] = profile_one(a, name, exported[name], time.monotonic() + a.model_seconds)
        except Exception as e:  # recorded: the models profiled are kept
            doc["errors"].append(f"{name}: {type(e).__name__}: {str(e)[:400]}")
            log(f"!! {name}: {e}")
    return consolidation.write_result(a.out, doc)


if __name__ == "__main__":
    sys.exit(main())
