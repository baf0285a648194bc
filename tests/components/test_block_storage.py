"""Block storage: the EBS CSI driver add-on, its Pod Identity role and the default gp3
StorageClass; and the wiring that makes every Kubernetes component wait for nodes,
CoreDNS and that StorageClass."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.block_storage import (
    ADDON,
    MANAGED_POLICY_ARN,
    BlockStorageArgs,
    _build_kms_policy,
    _build_storage_class,
    _build_trust_policy,
)
from components.kubernetes import naming
from components.upstream import versions
from tests import pulumi_kit
from tests.components._helpers import assert_children_prefixed, registered_outputs
from tests.pulumi_kit import ACCOUNT, Run

BLOCK_STORAGE = "triton-platform:storage:BlockStorage"
KEY = "arn:aws:kms:us-east-1:111122223333:key/0d3c6f1e-8a2b-4c5d-9e7f-1a2b3c4d5e6f"
CLUSTER_ARN = "arn:aws:eks:us-east-1:111122223333:cluster/triton-prod"


def test_addon_pinned_with_pod_identity_for_the_controller(any_stack: Run) -> None:
    addon = any_stack.one("aws:eks/addon:Addon", "block-storage-addon")
    assert addon.inputs["addonName"] == ADDON
    assert addon.inputs["addonVersion"] == versions.EKS_ADDON_VERSIONS["1.33"][ADDON]
    role = any_stack.one("aws:iam/role:Role", "block-storage-role")
    assert addon.inputs["podIdentityAssociations"] == [
        {"roleArn": role.state["arn"], "serviceAccount": "ebs-csi-controller-sa"}
    ]
    attachment = any_stack.one("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "block-storage-role-managed-policy")
    assert (
        attachment.inputs["policyArn"]
        == MANAGED_POLICY_ARN
        == "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
    )
    cluster_arn = any_stack.one("aws:eks/cluster:Cluster", "cluster-cluster").state["arn"]
    [statement] = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": ACCOUNT,
            "aws:RequestTag/eks-cluster-arn": cluster_arn,
            "aws:RequestTag/kubernetes-namespace": "kube-system",
            "aws:RequestTag/kubernetes-service-account": ["ebs-csi-controller-sa"],
        },
        "ArnEquals": {"aws:SourceArn": cluster_arn},
    }


def test_default_storage_class_is_encrypted_gp3_on_the_cluster_provider(any_stack: Run) -> None:
    sc = any_stack.one("kubernetes:storage.k8s.io/v1:StorageClass", "block-storage-storage-class")
    assert sc.inputs["metadata"]["name"] == naming.STORAGE_CLASS == "gp3-encrypted"
    assert sc.inputs["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    assert sc.inputs["provisioner"] == "ebs.csi.aws.com"
    assert sc.inputs["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert sc.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    assert sc.inputs["allowVolumeExpansion"] is True
    assert sc.inputs["reclaimPolicy"] == ("Delete" if any_stack.stack == "dev" else "Retain")
    provider = any_stack.one("pulumi:providers:kubernetes", "cluster-k8s")
    assert sc.provider.startswith(provider.urn + "::")
    assert any_stack.exports["storageClassName"] == naming.STORAGE_CLASS
    # Nothing else in the program claims to be the default class.
    defaults = [
        r
        for r in any_stack.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
        if (r.inputs["metadata"].get("annotations") or {}).get("storageclass.kubernetes.io/is-default-class") == "true"
    ]
    assert len(defaults) == 1


def test_component_shape(any_stack: Run) -> None:
    comp = any_stack.one(BLOCK_STORAGE, "block-storage")
    assert_children_prefixed(any_stack, comp, min_children=4)
    outputs = registered_outputs(any_stack, comp)
    assert outputs["storageClassName"] == naming.STORAGE_CLASS
    assert outputs["addonVersion"] == versions.EKS_ADDON_VERSIONS["1.33"][ADDON]


def test_builders_with_a_customer_managed_key() -> None:
    manifest = _build_storage_class("Retain", KEY)
    assert manifest["parameters"] == {"type": "gp3", "encrypted": "true", "kmsKeyId": KEY}
    assert (manifest["apiVersion"], manifest["kind"]) == ("storage.k8s.io/v1", "StorageClass")
    statements = {s["Sid"]: s for s in _build_kms_policy(KEY)["Statement"]}
    assert statements["GrantsForEbs"]["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    assert all(s["Resource"] == KEY for s in statements.values())
    assert all("*" not in a for s in statements.values() for a in s["Action"])
    assert (
        json.loads(_build_trust_policy(CLUSTER_ARN))["Statement"][0]["Condition"]["StringEquals"]["aws:SourceAccount"]
        == "111122223333"
    )


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        (
            {"kubernetes_version": "1.31"},
            (
                r"BlockStorageArgs.kubernetes_version: '1.31' has no pinned aws-ebs-csi-driver version; allowed: "
                r"1.32, 1.33, 1.34"
            ),
        ),
        ({"kms_key_arn": "alias/aws/ebs"}, r"BlockStorageArgs.kms_key_arn: 'alias/aws/ebs' is not a KMS key ARN"),
        (
            {"reclaim_policy": "Recycle"},
            r"BlockStorageArgs.reclaim_policy: 'Recycle' is not allowed; allowed: Delete \| Retain",
        ),
    ],
)
def test_args_validation(changes: dict[str, Any], match: str) -> None:
    base: dict[str, Any] = {"cluster_name": "c", "cluster_arn": CLUSTER_ARN, "kubernetes_version": "1.33"}
    with pytest.raises(ValueError, match=match):
        BlockStorageArgs(**{**base, **changes})


# ---- ordering: Kubernetes components wait for nodes, CoreDNS and the StorageClass ----------

KUBERNETES_COMPONENTS = (
    ("triton-platform:serving:ServingNamespace", "triton-namespace"),
    ("triton-platform:serving:Monitoring", "monitoring"),
    ("triton-platform:serving:LogShipping", "log-shipping"),
    ("triton-platform:gpu:GpuOperators", "gpu-operators"),
    ("triton-platform:autoscaling:ClusterAutoscaler", "cluster-autoscaler"),
    ("triton-platform:serving:TritonDeployment", "triton-default"),
    ("triton-platform:serving:Ingress", "ingress"),
)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_kubernetes_components_wait_for_nodes_coredns_and_storage(stack: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the engine is told (RegisterResource dependencies), for every component on the
    cluster provider: the node groups, the post-compute coredns add-on and the StorageClass."""
    dependencies: dict[tuple[str, str], set[str]] = {}
    register = pulumi_kit.RecordingMonitor.RegisterResource

    def recording(self: pulumi_kit.RecordingMonitor, request: Any) -> Any:
        dependencies[(request.type, request.name)] = {d.rsplit("::", 1)[-1] for d in request.dependencies}
        return register(self, request)

    monkeypatch.setattr(pulumi_kit.RecordingMonitor, "RegisterResource", recording)
    run = pulumi_kit.run_program(stack)
    node_groups = {r.name for r in run.of_type("aws:eks/nodeGroup:NodeGroup")}
    assert node_groups
    required = {*node_groups, "post-compute-addons-coredns", "block-storage-storage-class", "block-storage-addon"}
    for key in KUBERNETES_COMPONENTS:
        assert key in dependencies, f"{key} not registered"
        missing = required - dependencies[key]
        assert not missing, f"{key[1]} does not wait for {sorted(missing)}"
    # The StorageClass itself waits for the driver, which waits for the nodes.
    assert (
        "block-storage-addon"
        in dependencies[("kubernetes:storage.k8s.io/v1:StorageClass", "block-storage-storage-class")]
    )
    assert node_groups <= dependencies[("triton-platform:storage:BlockStorage", "block-storage")]
