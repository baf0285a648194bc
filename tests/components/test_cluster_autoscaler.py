"""Cluster Autoscaler: builders, Args validation, and (under the mocks, per stack) the
recorded role, policy, scale-from-zero tags and Helm release."""

from __future__ import annotations

import json

import pytest

from components import cluster_autoscaler as ca
from components.gpu import gpu_contract
from components.gpu.gpu_instances import gpus_per_node
from components.stack_config.model import StackConfig
from components.stack_config.parser import parse as parse_config
from components.upstream import versions
from tests.components._helpers import assert_bounded_resources, assert_restricted_container, assert_restricted_pod
from tests.pulumi_kit import Run
from tests.pulumi_kit import stack_config as stack_file

CLUSTER_ARN = "arn:aws:eks:us-east-1:111122223333:cluster/c"
POOL = ca.GpuPool(name="gpu-l4", autoscaling_group_name="eks-gpu-l4-abc", gpus_per_node=4, capacity_type="SPOT")


def args(**kw: object) -> ca.ClusterAutoscalerArgs:
    base: dict[str, object] = {
        "cluster_name": "c",
        "cluster_arn": CLUSTER_ARN,
        "region": "us-east-1",
        "kubernetes_version": "1.33",
        "gpu_pools": (POOL,),
    }
    base.update(kw)
    return ca.ClusterAutoscalerArgs(**base)  # type: ignore[arg-type]


def test_node_template_tags_derive_from_the_gpu_contract() -> None:
    tags = ca._build_node_template_tags(POOL)
    prefix = "k8s.io/cluster-autoscaler/node-template"
    for key, value in gpu_contract.gpu_node_labels("gpu-l4").items():
        assert tags[f"{prefix}/label/{key}"] == value
    taint = gpu_contract.GPU_TAINT
    assert tags[f"{prefix}/taint/{taint.key}"] == f"{taint.value}:{taint.effect}" == "true:NoSchedule"
    assert tags[f"{prefix}/resources/nvidia.com/gpu"] == "4"


def test_policy_scopes_mutations_to_this_clusters_groups() -> None:
    policy = json.loads(ca._build_policy("prod-cluster", "us-east-1", "123456789012"))
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert set(by_sid) == {"DescribeOnly", "ScaleOwnGroupsOnly", "ReadOwnNodeGroups"}
    # The only wildcard resource is for Describe* calls, which IAM cannot scope.
    for s in policy["Statement"]:
        assert all(not a.endswith("*") for a in s["Action"])
        if s["Resource"] == "*":
            assert all(a.split(":")[1].startswith(("Describe", "Get")) for a in s["Action"]), s
    scale = by_sid["ScaleOwnGroupsOnly"]
    assert scale["Action"] == ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]
    assert scale["Condition"] == {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/prod-cluster": "owned"}}
    assert by_sid["ReadOwnNodeGroups"]["Resource"] == "arn:aws:eks:us-east-1:123456789012:nodegroup/prod-cluster/*/*"


def test_trust_is_pod_identity_of_this_clusters_autoscaler_only() -> None:
    trust = json.loads(ca._build_trust_policy(CLUSTER_ARN))
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert statement["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": "111122223333",
            "aws:RequestTag/eks-cluster-arn": CLUSTER_ARN,
            "aws:RequestTag/kubernetes-namespace": "kube-system",
            "aws:RequestTag/kubernetes-service-account": ["cluster-autoscaler"],
        },
        "ArnEquals": {"aws:SourceArn": CLUSTER_ARN},
    }


def _semver(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.lstrip("v").split("."))


def test_chart_renders_rbac_for_every_autoscaler_image_it_runs() -> None:
    """Autoscaler >= 1.32 blocks its scaling loop on a VolumeAttachment informer; only
    charts >= 9.46.3 grant that RBAC (kubernetes/autoscaler#7663). The chart's appVersion
    must also be at least the newest image minor (its RBAC and flags know that release)."""
    chart = versions.CLUSTER_AUTOSCALER_CHART
    assert chart.chart == "cluster-autoscaler"
    assert chart.repository == "https://kubernetes.github.io/autoscaler"
    image_minors = {kube: _semver(tag)[:2] for kube, tag in versions.CLUSTER_AUTOSCALER_IMAGE_TAGS.items()}
    # Each image tag follows its Kubernetes minor version.
    assert all(minor == _semver(kube) for kube, minor in image_minors.items()), image_minors
    if max(image_minors.values()) >= (1, 32):
        assert _semver(chart.version) >= _semver(versions.CLUSTER_AUTOSCALER_VOLUME_ATTACHMENT_RBAC_CHART)
    assert _semver(versions.CLUSTER_AUTOSCALER_CHART_APP_MINOR) >= max(image_minors.values())
    # The pre-fix pin is refused by the same rule.
    assert _semver("9.38.0") < _semver(versions.CLUSTER_AUTOSCALER_VOLUME_ATTACHMENT_RBAC_CHART)


