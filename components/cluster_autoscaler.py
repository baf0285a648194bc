"""Node autoscaling: the Kubernetes Cluster Autoscaler over the EKS managed node groups.

Why Cluster Autoscaler and not Karpenter (docs/node-autoscaling.md has the long form):
- the GPU capacity is already modelled as EKS managed node groups keyed by name, with the
  GPU taint/label contract on the group definition; the Cluster Autoscaler scales exactly
  those groups, so there is one definition of a GPU pool, not two (a Karpenter NodePool
  would restate instance types, taints and labels);
- managed node groups already handle spot interruptions: with capacity type SPOT, EKS
  enables Capacity Rebalancing and, on a rebalance recommendation, launches a replacement
  and cordons + drains the old node through the eviction API, so PodDisruptionBudgets and
  the Triton pods' terminationGracePeriodSeconds are respected; no SQS queue and
  EventBridge rules to operate;
- the per-stack limits are the node groups' own min/max sizes, validated against the
  Triton deployments' replicas in components/stack_config/rules.py.

Scale-from-zero: an empty group has no node to copy, so the autoscaler reads the node
template from ASG tags; the labels, taint and `nvidia.com/gpu` capacity tags are derived
from components/gpu/gpu_contract.py and components/gpu/gpu_instances.py, never retyped.
# ref:
https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/cloudprovider/aws/README.md#auto-discovery-setup
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from components.gpu import gpu_contract
from components.gpu.gpu_sharing import REPLICA_BOUNDS
from components.iam.pod_identity import pod_identity_trust
from components.kubernetes.helm import pinned_release
from components.stack_config.declarations import check_declared
from components.upstream import versions

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"
_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
RELEASE_TIMEOUT_SECONDS = 600
# The most `nvidia.com/gpu` a node may advertise: 16 GPUs, each shared by the most replicas a mode allows.
MAX_GPU_RESOURCES_PER_NODE = 16 * max(hi for _, hi in REPLICA_BOUNDS.values())


@dataclass(frozen=True)
class GpuPool:
    """One GPU node group as the autoscaler sees it."""

    name: str  # node group name (the key in config nodeGroups)
    autoscaling_group_name: pulumi.Input[str]
    # The `nvidia.com/gpu` a node brings: its GPUs, times the shares of each on a shared group
    # (components/gpu/gpu_sharing.py), at most MAX_GPU_RESOURCES_PER_NODE.
    gpus_per_node: int
    capacity_type: str  # ON_DEMAND | SPOT

    def __post_init__(self) -> None:
        if not 1 <= self.gpus_per_node <= MAX_GPU_RESOURCES_PER_NODE:
            raise ValueError(
                f"GpuPool.gpus_per_node: {self.gpus_per_node} is out of range; allowed: 1 to {MAX_GPU_RESOURCES_PER_NODE}"
            )
        if self.capacity_type not in ("ON_DEMAND", "SPOT"):
            raise ValueError(f"GpuPool.capacity_type: {self.capacity_type!r} is not allowed; allowed: ON_DEMAND | SPOT")


@dataclass(frozen=True)
class ClusterAutoscalerArgs:
    """Inputs of ClusterAutoscaler.

    cluster_name: EKS cluster name (auto-discovery and the IAM condition use it).
    cluster_arn: EKS cluster ARN; the role's Pod Identity trust requires it.
    region: AWS region of the cluster.
    kubernetes_version: cluster minor version; picks the matching autoscaler image.
    gpu_pools: the GPU node groups, keyed by `GpuPool.name` (unique).
    scale_down_unneeded_minutes: minutes a node must be unneeded before removal (the bounds declared for
        `scaleDownUnneededMinutes`).
    scale_down_delay_after_add_minutes: minutes after a scale-up before scale-down (the bounds declared
        for `scaleDownDelayAfterAddMinutes`).
    system_node_selector: where the autoscaler itself runs (the system group's labels).
    service_monitor: create the chart's ServiceMonitor (needs the Prometheus Operator CRDs).
    """

    cluster_name: pulumi.Input[str]
    cluster_arn: pulumi.Input[str]
    region: str
    kubernetes_version: str
    gpu_pools: tuple[GpuPool, ...]
    scale_down_unneeded_minutes: int = 10
    scale_down_delay_after_add_minutes: int = 10
    system_node_selector: Mapping[str, str] = field(default_factory=gpu_contract.system_node_labels)
    service_monitor: bool = False

    def __post_init__(self) -> None:
        if self.kubernetes_version not in versions.CLUSTER_AUTOSCALER_IMAGE_TAGS:
            raise ValueError(
                f"ClusterAutoscalerArgs.kubernetes_version: {self.kubernetes_version!r} has no matching autoscaler "
                "image; "
                f"allowed: {', '.join(sorted(versions.CLUSTER_AUTOSCALER_IMAGE_TAGS))}"
            )
        names = [p.name for p in self.gpu_pools]
        if len(set(names)) != len(names):
            raise ValueError(
                f"ClusterAutoscalerArgs.gpu_pools: {names} repeats a name; allowed: unique node group names"
            )
        check_declared(
            "ClusterAutoscalerArgs.scale_down_unneeded_minutes",
            "scaleDownUnneededMinutes",
            self.scale_down_unneeded_minutes,
        )
        check_declared(
            "ClusterAutoscalerArgs.scale_down_delay_after_add_minutes",
            "scaleDownDelayAfterAddMinutes",
            self.scale_down_delay_after_add_minutes,
        )


def _build_trust_policy(cluster_arn: str) -> str:
    """EKS Pod Identity trust: this cluster's kube-system/cluster-autoscaler only (components/iam/pod_identity.py)."""
    return json.dumps(pod_identity_trust(cluster_arn, NAMESPACE, [SERVICE_ACCOUNT]))


def tag_slug(key: str) -> str:
    """A stable child-name suffix for a node-template tag key: the part after the
    node-template prefix, lowercased, every run of other characters turned into '-'
    (`.../taint/nvidia.com/gpu` -> `taint-nvidia-com-gpu`)."""
    short = key[len(_TEMPLATE) + 1 :] if key.startswith(_TEMPLATE + "/") else key
    return re.sub(r"[^a-z0-9]+", "-", short.lower()).strip("-")


def _build_policy(cluster_name: str, region: str, account_id: str) -> str:
    """Least privilege for the AWS cloud provider.

    - The Describe* calls do not support resource-level permissions in IAM, so they
      are the only `Resource: "*"` statement (read-only).
      # ref: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2autoscaling.html
    - Changing capacity is limited to ASGs tagged as owned by THIS cluster (EKS managed
      node groups carry `k8s.io/cluster-autoscaler/<cluster>=owned`).
    - eks:DescribeNodegroup (labels/taints for scale-from-zero) only on this cluster's
      node groups.
    """
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DescribeOnly",
                    "Effect": "Allow",
                    "Action": [
                        "autoscaling:DescribeAutoScalingGroups",
                        "autoscaling:DescribeAutoScalingInstances",
                        "autoscaling:DescribeLaunchConfigurations",
                        "autoscaling:DescribeScalingActivities",
                        "autoscaling:DescribeTags",
                        "ec2:DescribeImages",
                        "ec2:DescribeInstanceTypes",
                        "ec2:DescribeLaunchTemplateVersions",
                        "ec2:GetInstanceTypesFromInstanceRequirements",
                    ],
                    "Resource": "*",
                },
                {
                    "Sid": "ScaleOwnGroupsOnly",
                    "Effect": "Allow",
                    "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                    "Resource": f"arn:aws:autoscaling:{region}:{account_id}:autoScalingGroup:*:autoScalingGroupName/*",
                    "Condition": {
                        "StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}
                    },
                },
                {
                    "Sid": "ReadOwnNodeGroups",
                    "Effect": "Allow",
                    "Action": ["eks:DescribeNodegroup"],
                    "Resource": f"arn:aws:eks:{region}:{account_id}:nodegroup/{cluster_name}/*/*",
                },
            ],
        }
    )


