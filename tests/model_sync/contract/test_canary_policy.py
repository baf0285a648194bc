"""model_sync.contract.canary_policy: the gray release's policy, read from its camelCase mapping (the stack
config, the stack output, model-sync.yaml) with one-line errors naming the key."""

from __future__ import annotations

import pytest

from model_sync.contract.canary_policy import KEYS, CanaryPolicy, CanaryPolicyError


def test_defaults_are_safe_and_round_trip_through_the_mapping() -> None:
    policy = CanaryPolicy.from_mapping(None)
    assert policy == CanaryPolicy.from_mapping({}) == CanaryPolicy()
    assert policy.steps == (10, 25, 50)
    assert max(policy.steps) <= 50
    assert policy.deadline_seconds >= len(policy.steps) * policy.step_seconds
    mapping = policy.to_mapping()
    assert tuple(mapping) == KEYS
    assert CanaryPolicy.from_mapping(mapping) == policy
    custom = CanaryPolicy.from_mapping({"steps": [25, 50], "stepSeconds": 5, "deadlineSeconds": 60, "minRequests": 30})
    assert (custom.steps, custom.step_seconds, custom.min_requests) == ((25, 50), 5, 30)
    assert custom.max_p99_ratio == CanaryPolicy().max_p99_ratio  # a key left out keeps its default


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"step": [10]}, r"^tritonDeployments\.d\.canary\.step: unknown key; allowed: deadlineSeconds, "),
        (
            {"steps": [50, 25]},
            r"^tritonDeployments\.d\.canary\.steps: \[50, 25\]; allowed: increasing percentages 1\.\.50",
        ),
        ({"steps": [10, 60]}, r"\.steps: \[10, 60\]; allowed: increasing percentages 1\.\.50"),
        ({"steps": []}, r"\.steps: \[\]; allowed: increasing percentages"),
        ({"stepSeconds": 0}, r"\.stepSeconds: 0; allowed: 1\.\.86400$"),
        ({"stepSeconds": 1.5}, r"\.stepSeconds: 1\.5; allowed: an integer$"),
        ({"minRequests": True}, r"\.minRequests: True; allowed: an integer$"),
        ({"maxP99Ratio": 0.5}, r"\.maxP99Ratio: 0\.5; allowed: 1\.\.100$"),
        ({"maxErrorRatioIncrease": "1%"}, r"\.maxErrorRatioIncrease: '1%'; allowed: a number$"),
        (
            {"steps": [10, 25, 50], "stepSeconds": 600, "deadlineSeconds": 1200},
            r"\.deadlineSeconds: 1200; allowed: at least len\(steps\) x stepSeconds \(1800\)$",
        ),
        ([10, 25], r"^tritonDeployments\.d\.canary: \[10, 25\]; allowed: a mapping of "),
    ],
)
def test_a_bad_policy_is_one_line_naming_the_key(mapping: object, message: str) -> None:
    with pytest.raises(CanaryPolicyError, match=message):
        CanaryPolicy.from_mapping(mapping, "tritonDeployments.d.canary")  # type: ignore[arg-type]