def test_node_template_tag_children_are_named_by_key_not_index() -> None:
    keys = sorted(ca._build_node_template_tags(POOL))
    assert [ca.tag_slug(k) for k in keys] == [
        "label-triton-platform-io-gpu-node-group",
        "label-triton-platform-io-node-role",
        "resources-nvidia-com-gpu",
        "taint-nvidia-com-gpu",
    ]


def test_priority_expander_prefers_spot_then_on_demand() -> None:
    od = ca.GpuPool(name="gpu-a10g", autoscaling_group_name="x", gpus_per_node=1, capacity_type="ON_DEMAND")
    prio = ca._build_priorities((POOL, od))
    assert prio == {"1": [".*"], "20": ["^eks-gpu-a10g-.*"], "30": ["^eks-gpu-l4-.*"]}


def test_values_let_gpu_nodes_with_emptydir_models_scale_down() -> None:
    values = ca._build_values(args(scale_down_unneeded_minutes=7, scale_down_delay_after_add_minutes=3), "c")
    extra = values["extraArgs"]
    assert extra["skip-nodes-with-local-storage"] is False
    assert extra["scale-down-unneeded-time"] == "7m"
    assert extra["scale-down-delay-after-add"] == "3m"
    assert extra["expander"] == "priority,least-waste"
    assert values["image"]["tag"] == versions.CLUSTER_AUTOSCALER_IMAGE_TAGS["1.33"]
    assert values["autoDiscovery"] == {"clusterName": "c"}
    assert values["nodeSelector"] == gpu_contract.system_node_labels()
    assert_restricted_container("cluster-autoscaler", values["containerSecurityContext"])
    assert_restricted_pod("cluster-autoscaler", values["securityContext"])
    assert_bounded_resources("cluster-autoscaler", values["resources"])


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"kubernetes_version": "1.20"}, r"kubernetes_version: '1.20' has no matching autoscaler image"),
        ({"gpu_pools": (POOL, POOL)}, r"gpu_pools: \['gpu-l4', 'gpu-l4'\] repeats a name"),
        ({"scale_down_unneeded_minutes": 0}, r"scale_down_unneeded_minutes: 0 is out of range"),
        ({"scale_down_delay_after_add_minutes": -1}, r"scale_down_delay_after_add_minutes: -1 is out of range"),
    ],
)
def test_args_validation(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        args(**kw)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"gpus_per_node": 0}, r"GpuPool.gpus_per_node: 0 is out of range"),
        ({"capacity_type": "spot"}, r"GpuPool.capacity_type: 'spot' is not allowed"),
    ],
)
def test_pool_validation(kw: dict[str, object], match: str) -> None:
    base: dict[str, object] = {"name": "g", "autoscaling_group_name": "a", "gpus_per_node": 1, "capacity_type": "SPOT"}
    base.update(kw)
    with pytest.raises(ValueError, match=match):
        ca.GpuPool(**base)  # type: ignore[arg-type]


# ---- the real program, per stack -------------------------------------------------------------


def _config(stack: str) -> StackConfig:
    return parse_config(stack_file(stack), stack)


