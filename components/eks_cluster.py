"""The EKS control plane, built from plain `pulumi_aws.eks` resources.

- Authentication mode `API`: who may reach the cluster is a list of EKS access entries
  in this program (AmazonEKSClusterAdminPolicy for `cluster_admin_role_arns`), never an
  aws-auth ConfigMap, and the cluster creator gets no invisible admin entry
  (`bootstrap_cluster_creator_admin_permissions=False`). The first `pulumi up` must
  therefore be run by one of the admin roles; afterwards the CI deployer role (an access
  entry made by `Identities`) takes over.
  ref: https://docs.aws.amazon.com/eks/latest/userguide/access-entries.html
- Private endpoint always on. The public endpoint is on only when
  `public_access_cidrs` is non-empty, and then limited to those CIDRs (prod ships with
  none: `pulumi up` runs from inside the VPC).
- Control-plane logs to a CloudWatch log group created here (so its retention is ours,
  not "never expire"), secrets envelope-encrypted with a dedicated KMS key (rotation on).
- Workload identity is EKS Pod Identity, not IRSA. The decision: Pod Identity needs no
  per-cluster IAM OIDC provider and no trust policy naming a cluster's issuer URL, so a
  role's trust policy is the same for every cluster (`pods.eks.amazonaws.com`) and a
  cluster can be replaced or blue/green-upgraded without editing IAM; the binding
  (namespace + service account -> role) is an EKS API object (`PodIdentityAssociation`)
  reviewed in this program instead of a ServiceAccount annotation anyone with RBAC on
  the namespace can change; sessions carry the cluster/namespace/service-account as
  session tags for ABAC. It is AWS's recommended path for new clusters.
  ref: https://docs.aws.amazon.com/eks/latest/userguide/service-accounts.html#service-accounts-iam
- `provider`: a `pulumi_kubernetes.Provider` on this cluster's kubeconfig (token from
  `aws eks get-token`, no static credentials), shared by every Kubernetes resource.
  It waits for the admin access entries, so nothing races an Unauthorized API.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.eks.addons import BEFORE_COMPUTE_ADDONS, EksAddons, EksAddonsArgs
from components.iam.arns import CLUSTER_ADMIN_POLICY_ARN, role_identity, role_key, role_name_key
from components.iam.kms_keys import key_with_alias
from components.iam.roles import role_with_policies
from components.stack_config import cidr_rules
from components.stack_config.vocabulary import CLOUDWATCH_RETENTION_DAYS, CONTROL_PLANE_LOG_TYPES
from components.upstream.versions import EKS_ADDON_VERSIONS

CLUSTER_ROLE_POLICY_ARNS = ("arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",)
_CIDR = re.compile(r"^(\d{1,3}\.){3}\d{1,3}/\d{1,2}$")
_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")


def cluster_name(environment: str) -> str:
    """The EKS cluster name of an environment (subnet tags need it before the cluster exists)."""
    return f"triton-{environment}"


@dataclass(frozen=True)
class EksClusterArgs:
    """Inputs of `EksCluster`.

    cluster_name: EKS cluster name (required; see `cluster_name()`).
    region: AWS region, used by the kubeconfig's `aws eks get-token` (required).
    kubernetes_version: minor version; must have pinned add-ons in versions.py (required).
    subnet_ids: private subnets for the control-plane ENIs (required, >= 2 AZs).
    cluster_admin_role_arns: IAM roles granted AmazonEKSClusterAdminPolicy (required, >= 1, distinct).
    public_access_cidrs: CIDRs allowed to the public endpoint; empty (default) = private only.
        CIDRs whose union is wider than a /8 (components/stack_config/cidr_rules.py) are refused here, as the
        stack config and the policy pack refuse them.
    log_types: control-plane log types (default all five).
    log_retention_days: CloudWatch retention of those logs, in days (default 90).
    deletion_protection: refuse `DeleteCluster` until turned off (default True; dev may turn it off).
    tags: extra tags on every resource (default none).
    """

    cluster_name: str
    region: str
    kubernetes_version: str
    subnet_ids: pulumi.Input[Sequence[str]]
    cluster_admin_role_arns: Sequence[str]
    public_access_cidrs: Sequence[str] = ()
    log_types: Sequence[str] = CONTROL_PLANE_LOG_TYPES
    log_retention_days: int = 90
    deletion_protection: bool = True
    tags: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _CLUSTER_NAME.match(self.cluster_name):
            raise ValueError(
                f"EksClusterArgs.cluster_name: {self.cluster_name!r} is not valid; allowed: letters, digits, '-' and "
                "'_', starting alphanumeric, at most 100 characters"
            )
        if not re.fullmatch(r"[a-z]{2}(-gov)?-[a-z]+-[0-9]", self.region):
            raise ValueError(
                f"EksClusterArgs.region: {self.region!r} is not an AWS region; allowed: a region name such as us-east-1"
            )
        if self.kubernetes_version not in EKS_ADDON_VERSIONS:
            raise ValueError(
                f"EksClusterArgs.kubernetes_version: {self.kubernetes_version!r} has no pinned add-on versions; "
                f"allowed: {', '.join(sorted(EKS_ADDON_VERSIONS))}"
            )
        if not self.cluster_admin_role_arns:
            raise ValueError("EksClusterArgs.cluster_admin_role_arns: [] is empty; allowed: at least one IAM role ARN")
        roles = [role_identity(a) for a in self.cluster_admin_role_arns]  # raises on a non-role ARN
        if len(set(roles)) != len(roles):  # the same account and name (not just the same name)
            raise ValueError(
                f"EksClusterArgs.cluster_admin_role_arns: {list(self.cluster_admin_role_arns)!r} names a role twice; "
                "allowed: distinct roles"
            )
        for cidr in self.public_access_cidrs:
            if not _CIDR.match(cidr):
                raise ValueError(
                    f"EksClusterArgs.public_access_cidrs: {cidr!r} is not an IPv4 CIDR; allowed: CIDRs such as "
                    "198.51.100.0/24"
                )
        if cidr_rules.world_open(self.public_access_cidrs):
            raise ValueError(
                f"EksClusterArgs.public_access_cidrs: {cidr_rules.describe(self.public_access_cidrs)} opens the API "
                "to the internet; allowed: specific CIDRs whose union is at most a /8, or none (a private endpoint)"
            )
        for t in self.log_types:
            if t not in CONTROL_PLANE_LOG_TYPES:
                raise ValueError(
                    f"EksClusterArgs.log_types: {t!r} is not a log type; allowed: {', '.join(CONTROL_PLANE_LOG_TYPES)}"
                )
        if self.log_retention_days not in CLOUDWATCH_RETENTION_DAYS:
            raise ValueError(
                f"EksClusterArgs.log_retention_days: {self.log_retention_days!r} is not a CloudWatch retention; "
                f"allowed: {', '.join(map(str, CLOUDWATCH_RETENTION_DAYS))}"
            )


def _kept(parent: pulumi.Resource, old_name: str | None) -> pulumi.ResourceOptions:
    """Child options that keep the URN the child had under `old_name` (none when None)."""
    return pulumi.ResourceOptions(parent=parent, aliases=[pulumi.Alias(name=old_name)] if old_name else [])


def _build_assume_role_policy(service: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": service},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
            }
        ],
    }


def _build_encryption_policy(key_arn: str) -> dict[str, Any]:
    """What the cluster role needs on its secrets key (envelope encryption)."""
    # ref: https://docs.aws.amazon.com/eks/latest/userguide/enable-kms.html
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ClusterSecretsEncryption",
                "Effect": "Allow",
                "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"],
                "Resource": key_arn,
            }
        ],
    }


def _build_vpc_config(
    subnet_ids: pulumi.Input[Sequence[str]], public_access_cidrs: Sequence[str]
) -> aws.eks.ClusterVpcConfigArgs:
    public = bool(public_access_cidrs)
    return aws.eks.ClusterVpcConfigArgs(
        subnet_ids=subnet_ids,
        endpoint_private_access=True,
        endpoint_public_access=public,
        # Omitted when private: EKS would otherwise default the (unused) list to 0.0.0.0/0.
        public_access_cidrs=list(public_access_cidrs) if public else None,
    )


def _build_kubeconfig(name: str, endpoint: str, ca_data: str, region: str) -> str:
    """A kubeconfig whose credentials come from `aws eks get-token` (ambient AWS identity)."""
    # ref: https://docs.aws.amazon.com/eks/latest/userguide/create-kubeconfig.html
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", name, "--region", region, "--output", "json"],
            "interactiveMode": "Never",
        }
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": name,
            "preferences": {},
            "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "users": [{"name": name, "user": user}],
        }
    )


class EksCluster(pulumi.ComponentResource):
    """The EKS control plane, its access entries, pre-compute add-ons and Kubernetes provider."""

    cluster_name: pulumi.Output[str]
    cluster_arn: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    certificate_authority: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    kubernetes_version: str
    kms_key_arn: pulumi.Output[str]
    log_group_name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    addons: EksAddons

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:eks:EksCluster", name, None, opts)
        cluster, key, log_group = self._control_plane(name, args)
        associations = self._admin_access(name, args, cluster)
        self.addons = EksAddons(
            f"{name}-addons",
            EksAddonsArgs(
                cluster_name=cluster.name,
                kubernetes_version=args.kubernetes_version,
                addons=BEFORE_COMPUTE_ADDONS,
                tags=dict(args.tags),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

        self.cluster_name = cluster.name
        self.cluster_arn = cluster.arn
        self.endpoint = cluster.endpoint
        self.certificate_authority = cluster.certificate_authority.apply(lambda ca: ca.data or "")
        self.security_group_id = cluster.vpc_config.apply(lambda v: v.cluster_security_group_id or "")
        self.kubernetes_version = args.kubernetes_version
        self.kms_key_arn = key.arn
        self.log_group_name = log_group.name
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(cluster.name, cluster.endpoint, self.certificate_authority).apply(
                lambda v: _build_kubeconfig(v[0], v[1], v[2], args.region)
            )
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # Every Kubernetes object this program creates is named explicitly (metadata.name).
            # ref: https://www.pulumi.com/registry/packages/kubernetes/api-docs/provider/#enableserversideapply_python
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=associations),
        )
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "clusterArn": self.cluster_arn,
                "endpoint": self.endpoint,
                "securityGroupId": self.security_group_id,
                "kmsKeyArn": self.kms_key_arn,
                "logGroupName": self.log_group_name,
                "kubeconfig": self.kubeconfig,
                "kubernetesVersion": self.kubernetes_version,
            }
        )

    def _control_plane(
        self, name: str, args: EksClusterArgs
    ) -> tuple[aws.eks.Cluster, aws.kms.Key, aws.cloudwatch.LogGroup]:
        """The cluster's role, its secrets' KMS key, its log group, and the cluster after all three."""
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        role, attachments = role_with_policies(
            f"{name}-role",
            CLUSTER_ROLE_POLICY_ARNS,
            child,
            name=f"{args.cluster_name}-cluster",
            assume_role_policy=json.dumps(_build_assume_role_policy("eks.amazonaws.com")),
            tags=tags,
        )
        key = key_with_alias(
            f"{name}-secrets-key",
            f"{args.cluster_name}-eks-secrets",
            f"EKS {args.cluster_name}: envelope encryption of Kubernetes secrets",
            child,
            tags=tags,
        )
        encryption = aws.iam.RolePolicy(
            f"{name}-role-encryption",
            role=role.id,
            policy=key.arn.apply(lambda arn: json.dumps(_build_encryption_policy(arn))),
            opts=child,
        )
        # Created before the cluster so EKS does not create it first with no retention.
        # ref: https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=f"/aws/eks/{args.cluster_name}/cluster",
            retention_in_days=args.log_retention_days,
            tags=tags,
            opts=child,
        )
        cluster = aws.eks.Cluster(
            f"{name}-cluster",
            name=args.cluster_name,
            role_arn=role.arn,
            version=args.kubernetes_version,
            vpc_config=_build_vpc_config(args.subnet_ids, args.public_access_cidrs),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API", bootstrap_cluster_creator_admin_permissions=False
            ),
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key.arn), resources=["secrets"]
            ),
            enabled_cluster_log_types=list(args.log_types),
            bootstrap_self_managed_addons=False,  # managed add-ons below are the only copies
            # Standard support only: a cluster left on an old version fails loudly instead of
            # silently moving to paid extended support.
            # ref: https://docs.aws.amazon.com/eks/latest/userguide/view-upgrade-policy.html
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type="STANDARD"),
            deletion_protection=args.deletion_protection,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*attachments, encryption, log_group]),
        )
        return cluster, key, log_group

    def _admin_access(self, name: str, args: EksClusterArgs, cluster: aws.eks.Cluster) -> list[pulumi.Resource]:
        """An access entry with the cluster-admin policy for each of `cluster_admin_role_arns`."""
        associations: list[pulumi.Resource] = []
        name_keys = [role_name_key(a) for a in args.cluster_admin_role_arns]
        for arn in args.cluster_admin_role_arns:
            # Children are keyed `<account>-<role name>` (one name may exist in two accounts); a
            # name unique in the list keeps the URN it had when keys were the name alone.
            child_name = f"{name}-admin-{role_key(arn)}"
            old = f"{name}-admin-{role_name_key(arn)}" if name_keys.count(role_name_key(arn)) == 1 else None
            entry = aws.eks.AccessEntry(
                child_name,
                cluster_name=cluster.name,
                principal_arn=arn,
                type="STANDARD",
                tags=dict(args.tags),
                opts=_kept(self, old),
            )
            associations.append(
                aws.eks.AccessPolicyAssociation(
                    f"{child_name}-policy",
                    cluster_name=cluster.name,
                    principal_arn=entry.principal_arn,
                    policy_arn=CLUSTER_ADMIN_POLICY_ARN,
                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    opts=_kept(self, old and f"{old}-policy"),
                )
            )
        return associations
