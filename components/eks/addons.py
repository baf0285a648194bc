"""EKS managed add-ons, pinned per Kubernetes version in components/upstream/versions.py.

Add-ons come in two waves, as terraform-aws-eks's `before_compute` does it:
- `BEFORE_COMPUTE_ADDONS` (vpc-cni, kube-proxy, eks-pod-identity-agent) are DaemonSets
  that nodes need to become Ready and pods need for credentials; `EksCluster` installs
  them right after the control plane, before any node group.
- `AFTER_COMPUTE_ADDONS` (coredns) is a Deployment: created before any node exists it
  stays DEGRADED and the create times out, so `__main__` installs it after the node groups.
ref: https://docs.aws.amazon.com/eks/latest/userguide/eks-add-ons.html

The cluster is created with `bootstrap_self_managed_addons=False`, so these managed
add-ons are the only copies (no unmanaged defaults drifting underneath).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from components.upstream.versions import EKS_ADDON_VERSIONS

BEFORE_COMPUTE_ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
AFTER_COMPUTE_ADDONS = ("coredns",)
KNOWN_ADDONS = BEFORE_COMPUTE_ADDONS + AFTER_COMPUTE_ADDONS


def _build_addon_configuration(addon: str) -> dict[str, Any] | None:
    """The add-on's `configuration_values` (None = the add-on's defaults)."""
    if addon == "vpc-cni":
        # The Triton deployments ship NetworkPolicies; on EKS they are only enforced when
        # the VPC CNI's network-policy agent is on.
        # ref: https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html
        return {"enableNetworkPolicy": "true"}
    if addon == "coredns":
        # Two replicas spread over zones survive a node drain.
        # ref: https://docs.aws.amazon.com/eks/latest/userguide/coredns-add-on-create.html
        return {
            "replicaCount": 2,
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                }
            ],
        }
    return None


@dataclass(frozen=True)
class EksAddonsArgs:
    """Inputs of `EksAddons`.

    cluster_name: the EKS cluster (required).
    kubernetes_version: the cluster's minor version; must have pinned versions in
        components/upstream/versions.py EKS_ADDON_VERSIONS (required).
    addons: add-on names to install, each one of KNOWN_ADDONS, no duplicates (required, non-empty).
    tags: extra tags on every add-on (default none).
    """

    cluster_name: pulumi.Input[str]
    kubernetes_version: str
    addons: Sequence[str]
    tags: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kubernetes_version not in EKS_ADDON_VERSIONS:
            raise ValueError(
                f"EksAddonsArgs.kubernetes_version: {self.kubernetes_version!r} has no pinned add-on versions; "
                f"allowed: {', '.join(sorted(EKS_ADDON_VERSIONS))} (pin new ones in components/upstream/versions.py)"
            )
        if not self.addons or len(set(self.addons)) != len(self.addons):
            raise ValueError(
                f"EksAddonsArgs.addons: {list(self.addons)!r} is empty or lists an add-on twice; allowed: distinct "
                f"names from {', '.join(KNOWN_ADDONS)}"
            )
        for addon in self.addons:
            if addon not in KNOWN_ADDONS:
                raise ValueError(
                    f"EksAddonsArgs.addons: {addon!r} is not a known add-on; allowed: {', '.join(KNOWN_ADDONS)}"
                )


class EksAddons(pulumi.ComponentResource):
    """A set of pinned EKS managed add-ons (see module docstring)."""

    addon_versions: dict[str, str]
    addon_arns: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: EksAddonsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:eks:EksAddons", name, None, opts)
        pinned = EKS_ADDON_VERSIONS[args.kubernetes_version]
        self.addon_versions = {a: pinned[a] for a in args.addons}
        self.addon_arns = {}
        for addon, version in self.addon_versions.items():
            config = _build_addon_configuration(addon)
            created = aws.eks.Addon(
                f"{name}-{addon}",
                cluster_name=args.cluster_name,
                addon_name=addon,
                addon_version=version,
                configuration_values=json.dumps(config) if config is not None else None,
                # The managed add-on owns its objects: drift (kubectl edits) is overwritten.
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                tags=dict(args.tags),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.addon_arns[addon] = created.arn
        self.register_outputs({"addonVersions": self.addon_versions, "addonArns": self.addon_arns})
