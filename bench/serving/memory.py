"""GPU memory of `pytorch_libtorch` models as Triton serves them, against GPU memory planning's
prediction (model_sync/admission/gpu_plan.py), on the GPU host (bench/serving/device.sh, MEMORY=1):

    python3 -m bench.serving.memory --triton-root W/triton --perf-analyzer W/triton/perf/bin/perf_analyzer \
        --out OUT/memory-plan.json [--models mlp-small resnet18 resnet50] [--counts 1 2 4]

Three models of different sizes (bench.zoo) are exported once each with `model-sync export --target
cloud` (KIND_GPU, max batch `--max-batch-size`; export measures one instance's GPU memory at that
batch: `gpu_memory.bytes_per_instance`). Then, for each model and instance count, and for all three
together at each count ("mixed": one process, several models), a fresh tritonserver (Triton's PyTorch
backend built by bench.serving.pytorch_backend) serves that configuration; once READY (its warm-up
ran), perf_analyzer drives it with count x max batch requests in flight, so every instance runs
full batches; then NVML reads the server process' GPU memory (`process_bytes`; where the driver
does not attribute memory to processes, the device's memory in use minus what it used before the
server started: `device_bytes`).

Each row records its models' export figures, counts and platform, so the plan is recomputed from
the row with whatever gpu_plan says now (`planned`, `python -m bench.serving.report`): the
recalibration is checked against these observations, not asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import zoo
from bench.serving import pytorch_backend
from bench.serving.instruments import log, process_gpu_bytes
from model_sync.admission import gpu_plan
from model_sync.environments import DeploymentGpu
from model_sync.sandbox.procs import http_status, wait_until
from model_sync.sandbox.runtime import TritonRuntime, TritonServer
from model_sync.triton_model import model_config

SCHEMA = "triton-platform/bench-memory-plan/v1"
ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20


def planned(row: dict[str, Any], gpu_gib: float = 80.0) -> int:
    """What gpu_plan predicts for one row's models on one GPU (the row as the bench recorded it)."""
    needs = [
        gpu_plan.Need(m["model"], m["model"], m["bytes_per_instance"],
                      ({"kind": "KIND_GPU", "count": m["count"], "gpus": []},), backend=m["platform"])
        for m in row["models"]
    ]  # fmt: skip
    deployment = DeploymentGpu("bench", "bench", gpu_gib, tuple(m["model"] for m in row["models"]))
    return gpu_plan.plan(deployment, needs).planned


def observed(row: dict[str, Any]) -> int:
    """The row's observed GPU memory: the process' where NVML attributes it, else the device's."""
    value = row["process_bytes"] if row.get("process_bytes") else row["device_bytes"]
    return int(value)


def compare(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per row: planned (gpu_plan now) against observed, and the error as a share of observed."""
    out = []
    for row in doc["rows"]:
        p, o = planned(row), observed(row)
        out.append({"label": row["label"], "planned_mib": round(p / MIB, 1), "observed_mib": round(o / MIB, 1),
                    "error_pct": round((p - o) / o * 100, 1)})  # fmt: skip
    return out


def fit(doc: dict[str, Any]) -> dict[str, float] | None:
    """Least squares over the one-model rows: observed - count x export's bytes = process + count x
    instance, i.e. what one server process holds beside its instances (CUDA context, libtorch's
    kernels and handles) and what each instance holds beyond export's figure."""
    pts = [(m["count"], observed(r) - m["count"] * m["bytes_per_instance"])
           for r in doc["rows"] if len(r["models"]) == 1 for m in r["models"]]  # fmt: skip
    if len({n for n, _ in pts}) < 2:
        return None
    n_mean = sum(n for n, _ in pts) / len(pts)
    y_mean = sum(y for _, y in pts) / len(pts)
    slope = sum((n - n_mean) * (y - y_mean) for n, y in pts) / sum((n - n_mean) ** 2 for n, _ in pts)
    return {"process_mib": round((y_mean - slope * n_mean) / MIB, 1), "instance_mib": round(slope / MIB, 1),
            "rows": len(pts)}  # fmt: skip


def export(name: str, repo: Path, max_batch: int, kind: str = "KIND_GPU") -> dict[str, Any]:
    args = zoo.export_args(name, repo, max_batch=max_batch, preferred=(max_batch,), delay_us=1000, instances=1,
                           kind=kind)  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "model_sync", "export", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"export {name}: exit {proc.returncode}: {proc.stderr.strip()[-400:]}")
    meta = json.loads((repo / name / "export.json").read_text())
    cfg = model_config.read_file(str(repo / name / "config.pbtxt"))
    return {"model": name, "bytes_per_instance": meta["gpu_memory"]["bytes_per_instance"],
            "export_basis": meta["gpu_memory"]["basis"], "platform": cfg.platform}  # fmt: skip


