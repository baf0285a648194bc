"""`nodeGroups.<group>.gpuSharing` in a stack: read strictly, held to what the group's AMI and GPUs can
apply, and counted in the capacity, node-fit and GPU memory rules; every mistake is one line naming the key
and what is allowed."""

from __future__ import annotations

import pytest

from components.gpu.gpu_sharing import GpuSharing
from tests.components.stack_config._helpers import K, fails, parse, raw

SHARED = "gpu-l4-shared"


def _dev(**sharing: object) -> dict:
    cfg = raw("dev")
    cfg[K + "nodeGroups"][SHARED]["gpuSharing"] = dict(sharing)
    return cfg


def _mig_on_p5(profile: str, **group: object) -> dict:
    cfg = _dev(mode="mig", migProfile=profile)
    cfg[K + "nodeGroups"][SHARED].update(instanceTypes=["p5.48xlarge"], **group)
    return cfg


def test_dev_time_slices_its_light_group_and_every_other_group_keeps_whole_gpus() -> None:
    for stack in ("dev", "staging", "prod"):
        config = parse(raw(stack), stack)
        for group in config.gpu_node_groups:
            expected = GpuSharing("time-slicing", 2) if group.name == SHARED else GpuSharing()
            assert group.sharing == expected, (stack, group.name)


def test_a_mig_layout_on_h100s_is_read_and_each_instance_holds_a_replica() -> None:
    """A p5.48xlarge node cut into 1g.10gb instances takes 56 replicas (8 H100s x 7): their disks must fit it
    together, and a group of 1 node holds 56 of them."""
    fails(_mig_on_p5("1g.10gb"), r"tritonDeployments\.light\.modelVolumeGiB: 25 needs 1512Gi of disk for the 56 "
                                 r"replicas sharing its GPUs \(mig 1g\.10gb\)")  # fmt: skip
    config = parse(_mig_on_p5("1g.10gb", diskSizeGiB=2000, maxSize=1))
    assert config.node_group(SHARED).sharing == GpuSharing("mig", 1, "1g.10gb")
    cfg = _mig_on_p5("1g.10gb", diskSizeGiB=2000, maxSize=1)
    cfg[K + "tritonDeployments"]["light"]["maxReplicas"] = 57
    fails(cfg, rf"nodeGroups\.{SHARED}\.maxSize: 1 holds 56 GPU share\(s\) but .* need 57; allowed: maxSize >= 2")


@pytest.mark.parametrize(
    ("sharing", "match"),
    [
        ({"mode": "slices"}, r"gpuSharing\.mode: 'slices' is not allowed; allowed: whole \| time-slicing \| mps \| mig"),
        ({"replicas": 2}, r"gpuSharing\.mode: <unset> is missing; allowed: a value"),
        ({"mode": "time-slicing"}, r"gpuSharing\.replicas: <unset> is missing; allowed: replicas per GPU with mode"),
        ({"mode": "time-slicing", "replicas": 17}, r"gpuSharing\.replicas: 17 is out of range; allowed: an integer from 2 to 16"),
        ({"mode": "mps", "replicas": 1}, r"gpuSharing\.replicas: 1 is out of range; allowed: an integer from 2 to 48"),
        ({"mode": "whole", "replicas": 2}, r"gpuSharing\.replicas: 2 is set with mode whole; allowed: replicas with mode"),
        ({"mode": "mps", "replicas": 2, "migProfile": "1g.10gb"}, r"gpuSharing\.migProfile: '1g\.10gb' is set with mode mps"),
        ({"mode": "mig"}, r"gpuSharing\.migProfile: <unset> is not a MIG profile name; allowed: 1g\.10gb, "),
        ({"mode": "mig", "migProfile": "1g.10gb"},
         r"gpuSharing\.migProfile: '1g\.10gb' is not a MIG profile of the L4 24 GB GPU; allowed: none \(L4 24 GB has no MIG\)"),
        ({"mode": "mps", "replicas": 2, "spread": True}, r"gpuSharing\.spread: true is an unknown key; allowed: migProfile, mode"),
    ],
)  # fmt: skip
def test_a_sharing_its_group_cannot_apply_is_refused_naming_the_key(sharing: dict, match: str) -> None:
    fails(_dev(**sharing), rf"nodeGroups\.{SHARED}\.{match}")


def test_sharing_on_al2023_or_a_system_group_is_refused() -> None:
    cfg = _dev(mode="time-slicing", replicas=2)
    cfg[K + "nodeGroups"][SHARED]["amiType"] = "AL2023_x86_64_NVIDIA"
    fails(cfg, rf"nodeGroups\.{SHARED}\.gpuSharing\.mode: 'time-slicing' needs the host device plugin of amiType "
               r"BOTTLEROCKET_x86_64_NVIDIA, not AL2023_x86_64_NVIDIA; allowed: whole on AL2023_x86_64_NVIDIA, or ")  # fmt: skip
    cfg = raw("dev")
    cfg[K + "nodeGroups"]["system"]["gpuSharing"] = {"mode": "whole"}
    fails(
        cfg, r"nodeGroups\.system\.gpuSharing: .* is set on a system group; allowed: gpuSharing on groups of kind gpu"
    )


def test_a_replica_takes_one_share_and_capacity_counts_shares() -> None:
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["light"]["gpusPerReplica"] = 2
    fails(cfg, r"tritonDeployments\.light\.gpusPerReplica: 2 does not fit on one node of .*gpu-l4-shared \(one "
               r"time-slicing x2 GPU share per replica\); allowed: at most 1")  # fmt: skip
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["light"]["maxReplicas"] = 5  # 2 nodes x 1 L4 x 2 shares
    fails(cfg, rf"nodeGroups\.{SHARED}\.maxSize: 2 holds 4 GPU share\(s\) but .*light\.maxReplicas x gpusPerReplica "
               r"need 5; allowed: maxSize >= 3")  # fmt: skip


def test_the_replicas_sharing_a_node_must_fit_it_together() -> None:
    """Two replicas of 3 CPUs each cannot share a g6.xlarge (4 vCPUs) even though one fits."""
    cfg = raw("dev")
    cfg[K + "tritonDeployments"]["light"]["cpu"] = "3"
    fails(cfg, r"tritonDeployments\.light\.cpu: '3' needs 6200m for the 2 replicas sharing its GPUs "
               r"\(time-slicing x2\) \(with the agent sidecar\) but a g6\.xlarge node of group 'gpu-l4-shared' "
               r"leaves pods 3220m")  # fmt: skip
