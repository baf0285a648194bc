"""The seed's consolidation claim, measured on one GPU (bench/serving/device.sh, CONSOLIDATION=1).

The claim (docs/gpu-benchmark.md): "a dozen models served one per service at 27 % GPU utilisation
were hosted on two A100s after the move to Triton: GPU memory -40 %, P99 < 80 ms, QPS x2 or more".
Here, the twelve models of bench.zoo (torchvision classifiers with random weights, two MLPs, a small
transformer encoder), each exported once by `model-sync export --target cloud` (TorchScript), served
two ways on the same GPU:

  (a) one process per model answering one request at a time (bench.serving.baseline_server, the
      "Flask + torch" service: batch 1, no overlap), twelve processes;
  (b) all twelve in one tritonserver, Triton's own PyTorch backend (`pytorch_libtorch`, built by
      bench.serving.pytorch_backend), each model with the config export generated (`CONFIG`).

Every model gets its own open-loop request stream (perf_analyzer --request-rate-range, Poisson
arrivals, one perf_analyzer per model, all twelve at once) at the same rate. A step passes when every
model's p99 <= --p99-ms and every model was served >= SERVED_SHARE of its offered rate. The rate doubles from
--start-rate until a step fails, then is bisected (--bisect times): the arm's figure is the highest
passing aggregate rate, with each model's p99, the GPU utilisation NVML sampled during that step,
and the GPU memory in use then (the device's, minus what it used before the arm's servers started).
Both arms are driven over HTTP by perf_analyzer (the one protocol the baseline speaks); (b) is also
searched over gRPC when --grpc is given. Not with shared memory: perf_analyzer names its regions
after the tensor (INPUT__0_0_0), so twelve clients of one server collide.

    python3 -m bench.consolidation.run --triton-root W/triton --perf-analyzer W/triton/perf/bin/perf_analyzer \
        --out OUT/consolidation.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import math
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import zoo
from bench.serving import pytorch_backend, stats
from bench.serving.instruments import GpuSampler, log, process_gpu_bytes
from model_sync.sandbox.procs import LOOPBACK, Process, free_port, http_status, wait_until
from model_sync.sandbox.runtime import TritonRuntime, TritonServer

SCHEMA = "triton-platform/bench-consolidation/v1"
ROOT = Path(__file__).resolve().parents[2]
# What export generates for every model of (b): the flags given to `model-sync export --target cloud`.
CONFIG: dict[str, Any] = {"max_batch": 32, "preferred": (16, 32), "delay_us": 2000, "instances": 2}
# A step fails when a model is served less than this share of its offered rate. Overload shows first as
# a p99 that grows without bound (the arrivals are open-loop); perf_analyzer's own throughput reads
# 78-93 % of a Poisson rate a server keeps up with (seen on CPU: its windows' edges), hence the margin.
SERVED_SHARE = 0.75
# Goals of the issue: (b) >= 2x (a)'s throughput, >= 80 % GPU utilisation, >= 40 % less GPU memory.
GOALS = {"throughput_ratio": 2.0, "gpu_util_pct": 80.0, "memory_reduction": 0.40}


@dataclass(frozen=True)
class Target:
    """Where one model is served in an arm, and how perf_analyzer reaches it."""

    model: str
    url: str
    protocol: str  # http | grpc


def export_all(a: argparse.Namespace, repo: Path) -> dict[str, Any]:
    def one(name: str) -> tuple[str, dict[str, Any]]:
        args = zoo.export_args(name, repo, max_batch=CONFIG["max_batch"], preferred=CONFIG["preferred"],
                               delay_us=CONFIG["delay_us"], instances=CONFIG["instances"], kind=a.instance_kind)  # fmt: skip
        proc = subprocess.run([sys.executable, "-m", "model_sync", "export", *args], capture_output=True,
                              text=True, cwd=ROOT, timeout=900, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"export {name}: exit {proc.returncode}: {proc.stderr.strip()[-400:]}")
        meta = json.loads((repo / name / "export.json").read_text())
        return name, {"factory": zoo.ZOO[name].factory, "input_shape": list(zoo.ZOO[name].shape),
                      "gpu_memory_per_instance": meta["gpu_memory"]["bytes_per_instance"],
                      "export_command": "model-sync export " + " ".join(args).replace(str(repo), "REPO")}  # fmt: skip

    with ThreadPoolExecutor(4) as pool:
        return dict(pool.map(one, a.models))


def perf_step(a: argparse.Namespace, targets: list[Target], rate: float, work: Path,
              rates: dict[str, float] | None = None) -> dict[str, Any]:  # fmt: skip
    """All models at `rate` requests/s each (or each at its own, `rates`), at once; GPU utilisation and
    memory sampled meanwhile."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = f"{Path(a.perf_analyzer).parent.parent / 'lib'}:{env.get('LD_LIBRARY_PATH', '')}"
    procs = []
    for t in targets:
        r = (rates or {}).get(t.model, rate)
        csv_path = work / f"pa-{t.model}-{t.protocol}-{r:g}.csv"
        cmd = [a.perf_analyzer, "-m", t.model, "-u", t.url, "-i", t.protocol, "--async",
               "--request-rate-range", f"{r:g}:{r:g}:1", "--request-distribution", "poisson",
               "--measurement-interval", str(a.window_ms), "--max-trials", "3", "--stability-percentage", "999",
               "-f", str(csv_path)]  # fmt: skip
        procs.append((t, csv_path, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)))
    with GpuSampler() as gpu:
        outputs = [(t, csv_path, p.communicate(timeout=a.window_ms / 1000 * 8 + 60)[0], p.returncode)
                   for t, csv_path, p in procs]  # fmt: skip
    models: dict[str, dict[str, Any]] = {}
    passed = True
    for t, csv_path, out, rc in outputs:
        if rc != 0 or not csv_path.exists():
            models[t.model] = {"error": f"perf_analyzer exit {rc}: {out.decode(errors='replace').strip()[-300:]}"}
            passed = False
            continue
        row = stats.parse_perf_analyzer_csv(csv_path.read_text())[0]
        ok = row["p99_ms"] <= a.p99_ms and row["throughput"] >= SERVED_SHARE * (rates or {}).get(t.model, rate)
        passed = passed and ok
        models[t.model] = {k: round(v, 3) for k, v in row.items()} | {"ok": ok}
    return {"rate_per_model": rate, "offered": sum((rates or {}).get(t.model, rate) for t in targets),
            "served": round(sum(m.get("throughput", 0.0) for m in models.values()), 1), "passed": passed,
            "gpu_util_pct": gpu.mean, "gpu_memory_used_mib": gpu.peak_memory_mib, "models": models}  # fmt: skip


