"""Persistent volumes: the EBS CSI driver add-on and the cluster's default StorageClass.

EKS ships no working volume provisioner: without the EBS CSI driver every
PersistentVolumeClaim (Prometheus, Alertmanager, Loki) stays Pending, the atomic Helm
releases that create them time out and roll back, and `pulumi up` fails.
- `aws-ebs-csi-driver` managed add-on, pinned per Kubernetes version
  (versions.EKS_ADDON_VERSIONS). Its controller is a Deployment, so `__main__` installs it
  after the node groups (like coredns).
- Its controller's service account `kube-system/ebs-csi-controller-sa` is bound through
  EKS Pod Identity (the add-on's own `pod_identity_associations`) to a role with the AWS
  managed `AmazonEBSCSIDriverPolicy`, plus KMS permissions when volumes use a customer
  managed key. The role's trust is components/iam/pod_identity.py's (this cluster, that
  namespace and service account only).
  ref: https://docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html
- StorageClass `naming.STORAGE_CLASS`: gp3, encrypted (the given KMS key, else the
  account's AWS managed `aws/ebs` key), default class, volume expansion allowed,
  `WaitForFirstConsumer` so a volume is created in the zone its pod is scheduled to.
  (EKS 1.30+ no longer marks its legacy gp2 class default, so this is the only default.)
  ref: https://github.com/kubernetes-sigs/aws-ebs-csi-driver/blob/master/docs/parameters.md
  ref: https://kubernetes.io/docs/concepts/storage/storage-classes/#volume-binding-mode
The Kubernetes provider comes through `opts.provider`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.iam.pod_identity import pod_identity_trust
from components.kubernetes import naming
from components.upstream.versions import EKS_ADDON_VERSIONS

ADDON = "aws-ebs-csi-driver"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "ebs-csi-controller-sa"
PROVISIONER = "ebs.csi.aws.com"
MANAGED_POLICY_ARN = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
RECLAIM_POLICIES = ("Delete", "Retain")
_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[0-9a-f-]{36}$")


@dataclass(frozen=True)
class BlockStorageArgs:
    """Inputs of `BlockStorage`.

    cluster_name: the EKS cluster (required).
    cluster_arn: its ARN; the driver role's Pod Identity trust requires it (required).
    kubernetes_version: the cluster's minor version; must pin `aws-ebs-csi-driver` in
        versions.EKS_ADDON_VERSIONS (required).
    kms_key_arn: customer managed KMS key for the volumes; None (default) = the AWS managed
        `aws/ebs` key (still encrypted). A plain string must be a KMS key ARN.
    reclaim_policy: what happens to a volume when its claim is deleted: Delete (default) | Retain.
    tags: extra tags on the AWS resources (default none).
    """

    cluster_name: pulumi.Input[str]
    cluster_arn: pulumi.Input[str]
    kubernetes_version: str
    kms_key_arn: pulumi.Input[str] | None = None
    reclaim_policy: str = "Delete"
    tags: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if ADDON not in EKS_ADDON_VERSIONS.get(self.kubernetes_version, {}):
            pinned = sorted(v for v, addons in EKS_ADDON_VERSIONS.items() if ADDON in addons)
            raise ValueError(
                f"BlockStorageArgs.kubernetes_version: {self.kubernetes_version!r} has no pinned {ADDON} version; "
                f"allowed: {', '.join(pinned)} (pin it in components/upstream/versions.py)"
            )
        if isinstance(self.kms_key_arn, str) and not _KMS_KEY_ARN.match(self.kms_key_arn):
            raise ValueError(
                f"BlockStorageArgs.kms_key_arn: {self.kms_key_arn!r} is not a KMS key ARN; "
                "allowed: arn:aws:kms:<region>:<account>:key/<key id>, or None for the aws/ebs key"
            )
        if self.reclaim_policy not in RECLAIM_POLICIES:
            raise ValueError(
                f"BlockStorageArgs.reclaim_policy: {self.reclaim_policy!r} is not allowed; allowed: "
                f"{' | '.join(RECLAIM_POLICIES)}"
            )


def _build_trust_policy(cluster_arn: str) -> str:
    return json.dumps(pod_identity_trust(cluster_arn, NAMESPACE, [SERVICE_ACCOUNT]))


def _build_kms_policy(key_arn: str) -> dict[str, Any]:
    """What the driver needs on a customer managed key: grants for EC2 (attach) and data keys.
    ref: https://docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html (KMS key policy for encrypted volumes)"""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "GrantsForEbs",
                "Effect": "Allow",
                "Action": ["kms:CreateGrant", "kms:ListGrants", "kms:RevokeGrant"],
                "Resource": key_arn,
                "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}},
            },
            {
                "Sid": "VolumeDataKeys",
                "Effect": "Allow",
                "Action": [
                    "kms:Encrypt",
                    "kms:Decrypt",
                    "kms:ReEncryptFrom",
                    "kms:ReEncryptTo",
                    "kms:GenerateDataKey",
                    "kms:GenerateDataKeyWithoutPlaintext",
                    "kms:DescribeKey",
                ],
                "Resource": key_arn,
            },
        ],
    }


