"""Gray release: share accuracy, time to 0 % canary after a failing verdict, what the canary
answered before it was aborted, and how often the analysis aborts two identical versions (A/A)
beside how it detects a tail-only regression, on the real local stack (model_sync.sandbox.canary_lab:
the local S3 server, 4 real tritonserver replicas with their agents in prod, round-robin traffic
over them standing in for the Service, the CLI as subprocesses).

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

Then `--aa` releases of `good` against a stable `good` (A/A: identical code, a new version each
time), spread over `--fresh` labs started from nothing, so that `--fresh` of them are the first
release after the fleet started (its canary replicas just loaded, stable's served for minutes),
and `--tail` releases of `tail` against a stable `slow` (the same 30 ms model, +150 ms on 3 % of
its requests; at the lab's TAIL_RATE, 80 requests a second), one after another. The policy is the
lab's short steps (POLICY: 25 and 50 %, 5 s each, 40 requests per track) with the product's default
thresholds and floors (model_sync.contract.canary_policy.CanaryPolicy):

  false_aborts           A/A releases the analysis aborted (any reason): the noise the rules let in
  strikes                A/A windows that failed on latency once and were judged again (the cold
                         canary rule, model_sync.canary.gray_release): what the rule absorbed
  detected               tail releases aborted on p99 latency, and seconds_to_verdict: from the
                         window's start (its replicas serve the canary) to the failing verdict
  mean_rule_*            the rule before it (p99 beyond its bounds only when the window's mean is
                         beyond them too), applied to the same figures each step recorded: what
                         it would have decided on the same releases

    .venv/bin/python -m bench.canary.run [--repeat 3] [--aa 30] [--fresh 3] [--tail 10] [--out bench/results/canary.json]
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


def mean_rule_fails(step: dict[str, Any], policy: Any) -> bool:
    """Whether the p99 rule as it was before (its failure confirmed by the window's mean beyond the
    same ratio and half the floor) fails a step's recorded figures."""
    figures = step.get("figures")
    if not figures:
        return False
    canary, stable = figures["canary"], figures["stable"]

    def beyond(mine: float | None, theirs: float | None, floor: float) -> bool:
        return (
            mine is not None and theirs is not None and mine > theirs * policy.max_p99_ratio and mine - theirs > floor
        )

    return beyond(canary["p99_ms"], stable["p99_ms"], policy.min_p99_delta_ms) and beyond(
        canary["mean_ms"], stable["mean_ms"], policy.min_p99_delta_ms / 2
    )


def _release(lab: Any, kind: str) -> dict[str, Any]:
    done = lab.release(kind)
    figures: dict[str, Any] = done.figures
    figures.update(kind=kind, exit_code=done.code, release_seconds=round(done.seconds, 2))
    for step in figures["steps"]:  # a step never judged (the canary did not load) took no traffic: no share
        observed = step["observed_percent"]
        judged = observed is not None and step["verdict"] is not None
        step["share_points"] = round(observed - step["configured_percent"], 2) if judged else None
    return figures


def _analysis(lab: Any, kind: str, count: int, rate: float, first: int = -1) -> list[dict[str, Any]]:
    """`count` releases of `kind` at `rate` requests a second: each one's outcome, reason, the
    seconds from its last step's window start to its verdict, and what the mean-confirmed p99 rule
    said of its steps."""
    from model_sync.contract.canary_policy import CanaryPolicy
    from model_sync.records import codec

    out = []
    for i in range(count):
        done = lab.release(kind, rate=rate)
        policy = CanaryPolicy.from_mapping(done.doc["policy"])
        last = done.doc["steps"][-1] if done.doc["steps"] else {}
        verdict_s = None
        if done.doc["decision"] and last.get("window_from"):
            decided = codec.parse_time(done.doc["decision"]["at"]).timestamp()
            verdict_s = round(decided - codec.parse_time(last["window_from"]).timestamp(), 2)
        run = {"kind": kind, "i": i, "outcome": done.figures["outcome"], "exit_code": done.code,
               "reason": done.figures["reason"], "seconds_to_verdict": verdict_s,
               "mean_rule_fails": any(mean_rule_fails(s, policy) for s in done.doc["steps"]),
               "first_after_start": i == first, "strikes": sum(s.get("strikes", 0) for s in done.doc["steps"]),
               "failed_outside_canary": done.figures["failed_stable"] + done.figures["failed_other"],
               "steps": [{k: s.get(k) for k in ("share_percent", "verdict", "figures")} for s in done.doc["steps"]]}  # fmt: skip
        print(json.dumps({k: run[k] for k in ("kind", "i", "outcome", "reason", "strikes", "seconds_to_verdict")}),
              flush=True)  # fmt: skip
        out.append(run)
    return out