def search(a: argparse.Namespace, targets: list[Target], work: Path, deadline: float) -> dict[str, Any]:
    """Double the per-model rate until a step fails, then bisect; the best passing step wins."""
    # One uncounted step first: the first requests of each new batch shape are slow (TorchScript's
    # profiling executor specialises per shape; a baseline process pays its cuDNN start-up), and the
    # first GPU run failed both arms' first step on them (p99 2.2-2.3 s) while half that rate passed.
    warmup = perf_step(a, targets, a.start_rate, work)
    log(f"  warm-up step at {a.start_rate:g}/model: served {warmup['served']:g} (not counted)")
    steps: list[dict[str, Any]] = []
    good, bad, rate = None, None, a.start_rate
    while time.monotonic() < deadline:
        step = perf_step(a, targets, rate, work)
        steps.append(step)
        log(f"  rate {rate:g}/model ({step['offered']:g} offered): served {step['served']:g}, "
            f"{'pass' if step['passed'] else 'FAIL'}, gpu {step['gpu_util_pct'] or 0:.0f}%, worst p99 "
            f"{max(m.get('p99_ms', 1e9) for m in step['models'].values()):.1f} ms")  # fmt: skip
        if step["passed"]:
            good = max(good or 0.0, rate)
        else:
            bad = min(bad or float("inf"), rate)
        if bad is None:
            rate *= 2
        elif good is None:
            rate /= 2
            if rate < 0.5:
                break
        elif bad - good <= max(1.0, good * a.resolution):
            break
        else:
            rate = (good + bad) / 2
    best = max((s for s in steps if s["passed"]), key=lambda s: s["rate_per_model"], default=None)
    return {"warmup": warmup, "steps": steps, "best": best, "complete": bad is not None and good is not None}