def _build_storage_class(reclaim_policy: str, kms_key_arn: str | None) -> dict[str, Any]:
    """The StorageClass manifest (apiVersion/kind included), with parameters as the driver reads them."""
    parameters = {"type": "gp3", "encrypted": "true"}
    if kms_key_arn:
        parameters["kmsKeyId"] = kms_key_arn
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": naming.STORAGE_CLASS,
            "annotations": {DEFAULT_CLASS_ANNOTATION: "true"},
            "labels": dict(naming.PART_OF_LABELS),
        },
        "provisioner": PROVISIONER,
        "parameters": parameters,
        "reclaimPolicy": reclaim_policy,
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
    }


class BlockStorage(pulumi.ComponentResource):
    """The EBS CSI driver (managed add-on + Pod Identity role) and the default gp3 StorageClass."""

    role_arn: pulumi.Output[str]
    addon_version: str
    storage_class_name: pulumi.Output[str]

    def __init__(self, name: str, args: BlockStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:storage:BlockStorage", name, None, opts)
        tags = dict(args.tags)

        role, grants, kms_key = self._role(name, args)

        self.addon_version = EKS_ADDON_VERSIONS[args.kubernetes_version][ADDON]
        addon = aws.eks.Addon(
            f"{name}-addon",
            cluster_name=args.cluster_name,
            addon_name=ADDON,
            addon_version=self.addon_version,
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(role_arn=role.arn, service_account=SERVICE_ACCOUNT)
            ],
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=grants),
        )
        manifest = _build_storage_class(args.reclaim_policy, None)
        parameters: pulumi.Input[Mapping[str, str]] = (
            kms_key.apply(lambda arn: _build_storage_class(args.reclaim_policy, arn)["parameters"])
            if kms_key is not None
            else manifest["parameters"]
        )
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-storage-class",
            metadata=manifest["metadata"],
            provisioner=manifest["provisioner"],
            parameters=parameters,
            reclaim_policy=manifest["reclaimPolicy"],
            volume_binding_mode=manifest["volumeBindingMode"],
            allow_volume_expansion=manifest["allowVolumeExpansion"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[addon]),
        )

        self.role_arn = role.arn
        self.storage_class_name = storage_class.metadata.apply(lambda m: m.name or naming.STORAGE_CLASS)
        self.register_outputs(
            {"roleArn": self.role_arn, "addonVersion": self.addon_version, "storageClassName": self.storage_class_name}
        )

    def _role(
        self, name: str, args: BlockStorageArgs
    ) -> tuple[aws.iam.Role, list[pulumi.Resource], pulumi.Output[str] | None]:
        """The driver's role (Pod Identity), its managed policy and, with a customer key, its KMS grant."""
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        role = aws.iam.Role(
            f"{name}-role",
            description="EBS CSI driver (EKS Pod Identity): create, attach and delete this cluster's volumes",
            assume_role_policy=pulumi.Output.from_input(args.cluster_arn).apply(_build_trust_policy),
            tags=tags,
            opts=child,
        )
        grants: list[pulumi.Resource] = [
            aws.iam.RolePolicyAttachment(
                f"{name}-role-managed-policy", role=role.name, policy_arn=MANAGED_POLICY_ARN, opts=child
            )
        ]
        kms_key: pulumi.Output[str] | None = None
        if args.kms_key_arn is not None:
            kms_key = pulumi.Output.from_input(args.kms_key_arn)
            grants.append(
                aws.iam.RolePolicy(
                    f"{name}-role-kms",
                    role=role.id,
                    policy=kms_key.apply(lambda arn: json.dumps(_build_kms_policy(arn))),
                    opts=child,
                )
            )
        return role, grants, kms_key