def summarise_analysis(aa: list[dict[str, Any]], tail: list[dict[str, Any]]) -> dict[str, Any]:
    def p99_abort(r: dict[str, Any]) -> bool:
        return r["outcome"] == "aborted" and "p99 latency" in (r["reason"] or "")

    return {
        "aa": {
            "releases": len(aa),
            "false_aborts": sum(r["outcome"] == "aborted" for r in aa),
            "false_abort_reasons": sorted({r["reason"] for r in aa if r["outcome"] == "aborted"}),
            "first_after_start": {
                "releases": sum(r["first_after_start"] for r in aa),
                "aborted": sum(r["first_after_start"] and r["outcome"] == "aborted" for r in aa),
            },
            "releases_with_strikes": sum(r["strikes"] > 0 for r in aa),
            "mean_rule_false_aborts": sum(r["mean_rule_fails"] for r in aa),
            "failed_outside_canary": sum(r["failed_outside_canary"] for r in aa),
        },
        "tail": {
            "releases": len(tail),
            "detected": sum(p99_abort(r) for r in tail),
            "seconds_to_verdict": _spread([r["seconds_to_verdict"] for r in tail if p99_abort(r)]),
            "releases_with_strikes": sum(r["strikes"] > 0 for r in tail),
            "mean_rule_detected": sum(r["mean_rule_fails"] for r in tail),
            "failed_outside_canary": sum(r["failed_outside_canary"] for r in tail),
        },
    }


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


def _kinds(lab: Any, repeat: int) -> list[dict[str, Any]]:
    runs = []
    for rep in range(repeat):
        for kind in KINDS:
            run = _release(lab, kind)
            run["repeat"] = rep
            runs.append(run)
            print(json.dumps({k: run[k] for k in ("kind", "outcome", "exit_code", "answered_by_canary")}
                             | {"steps": run["steps"], "zero_s": run.get("seconds_to_zero_canary")}),
                  flush=True)  # fmt: skip
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.canary.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of the four releases (default 3)")
    parser.add_argument("--aa", type=int, default=30, help="A/A releases: good against good (default 30)")
    parser.add_argument("--fresh", type=int, default=3, help="labs the A/A releases are spread over (default 3)")
    parser.add_argument("--tail", type=int, default=10, help="tail-regression releases (default 10)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/canary.json"), help="the results file")
    args = parser.parse_args(argv)
    from model_sync.sandbox.canary_lab import POLICY, TAIL_RATE, TRAFFIC_RATE, TRAFFIC_THREADS, CanaryLab

    runs: list[dict[str, Any]] = []
    aa: list[dict[str, Any]] = []
    tail: list[dict[str, Any]] = []
    load = [round(x, 2) for x in os.getloadavg()]
    fresh = max(1, args.fresh)
    with tempfile.TemporaryDirectory(prefix="bench-canary-") as tmp:
        for n in range(fresh):
            lab = CanaryLab(Path(tmp) / f"lab-{n}").start()
            try:
                lab.stable()
                share = args.aa // fresh + (n < args.aa % fresh)
                aa += _analysis(lab, "good", share, TRAFFIC_RATE, first=0)  # the first: after the fleet started
                if n == 0:
                    runs += _kinds(lab, args.repeat)
                if n == fresh - 1 and args.tail:
                    lab.stable("slow")  # the tail regression's stable: the same model without the tail
                    tail = _analysis(lab, "tail", args.tail, TAIL_RATE)
            finally:
                lab.stop()
    doc = {
        "benchmark": "gray release on the local stack (bench/canary/run.py)",
        "measured_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{os.cpu_count()} CPUs (shared, noisy), tritonserver 2.51 on CPU",
        "load_average_before": load,
        "scenario": {
            "replicas": 4,
            "policy": POLICY,
            "traffic": f"round robin, {TRAFFIC_RATE:g} requests a second ({TAIL_RATE:g} for the tail releases), "
            f"at most {TRAFFIC_THREADS} in flight",
            "repeat": args.repeat,
            "aa_labs": fresh,
            "thresholds": "the product's defaults (CanaryPolicy()): only steps, stepSeconds, deadlineSeconds, "
            "loadTimeoutSeconds and minRequests are the lab's",
        },
        "targets": {
            "share_points_abs": "<= 3",
            "seconds_to_zero_canary": "<= 10",
            "aa_false_aborts": "0",
            "tail_detected": "10 of 10",
        },
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "summary": summarise(runs),
        "analysis": summarise_analysis(aa, tail),
        "runs": runs,
        "analysis_runs": aa + tail,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({"summary": doc["summary"], "analysis": doc["analysis"]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