def _build_node_template_tags(pool: GpuPool) -> dict[str, str]:
    """ASG tags describing a node of `pool` for scale-from-zero (labels, taints, GPUs)."""
    tags = {f"{_TEMPLATE}/label/{k}": v for k, v in gpu_contract.gpu_node_labels(pool.name).items()}
    for taint in gpu_contract.gpu_taints():
        tags[f"{_TEMPLATE}/taint/{taint.key}"] = f"{taint.value}:{taint.effect}"
    tags[f"{_TEMPLATE}/resources/{gpu_contract.GPU_RESOURCE}"] = str(pool.gpus_per_node)
    return tags


def _build_priorities(pools: tuple[GpuPool, ...]) -> dict[str, list[str]]:
    """Priority expander: spot GPU groups first (cheapest, where a stack allows spot),
    then on-demand GPU groups; anything else (the system group) last. Managed node group
    ASGs are named `eks-<nodegroup name>-<uuid>`. Keys are strings (Helm values travel
    as a protobuf Struct); the chart writes them into the priority ConfigMap as-is.
    # ref: https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/expander/priority/readme.md
    """
    spot = sorted(f"^eks-{p.name}-.*" for p in pools if p.capacity_type == "SPOT")
    on_demand = sorted(f"^eks-{p.name}-.*" for p in pools if p.capacity_type == "ON_DEMAND")
    priorities: dict[str, list[str]] = {"1": [".*"]}
    if on_demand:
        priorities["20"] = on_demand
    if spot:
        priorities["30"] = spot
    return priorities


