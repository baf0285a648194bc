"""model_sync.canary.analysis.judge: canary against stable, pass / fail / inconclusive, with the
figure that decided on one line."""

from __future__ import annotations

import re

import pytest

from model_sync.canary.analysis import FAIL, INCONCLUSIVE, PASS, Figures, judge, tracks
from model_sync.contract.canary_policy import CanaryPolicy

POLICY = CanaryPolicy(min_requests=100)
STABLE = Figures(requests=1000, errors=0, p99_ms=20.0, queue_us=100.0, mean_ms=10.0)


@pytest.mark.parametrize(
    ("canary", "outcome", "reason"),
    [
        (Figures(requests=400, errors=0, p99_ms=21.0, queue_us=110.0), PASS, r"^canary 400 requests, 0\.00 % errors"),
        (Figures(requests=99, errors=50, p99_ms=90.0), INCONCLUSIVE, r"^requests: canary 99, stable 1000; allowed: "),
        (
            Figures(requests=400, errors=20),
            FAIL,
            r"^error ratio: canary 5\.00 % vs stable 0\.00 %; allowed: at most 1 ",
        ),
        (Figures(requests=400, errors=4, p99_ms=20.0), PASS, r"^canary"),  # 1 point exactly: allowed
        (
            Figures(requests=400, p99_ms=60.0, queue_us=100.0, mean_ms=30.0),
            FAIL,
            r"^p99 latency: canary 60\.0 ms vs stable 20\.0 ms; allowed: at most 1\.5x \(maxP99Ratio\) or 5 ms",
        ),
        # +150 ms on 3 % of requests: the mean barely moves (11 vs 10 ms), p99 alone fails it
        (Figures(requests=400, p99_ms=160.7, mean_ms=11.0), FAIL, r"^p99 latency: canary 160\.7 ms vs stable 20\.0"),
        (Figures(requests=400, p99_ms=24.0, p95_ms=90.0), PASS, r"^canary"),  # p95 is not judged by default
        (Figures(requests=400, p99_ms=29.0, queue_us=100.0), PASS, r"^canary"),  # 1.45x: under the ratio
        (Figures(requests=400, queue_us=5000.0), FAIL, r"^queue time: canary 5000 µs vs stable 100 µs"),
        (Figures(requests=400, queue_us=900.0), PASS, r"^canary"),  # 9x, but under the 1000 µs floor
        (Figures(requests=400, p99_ms=None, queue_us=None), PASS, r"^canary 400 requests, 0\.00 % errors, p99 -"),
    ],
)
def test_judge(canary: Figures, outcome: str, reason: str) -> None:
    verdict = judge(canary, STABLE, POLICY)
    assert verdict.outcome == outcome, verdict
    assert re.match(reason, verdict.reason), verdict.reason
    assert "\n" not in verdict.reason


def test_tiny_latencies_never_fail_on_the_ratio_alone() -> None:
    stable = Figures(requests=500, p99_ms=0.4, mean_ms=0.2)
    assert judge(Figures(requests=500, p99_ms=1.6, mean_ms=0.8), stable, POLICY).outcome == PASS  # 4x, 1.2 ms above
    assert judge(Figures(requests=500, p99_ms=6.0, mean_ms=3.0), stable, POLICY).outcome == FAIL


def test_p95_is_judged_on_its_own_when_the_policy_sets_its_ratio() -> None:
    policy = POLICY.replace(max_p95_ratio=1.5, min_p95_delta_ms=10.0)
    stable = Figures(requests=1000, p99_ms=40.0, p95_ms=15.0)
    slow_p95 = judge(Figures(requests=400, p99_ms=41.0, p95_ms=38.0), stable, policy)
    assert (slow_p95.outcome, slow_p95.reason.split(";")[0]) == (FAIL, "p95 latency: canary 38.0 ms vs stable 15.0 ms")
    assert "(maxP95Ratio) or 10 ms above (minP95DeltaMs)" in slow_p95.reason
    assert judge(Figures(requests=400, p99_ms=41.0, p95_ms=24.0), stable, policy).outcome == PASS  # 9 ms: the floor


def test_figures_record_matches_the_canary_schema() -> None:
    from model_sync.records import schemas

    record = Figures(requests=3, errors=1, p99_ms=12.34567, queue_us=None, mean_ms=4.0).record()
    assert record == {
        "requests": 3, "errors": 1, "error_ratio": 0.333333, "p99_ms": 12.346, "p95_ms": None, "mean_ms": 4.0,
        "queue_us": None, "replicas_p99_ms": [],
    }  # fmt: skip
    assert set(record) == set(schemas._FIGURES["properties"])


def test_the_canary_worst_replica_is_judged_against_what_the_worst_of_as_many_stable_replicas_is() -> None:
    """Per-replica quantiles cannot be merged: the canary's worst replica (what its unluckiest
    clients see) against the stable replicas' k/(k+1) quantile, k the canary's replicas (what the
    worst of k identical replicas typically is): one canary replica against the stable median, so
    one slow stable replica (a busy node) does not raise the bar; two against the upper third."""
    one = Figures(requests=300, p99_ms=30.0, replicas_p99_ms=(30.0,), p95_ms=9.0, replicas_p95_ms=(9.0,))
    stable = Figures(requests=900, p99_ms=40.0, replicas_p99_ms=(10.0, 12.0, 40.0), p95_ms=20.0,
                     replicas_p95_ms=(7.0, 8.0, 20.0))  # fmt: skip
    judged_canary, judged_stable = tracks(one, stable)
    assert judged_canary == one
    assert (judged_stable.p99_ms, judged_stable.p95_ms) == (12.0, 8.0)  # the median of three
    verdict = judge(judged_canary, judged_stable, CanaryPolicy())
    assert (verdict.outcome, verdict.latency) == (FAIL, True), verdict  # 30 ms > 1.5 x 12 and 5 ms above
    assert verdict.reason.startswith("p99 latency: canary 30.0 ms vs stable 12.0 ms"), verdict
    assert judge(one, stable, CanaryPolicy()).outcome == PASS  # worst against worst would have passed it
    two = Figures(requests=300, p99_ms=30.0, replicas_p99_ms=(11.0, 30.0))
    assert tracks(two, stable)[1].p99_ms == pytest.approx(12.0 + (40.0 - 12.0) / 3)  # quantile 2/3 of three
    assert Figures(p99_ms=7.0).replica_at(0.5).p99_ms == 7.0  # no per-replica figures: as given
