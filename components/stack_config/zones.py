"""The zones an EKS cluster can use in the stack's region, asked of AWS when the stack is loaded.

The stack model checks `availabilityZoneCount` against them before any resource exists
(components/stack_config/loading.py), and the Network spans the first N of them.
"""

from __future__ import annotations

import pulumi_aws as aws

# Availability zones where the EKS control plane cannot place its network interfaces.
# ref: https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html#network-requirements-subnets
EKS_UNSUPPORTED_ZONE_IDS = ("use1-az3", "usw1-az2", "cac1-az3")


def eks_zone_names() -> list[str]:
    """The region's zones an EKS cluster can use, asked of AWS (the stack model checks
    `availabilityZoneCount` against them before any resource exists)."""
    zones = aws.get_availability_zones(
        state="available",
        # Regular zones only: Local Zones and Wavelength zones are opt-in.
        filters=[aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])],
        exclude_zone_ids=list(EKS_UNSUPPORTED_ZONE_IDS),
    )
    return list(zones.names)
