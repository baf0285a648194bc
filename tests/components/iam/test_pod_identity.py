"""The shared EKS Pod Identity trust policy (components/iam/pod_identity.py)."""

from __future__ import annotations

import pytest

from components.iam.pod_identity import cluster_account, pod_identity_principal_condition, pod_identity_trust

ARN = "arn:aws:eks:eu-west-1:444455556666:cluster/triton-prod"


def test_trust_requires_source_account_cluster_namespace_and_service_accounts() -> None:
    [st] = pod_identity_trust(ARN, "triton", ["triton-large", "triton-default"])["Statement"]
    assert st["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert st["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert st["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": "444455556666",
            "aws:RequestTag/eks-cluster-arn": ARN,
            "aws:RequestTag/kubernetes-namespace": "triton",
            "aws:RequestTag/kubernetes-service-account": ["triton-default", "triton-large"],
        },
        "ArnEquals": {"aws:SourceArn": ARN},
    }
    assert cluster_account("arn:aws-us-gov:eks:us-gov-west-1:111122223333:cluster/c") == "111122223333"


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("arn:aws:eks:us-east-1:1234:cluster/c", "triton", ["a"]), r"cluster_arn: .* is not an EKS cluster ARN"),
        (("arn:aws:iam::111122223333:role/c", "triton", ["a"]), r"cluster_arn: .* is not an EKS cluster ARN"),
        ((ARN, "Triton", ["a"]), r"namespace: 'Triton' is not a Kubernetes name"),
        ((ARN, "triton", []), r"service_accounts: \[\] is empty or repeats a name"),
        ((ARN, "triton", ["a", "a"]), r"service_accounts: \['a', 'a'\] is empty or repeats a name"),
        ((ARN, "triton", ["a_b"]), r"service_accounts: 'a_b' is not a Kubernetes name"),
    ],
)
def test_validation(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pod_identity_trust(*args)


def test_principal_condition_names_the_session_tags_of_one_service_account() -> None:
    """The permission-side twin of the trust: the same three session tags, read back as
    aws:PrincipalTag, with ONE service account (pod-id-abac.html)."""
    assert pod_identity_principal_condition(ARN, "triton", "triton-large") == {
        "StringEquals": {
            "aws:PrincipalTag/eks-cluster-arn": ARN,
            "aws:PrincipalTag/kubernetes-namespace": "triton",
            "aws:PrincipalTag/kubernetes-service-account": "triton-large",
        }
    }
    # The tag keys are the ones the trust requires on the request.
    [st] = pod_identity_trust(ARN, "triton", ["triton-large"])["Statement"]
    request_tags = {
        k.removeprefix("aws:RequestTag/") for k in st["Condition"]["StringEquals"] if k.startswith("aws:RequestTag/")
    }
    principal_tags = {
        k.removeprefix("aws:PrincipalTag/")
        for k in pod_identity_principal_condition(ARN, "triton", "triton-large")["StringEquals"]
    }
    assert principal_tags == request_tags


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("arn:aws:iam::111122223333:role/c", "triton", "a"), r"cluster_arn: .* is not an EKS cluster ARN"),
        ((ARN, "Triton", "a"), r"namespace: 'Triton' is not a Kubernetes name"),
        ((ARN, "triton", "a_b"), r"service_accounts: 'a_b' is not a Kubernetes name"),
    ],
)
def test_principal_condition_validation(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pod_identity_principal_condition(*args)
