"""Node groups: contract labels/taints, AMI types, scaling per stack, launch template, node role."""

from __future__ import annotations

import base64
import tomllib

import pytest

from components.gpu import gpu_contract
from components.node_group import IMDS_HOP_LIMIT, NODE_ROLE_POLICY_ARNS, NodeGroupArgs, _data_device_name
from components.stack_config.parser import parse
from tests.components._helpers import assert_children_prefixed, policy, registered_outputs
from tests.pulumi_kit import Run
from tests.pulumi_kit import stack_config as stack_file

NODE_GROUP = "triton-platform:eks:NodeGroup"
# stack -> group -> (kind, ami, capacity, min, desired, max, disk GiB, instance types)
EXPECTED = {
    "dev": {
        "system": ("system", "AL2023_x86_64_STANDARD", "ON_DEMAND", 2, 2, 3, 50, ["m7i.large"]),
        "gpu-l4": ("gpu", "AL2023_x86_64_NVIDIA", "SPOT", 0, 0, 2, 100, ["g6.xlarge", "g6.2xlarge"]),
        "gpu-l4-shared": ("gpu", "BOTTLEROCKET_x86_64_NVIDIA", "SPOT", 0, 0, 2, 100, ["g6.xlarge"]),
    },
    "staging": {
        "system": ("system", "AL2023_x86_64_STANDARD", "ON_DEMAND", 2, 3, 4, 50, ["m7i.xlarge"]),
        "gpu-l4": ("gpu", "AL2023_x86_64_NVIDIA", "ON_DEMAND", 1, 1, 4, 200, ["g6.2xlarge"]),
    },
    "prod": {
        "system": ("system", "AL2023_x86_64_STANDARD", "ON_DEMAND", 3, 3, 6, 50, ["m7i.xlarge", "m6i.xlarge"]),
        "gpu-l4": ("gpu", "AL2023_x86_64_NVIDIA", "ON_DEMAND", 2, 3, 8, 200, ["g6.2xlarge"]),
        "gpu-a10g": ("gpu", "AL2023_x86_64_NVIDIA", "ON_DEMAND", 2, 2, 6, 300, ["g5.4xlarge"]),
    },
}


def _groups(run: Run) -> dict:
    return {
        r.name.removeprefix("nodegroup-").removesuffix("-node-group"): r
        for r in run.of_type("aws:eks/nodeGroup:NodeGroup")
    }


def test_node_groups_match_config(any_stack: Run) -> None:
    groups = _groups(any_stack)
    assert set(groups) == set(EXPECTED[any_stack.stack])
    for name, (_kind, ami, capacity, lo, desired, hi, _, types) in EXPECTED[any_stack.stack].items():
        g = groups[name]
        assert g.inputs["amiType"] == ami
        assert g.inputs["capacityType"] == capacity
        assert g.inputs["instanceTypes"] == types
        assert g.inputs["scalingConfig"] == {"minSize": lo, "desiredSize": desired, "maxSize": hi}
        assert g.inputs["nodeGroupNamePrefix"] == f"{name}-"
        assert g.inputs["clusterName"] == f"triton-{any_stack.stack}"
        assert g.inputs["version"] == "1.33"
        assert g.inputs["nodeRepairConfig"] == {"enabled": True}
        private = {
            s.state["id"] for s in any_stack.of_type("aws:ec2/subnet:Subnet") if s.inputs["tags"]["tier"] == "private"
        }
        assert set(g.inputs["subnetIds"]) == private
        assert "diskSize" not in g.inputs  # the launch template owns the volume


def test_dev_gpus_scale_to_zero(dev: Run) -> None:
    assert _groups(dev)["gpu-l4"].inputs["scalingConfig"]["minSize"] == 0


def test_gpu_groups_carry_the_contract_taint_and_labels(any_stack: Run) -> None:
    for name, spec in EXPECTED[any_stack.stack].items():
        g = _groups(any_stack)[name]
        if spec[0] == "gpu":
            assert g.inputs["taints"] == [gpu_contract.GPU_TAINT.as_eks()]
            assert g.inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
            for k, v in gpu_contract.gpu_node_labels(name).items():
                assert g.inputs["labels"][k] == v
        else:
            assert g.inputs.get("taints", []) == []
            assert g.inputs["labels"] == gpu_contract.system_node_labels()


def test_launch_template_imdsv2_hop_limit_and_encrypted_gp3(any_stack: Run) -> None:
    for name, spec in EXPECTED[any_stack.stack].items():
        lt = any_stack.one("aws:ec2/launchTemplate:LaunchTemplate", f"nodegroup-{name}-launch-template")
        assert lt.inputs["metadataOptions"] == {
            "httpEndpoint": "enabled",
            "httpTokens": "required",
            "httpPutResponseHopLimit": IMDS_HOP_LIMIT,
            "instanceMetadataTags": "disabled",
        }
        assert IMDS_HOP_LIMIT == 1
        [bdm] = lt.inputs["blockDeviceMappings"]
        assert bdm["deviceName"] == ("/dev/xvdb" if spec[1].startswith("BOTTLEROCKET") else "/dev/xvda")
        assert bdm["ebs"] == {
            "volumeSize": spec[6],
            "volumeType": "gp3",
            "encrypted": "true",
            "deleteOnTermination": "true",
        }
        g = _groups(any_stack)[name]
        assert g.inputs["launchTemplate"] == {"id": lt.state["id"], "version": "1"}