def baseline_arm(a: argparse.Namespace, repo: Path, work: Path) -> tuple[list[Process], list[Target]]:
    procs, targets = [], []
    for name in a.models:
        port = free_port()
        cmd = [sys.executable, "-m", "bench.serving.baseline_server", "--model-pt", str(repo / name / "1/model.pt"),
               "--model-name", name, "--port", str(port), "--device", a.device,
               "--input-shape", ",".join(map(str, zoo.ZOO[name].shape)), "--threaded"]  # fmt: skip
        procs.append(Process(f"baseline-{name}", cmd, work / f"baseline-{name}.log", cwd=ROOT).start())
        targets.append(Target(name, f"{LOOPBACK}:{port}", "http"))
    for t, p in zip(targets, procs, strict=True):
        wait_until(functools.partial(_answers, f"http://{t.url}/v2/health/ready"), 300,
                   what=f"baseline {t.model} ready ({p.log_path})")  # fmt: skip
    return procs, targets


def triton_arm(a: argparse.Namespace, repo: Path, work: Path) -> TritonServer:
    backends = Path(a.triton_root) / "pytriton/tritonserver/backends"
    server = TritonServer(repo, work / "tritonserver.log", runtime=TritonRuntime(Path(a.triton_root)),
                          extra_env=pytorch_backend.runtime_env({}, backends))  # fmt: skip
    server.start(timeout=120)
    for name in a.models:
        wait_until(functools.partial(_answers, f"{server.http_url}/v2/models/{name}/ready"), 300,
                   what=f"{name} READY ({server.log_path})")  # fmt: skip
    return server


def _answers(url: str) -> bool:
    """Whether `url` answers 200 (a readiness endpoint)."""
    return http_status(url) == 200


def run_arm(a: argparse.Namespace, arm: str, repo: Path, work: Path, deadline: float) -> dict[str, Any]:
    before = process_gpu_bytes(None) if a.device == "cuda" else 0
    procs: list[Process] = []
    server = None
    try:
        if arm == "a":
            procs, targets = baseline_arm(a, repo, work)
        else:
            server = triton_arm(a, repo, work)
            grpc = arm == "b-grpc"
            targets = [Target(n, server.grpc_url if grpc else f"{LOOPBACK}:{server.http_port}",
                              "grpc" if grpc else "http") for n in a.models]  # fmt: skip
        idle = process_gpu_bytes(None) - before if a.device == "cuda" else None
        log(
            f"arm {arm}: {len(targets)} models ready; GPU memory idle: {'-' if idle is None else f'{idle / 2**20:.0f} MiB'}"
        )
        result = search(a, targets, work, deadline)
    finally:
        for p in procs:
            p.stop(timeout=10)
        if server is not None:
            server.stop()
    best = result["best"]
    result.update(
        client=f"perf_analyzer {targets[0].protocol}, Poisson arrivals, one client per model",
        gpu_memory_idle_mib=idle and round(idle / 2**20, 1),
        gpu_memory_mib=best and best["gpu_memory_used_mib"] and round(best["gpu_memory_used_mib"] - before / 2**20, 1),
    )
    return result


def _worst_p99(step: dict[str, Any]) -> float:
    return max(m.get("p99_ms", math.inf) for m in step["models"].values())


def _kept_up(step: dict[str, Any]) -> bool:
    """Every model served >= SERVED_SHARE of its offered rate (its p99 aside)."""
    return all(m.get("throughput", 0.0) >= SERVED_SHARE * step["rate_per_model"] for m in step["models"].values())


def summary(arms: dict[str, Any], p99_ms: float) -> dict[str, Any]:
    """(b) against (a): each arm's best step within `p99_ms`; where (a) has none, its busiest tested
    step that kept up, at whatever p99 it had (`a_at_looser_p99`). GPU memory is NVML's device
    memory in use, the peak of each arm's best (or busiest) step."""
    if "a" not in arms or "b" not in arms:
        return {"complete": False}
    b = arms["b"]["best"]
    a = arms["a"]["best"]
    a_bound = p99_ms
    if a is None:  # (a) met the bound at no rate: compare with its busiest step that kept up
        kept = [s for s in arms["a"]["steps"] if _kept_up(s) and s["served"] > 0]
        a = max(kept, key=lambda s: s["served"], default=None)
        a_bound = _worst_p99(a) if a else math.inf
    if a is None or b is None:
        return {"complete": False}
    out = {
        "complete": True, "p99_bound_ms": p99_ms, "a_meets_bound": arms["a"]["best"] is not None,
        "a_req_s": a["served"], "a_worst_p99_ms": _worst_p99(a), "a_gpu_util_pct": a["gpu_util_pct"],
        "a_gpu_memory_used_mib": a["gpu_memory_used_mib"],
        "b_req_s": b["served"], "b_worst_p99_ms": _worst_p99(b), "b_gpu_util_pct": b["gpu_util_pct"],
        "b_gpu_memory_used_mib": b["gpu_memory_used_mib"],
        "throughput_ratio": b["served"] / a["served"],
        # (a) met the bound at no rate: its figure is its busiest tested step, at a looser p99 than (b)
        # was held to (and not searched above it): under the bound itself (a) serves nothing
        "a_at_looser_p99": a_bound > p99_ms,
        "memory_reduction": 1 - b["gpu_memory_used_mib"] / a["gpu_memory_used_mib"]
        if a["gpu_memory_used_mib"] and b["gpu_memory_used_mib"] else None,
    }  # fmt: skip
    out["meets"] = {
        "throughput_ratio": out["throughput_ratio"] >= GOALS["throughput_ratio"],
        "gpu_util_pct": (out["b_gpu_util_pct"] or 0) >= GOALS["gpu_util_pct"],
        "memory_reduction": (out["memory_reduction"] or 0) >= GOALS["memory_reduction"],
    }
    return out