def _build_values(args: ClusterAutoscalerArgs, cluster_name: str) -> dict[str, Any]:
    return {
        "cloudProvider": "aws",
        "awsRegion": args.region,
        "autoDiscovery": {"clusterName": cluster_name},
        "image": {
            "repository": versions.CLUSTER_AUTOSCALER_IMAGE_REPOSITORY,
            "tag": versions.CLUSTER_AUTOSCALER_IMAGE_TAGS[args.kubernetes_version],
        },
        "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
        "extraArgs": {
            "expander": "priority,least-waste",
            "balance-similar-node-groups": True,
            # Triton pods keep their models on an emptyDir: with the default (true) no GPU
            # node would ever be scaled down and dev could never reach zero.
            "skip-nodes-with-local-storage": False,
            "skip-nodes-with-system-pods": False,
            "scale-down-unneeded-time": f"{args.scale_down_unneeded_minutes}m",
            "scale-down-delay-after-add": f"{args.scale_down_delay_after_add_minutes}m",
            # GPU nodes take a while to boot and load the driver.
            "max-node-provision-time": "20m",
            "stderrthreshold": "info",
            "v": 2,
        },
        "expanderPriorities": _build_priorities(args.gpu_pools),
        "nodeSelector": dict(args.system_node_selector),
        "priorityClassName": "system-cluster-critical",
        "podDisruptionBudget": {"maxUnavailable": 1},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "runAsGroup": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containerSecurityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        # The CPU limit is 10x the request: a scale-up simulation over every pending pod is
        # bursty, and a throttled autoscaler only scales later.
        "resources": {"requests": {"cpu": "100m", "memory": "300Mi"}, "limits": {"cpu": "1", "memory": "600Mi"}},
        "serviceMonitor": {"enabled": args.service_monitor, "namespace": NAMESPACE, "selector": {}},
    }


class ClusterAutoscaler(pulumi.ComponentResource):
    """Cluster Autoscaler (Helm), its Pod Identity role, and the scale-from-zero tags."""

    role_arn: pulumi.Output[str]
    release_name: pulumi.Output[str | None]

    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:autoscaling:ClusterAutoscaler", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=pulumi.Output.from_input(args.cluster_arn).apply(_build_trust_policy),
            description="Cluster Autoscaler (EKS Pod Identity): scales this cluster's node groups",
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-policy",
            role=role.id,
            policy=pulumi.Output.all(args.cluster_name, account_id).apply(
                lambda v: _build_policy(v[0], args.region, v[1])
            ),
            opts=child,
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-pod-identity",
            cluster_name=args.cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=role.arn,
            opts=child,
        )
        for pool in args.gpu_pools:
            tags = _build_node_template_tags(pool)
            slugs = [tag_slug(k) for k in tags]
            if len(set(slugs)) != len(slugs):  # two keys differing only in punctuation
                raise ValueError(
                    f"node-template tags of {pool.name}: {sorted(tags)} collide as child names {sorted(slugs)}"
                )
            for key, value in sorted(tags.items()):
                aws.autoscaling.Tag(
                    f"{name}-{pool.name}-template-{tag_slug(key)}",
                    autoscaling_group_name=pool.autoscaling_group_name,
                    tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                    opts=child,
                )
        release = pinned_release(
            f"{name}-release",
            versions.CLUSTER_AUTOSCALER_CHART,
            NAMESPACE,
            pulumi.Output.from_input(args.cluster_name).apply(lambda cluster: _build_values(args, cluster)),
            pulumi.ResourceOptions(parent=self, depends_on=[association]),
            timeout=RELEASE_TIMEOUT_SECONDS,
        )

        self.role_arn = role.arn
        self.release_name = release.name
        self.register_outputs({"roleArn": self.role_arn, "releaseName": self.release_name})
