"""P3: how long until a replica serves MANY small models READY.

Real rclone S3 + real tritonserver (CPU, local poll 1 s) + the agent as subprocesses, exactly
as the tests run them. The models are the tests' python-backend `add` model, one version each,
uploaded and pinned directly (tests.support.triton.upload_version + a pin PUT).

Scenarios (side by side in one run):
  new-pod   the init container (`agent --once`, no Triton) places every pin, then tritonserver
            starts on the filled repository and the sidecar starts; the clock runs from the
            init container's start until the sidecar's status shows every model READY.
  live-pod  tritonserver and the sidecar run on an empty repository; every pin is written at
            once; the clock runs from the last pin PUT until the status shows every model READY.

    .venv/bin/python -m bench.agent.ready_many [--models 200] [--out bench/results/agent-ready.json]
Target: 200 small models READY within 30 s locally.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from model_sync.contract import layout
from model_sync.sandbox.runtime import ensure_tritonserver
from tests.support.triton import BUCKET, Serving, add_model_files, pinned_config, upload_version

TARGET_S = 30.0


def _publish_all(stack: Serving, names: list[str]) -> float:
    """Upload every version, then write every pin; the monotonic time of the last pin PUT."""
    client = stack.client
    for name in names:
        upload_version(client, BUCKET, name, 1, add_model_files(1), pinned_config(name, 1))
    for name in names:
        client.put_object(Bucket=BUCKET, Key=layout.config_key(name), Body=pinned_config(name, 1).encode())
    return time.monotonic()


def _all_ready(doc: dict[str, Any] | None, names: list[str]) -> bool:
    models = (doc or {}).get("models", {})
    return all(models.get(n, {}).get("state") == "READY" for n in names)


def _all_smoked(doc: dict[str, Any] | None, names: list[str]) -> bool:
    models = (doc or {}).get("models", {})
    return all((models.get(n, {}).get("smoke") or {}).get("ok") is True for n in names)


def _wait_status(stack: Serving, names: list[str], timeout: float) -> tuple[float, float]:
    """Monotonic times at which the status first showed every model READY, then every smoke
    inference passed."""
    deadline = time.monotonic() + timeout
    ready: float | None = None
    while time.monotonic() < deadline:
        doc = stack.status()
        if ready is None and _all_ready(doc, names):
            ready = time.monotonic()
        if ready is not None and _all_smoked(doc, names):
            return ready, time.monotonic()
        time.sleep(0.25)
    doc = stack.status() or {}
    states = [m.get("state") for m in doc.get("models", {}).values()]
    raise TimeoutError(
        f"not every model READY and smoke-tested within {timeout:.0f}s: {states.count('READY')} of {len(names)} READY"
    )


def new_pod(tmp: Path, count: int, timeout: float) -> dict[str, Any]:
    stack = Serving(tmp, ensure_tritonserver())
    names = [f"m{i:03d}" for i in range(count)]
    try:
        stack.s3.start()
        _publish_all(stack, names)
        t0 = time.monotonic()
        rc, log = stack.run_agent_once(timeout=timeout)
        if rc != 0:
            raise RuntimeError(f"agent --once exited {rc}: {log}")
        placed = time.monotonic()
        stack.triton.start(timeout=timeout)
        live = time.monotonic()
        stack.start_agent()
        ready, smoked = _wait_status(stack, names, timeout)
        return {
            "models": count,
            "placed_s": round(placed - t0, 2),
            "triton_live_s": round(live - t0, 2),
            "ready_s": round(ready - t0, 2),
            "smoked_s": round(smoked - t0, 2),
        }
    finally:
        stack.stop()


def live_pod(tmp: Path, count: int, timeout: float) -> dict[str, Any]:
    stack = Serving(tmp, ensure_tritonserver())
    names = [f"m{i:03d}" for i in range(count)]
    try:
        stack.s3.start()
        stack.triton.start(timeout=timeout)
        stack.start_agent()
        t0 = _publish_all(stack, names)
        ready, smoked = _wait_status(stack, names, timeout)
        return {"models": count, "ready_s": round(ready - t0, 2), "smoked_s": round(smoked - t0, 2)}
    finally:
        stack.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.agent.ready_many",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--models", type=int, default=200, help="small python-backend models (default 200)")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="give up after this many seconds per scenario (default 600)"
    )
    parser.add_argument("--only", choices=("new-pod", "live-pod"), help="run one scenario")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each scenario, alternating (default 3: the spread is reported)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("bench/results/agent-ready.json"),
        help="result JSON (default bench/results/agent-ready.json)",
    )
    args = parser.parse_args(argv)
    load_before = round(os.getloadavg()[0], 2)  # other work on the machine skews every figure: recorded
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(args.repeat):
        for scenario, fn in (("new-pod", new_pod), ("live-pod", live_pod)):
            if args.only and scenario != args.only:
                continue
            with tempfile.TemporaryDirectory(prefix=f"ready-{scenario}-") as tmp:
                runs.setdefault(scenario, []).append(fn(Path(tmp), args.models, args.timeout))
            print(scenario, json.dumps(runs[scenario][-1]), flush=True)
    results = {scenario: {"median_ready_s": statistics.median(r["ready_s"] for r in rs),
                          "min_ready_s": min(r["ready_s"] for r in rs),
                          "max_ready_s": max(r["ready_s"] for r in rs), "runs": rs}
               for scenario, rs in runs.items()}  # fmt: skip
    doc = {
        "benchmark": "P3 many small models -> every model READY",
        "model": "tests.support.triton add model (python backend: one stub process per model, CPU, 1 instance)",
        "target_s": TARGET_S,
        "met": {scenario: r["median_ready_s"] <= TARGET_S for scenario, r in results.items()},
        "scenarios": results,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": (
            f"{os.cpu_count()} cores, CPU tritonserver 2.51 (--model-load-thread-count 4, its default), rclone serve s3"
        ),
        "load_average_1m": {"before": load_before, "after": round(os.getloadavg()[0], 2)},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "scenarios"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
