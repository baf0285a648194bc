"""The Triton deployments: their node group, models (each served once), replicas, sizes and gray-release policy."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.stack_config import parser
from components.stack_config.errors import ConfigError
from model_sync.contract.canary_policy import CanaryPolicy
from tests.components.stack_config._helpers import K, fails, parse, raw
from tests.pulumi_kit import stack_config as stack_file


def test_triton_deployment_names_are_dns_safe() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["Default"] = cfg[K + "tritonDeployments"].pop("default")
    fails(cfg, r"tritonDeployments\.<name>: 'Default' is not valid; allowed: a DNS label")


def test_model_names_checked() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["models"] = ["ResNet 18"]
    fails(
        cfg, r"tritonDeployments\.default\.models: 'ResNet 18' is not valid; allowed: model names of lowercase letters"
    )


def test_model_listed_twice() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["models"] = ["a", "a"]
    fails(cfg, r"models: .* lists a model twice")


def test_triton_node_group_must_be_a_gpu_group() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["nodeGroup"] = "system"
    fails(
        cfg, r"tritonDeployments\.default\.nodeGroup: 'system' is not a GPU node group of this stack; allowed: gpu-l4"
    )


def test_triton_min_replicas_not_above_max() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"].update(minReplicas=3, maxReplicas=2)
    fails(cfg, r"minReplicas: .* exceeds maxReplicas")


def test_triton_quantities() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["memory"] = "lots"
    fails(cfg, r"tritonDeployments\.default\.memory: 'lots' is not valid; allowed: a Kubernetes quantity")


def test_triton_numbers_in_range() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["gpusPerReplica"] = 0
    fails(cfg, r"gpusPerReplica: 0 is out of range; allowed: an integer from 1 to 16")


def test_integer_fields_refuse_non_integers() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["maxReplicas"] = 2.5
    fails(cfg, r"maxReplicas: 2.5 is not an integer")


def test_unknown_triton_field_rejected() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["readynessProbe"] = {}
    fails(cfg, r"tritonDeployments\.default\.readynessProbe: .* is an unknown key")


def test_canary_policy_is_parsed_per_deployment_with_defaults_for_what_is_left_out() -> None:
    cfg = parser.parse(stack_file("prod"), "prod")
    policies = {d.name: d.canary for d in cfg.triton_deployments}
    assert policies["default"] == CanaryPolicy()  # no `canary` key: the defaults
    assert "canary" not in stack_file("prod")[K + "tritonDeployments"]["default"]
    assert policies["large"] == CanaryPolicy(step_seconds=900, deadline_seconds=5400)
    custom = raw("dev")
    custom[K + "tritonDeployments"]["default"]["canary"] = {
        "steps": [5, 20, 50],
        "stepSeconds": 120,
        "deadlineSeconds": 1800,
        "minRequests": 50,
        "maxP99Ratio": 1.2,
    }
    d = next(d for d in parse(custom).triton_deployments if d.name == "default")
    assert d.canary == CanaryPolicy(
        steps=(5, 20, 50), step_seconds=120, deadline_seconds=1800, min_requests=50, max_p99_ratio=1.2
    )
    assert d.canary.to_mapping()["steps"] == [5, 20, 50]
    # Pulumi's spelling (the map as a JSON string) reads the same.
    from tests.pulumi_kit import to_pulumi_strings

    same = next(d for d in parse(to_pulumi_strings(custom)).triton_deployments if d.name == "default")
    assert same.canary == d.canary
    empty = raw("dev")
    empty[K + "tritonDeployments"]["default"]["canary"] = {}
    assert parse(empty).triton_deployments[0].canary == CanaryPolicy()


@pytest.mark.parametrize(
    ("canary", "match"),
    [
        (
            {"stepSecond": 60},
            r"^triton-platform:tritonDeployments\.default\.canary\.stepSecond: 60 is an unknown key; "
            r"allowed: deadlineSeconds, .*stepSeconds, steps$",
        ),
        (
            {"stepSeconds": 0},
            r"^triton-platform:tritonDeployments\.default\.canary\.stepSeconds: 0 is not allowed; allowed: 1\.\.86400$",
        ),
        (
            {"maxErrorRatioIncrease": 1.5},
            r"canary\.maxErrorRatioIncrease: 1\.5 is not allowed; allowed: 0\.\.1$",
        ),
        (
            {"steps": [25, 10]},
            r"canary\.steps: \[25, 10\] is not allowed; allowed: increasing percentages 1\.\.50",
        ),
        (
            {"steps": [10, 60]},
            r"canary\.steps: \[10, 60\] is not allowed; allowed: increasing percentages 1\.\.50",
        ),
        (
            {"minRequests": "many"},
            r"canary\.minRequests: 'many' is not allowed; allowed: an integer$",
        ),
        # A cross-check broken by a key left out: the default it takes is named.
        (
            {"stepSeconds": 2000},
            r"canary\.deadlineSeconds: 3600 is not allowed; allowed: at least len\(steps\) x stepSeconds \(6000\)$",
        ),
        (
            "fast",
            r"^triton-platform:tritonDeployments\.default\.canary: 'fast' is not a mapping; allowed: a mapping of ",
        ),
    ],
)
def test_canary_policy_refused_in_one_line(canary: Any, match: str) -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["canary"] = canary
    err = fails(cfg, match)
    assert err.key.startswith(K + "tritonDeployments.default.canary")


def test_triton_min_replicas_at_least_one() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["minReplicas"] = 0
    fails(cfg, r"tritonDeployments\.default\.minReplicas: 0 is out of range; allowed: an integer from 1 to 1000")


def test_a_model_in_two_deployments_is_refused_before_any_resource() -> None:
    """It used to pass the stack model and raise inside IngressArgs after 153 resources."""
    from tests.pulumi_kit import run_program

    cfg = raw("prod")
    cfg[K + "tritonDeployments"]["large"]["models"] = ["reranker-large", "resnet18"]
    err = fails(
        cfg,
        r"tritonDeployments\.large\.models: 'resnet18' is already served by deployment 'default'; allowed: each "
        r"model in one deployment",
    )
    assert err.key == K + "tritonDeployments.large.models"
    with pytest.raises(ConfigError, match="already served by deployment 'default'"):
        run_program("prod", {K + "tritonDeployments": yaml.safe_dump(cfg[K + "tritonDeployments"])})


def test_shm_must_be_below_the_container_memory() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["shmSizeGiB"] = 12
    fails(
        cfg,
        r"tritonDeployments\.default\.shmSizeGiB: 12 is not below the container's memory \(12Gi; /dev/shm is charged "
        r"to it\); "
        r"allowed: less than triton-platform:tritonDeployments\.default\.memory",
    )


def test_memory_without_a_unit_is_refused() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["memory"] = 16
    fails(
        cfg,
        r"tritonDeployments\.default\.memory: '16' is less than 1Gi \(a quantity without a unit counts bytes\); "
        r"allowed: at least 1Gi",
    )
    cfg[K + "tritonDeployments"]["default"]["memory"] = "12Gi"
    cfg[K + "tritonDeployments"]["default"]["cpu"] = "100m"
    fails(cfg, r"tritonDeployments\.default\.cpu: '100m' is too little for tritonserver; allowed: at least 500m")


@pytest.mark.parametrize("name", ["ResNet", "m" * 64, "-m", "a.b", "resnet-18_v2", "m" * 63])
def test_a_stack_accepts_exactly_the_model_names_model_sync_accepts(name: str) -> None:
    """One rule for a stack's models and every bucket key (model_sync.contract.layout): a stack never lists
    a model that `push` refuses, nor the other way round."""
    from model_sync.contract import layout

    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["default"]["models"] = [name]
    try:
        layout.check_model_name(name)
    except layout.LayoutError:
        fails(cfg, r"tritonDeployments\.default\.models: .* is not valid; allowed: model names of lowercase letters")
    else:
        parse(cfg)