def server_parser(module: str, doc: str | None, work: str) -> argparse.ArgumentParser:
    """The options every bench.consolidation module takes: the bundle's server and perf_analyzer, the result
    file, its work folder (default `work`), the device and the instances' kind."""
    p = argparse.ArgumentParser(prog=f"python -m {module}", description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--triton-root", required=True, help="the bundle's triton/, the PyTorch backend installed in it")
    p.add_argument("--perf-analyzer", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", type=Path, default=Path(work))
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--instance-kind", default="KIND_GPU", choices=("KIND_GPU", "KIND_CPU"))
    return p


def write_result(out: Path, doc: dict[str, Any]) -> int:
    """The result file (non-finite floats as null); exit 0, or 1 when the run recorded errors."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(stats.finite(doc), indent=2, default=str) + "\n")
    return 0 if not doc["errors"] else 1


def main(argv: list[str] | None = None) -> int:
    p = server_parser("bench.consolidation.run", __doc__, "/tmp/bench-consolidation")
    p.add_argument("--models", nargs="+", default=list(zoo.ZOO), choices=list(zoo.ZOO))
    p.add_argument("--p99-ms", type=float, default=80.0)
    p.add_argument("--start-rate", type=float, default=25.0, help="requests/s per model of the first step")
    p.add_argument("--resolution", type=float, default=0.1, help="bisect until the bracket is this share of the rate")
    p.add_argument("--window-ms", type=int, default=3000, help="perf_analyzer's measurement window (3 per step)")
    p.add_argument("--grpc", action="store_true", help="also search (b) over gRPC")
    p.add_argument("--arm-seconds", type=float, default=150, help="time budget of one arm's search")
    a = p.parse_args(argv)
    shutil.rmtree(a.work, ignore_errors=True)
    repo = a.work / "repository"
    doc: dict[str, Any] = {"schema": SCHEMA, "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                           "scenario": __doc__.split("\n\n")[1].strip(), "config": CONFIG, "goals": GOALS,
                           "p99_ms": a.p99_ms, "gpu": gpu_name(a.device), "device": a.device,
                           "backend": {"a": "bench.serving.baseline_server: torch.jit.load, batch 1, one request at a "
                                            "time, one process per model",
                                       "b": "pytorch_libtorch: Triton's PyTorch backend (r24.10, built from the "
                                            "pinned sources), tritonserver 2.51"},
                           "arms": {}, "errors": []}  # fmt: skip
    try:
        doc["models"] = export_all(a, repo)
        for arm in ("a", "b", *(("b-grpc",) if a.grpc else ())):
            log(f"== arm {arm}")
            doc["arms"][arm] = run_arm(a, arm, repo, a.work, time.monotonic() + a.arm_seconds)
    except Exception as e:  # recorded: the arms that finished are kept
        doc["errors"].append(f"{type(e).__name__}: {str(e)[:600]}")
        log(f"!! {e}")
    doc["summary"] = summary(doc["arms"], a.p99_ms)
    code = write_result(a.out, doc)
    log(f"summary: {json.dumps(doc['summary'])}")
    return code


def gpu_name(device: str) -> str:
    if device != "cuda":
        return f"none: CPU run ({os.cpu_count()} cores)"
    import torch

    return torch.cuda.get_device_name(0)


if __name__ == "__main__":
    sys.exit(main())