def stage(exported: Path, repo: Path, counts: dict[str, int]) -> None:
    """A repository of the given models, each config's instance count set (export's config otherwise)."""
    shutil.rmtree(repo, ignore_errors=True)
    for name, count in counts.items():
        shutil.copytree(exported / name, repo / name)
        cfg = model_config.read_file(str(repo / name / "config.pbtxt"))
        cfg.instance_group[0].count = count
        model_config.write_file(str(repo / name / "config.pbtxt"), cfg)


def drive(a: argparse.Namespace, server: TritonServer, name: str, inflight: int) -> None:
    """perf_analyzer with `inflight` requests in flight for one short window (full batches everywhere)."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = f"{Path(a.perf_analyzer).parent.parent / 'lib'}:{env.get('LD_LIBRARY_PATH', '')}"
    cmd = [a.perf_analyzer, "-m", name, "-u", server.grpc_url, "-i", "grpc", "--async", "--shared-memory", "system",
           "--output-shared-memory-size", "65536", "--concurrency-range", f"{inflight}:{inflight}",
           "--measurement-interval", "1000", "--max-trials", "3", "--stability-percentage", "999"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"perf_analyzer {name}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")


def measure(a: argparse.Namespace, label: str, repo: Path, counts: dict[str, int], device_before: int) -> dict:
    server = TritonServer(repo, Path(a.work) / f"triton-{label}.log", runtime=TritonRuntime(Path(a.triton_root)),
                          extra_env=pytorch_backend.runtime_env({}, Path(a.backends)))  # fmt: skip
    server.start(timeout=120)
    try:
        for name in counts:
            wait_until(lambda n=name: http_status(f"{server.http_url}/v2/models/{n}/ready") == 200, 180,
                       what=f"{name} READY ({server.log_path})")  # fmt: skip
        for name, count in counts.items():
            drive(a, server, name, count * a.max_batch_size)
        time.sleep(0.5)
        pid = server.process.pid if server.process else None
        return {"process_bytes": process_gpu_bytes(pid) if pid else None,
                "device_bytes": process_gpu_bytes(None) - device_before}  # fmt: skip
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.serving.memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--triton-root", required=True)
    p.add_argument("--perf-analyzer", required=True)
    p.add_argument("--backends", default="", help="the built backend's directory (default: the triton root's)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", default="/tmp/bench-memory")
    p.add_argument("--models", nargs="+", default=["mlp-small", "resnet18", "resnet50"], choices=sorted(zoo.ZOO))
    p.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--max-batch-size", type=int, default=32)
    p.add_argument("--instance-kind", default="KIND_GPU", choices=("KIND_GPU", "KIND_CPU"), help="KIND_CPU: a CPU "
                   "run of the harness (no NVML there: its figures are zeros)")  # fmt: skip
    a = p.parse_args(argv)
    a.backends = a.backends or str(Path(a.triton_root) / "pytriton/tritonserver/backends")
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    exported = work / "exported"
    doc: dict[str, Any] = {"schema": SCHEMA, "backend": "pytorch_libtorch: Triton's PyTorch backend (r24.10, built "
                           "from the pinned sources)", "gpu": gpu_name(), "max_batch_size": a.max_batch_size,
                           "client": "perf_analyzer grpc + system shm, count x max batch in flight", "exports": {},
                           "rows": [], "errors": []}  # fmt: skip
    for name in a.models:
        doc["exports"][name] = export(name, exported, a.max_batch_size, a.instance_kind)
        log(f"export {name}: {doc['exports'][name]['bytes_per_instance'] / MIB:.1f} MiB per instance")
    configs = [(f"{m} x{n}", {m: n}) for m in a.models for n in a.counts]
    configs += [(f"mixed x{n}", dict.fromkeys(a.models, n)) for n in a.counts[:2]]
    for label, counts in configs:
        try:
            before = process_gpu_bytes(None)
            stage(exported, work / "repo", counts)
            seen = measure(a, label.replace(" ", ""), work / "repo", counts, before)
        except Exception as e:  # recorded; the other configurations still run
            doc["errors"].append({"label": label, "error": f"{type(e).__name__}: {str(e)[:400]}"})
            log(f"!! {label}: {e}")
            continue
        row = {"label": label, "models": [dict(doc["exports"][m], count=n) for m, n in counts.items()], **seen}
        doc["rows"].append(row)
        log(f"{label}: observed {observed(row) / MIB:.0f} MiB, planned now {planned(row) / MIB:.0f} MiB")
    doc["comparison"] = compare(doc) if doc["rows"] else []
    doc["fit"] = fit(doc)
    log(f"fit: {doc['fit']}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if not doc["errors"] else 1


def gpu_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    except Exception as e:
        return f"unknown ({type(e).__name__})"


if __name__ == "__main__":
    sys.exit(main())
