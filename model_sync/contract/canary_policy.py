"""A gray release's policy: the canary's steps, how long each runs, and the thresholds of the
analysis (docs/architecture.md#gray-release). Dependency-free: the stack config
(`tritonDeployments.<d>.canary`, components/stack_config/triton_deployments.py) and model_sync read it alike, and the
stack exports it per model (`canaryPolicies`), which is where `model-sync canary` and
`model-sync promote` get it from (`canaryPolicies` in model-sync.yaml for a local environment).

The mapping's keys are camelCase, like every stack config key; a key left out takes its default
(`CanaryPolicy()`), and an unknown key or a value out of bounds is a CanaryPolicyError naming the
key, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class CanaryPolicyError(ValueError):
    """`<where>.<key>: <value>; allowed: <what is>`."""


# camelCase key -> (field, type, lowest, highest): the bounds a policy is checked against.
_BOUNDS: dict[str, tuple[str, type, float, float]] = {
    "stepSeconds": ("step_seconds", int, 1, 86_400),
    "deadlineSeconds": ("deadline_seconds", int, 10, 7 * 86_400),
    "loadTimeoutSeconds": ("load_timeout_seconds", int, 1, 3_600),
    "minRequests": ("min_requests", int, 1, 10_000_000),
    "maxErrorRatioIncrease": ("max_error_ratio_increase", float, 0.0, 1.0),
    "maxP99Ratio": ("max_p99_ratio", float, 1.0, 100.0),
    "minP99DeltaMs": ("min_p99_delta_ms", float, 0.0, 60_000.0),
    "maxP95Ratio": ("max_p95_ratio", float, 0.0, 100.0),  # 0: p95 not judged
    "minP95DeltaMs": ("min_p95_delta_ms", float, 0.0, 60_000.0),
    "maxQueueRatio": ("max_queue_ratio", float, 1.0, 100.0),
    "minQueueDeltaMicroseconds": ("min_queue_delta_us", float, 0.0, 60_000_000.0),
    "latencyConfirmAfterSeconds": ("latency_confirm_after_seconds", int, 0, 3_600),
}
MAX_STEP_PERCENT = 50  # a canary never serves more than half of the traffic: the stable track keeps the rest


@dataclass(frozen=True)
class CanaryPolicy:
    """Defaults are the safe ones: three steps up to half of the traffic, five minutes each, one
    hour in all, and a canary judged only on at least 200 requests per track and step."""

    steps: tuple[int, ...] = (10, 25, 50)  # canary share per step, in percent: increasing, 1..50
    step_seconds: int = 300  # how long each step runs before its pass verdict
    deadline_seconds: int = 3_600  # the whole run, from the canary's start: past it, the run aborts
    load_timeout_seconds: int = 300  # the canary's replicas must serve it within this, else abort
    min_requests: int = 200  # per track (canary, stable) within a step: fewer is inconclusive
    max_error_ratio_increase: float = 0.01  # fail: canary error ratio > stable's + this (0.01 = 1 point)
    max_p99_ratio: float = 1.5  # fail: canary p99 > stable p99 x this ...
    min_p99_delta_ms: float = 5.0  # ... and at least this many ms above it (noise floor), whatever the mean does
    max_p95_ratio: float = 0.0  # fail: canary p95 > stable p95 x this (0: p95 is not judged) ...
    min_p95_delta_ms: float = 5.0  # ... and at least this many ms above it
    max_queue_ratio: float = 2.0  # fail: canary mean queue time > stable's x this ...
    min_queue_delta_us: float = 1_000.0  # ... and at least this many µs above it
    # A latency failure aborts only when a later window confirms it, judged once every canary replica
    # has served this long since its load: Triton's latency summaries cover the last 60 s, so a replica's
    # first requests (answered cold) have left them by then (docs/agent.md).
    latency_confirm_after_seconds: int = 60

    def __post_init__(self) -> None:
        steps = self.steps
        if (
            not isinstance(steps, tuple)
            or not steps
            or any(isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= MAX_STEP_PERCENT for s in steps)
            or list(steps) != sorted(set(steps))
        ):
            raise CanaryPolicyError(
                f"steps: {list(steps) if isinstance(steps, tuple) else steps!r}; allowed: increasing percentages "
                f"1..{MAX_STEP_PERCENT}, at least one (e.g. [10, 25, 50])"
            )
        for key, (fname, kind, low, high) in _BOUNDS.items():
            value = getattr(self, fname)
            if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and value != int(value)):
                raise CanaryPolicyError(f"{key}: {value!r}; allowed: {'an integer' if kind is int else 'a number'}")
            if not low <= value <= high:
                raise CanaryPolicyError(f"{key}: {value!r}; allowed: {low:g}..{high:g}")
        if 0 < self.max_p95_ratio < 1:
            raise CanaryPolicyError(f"maxP95Ratio: {self.max_p95_ratio!r}; allowed: 0 (p95 not judged) or 1..100")
        if self.deadline_seconds < len(steps) * self.step_seconds:
            raise CanaryPolicyError(
                f"deadlineSeconds: {self.deadline_seconds}; allowed: at least len(steps) x stepSeconds "
                f"({len(steps) * self.step_seconds})"
            )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, where: str = "canary") -> CanaryPolicy:
        """A policy from its camelCase mapping (None or {}: the defaults)."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise CanaryPolicyError(f"{where}: {data!r}; allowed: a mapping of {', '.join(sorted(KEYS))}")
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise CanaryPolicyError(f"{where}.{unknown[0]}: unknown key; allowed: {', '.join(sorted(KEYS))}")
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key == "steps":
                values["steps"] = tuple(value) if isinstance(value, list | tuple) else value
            else:
                values[_BOUNDS[key][0]] = value
        try:
            return cls(**values)
        except CanaryPolicyError as e:
            raise CanaryPolicyError(f"{where}.{e}") from None

    def to_mapping(self) -> dict[str, Any]:
        """The camelCase mapping (every key), what the stack exports and the audit records."""
        out: dict[str, Any] = {"steps": list(self.steps)}
        out.update({key: getattr(self, fname) for key, (fname, _, _, _) in _BOUNDS.items()})
        return out

    def replace(self, **changes: Any) -> CanaryPolicy:
        return dataclasses.replace(self, **changes)


KEYS = ("steps", *_BOUNDS)
