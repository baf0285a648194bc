"""The VPC and EKS keys: the endpoint allowlist, the VPC, admin roles, log retention and the Kubernetes version."""

from __future__ import annotations

from typing import Any

import pytest

from components.stack_config.vocabulary import KUBERNETES_VERSIONS
from tests.components.stack_config._helpers import K, fails, parse, raw


def test_a_specific_endpoint_allowlist_passes() -> None:
    cfg = raw("dev")
    cfg[K + "clusterEndpointPublicAccessCidrs"] = ["198.51.100.0/24", "203.0.113.0/24", "16.0.0.0/9"]
    assert parse(cfg).cluster_endpoint_public_access_cidrs == ("198.51.100.0/24", "203.0.113.0/24", "16.0.0.0/9")


def test_endpoint_cidr_must_be_a_network() -> None:
    cfg = raw("dev")
    cfg[K + "clusterEndpointPublicAccessCidrs"] = ["198.51.100.7/24"]
    fails(cfg, r"clusterEndpointPublicAccessCidrs: '198.51.100.7/24' is not an IPv4 CIDR")


def test_prod_endpoint_private_only() -> None:
    assert parse(raw("prod")).cluster_endpoint_public_access_cidrs == ()


def test_vpc_cidr_private_range() -> None:
    cfg = raw("dev")
    cfg[K + "vpcCidr"] = "8.8.0.0/16"
    fails(cfg, r"vpcCidr: '8.8.0.0/16' is not a private /16-/20 range")


def test_admin_role_arns_required_and_shaped() -> None:
    cfg = raw("dev")
    cfg[K + "clusterAdminRoleArns"] = ["arn:aws:iam::1234:user/bob"]
    fails(cfg, r"clusterAdminRoleArns: 'arn:aws:iam::1234:user/bob' is not valid; allowed: IAM role ARNs")
    cfg[K + "clusterAdminRoleArns"] = []
    fails(cfg, r"clusterAdminRoleArns: .* is empty")


def test_kubernetes_version_choices() -> None:
    cfg = raw("dev")
    cfg[K + "kubernetesVersion"] = "1.20"
    fails(
        cfg,
        r"kubernetesVersion: '1.20' has no pinned EKS add-on versions and Cluster Autoscaler image; allowed: 1.32 \| "
        r"1.33 \| 1.34 \(pin",
    )


@pytest.mark.parametrize("version", ["1.31", "1.35", 1.33])
def test_kubernetes_version_needs_every_pinned_addon_and_autoscaler_image(version: Any) -> None:
    """1.31 has an autoscaler image nowhere and no EKS add-on pins: refused before any resource exists."""
    from components.upstream import versions

    cfg = raw("dev")
    cfg[K + "kubernetesVersion"] = version
    fails(cfg, r"kubernetesVersion: .* has no pinned EKS add-on versions and Cluster Autoscaler image")
    assert KUBERNETES_VERSIONS == versions.KUBERNETES_VERSIONS == ("1.32", "1.33", "1.34")
    for v in KUBERNETES_VERSIONS:
        assert v in versions.EKS_ADDON_VERSIONS
        assert "aws-ebs-csi-driver" in versions.EKS_ADDON_VERSIONS[v]
        assert v in versions.CLUSTER_AUTOSCALER_IMAGE_TAGS


def test_admin_roles_compared_by_account_and_name() -> None:
    cfg = raw("prod")
    other_account = "arn:aws:iam::777788889999:role/platform-admins"
    cfg[K + "clusterAdminRoleArns"] = [*cfg[K + "clusterAdminRoleArns"], other_account]
    assert other_account in parse(cfg).cluster_admin_role_arns  # same name, another account: another role
    cfg[K + "clusterAdminRoleArns"] = [
        "arn:aws:iam::444455556666:role/platform-admins",
        "arn:aws:iam::444455556666:role/team/Platform-Admins",
    ]
    fails(
        cfg,
        r"clusterAdminRoleArns: 'arn:aws:iam::444455556666:role/team/Platform-Admins' names the same role as "
        r"'arn:aws:iam::444455556666:role/platform-admins' \(one account, one name\); allowed: each role once",
    )
    cfg[K + "clusterAdminRoleArns"] = ["arn:aws:iam::444455556666:role/platform-admins"] * 2
    fails(cfg, r"clusterAdminRoleArns: .* names the same role")


@pytest.mark.parametrize("days", [2, 100, 3650])
def test_log_retention_is_one_cloudwatch_offers(days: int) -> None:
    cfg = raw("prod")
    cfg[K + "clusterLogRetentionDays"] = days
    fails(
        cfg,
        rf"clusterLogRetentionDays: {days} is not a retention CloudWatch Logs offers; allowed: 1, 3, 5, 7, 14, 30, "
        r"60, 90,",
    )
    cfg[K + "clusterLogRetentionDays"] = 400
    assert parse(cfg).cluster_log_retention_days == 400
