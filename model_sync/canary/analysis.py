"""The gray release's analysis: canary against stable over one step's window, judged against the
policy (model_sync.contract.canary_policy) into pass, fail or inconclusive. The same code judges figures from
Prometheus (the cloud) and from each replica's Triton /metrics (locally): model_sync.canary.metrics
produces `Figures` either way (docs/architecture.md#gray-release)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from model_sync.contract.canary_policy import CanaryPolicy

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


@dataclass(frozen=True)
class Figures:
    """One version's traffic over a window, from Triton's metrics: requests answered (success +
    failure), failures, p99 and p95 request latency (Triton's summary, ms; None without a sample),
    mean request latency over the window (ms) and mean queue time per successful request (µs);
    None without a successful request."""

    requests: int = 0
    errors: int = 0
    p99_ms: float | None = None
    queue_us: float | None = None
    mean_ms: float | None = None
    p95_ms: float | None = None

    @property
    def error_ratio(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    def record(self) -> dict[str, Any]:
        """The canary record's FIGURES (model_sync.records.schemas)."""

        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 3)

        return {
            "requests": self.requests,
            "errors": self.errors,
            "error_ratio": round(self.error_ratio, 6),
            "p99_ms": r(self.p99_ms),
            "p95_ms": r(self.p95_ms),
            "mean_ms": r(self.mean_ms),
            "queue_us": r(self.queue_us),
        }

    def describe(self) -> str:
        p99 = "-" if self.p99_ms is None else f"{self.p99_ms:.1f} ms"
        queue = "-" if self.queue_us is None else f"{self.queue_us:.0f} µs"
        return f"{self.requests} requests, {100 * self.error_ratio:.2f} % errors, p99 {p99}, queue {queue}"


@dataclass(frozen=True)
class Verdict:
    outcome: str  # PASS, FAIL or INCONCLUSIVE
    reason: str  # one line: the figure that decided, or why none could


def judge(canary: Figures, stable: Figures, policy: CanaryPolicy) -> Verdict:
    """Fail on the first threshold the canary breaks (error ratio, then p99, then p95 when the
    policy judges it, then queue time); inconclusive while either track has fewer than
    `min_requests` requests in the window; else pass. A failure needs the minimum too: a handful
    of requests decides nothing. Each latency quantile is judged on its own against stable's,
    beyond both its ratio and its floor in ms: a regression of the slowest requests alone (the
    tail) moves p99 and barely the mean, so no other figure has to confirm it."""
    low = min(canary.requests, stable.requests)
    if low < policy.min_requests:
        return Verdict(
            INCONCLUSIVE,
            f"requests: canary {canary.requests}, stable {stable.requests}; allowed: at least "
            f"{policy.min_requests} each (minRequests)",
        )
    if canary.error_ratio > stable.error_ratio + policy.max_error_ratio_increase:
        return Verdict(
            FAIL,
            f"error ratio: canary {100 * canary.error_ratio:.2f} % vs stable {100 * stable.error_ratio:.2f} %; "
            f"allowed: at most {100 * policy.max_error_ratio_increase:g} points above (maxErrorRatioIncrease)",
        )
    quantiles = [("p99", canary.p99_ms, stable.p99_ms, policy.max_p99_ratio, policy.min_p99_delta_ms)]
    if policy.max_p95_ratio:
        quantiles.append(("p95", canary.p95_ms, stable.p95_ms, policy.max_p95_ratio, policy.min_p95_delta_ms))
    for name, mine, theirs, ratio, floor in quantiles:
        if _beyond(mine, theirs, ratio, floor):
            key = name.upper()
            return Verdict(
                FAIL,
                f"{name} latency: canary {mine:.1f} ms vs stable {theirs:.1f} ms; allowed: at most {ratio:g}x "
                f"(max{key}Ratio) or {floor:g} ms above (min{key}DeltaMs)",
            )
    if _beyond(canary.queue_us, stable.queue_us, policy.max_queue_ratio, policy.min_queue_delta_us):
        return Verdict(
            FAIL,
            f"queue time: canary {canary.queue_us:.0f} µs vs stable {stable.queue_us:.0f} µs; allowed: at most "
            f"{policy.max_queue_ratio:g}x (maxQueueRatio) or {policy.min_queue_delta_us:g} µs above "
            "(minQueueDeltaMicroseconds)",
        )
    return Verdict(PASS, f"canary {canary.describe()}; stable {stable.describe()}")


def _beyond(canary: float | None, stable: float | None, ratio: float, floor: float) -> bool:
    """canary above stable by more than `ratio` times and by more than `floor` (both known)."""
    return canary is not None and stable is not None and canary > stable * ratio and canary - stable > floor
