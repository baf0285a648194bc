"""The one EKS Pod Identity trust policy every in-cluster role uses.

EKS Pod Identity assumes a role as the `pods.eks.amazonaws.com` service principal and
tags the session with `eks-cluster-arn`, `eks-cluster-name`, `kubernetes-namespace`,
`kubernetes-service-account`, `kubernetes-pod-name` and `kubernetes-pod-uid`. A trust
policy naming only the principal lets ANY cluster of ANY account that makes an
association to the role assume it; this one requires, on both `sts:AssumeRole` and
`sts:TagSession`:
- `aws:SourceAccount` = the cluster's account and `aws:SourceArn` = the cluster's ARN
  (the confused-deputy guard AWS documents for the pods.eks.amazonaws.com principal);
- the session tags `eks-cluster-arn` = this cluster, `kubernetes-namespace` = the
  namespace and `kubernetes-service-account` in the listed service accounts, so an
  association made for another cluster, namespace or service account cannot use it.

The same tags stay on the session as `aws:PrincipalTag/<key>` (EKS sets them; a pod cannot),
so one role's permission statements can each be limited to one service account
(`pod_identity_principal_condition`): attribute-based access control as AWS documents it.
ref: https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html
ref: https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from model_sync.contract.dns_label import RFC1123_LABEL

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
# Session tags EKS Pod Identity adds (ref: pod-id-abac.html, "List of session tags added by EKS Pod Identity").
TAG_CLUSTER_ARN = "eks-cluster-arn"
TAG_NAMESPACE = "kubernetes-namespace"
TAG_SERVICE_ACCOUNT = "kubernetes-service-account"
_CLUSTER_ARN = re.compile(
    r"^arn:aws[a-z-]*:eks:[a-z0-9-]+:(?P<account>[0-9]{12}):cluster/[A-Za-z0-9][A-Za-z0-9_-]{0,99}$"
)


def cluster_account(cluster_arn: str) -> str:
    """`arn:aws:eks:<region>:<account>:cluster/<name>` -> `<account>`."""
    m = _CLUSTER_ARN.match(cluster_arn)
    if not m:
        raise ValueError(
            f"cluster_arn: {cluster_arn!r} is not an EKS cluster ARN; allowed: arn:aws:eks:<region>:<12-digit "
            "account>:cluster/<name>"
        )
    return m.group("account")


def _check_names(namespace: str, service_accounts: Sequence[str]) -> None:
    if not RFC1123_LABEL.match(namespace):
        raise ValueError(f"namespace: {namespace!r} is not a Kubernetes name; allowed: a DNS label")
    if not service_accounts or len(set(service_accounts)) != len(service_accounts):
        raise ValueError(
            f"service_accounts: {list(service_accounts)!r} is empty or repeats a name; allowed: one or more distinct "
            "service accounts"
        )
    for sa in service_accounts:
        if not RFC1123_LABEL.match(sa):
            raise ValueError(f"service_accounts: {sa!r} is not a Kubernetes name; allowed: DNS labels")


def pod_identity_principal_condition(cluster_arn: str, namespace: str, service_account: str) -> dict[str, Any]:
    """A permission-statement condition that holds only for Pod Identity sessions of
    `namespace`/`service_account` in this cluster (the session tags of the assumed role)."""
    cluster_account(cluster_arn)
    _check_names(namespace, [service_account])
    return {
        "StringEquals": {
            f"aws:PrincipalTag/{TAG_CLUSTER_ARN}": cluster_arn,
            f"aws:PrincipalTag/{TAG_NAMESPACE}": namespace,
            f"aws:PrincipalTag/{TAG_SERVICE_ACCOUNT}": service_account,
        }
    }


def pod_identity_trust(cluster_arn: str, namespace: str, service_accounts: Sequence[str]) -> dict[str, Any]:
    """Trust policy for a role bound (PodIdentityAssociation) to `namespace`/`service_accounts` of one cluster."""
    account = cluster_account(cluster_arn)
    _check_names(namespace, service_accounts)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "EksPodIdentity",
                "Effect": "Allow",
                "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {
                    "StringEquals": {
                        "aws:SourceAccount": account,
                        f"aws:RequestTag/{TAG_CLUSTER_ARN}": cluster_arn,
                        f"aws:RequestTag/{TAG_NAMESPACE}": namespace,
                        f"aws:RequestTag/{TAG_SERVICE_ACCOUNT}": sorted(service_accounts),
                    },
                    "ArnEquals": {"aws:SourceArn": cluster_arn},
                },
            }
        ],
    }
