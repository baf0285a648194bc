"""P1: time from the pin flip (push/rollback returning) until every request is served by the new
version, and failed requests, over N publish/rollback cycles under client load.

Real rclone S3 + real tritonserver (local poll, 1 s) + the agent subprocess (--interval 1).
    .venv/bin/python -m bench.agent.p1_switch [--cycles 20] [--out bench/results/agent-p1.json]
Target: p95 <= agent interval + 2 s, 0 failed requests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from model_sync.sandbox.runtime import ensure_tritonserver
from tests.support.triton import LoadGenerator, Serving, flip_pin, publish


def switch_seconds(load: LoadGenerator, flipped_at: float, version: int, timeout: float = 30) -> float:
    """Seconds from `flipped_at` to the first response of `version` after which no other version answered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        after = [(t, v) for t, v in list(load.versions) if t >= flipped_at]
        if after and after[-1][1] == version and time.monotonic() - after[-1][0] > 1.0:
            return after[-1][0] - flipped_at
        time.sleep(0.05)
    raise TimeoutError(f"version {version} not served within {timeout}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.agent.p1_switch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--cycles", type=int, default=20, help="publish + rollback cycles (default 20; 2 switch samples each)"
    )
    parser.add_argument("--interval", type=float, default=1.0, help="agent --interval in seconds (default 1)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("bench/results/agent-p1.json"),
        help="result JSON (default bench/results/agent-p1.json)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="p1-") as tmp:
        stack = Serving(Path(tmp), ensure_tritonserver(), interval=args.interval)
        try:
            stack.s3.start()
            stack.triton.start()
            publish(stack, "add")  # version 1, through model_sync.push.publish.push
            stack.start_agent()
            stack.wait_served("add", 1)
            samples: list[dict[str, float | int | str]] = []
            with LoadGenerator(stack.triton.http_url, "add") as load:
                current = 1
                for cycle in range(args.cycles):
                    new = cycle + 2
                    assert publish(stack, "add") == new  # returns after the pin PUT
                    t = time.monotonic()
                    samples.append(
                        {"cycle": cycle, "action": "push", "version": new, "seconds": switch_seconds(load, t, new)}
                    )
                    flip_pin(stack, "add", current)  # rollback
                    t = time.monotonic()
                    samples.append(
                        {
                            "cycle": cycle,
                            "action": "rollback",
                            "version": current,
                            "seconds": switch_seconds(load, t, current),
                        }
                    )
                    current = new
                    flip_pin(stack, "add", current)
                    switch_seconds(load, time.monotonic(), current)
            secs = sorted(float(s["seconds"]) for s in samples)
            result = {
                "benchmark": "P1 pin flip -> every request on the new version",
                "cycles": args.cycles,
                "agent_interval_s": args.interval,
                "triton_poll_s": 1,
                "samples": len(secs),
                "p50_s": round(statistics.median(secs), 3),
                "p95_s": round(secs[max(0, int(len(secs) * 0.95) - 1)], 3),
                "max_s": round(secs[-1], 3),
                "target_p95_s": args.interval + 2,
                "requests_ok": load.ok,
                "requests_failed": load.failed,
                "errors": load.errors,
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "machine": "2 shared cores (other jobs running), CPU tritonserver 2.51, rclone serve s3",
                "detail": samples,
            }
        finally:
            stack.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "detail"}, indent=2))
    return 0 if result["requests_failed"] == 0 and result["p95_s"] <= result["target_p95_s"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
