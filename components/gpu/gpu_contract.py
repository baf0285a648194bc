"""The GPU scheduling contract, defined once.

Every GPU node group carries `GPU_TAINT` and the labels from `gpu_node_labels()`;
everything that must run on GPU nodes (NVIDIA device plugin, DCGM exporter, Triton
pods, the node autoscaler's GPU pools) derives its tolerations and node selectors from
the functions below. Nothing else in the repository spells `nvidia.com/gpu` as a taint.
"""

from __future__ import annotations

from dataclasses import dataclass

# ref: https://docs.aws.amazon.com/eks/latest/APIReference/API_Taint.html (EKS spells effects in SCREAMING_CASE)
_EKS_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}

# The extended resource the NVIDIA device plugin advertises.
GPU_RESOURCE = "nvidia.com/gpu"

# Label keys every GPU node carries. `NODE_ROLE_LABEL` is set on every node group
# (system and GPU); `GPU_GROUP_LABEL` names the GPU node group a node belongs to.
NODE_ROLE_LABEL = "triton-platform.io/node-role"
GPU_GROUP_LABEL = "triton-platform.io/gpu-node-group"
GPU_ROLE = "gpu"
SYSTEM_ROLE = "system"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str  # Kubernetes spelling: NoSchedule | NoExecute | PreferNoSchedule

    def __post_init__(self) -> None:
        if self.effect not in _EKS_EFFECTS:
            raise ValueError(f"Taint.effect: {self.effect!r} is not allowed; allowed: {', '.join(_EKS_EFFECTS)}")

    def as_eks(self) -> dict[str, str]:
        """The taint as `aws.eks.NodeGroup` takes it."""
        return {"key": self.key, "value": self.value, "effect": _EKS_EFFECTS[self.effect]}

    def as_kubernetes(self) -> dict[str, str]:
        """The taint as a Kubernetes Node spec (and Karpenter NodePool) spells it."""
        return {"key": self.key, "value": self.value, "effect": self.effect}

    def toleration(self) -> dict[str, str]:
        """The exact toleration for this taint (operator Equal, same effect)."""
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


GPU_TAINT = Taint(key=GPU_RESOURCE, value="true", effect="NoSchedule")


def gpu_node_labels(group_name: str) -> dict[str, str]:
    """Labels every node of GPU node group `group_name` carries."""
    return {NODE_ROLE_LABEL: GPU_ROLE, GPU_GROUP_LABEL: group_name}


def system_node_labels() -> dict[str, str]:
    return {NODE_ROLE_LABEL: SYSTEM_ROLE}


def gpu_taints() -> list[Taint]:
    """Taints every GPU node group carries."""
    return [GPU_TAINT]


def gpu_tolerations() -> list[dict[str, str]]:
    """Tolerations for workloads that must run on GPU nodes: exactly the GPU taints."""
    return [t.toleration() for t in gpu_taints()]


def gpu_node_selector(group_name: str | None = None) -> dict[str, str]:
    """Node selector for a workload pinned to one GPU group (or to any GPU node)."""
    if group_name is None:
        return {NODE_ROLE_LABEL: GPU_ROLE}
    return {GPU_GROUP_LABEL: group_name}


def gpu_node_affinity(group_names: list[str]) -> dict:
    """Required node affinity restricting a DaemonSet to the given GPU node groups."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": GPU_GROUP_LABEL, "operator": "In", "values": sorted(group_names)}]}
                ]
            }
        }
    }
