"""An EKS managed node group: the system (CPU) group or a GPU group.

The scheduling contract comes from components/gpu/gpu_contract.py and nowhere else: GPU
groups carry `GPU_TAINT` and `gpu_node_labels(<group>)`, the system group carries
`system_node_labels()`; the stack config's own labels are added (config refuses the
reserved `triton-platform.io/` and `kubernetes.io/` prefixes).

Launch template:
- IMDSv2 only, hop limit 1. Pods get AWS credentials from EKS Pod Identity (served by
  the pod-identity agent on the link-local 169.254.170.23, not IMDS), and the only
  pods that need IMDS (aws-node, kube-proxy, the pod-identity agent) use the host
  network, where hop limit 1 still reaches it. Any other pod is one hop further and
  cannot read the node role's credentials. Controllers that discover region/VPC from
  IMDS (AWS Load Balancer Controller) must be given them explicitly.
  ref:
  https://docs.aws.amazon.com/eks/latest/best-practices/identity-and-access-management.html#_restrict_access_to_the_instance_profile_assigned_to_the_worker_node
- An encrypted gp3 volume of `disk_size_gib` for images and pod storage (the root
  volume on AL2023, the data volume /dev/xvdb on Bottlerocket).

Node role: exactly AmazonEKSWorkerNodePolicy, AmazonEC2ContainerRegistryReadOnly and
AmazonEKS_CNI_Policy. AmazonSSMManagedInstanceCore is left out: it lets anyone with SSM
rights in the account open a root shell on a GPU node; break-glass access is a
reviewed, temporary attachment instead. With authentication mode API, EKS creates the
node role's EC2_LINUX access entry itself.
ref: https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from components.gpu import gpu_contract
from components.gpu.gpu_instances import gpus_of
from components.gpu.gpu_sharing import GpuSharing, bottlerocket_settings, refusal
from components.iam.roles import role_with_policies
from components.stack_config.model import NodeGroupConfig
from components.stack_config.vocabulary import CAPACITY_TYPES, GPU_AMI_TYPES, NODE_GROUP_KINDS, SYSTEM_AMI_TYPES
from model_sync.contract.dns_label import DNS_LABEL

NODE_ROLE_POLICY_ARNS = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
)
IMDS_HOP_LIMIT = 1


@dataclass(frozen=True)
class NodeGroupArgs:
    """Inputs of `NodeGroup`.

    group_name: the node group's stable name from the stack config (DNS label; required).
    kind: `system` or `gpu` (required); decides labels, taints and allowed AMI types.
    cluster_name: the EKS cluster (required).
    kubernetes_version: the cluster's minor version; nodes follow it (required).
    subnet_ids: private subnets to launch into (required).
    instance_types: EC2 instance types, at least one (required).
    ami_type: EKS AMI type; `gpu` groups take an NVIDIA AMI, `system` groups a standard one (required).
    capacity_type: ON_DEMAND (default) or SPOT.
    min_size / desired_size / max_size: node counts, min <= desired <= max, max >= 1;
        min 0 allowed only for GPU groups (dev scales GPUs to zero).
    disk_size_gib: encrypted gp3 volume size in GiB, 20 to 16384 (default 100).
    labels: extra Kubernetes labels (default none); may not override the contract labels.
    tags: extra AWS tags on every resource (default none).
    gpu_sharing: how a GPU group shares its GPUs (components/gpu/gpu_sharing.py; default whole GPUs);
        anything else needs a Bottlerocket NVIDIA AMI and, for MIG, a profile every instance type's GPU offers.
    """

    group_name: str
    kind: str
    cluster_name: pulumi.Input[str]
    kubernetes_version: str
    subnet_ids: pulumi.Input[Sequence[str]]
    instance_types: Sequence[str]
    ami_type: str
    min_size: int
    desired_size: int
    max_size: int
    capacity_type: str = "ON_DEMAND"
    disk_size_gib: int = 100
    labels: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    gpu_sharing: GpuSharing = field(default_factory=GpuSharing)

    def __post_init__(self) -> None:
        if not DNS_LABEL.match(self.group_name):
            raise ValueError(
                f"NodeGroupArgs.group_name: {self.group_name!r} is not valid; allowed: a DNS label of at most 32 "
                "characters"
            )
        if self.kind not in NODE_GROUP_KINDS:
            raise ValueError(
                f"NodeGroupArgs.kind: {self.kind!r} is not allowed; allowed: {' | '.join(NODE_GROUP_KINDS)}"
            )
        if not self.instance_types:
            raise ValueError("NodeGroupArgs.instance_types: [] is empty; allowed: at least one EC2 instance type")
        amis = GPU_AMI_TYPES if self.kind == "gpu" else SYSTEM_AMI_TYPES
        if self.ami_type not in amis:
            raise ValueError(
                f"NodeGroupArgs.ami_type: {self.ami_type!r} is not allowed for a {self.kind} group; allowed: "
                f"{' | '.join(amis)}"
            )
        if self.capacity_type not in CAPACITY_TYPES:
            raise ValueError(
                f"NodeGroupArgs.capacity_type: {self.capacity_type!r} is not allowed; allowed: "
                f"{' | '.join(CAPACITY_TYPES)}"
            )
        lo = 0 if self.kind == "gpu" else 1
        if self.min_size < lo or self.max_size < 1 or not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(
                f"NodeGroupArgs.desired_size: min/desired/max {self.min_size}/{self.desired_size}/{self.max_size} is "
                "not allowed; "
                f"allowed: {lo} <= min_size <= desired_size <= max_size, max_size >= 1"
            )
        if not 20 <= self.disk_size_gib <= 16384:
            raise ValueError(
                f"NodeGroupArgs.disk_size_gib: {self.disk_size_gib!r} is out of range; allowed: 20 to 16384"
            )
        if self.gpu_sharing.shared:
            bad = (
                refusal(self.gpu_sharing, self.ami_type, gpus_of(self.instance_types))
                if self.kind == "gpu"
                else ("", "is set on a system group", "whole")
            )
            if bad is not None:
                raise ValueError(
                    f"NodeGroupArgs.gpu_sharing: {self.gpu_sharing.describe()!r} {bad[1]}; allowed: {bad[2]}"
                )
        reserved = set(_contract_labels(self.kind, self.group_name))
        clash = sorted(reserved & set(self.labels))
        if clash:
            raise ValueError(
                f"NodeGroupArgs.labels: {clash!r} would override the GPU contract labels; allowed: keys other than "
                f"{', '.join(sorted(reserved))}"
            )


def _contract_labels(kind: str, group_name: str) -> dict[str, str]:
    return gpu_contract.gpu_node_labels(group_name) if kind == "gpu" else gpu_contract.system_node_labels()


def _build_labels(args: NodeGroupArgs) -> dict[str, str]:
    return {**args.labels, **_contract_labels(args.kind, args.group_name)}


def _build_taints(kind: str) -> list[dict[str, str]]:
    return [t.as_eks() for t in gpu_contract.gpu_taints()] if kind == "gpu" else []


def _data_device_name(ami_type: str) -> str:
    """Bottlerocket keeps images and pods on its second volume; AL2023 on the root volume."""
    # ref: https://bottlerocket.dev/en/os/latest/concepts/bottlerocket-architecture/#storage
    return "/dev/xvdb" if ami_type.startswith("BOTTLEROCKET") else "/dev/xvda"


def _build_metadata_options() -> aws.ec2.LaunchTemplateMetadataOptionsArgs:
    return aws.ec2.LaunchTemplateMetadataOptionsArgs(
        http_endpoint="enabled",
        http_tokens="required",
        http_put_response_hop_limit=IMDS_HOP_LIMIT,
        instance_metadata_tags="disabled",
    )


def _build_block_devices(ami_type: str, size_gib: int) -> list[aws.ec2.LaunchTemplateBlockDeviceMappingArgs]:
    return [
        aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
            device_name=_data_device_name(ami_type),
            ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                volume_size=size_gib, volume_type="gp3", encrypted="true", delete_on_termination="true"
            ),
        )
    ]


def _build_node_assume_role_policy() -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "ec2.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }


class NodeGroup(pulumi.ComponentResource):
    """One managed node group with its node role and launch template (see module docstring)."""

    group_name: str
    kind: str
    is_gpu: bool
    labels: dict[str, str]
    taints: list[dict[str, str]]
    node_group_name: pulumi.Output[str]
    node_group_arn: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    node_role_name: pulumi.Output[str]
    launch_template_id: pulumi.Output[str]

    def __init__(self, name: str, args: NodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:eks:NodeGroup", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = {**args.tags, "triton-platform.io/node-group": args.group_name}
        self.group_name = args.group_name
        self.kind = args.kind
        self.is_gpu = args.kind == "gpu"
        self.labels = _build_labels(args)
        self.taints = _build_taints(args.kind)

        role, attachments = role_with_policies(
            f"{name}-node-role",
            NODE_ROLE_POLICY_ARNS,
            child,
            name_prefix=f"{args.group_name}-node-",
            assume_role_policy=json.dumps(_build_node_assume_role_policy()),
            tags=tags,
        )

        template = self._launch_template(name, args, tags)
        group = self._node_group(name, args, role, attachments, template, tags)

        self.node_group_name = group.node_group_name
        self.node_group_arn = group.arn
        self.node_role_arn = role.arn
        self.node_role_name = role.name
        self.launch_template_id = template.id
        # The managed group's Auto Scaling group (scale-from-zero tags go on it).
        self.autoscaling_group_name = group.resources.apply(
            lambda res: res[0].autoscaling_groups[0].name  # type: ignore[index]
        )
        self.register_outputs(
            {
                "groupName": self.group_name,
                "kind": self.kind,
                "gpuSharing": args.gpu_sharing.describe(),  # in previews as words: the user data is base64
                "labels": self.labels,
                "taints": self.taints,
                "nodeGroupName": self.node_group_name,
                "nodeGroupArn": self.node_group_arn,
                "nodeRoleArn": self.node_role_arn,
                "launchTemplateId": self.launch_template_id,
                "autoscalingGroupName": self.autoscaling_group_name,
            }
        )

    def _node_group(
        self,
        name: str,
        args: NodeGroupArgs,
        role: aws.iam.Role,
        attachments: list[aws.iam.RolePolicyAttachment],
        template: aws.ec2.LaunchTemplate,
        tags: dict[str, str],
    ) -> aws.eks.NodeGroup:
        """The managed node group: its scaling bounds (the autoscaler owns the size), labels and taints."""
        return aws.eks.NodeGroup(
            f"{name}-node-group",
            cluster_name=args.cluster_name,
            # A prefix, so a replacement (new instance types, AMI type) is created before the old group is deleted.
            node_group_name_prefix=f"{args.group_name}-",
            node_role_arn=role.arn,
            subnet_ids=args.subnet_ids,
            version=args.kubernetes_version,
            ami_type=args.ami_type,
            capacity_type=args.capacity_type,
            instance_types=list(args.instance_types),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=args.min_size, desired_size=args.desired_size, max_size=args.max_size
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            # ref: https://docs.aws.amazon.com/eks/latest/userguide/node-health.html
            node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(enabled=True),
            labels=self.labels,
            taints=[aws.eks.NodeGroupTaintArgs(**t) for t in self.taints],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            tags=tags,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=attachments,
                # The node autoscaler owns the current size; the config sets the bounds.
                ignore_changes=["scalingConfig.desiredSize"],
            ),
        )

    def _launch_template(self, name: str, args: NodeGroupArgs, tags: dict[str, str]) -> aws.ec2.LaunchTemplate:
        """The nodes' launch template: IMDSv2 with hop limit 1, an encrypted gp3 root volume, the tags; on a
        shared GPU group, the Bottlerocket settings that share its GPUs as user data (EKS merges them)."""
        shared = args.gpu_sharing.shared
        settings = bottlerocket_settings(args.gpu_sharing, gpus_of(args.instance_types)) if shared else ""
        return aws.ec2.LaunchTemplate(
            f"{name}-launch-template",
            name_prefix=f"{args.group_name}-",
            description=f"EKS node group {args.group_name}: IMDSv2 hop limit 1, encrypted gp3",
            metadata_options=_build_metadata_options(),
            block_device_mappings=_build_block_devices(args.ami_type, args.disk_size_gib),
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(
                    resource_type=kind, tags={**tags, "Name": f"{args.group_name}-node"}
                )
                for kind in ("instance", "volume")
            ],
            user_data=base64.b64encode(settings.encode()).decode() if settings else None,
            update_default_version=True,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )


def build_node_groups(
    groups: Sequence[NodeGroupConfig],
    cluster_name: pulumi.Input[str],
    kubernetes_version: str,
    subnet_ids: pulumi.Input[Sequence[str]],
    tags: Mapping[str, str],
    opts: pulumi.ResourceOptions | None = None,
) -> dict[str, NodeGroup]:
    """One `NodeGroup` per configured group, keyed by its stable name, named `nodegroup-<group>`."""
    return {
        g.name: NodeGroup(
            f"nodegroup-{g.name}",
            NodeGroupArgs(
                group_name=g.name,
                kind=g.kind,
                cluster_name=cluster_name,
                kubernetes_version=kubernetes_version,
                subnet_ids=subnet_ids,
                instance_types=g.instance_types,
                ami_type=g.ami_type,
                capacity_type=g.capacity_type,
                min_size=g.min_size,
                desired_size=g.desired_size,
                max_size=g.max_size,
                disk_size_gib=g.disk_size_gib,
                labels=dict(g.labels),
                tags=tags,
                gpu_sharing=g.sharing,
            ),
            opts=opts,
        )
        for g in groups
    }
