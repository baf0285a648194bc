"""Gray release (issue 19): share accuracy, time to 0 % canary after a failing verdict, and what
the canary answered before it was aborted, on the real local stack (model_sync.local.canary_lab:
rclone serve s3, 4 real tritonserver replicas with their agents in prod, round-robin traffic over
them standing in for the Service, the CLI as subprocesses).

Each repetition releases, one after another: `good` (promoted), `errors` (5 % of inputs fail),
`slow` (3x the latency) and `broken` (fails to load), each `promote --to prod` with the lab's
policy (steps 25 and 50 %, 5 s each, 40 requests per track). Per release:

  observed_percent       the canary's share of the requests answered within each step's window
                         (from when its replicas served it to its verdict), against the
                         configured share (`share_points`) and the effective one, k/N
  seconds_to_zero_canary the decision (the aborted record's time) -> the last request the canary
                         version answered
  answered_by_canary     requests the canary answered in all, before the abort
  failed_*               failed requests, attributed to stable, canary or neither

The round robin sends exactly 1 of every N requests to each replica, so the observed share
measures that exactly the listed replicas serve the canary from the window's start, not a
Service's randomness (kube-proxy's spread adds its own binomial noise). Medians with min/max.

    .venv/bin/python -m bench.canary.run [--repeat 3] [--out bench/results/canary.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

KINDS = ("good", "errors", "slow", "broken")


def _release(lab: Any, kind: str) -> dict[str, Any]:
    done = lab.release(kind)
    figures: dict[str, Any] = done.figures
    figures.update(kind=kind, exit_code=done.code, release_seconds=round(done.seconds, 2))
    for step in figures["steps"]:  # a step never judged (the canary did not load) took no traffic: no share
        observed = step["observed_percent"]
        judged = observed is not None and step["verdict"] is not None
        step["share_points"] = round(observed - step["configured_percent"], 2) if judged else None
    return figures


def _spread(values: list[float]) -> dict[str, float] | None:
    return None if not values else {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in KINDS:
        mine = [r for r in runs if r["kind"] == kind]
        points = [abs(s["share_points"]) for r in mine for s in r["steps"] if s["share_points"] is not None]
        zero = [r["seconds_to_zero_canary"] for r in mine if r.get("seconds_to_zero_canary") is not None]
        out[kind] = {
            "outcomes": sorted({r["outcome"] for r in mine}),
            "exit_codes": sorted({r["exit_code"] for r in mine}),
            "share_points_abs": _spread(points),
            "seconds_to_zero_canary": _spread(zero),
            "answered_by_canary": _spread([float(r["answered_by_canary"]) for r in mine]),
            "failed_outside_canary": sum(r["failed_stable"] + r["failed_other"] for r in mine),
            "release_seconds": _spread([r["release_seconds"] for r in mine]),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.canary.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of the four releases (default 3)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/canary.json"), help="the results file")
    args = parser.parse_args(argv)
    from model_sync.local.canary_lab import POLICY, CanaryLab

    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-canary-") as tmp:
        lab = CanaryLab(Path(tmp)).start()
        try:
            lab.stable()
            for rep in range(args.repeat):
                for kind in KINDS:
                    run = _release(lab, kind)
                    run["repeat"] = rep
                    runs.append(run)
                    print(json.dumps({k: run[k] for k in ("kind", "outcome", "exit_code", "answered_by_canary")}
                                     | {"steps": run["steps"], "zero_s": run.get("seconds_to_zero_canary")}),
                          flush=True)  # fmt: skip
        finally:
            lab.stop()
    doc = {
        "benchmark": "gray release on the local stack (bench/canary/run.py)",
        "measured_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{os.cpu_count()} CPUs (shared, noisy), tritonserver 2.51 on CPU",
        "scenario": {
            "replicas": 4,
            "policy": POLICY,
            "traffic": "round robin, 4 client threads",
            "repeat": args.repeat,
        },
        "targets": {"share_points_abs": "<= 3", "seconds_to_zero_canary": "<= 10"},
        "summary": summarise(runs),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc["summary"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
