"""The gray release's analysis: canary against stable over one step's window, judged against the
policy (model_sync.contract.canary_policy) into pass, fail or inconclusive. The same code judges figures from
Prometheus (the cloud) and from each replica's Triton /metrics (locally): model_sync.canary.metrics
produces `Figures` either way (docs/architecture.md#gray-release)."""

from __future__ import annotations

import dataclasses
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
    replicas_p99_ms: tuple[float, ...] = ()  # each replica's p99 (Triton's summary), ascending
    replicas_p95_ms: tuple[float, ...] = ()

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
            "replicas_p99_ms": [round(v, 3) for v in self.replicas_p99_ms],
        }

    def replica_at(self, q: float) -> Figures:
        """These figures with p99 and p95 of the replica at quantile `q` of the track's replicas
        (linear between neighbours; 0.5: the median) instead of the worst; as given without
        per-replica figures."""
        return dataclasses.replace(self, p99_ms=_at(self.replicas_p99_ms, q, self.p99_ms),
                                   p95_ms=_at(self.replicas_p95_ms, q, self.p95_ms))  # fmt: skip

    def describe(self) -> str:
        p99 = "-" if self.p99_ms is None else f"{self.p99_ms:.1f} ms"
        queue = "-" if self.queue_us is None else f"{self.queue_us:.0f} µs"
        return f"{self.requests} requests, {100 * self.error_ratio:.2f} % errors, p99 {p99}, queue {queue}"


def _at(values: tuple[float, ...], q: float, default: float | None) -> float | None:
    """The value at quantile `q` of the ascending `values`, linear between neighbours."""
    if not values:
        return default
    pos = q * (len(values) - 1)
    low = int(pos)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (pos - low)


@dataclass(frozen=True)
class Verdict:
    outcome: str  # PASS, FAIL or INCONCLUSIVE
    reason: str  # one line: the figure that decided, or why none could
    latency: bool = False  # a FAIL on a latency figure (p99, p95, queue time), not on errors


def tracks(canary: Figures, stable: Figures) -> tuple[Figures, Figures]:
    """The two tracks as judged (docs/agent.md#what-a-gray-release-reads-from-a-replica): the
    canary's worst replica against the stable replicas' k/(k+1) quantile, k the canary's replicas:
    what the worst of k stable replicas typically is (for one canary replica, the stable median).
    Per-replica summaries cannot be merged; worst against worst favours the canary when stable has
    more replicas, worst against the median aborts identical code more often as k grows."""
    k = max(1, len(canary.replicas_p99_ms))
    return canary, stable.replica_at(k / (k + 1))


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
                latency=True,
            )
    if _beyond(canary.queue_us, stable.queue_us, policy.max_queue_ratio, policy.min_queue_delta_us):
        return Verdict(
            FAIL,
            f"queue time: canary {canary.queue_us:.0f} µs vs stable {stable.queue_us:.0f} µs; allowed: at most "
            f"{policy.max_queue_ratio:g}x (maxQueueRatio) or {policy.min_queue_delta_us:g} µs above "
            "(minQueueDeltaMicroseconds)",
            latency=True,
        )
    return Verdict(PASS, f"canary {canary.describe()}; stable {stable.describe()}")


def _beyond(canary: float | None, stable: float | None, ratio: float, floor: float) -> bool:
    """canary above stable by more than `ratio` times and by more than `floor` (both known)."""
    return canary is not None and stable is not None and canary > stable * ratio and canary - stable > floor