def test_every_stack_runs_the_autoscaler_with_tags_for_each_gpu_group(any_stack: Run) -> None:
    config = _config(any_stack.stack)
    component = any_stack.one("triton-platform:autoscaling:ClusterAutoscaler")
    children = any_stack.children_of(component)
    assert children, "autoscaler component has no children"
    assert all(c.name.startswith(f"{component.name}-") for c in children)
    tags = [c for c in children if c.type == "aws:autoscaling/tag:Tag"]
    for group in config.gpu_node_groups:
        mine = {
            t.inputs["tag"]["key"]: t.inputs["tag"]["value"]
            for t in tags
            if t.name.startswith(f"{component.name}-{group.name}-template-")
        }
        # A shared group's node brings GPUs x shares (time-slicing: `replicas` per GPU; none of the stacks uses MIG).
        assert group.sharing.mode in ("whole", "time-slicing")
        assert mine["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == str(
            gpus_per_node(group.instance_types) * group.sharing.replicas
        )
        assert mine["k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"] == "true:NoSchedule"
        assert all(t.inputs["tag"]["propagateAtLaunch"] is False for t in tags)
        group_resource = any_stack.one("aws:eks/nodeGroup:NodeGroup", f"nodegroup-{group.name}-node-group")
        asg = group_resource.state["resources"][0]["autoscalingGroups"][0]["name"]
        assert {
            t.inputs["autoscalingGroupName"]
            for t in tags
            if t.name.startswith(f"{component.name}-{group.name}-template-")
        } == {asg}
    release = any_stack.one("kubernetes:helm.sh/v3:Release", f"{component.name}-release")
    assert release.inputs["version"] == versions.CLUSTER_AUTOSCALER_CHART.version == "9.53.0"
    assert release.inputs["repositoryOpts"]["repo"] == versions.CLUSTER_AUTOSCALER_CHART.repository
    assert (release.inputs["atomic"], release.inputs["timeout"], release.inputs["createNamespace"]) == (
        True,
        ca.RELEASE_TIMEOUT_SECONDS,
        False,
    )
    # Tag children are named by the tag key (stable when a label is added), never by list index.
    assert sorted(
        t.name for t in tags if t.name.startswith(f"{component.name}-{config.gpu_node_groups[0].name}-template-")
    ) == sorted(
        f"{component.name}-{config.gpu_node_groups[0].name}-template-{ca.tag_slug(k)}"
        for k in ca._build_node_template_tags(ca.GpuPool(config.gpu_node_groups[0].name, "x", 1, "ON_DEMAND"))
    )
    cluster_arn = any_stack.one("aws:eks/cluster:Cluster", "cluster-cluster").state["arn"]
    trust = json.loads(any_stack.one("aws:iam/role:Role", f"{component.name}-role").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Condition"]["ArnEquals"] == {"aws:SourceArn": cluster_arn}
    assert trust["Statement"][0]["Condition"]["StringEquals"]["aws:RequestTag/eks-cluster-arn"] == cluster_arn
    assert release.inputs["namespace"] == "kube-system"
    values = release.inputs["values"]
    assert values["image"]["tag"] == versions.CLUSTER_AUTOSCALER_IMAGE_TAGS[config.kubernetes_version]
    assert values["extraArgs"]["scale-down-unneeded-time"] == f"{config.scale_down_unneeded_minutes}m"
    assoc = any_stack.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", f"{component.name}-pod-identity")
    assert (assoc.inputs["namespace"], assoc.inputs["serviceAccount"]) == ("kube-system", "cluster-autoscaler")
    policy = json.loads(any_stack.one("aws:iam/rolePolicy:RolePolicy", f"{component.name}-policy").inputs["policy"])
    scale = next(s for s in policy["Statement"] if s["Sid"] == "ScaleOwnGroupsOnly")
    assert list(scale["Condition"]["StringEquals"].values()) == ["owned"]


def test_dev_gpu_capacity_can_reach_zero_and_prod_keeps_an_on_demand_floor(dev: Run, prod: Run) -> None:
    """What EKS is asked for: dev GPU node groups may scale to 0; prod GPU groups keep an
    on-demand floor large enough for every deployment's minReplicas."""
    for run, stack in ((dev, "dev"), (prod, "prod")):
        config = _config(stack)
        for group in config.gpu_node_groups:
            recorded = run.one("aws:eks/nodeGroup:NodeGroup", f"nodegroup-{group.name}-node-group")
            assert recorded.inputs["capacityType"] == group.capacity_type
            scaling = recorded.inputs["scalingConfig"]
            if stack == "dev":
                assert scaling["minSize"] == 0
            else:
                node_gpus = gpus_per_node(group.instance_types)
                need = sum(
                    t.min_replicas * t.gpus_per_replica for t in config.triton_deployments if t.node_group == group.name
                )
                assert scaling["minSize"] * node_gpus >= need
