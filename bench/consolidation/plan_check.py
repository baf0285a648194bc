"""A `model-sync plan` served as planned on one GPU (bench/serving/device.sh, PLAN_CHECK=1): does the GPU
hold what the plan says, and does every model get its rate within its p99 target?

Input: the plan's JSON (`model-sync plan --output json`, from the profiles of bench.consolidation.profile
and a demand file) whose deployments have one replica each: each deployment is what one GPU serves, and
they are checked one after the other on the one GPU (the whole plan --passes times, each deployment on a
fresh server every time). Of a deployment, each model is exported by
`model-sync export --target cloud` with the plan's instance count (the profiles' config otherwise: max
batch 32, preferred 16 and 32, 2 ms queue delay), all are served by one tritonserver on Triton's PyTorch
backend (`pytorch_libtorch`), and each gets its own open-loop Poisson stream at its declared rate
(perf_analyzer over HTTP, all at once): one uncounted warm-up step, then one measured step. A deployment
passes when the server's GPU memory, idle with every model loaded, is within 10 % of the plan's, and
every model served >= SERVED_SHARE of its rate with its p99 within its target; the plan, when each does.
Only on the GPU the plan's profiles were measured on: on another, nothing runs and the file records why.

    python3 -m bench.consolidation.plan_check --plan PLAN.json --triton-root W/triton \
        --perf-analyzer W/triton/perf/bin/perf_analyzer --out OUT/plan-check.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.consolidation import profile
from bench.consolidation import run as consolidation
from bench.serving.instruments import log, process_gpu_bytes
from model_sync.sandbox.procs import LOOPBACK

# v1: a plan of one deployment, its step and check at the top; v2: each deployment once, no `pass`
SCHEMA = "triton-platform/bench-plan-check/v3"
MEMORY_TOLERANCE = 0.10


def verdict(deployment: dict[str, Any], step: dict[str, Any], idle_bytes: int | None) -> dict[str, Any]:
    """The check of one deployment's measured step against the plan: memory within MEMORY_TOLERANCE, every
    model's rate served within its p99 target."""
    models = {}
    for m in deployment["models"]:
        row = step["models"].get(m["model"], {})
        served, p99 = row.get("throughput", 0.0), row.get("p99_ms", float("inf"))
        ok = served >= consolidation.SERVED_SHARE * m["rate"] and p99 <= m["p99_ms"]
        models[m["model"]] = {"rate": m["rate"], "p99_target_ms": m["p99_ms"], "instances": m["instances"],
                              "served": served, "p99_ms": p99, "ok": ok}  # fmt: skip
    planned = deployment["memory_bytes"]
    error = None if idle_bytes is None else (planned - idle_bytes) / idle_bytes
    return {"models": models, "rates_met": all(m["ok"] for m in models.values()),
            "memory_planned_bytes": planned, "memory_idle_bytes": idle_bytes, "memory_error": error,
            "memory_within_10_percent": error is not None and abs(error) <= MEMORY_TOLERANCE,
            "gpu_util_pct": step["gpu_util_pct"]}  # fmt: skip


def check_one(a: argparse.Namespace, deployment: dict[str, Any], number: int) -> dict[str, Any]:
    """One deployment on a fresh tritonserver: export its models (once, for every pass), serve them,
    measure their planned rates."""
    work = a.work / deployment["name"]
    repo = work / "repository"
    instances = {m["model"]: m["instances"] for m in deployment["models"]}
    one = argparse.Namespace(**{**vars(a), "models": list(instances),
                                "p99_ms": max(m["p99_ms"] for m in deployment["models"])})  # fmt: skip
    if not repo.is_dir():
        repo.mkdir(parents=True)
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda n: profile.export_one(n, repo, a.instance_kind, instances[n]), instances))
    before = process_gpu_bytes(None) if a.device == "cuda" else 0
    server = consolidation.triton_arm(one, repo, work)
    try:
        idle = process_gpu_bytes(None) - before if a.device == "cuda" else None
        targets = [consolidation.Target(n, f"{LOOPBACK}:{server.http_port}", "http") for n in instances]
        rates = {m["model"]: m["rate"] for m in deployment["models"]}
        warmup = consolidation.perf_step(one, targets, 0.0, work, rates)
        step = consolidation.perf_step(one, targets, 0.0, work, rates)
    finally:
        server.stop()
    check = verdict(deployment, step, idle)
    log(f"{deployment['name']} pass {number}: {json.dumps({k: v for k, v in check.items() if k != 'models'})}")
    return {"name": deployment["name"], "pass": number, "warmup": warmup, "step": step, "check": check}


def main(argv: list[str] | None = None) -> int:
    p = consolidation.server_parser("bench.consolidation.plan_check", __doc__, "/tmp/bench-plan-check")
    p.add_argument("--plan", type=Path, required=True, help="model-sync plan --output json, one replica a deployment")
    p.add_argument("--window-ms", type=int, default=2500, help="perf_analyzer's measurement window (3 per step)")
    p.add_argument("--passes", type=int, default=1, help="check the whole plan this many times, a fresh server each")
    p.add_argument("--only", nargs="+", metavar="NAME", help="check these planned deployments only (default: all)")
    a = p.parse_args(argv)
    plan_doc = json.loads(a.plan.read_text())
    if a.passes < 1:
        p.error(f"--passes {a.passes}; allowed: 1 or more")
    if any(d["replicas"] != 1 for d in plan_doc["deployments"]):
        p.error("--plan: a deployment of more than one replica; allowed: deployments of one replica (one GPU each)")
    shutil.rmtree(a.work, ignore_errors=True)
    doc: dict[str, Any] = {"schema": SCHEMA, "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                           "scenario": __doc__.split("\n\n")[1].strip(), "plan": plan_doc,
                           "gpu": consolidation.gpu_name(a.device), "backend": plan_doc["backend"],
                           "client": "perf_analyzer http, Poisson arrivals, one stream per model at its rate",
                           "deployments": [], "errors": []}  # fmt: skip
    if doc["gpu"] != plan_doc["gpu"]:  # a faster GPU would pass a plan the profiled one fails
        doc["errors"].append(f"the plan is for the {plan_doc['gpu']}, this GPU is the {doc['gpu']}: not checked")
    chosen = [d for d in plan_doc["deployments"] if a.only is None or d["name"] in a.only]
    if not chosen:
        p.error(
            f"--only {' '.join(a.only)}: no such deployment; allowed: {', '.join(d['name'] for d in plan_doc['deployments'])}"
        )
    doc["checked"] = [d["name"] for d in chosen]
    runs = [(n, d) for n in range(1, a.passes + 1) for d in chosen] if not doc["errors"] else []
    for number, deployment in runs:
        try:
            doc["deployments"].append(check_one(a, deployment, number))
        except Exception as e:  # recorded
            doc["errors"].append(f"{deployment['name']} pass {number}: {type(e).__name__}: {str(e)[:600]}")
            log(f"!! {e}")
        consolidation.write_result(a.out, doc)  # what was measured survives a run cut short
    checks = [d["check"] for d in doc["deployments"]]
    complete = len(checks) == len(runs) > 0
    doc["check"] = {"rates_met": complete and all(c["rates_met"] for c in checks),
                    "memory_within_10_percent": complete and all(c["memory_within_10_percent"] for c in checks)}  # fmt: skip
    return consolidation.write_result(a.out, doc)


if __name__ == "__main__":
    sys.exit(main())
