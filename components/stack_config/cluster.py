"""The VPC and EKS keys: zones, VPC, NAT, who reaches the cluster API, its admins, logs and Kubernetes version."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.iam.arns import ROLE_ARN, role_identity
from components.stack_config import rules
from components.stack_config.declarations import KEYS_BY_NAME
from components.stack_config.errors import ConfigError
from components.stack_config.readers import read_choice, read_cidr, read_list, read_str
from components.stack_config.vocabulary import config_key


def read_network(
    values: Mapping[str, Any], environment: str, region: str, zones: Sequence[str] | None
) -> dict[str, Any]:
    """`availabilityZoneCount` (the zones it picks, once AWS named them), `vpcCidr`, `natGatewayMode`."""
    az_count = KEYS_BY_NAME["availabilityZoneCount"].read(values["availabilityZoneCount"])
    rules.check_zone_count(az_count, environment, region, zones)
    key = config_key("vpcCidr")
    vpc = read_cidr(key, values["vpcCidr"])
    if not vpc.is_private or not 16 <= vpc.prefixlen <= 20:
        raise ConfigError(
            key, str(vpc), "is not a private /16-/20 range", "a private (RFC 1918) CIDR with prefix length 16 to 20"
        )
    nat_mode = KEYS_BY_NAME["natGatewayMode"].read(values["natGatewayMode"])
    rules.check_nat_mode(nat_mode, environment)
    return {
        "availability_zone_count": az_count,
        "availability_zones": tuple(sorted(zones)[:az_count]) if zones is not None else (),
        "vpc_cidr": str(vpc),
        "nat_gateway_mode": nat_mode,
    }


def read_api_access(values: Mapping[str, Any]) -> dict[str, Any]:
    """Who reaches the EKS API: `clusterEndpointPublicAccessCidrs` (never the internet) and
    `clusterAdminRoleArns`, each role once (one account and role name, whatever the path or case)."""
    key = config_key("clusterEndpointPublicAccessCidrs")
    endpoint_cidrs = [str(read_cidr(key, c)) for c in read_list(key, values["clusterEndpointPublicAccessCidrs"])]
    rules.check_endpoint_exposure(endpoint_cidrs)
    key = config_key("clusterAdminRoleArns")
    admin_arns = read_list(key, values["clusterAdminRoleArns"])
    if not admin_arns:
        raise ConfigError(key, admin_arns, "is empty", "at least one IAM role ARN (arn:aws:iam::<account>:role/<name>)")
    roles: dict[tuple[str, str, str], str] = {}
    for arn in admin_arns:
        read_str(key, arn, ROLE_ARN, "IAM role ARNs: arn:aws:iam::<12-digit account>:role/<name>")
        same = roles.setdefault(role_identity(arn), arn)  # one account's role, whatever the path or case
        if same != arn or admin_arns.count(arn) > 1:
            raise ConfigError(
                key,
                arn,
                f"names the same role as {same!r} (one account, one name)",
                "each role once (the same role name in two accounts is two roles)",
            )
    return {
        "cluster_endpoint_public_access_cidrs": tuple(endpoint_cidrs),
        "cluster_admin_role_arns": tuple(admin_arns),
    }


def read_log_types(value: Any, environment: str) -> tuple[str, ...]:
    """`clusterLogTypes`: control-plane log types (its declared choices), audit among them in prod."""
    declared = KEYS_BY_NAME["clusterLogTypes"]
    log_types = read_list(config_key(declared.name), value)
    for t in log_types:
        read_choice(config_key(declared.name), t, declared.choices)
    rules.check_audit_logs(log_types, environment)
    return tuple(log_types)


def read_log_retention(value: Any) -> int:
    """`clusterLogRetentionDays`: in its declared range, and a retention CloudWatch Logs offers."""
    declared = KEYS_BY_NAME["clusterLogRetentionDays"]
    days = declared.read(value)
    if days not in declared.choices:
        raise ConfigError(config_key(declared.name), days, "is not a retention CloudWatch Logs offers", declared.bounds)
    return days


def read_kubernetes_version(value: Any) -> str:
    """`kubernetesVersion`: a minor version with every EKS add-on and an autoscaler image pinned."""
    declared = KEYS_BY_NAME["kubernetesVersion"]
    if value not in declared.choices:
        raise ConfigError(
            config_key(declared.name),
            value,
            "has no pinned EKS add-on versions and Cluster Autoscaler image",
            f"{declared.bounds} (pin a new version in components/upstream/versions.py first)",
        )
    return str(value)