def test_only_a_shared_gpu_group_carries_settings_and_they_are_bottlerockets_time_slicing(any_stack: Run) -> None:
    """The launch template's user data is the Bottlerocket settings that share a group's GPUs (TOML, which
    EKS merges into its own); a group of whole GPUs carries none, so its nodes boot as before."""
    config = parse(stack_file(any_stack.stack), any_stack.stack)
    for name in EXPECTED[any_stack.stack]:
        lt = any_stack.one("aws:ec2/launchTemplate:LaunchTemplate", f"nodegroup-{name}-launch-template")
        group = config.node_group(name)
        if not (group.is_gpu and group.sharing.shared):
            assert lt.inputs.get("userData") is None, name
            continue
        settings = tomllib.loads(base64.b64decode(lt.inputs["userData"]).decode())
        assert settings == {
            "settings": {
                "kubelet-device-plugins": {
                    "nvidia": {
                        "device-sharing-strategy": "time-slicing",
                        "time-slicing": {
                            "replicas": group.sharing.replicas,
                            "rename-by-default": False,
                            "fail-requests-greater-than-one": True,
                        },
                    }
                }
            }
        }
    if any_stack.stack == "dev":
        assert config.node_group("gpu-l4-shared").sharing.replicas == 2


def test_node_role_has_exactly_the_minimal_policies(any_stack: Run) -> None:
    for name in EXPECTED[any_stack.stack]:
        role = any_stack.one("aws:iam/role:Role", f"nodegroup-{name}-node-role")
        trust = policy(role, "assumeRolePolicy")
        assert [s["Principal"] for s in trust["Statement"]] == [{"Service": "ec2.amazonaws.com"}]
        attached = {
            a.inputs["policyArn"]
            for a in any_stack.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
            if a.name.startswith(f"nodegroup-{name}-node-role-")
        }
        assert attached == set(NODE_ROLE_POLICY_ARNS)
        assert not any("SSM" in a for a in attached)
        g = _groups(any_stack)[name]
        assert g.inputs["nodeRoleArn"] == role.state["arn"]


def test_component_shape(any_stack: Run) -> None:
    for name, spec in EXPECTED[any_stack.stack].items():
        comp = any_stack.one(NODE_GROUP, f"nodegroup-{name}")
        children = assert_children_prefixed(any_stack, comp, min_children=6)
        assert {c.type for c in children} >= {
            "aws:eks/nodeGroup:NodeGroup",
            "aws:ec2/launchTemplate:LaunchTemplate",
            "aws:iam/role:Role",
        }
        outputs = registered_outputs(any_stack, comp) if spec[0] == "gpu" else any_stack.component_outputs[comp.urn]
        assert outputs["groupName"] == name
        assert outputs["kind"] == spec[0]
        assert outputs["gpuSharing"] == ("time-slicing x2" if name == "gpu-l4-shared" else "whole")


# ---- builders and validation -----------------------------------------------------------


def test_bottlerocket_data_volume() -> None:
    assert _data_device_name("BOTTLEROCKET_x86_64_NVIDIA") == "/dev/xvdb"
    assert _data_device_name("AL2023_x86_64_NVIDIA") == "/dev/xvda"


_BASE = {
    "group_name": "gpu-l4",
    "kind": "gpu",
    "cluster_name": "c",
    "kubernetes_version": "1.33",
    "subnet_ids": ["s"],
    "instance_types": ["g6.xlarge"],
    "ami_type": "AL2023_x86_64_NVIDIA",
    "min_size": 0,
    "desired_size": 0,
    "max_size": 2,
}


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"group_name": "GPU"}, r"NodeGroupArgs.group_name: 'GPU' is not valid"),
        ({"kind": "cpu"}, r"NodeGroupArgs.kind: 'cpu' is not allowed; allowed: system \| gpu"),
        ({"instance_types": []}, r"NodeGroupArgs.instance_types: \[\] is empty"),
        (
            {"ami_type": "AL2023_x86_64_STANDARD"},
            r"NodeGroupArgs.ami_type: 'AL2023_x86_64_STANDARD' is not allowed for a gpu group",
        ),
        (
            {"kind": "system", "ami_type": "AL2023_x86_64_NVIDIA", "min_size": 1, "desired_size": 1},
            r"ami_type: 'AL2023_x86_64_NVIDIA' is not allowed for a system group",
        ),
        ({"capacity_type": "RESERVED"}, r"NodeGroupArgs.capacity_type: 'RESERVED' is not allowed"),
        ({"min_size": 3, "desired_size": 2}, r"NodeGroupArgs.desired_size: min/desired/max 3/2/2 is not allowed"),
        ({"max_size": 0}, r"NodeGroupArgs.desired_size: min/desired/max 0/0/0 is not allowed"),
        (
            {"kind": "system", "ami_type": "AL2023_x86_64_STANDARD"},
            r"min/desired/max 0/0/2 is not allowed; allowed: 1 <= min_size",
        ),
        ({"disk_size_gib": 10}, r"NodeGroupArgs.disk_size_gib: 10 is out of range"),
        (
            {"labels": {gpu_contract.GPU_GROUP_LABEL: "other"}},
            r"NodeGroupArgs.labels: .* would override the GPU contract labels",
        ),
    ],
)
def test_args_validation(changes: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        NodeGroupArgs(**{**_BASE, **changes})
