"""The node groups: one system group, GPU groups of GPU instance types only, sizes, AMIs, labels and names."""

from __future__ import annotations

import pytest

from tests.components.stack_config._helpers import K, fails, parse, raw


def test_gpu_group_accepts_only_gpu_families() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["instanceTypes"] = ["g6.xlarge", "m5.large"]
    fails(cfg, r"nodeGroups\.gpu-l4\.instanceTypes: 'm5.large' is not a GPU instance type; allowed: families g4dn, g5")


def test_system_group_refuses_gpu_instances() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["system"]["instanceTypes"] = ["g5.xlarge"]
    fails(cfg, r"nodeGroups\.system\.instanceTypes: 'g5.xlarge' is a GPU instance type in the system group")


def test_instance_type_shape() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["instanceTypes"] = ["bigbox"]
    fails(cfg, r"instanceTypes: 'bigbox' is not an EC2 instance type")


@pytest.mark.parametrize(("mn", "desired", "mx"), [(2, 1, 3), (1, 4, 3), (3, 3, 2)])
def test_node_group_min_desired_max(mn: int, desired: int, mx: int) -> None:
    cfg = raw("staging")
    cfg[K + "nodeGroups"]["gpu-l4"].update(minSize=mn, desiredSize=desired, maxSize=mx)
    fails(cfg, r"nodeGroups\.gpu-l4\.desiredSize: .* breaks minSize <= desiredSize <= maxSize")


def test_system_group_cannot_scale_to_zero() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["system"].update(minSize=0, desiredSize=0)
    fails(cfg, r"nodeGroups\.system\.minSize: 0 is out of range; allowed: an integer from 1 to 1000")


def test_gpu_group_may_scale_to_zero() -> None:
    assert parse(raw("dev")).node_group("gpu-l4").min_size == 0


def test_exactly_one_system_group() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["system2"] = dict(cfg[K + "nodeGroups"]["system"])
    fails(cfg, r"nodeGroups: .* must contain exactly one system group")


def test_at_least_one_gpu_group() -> None:
    cfg = raw("dev")
    for group in ("gpu-l4", "gpu-l4-shared"):
        del cfg[K + "nodeGroups"][group]
    fails(cfg, r"nodeGroups: .* has no GPU group")


def test_capacity_type_choices() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["capacityType"] = "spot"
    fails(cfg, r"capacityType: 'spot' is not allowed; allowed: ON_DEMAND \| SPOT")


def test_gpu_ami_type_choices() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["amiType"] = "AL2023_x86_64_STANDARD"
    fails(
        cfg,
        r"amiType: 'AL2023_x86_64_STANDARD' is not allowed; allowed: AL2023_x86_64_NVIDIA \| "
        r"BOTTLEROCKET_x86_64_NVIDIA",
    )


def test_reserved_label_prefix_refused() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["labels"] = {"triton-platform.io/node-role": "system"}
    fails(cfg, r"labels\.triton-platform\.io/node-role: 'system' is not allowed")


@pytest.mark.parametrize("bad", ["GPU", "gpu_l4", "-gpu", "g" * 40, "gpu.l4"])
def test_node_group_names_are_dns_safe(bad: str) -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"][bad] = cfg[K + "nodeGroups"].pop("gpu-l4")
    fails(cfg, r"nodeGroups\.<name>: .* is not valid; allowed: a DNS label")


def test_unknown_node_group_field_rejected() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["maxSise"] = 4
    fails(cfg, r"nodeGroups\.gpu-l4\.maxSise: 4 is an unknown key; allowed: .*maxSize")


def test_missing_required_nested_field() -> None:
    cfg = raw("dev")
    del cfg[K + "nodeGroups"]["gpu-l4"]["maxSize"]
    fails(cfg, r"nodeGroups\.gpu-l4\.maxSize: <unset> is missing")


def test_gpu_size_must_have_known_gpu_count() -> None:
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["gpu-l4"]["instanceTypes"] = ["g6.96xlarge"]
    fails(cfg, r"instanceTypes: 'g6.96xlarge' is not a GPU instance size with a known GPU count")
