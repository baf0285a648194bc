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
ref: https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html
ref: https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
_CLUSTER_ARN = re.compile(r"^arn:aws[a-z-]*:eks:[a-z0-9-]+:(?P<account>[0-9]{12}):cluster/[A-Za-z0-9][A-Za-z0-9_-]{0,99}$")
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def cluster_account(cluster_arn: str) -> str:
    """`arn:aws:eks:<region>:<account>:cluster/<name>` -> `<account>`."""
    m = _CLUSTER_ARN.match(cluster_arn)
    if not m:
        raise ValueError(f"cluster_arn: {cluster_arn!r} is not an EKS cluster ARN; allowed: arn:aws:eks:<region>:<12-digit account>:cluster/<name>")
    return m.group("account")


def pod_identity_trust(cluster_arn: str, namespace: str, service_accounts: Sequence[str]) -> dict[str, Any]:
    """Trust policy for a role bound (PodIdentityAssociation) to `namespace`/`service_accounts` of one cluster."""
    account = cluster_account(cluster_arn)
    if not _K8S_NAME.match(namespace):
        raise ValueError(f"namespace: {namespace!r} is not a Kubernetes name; allowed: a DNS label")
    if not service_accounts or len(set(service_accounts)) != len(service_accounts):
        raise ValueError(f"service_accounts: {list(service_accounts)!r} is empty or repeats a name; allowed: one or more distinct service accounts")
    for sa in service_accounts:
        if not _K8S_NAME.match(sa):
            raise ValueError(f"service_accounts: {sa!r} is not a Kubernetes name; allowed: DNS labels")
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "EksPodIdentity", "Effect": "Allow", "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {
            "StringEquals": {
                "aws:SourceAccount": account,
                "aws:RequestTag/eks-cluster-arn": cluster_arn,
                "aws:RequestTag/kubernetes-namespace": namespace,
                "aws:RequestTag/kubernetes-service-account": sorted(service_accounts),
            },
            "ArnEquals": {"aws:SourceArn": cluster_arn},
        },
    }]}
