"""Does one Triton replica fit on one node of its GPU group? The stack model asks before
any resource exists, so a replica that could never be scheduled (Pending forever, the
autoscaler adding nodes that cannot take it either) is a one-line config error instead.

What a node gives pods (its allocatable) is what the instance has minus what the EKS AMIs
reserve for the kubelet and the system, minus the hard eviction thresholds, minus what the
platform's own DaemonSets on a GPU node request (`DAEMONSET_BUDGET`, checked against the
rendered DaemonSets by tests/components/test_node_fit.py).
# ref: https://github.com/awslabs/amazon-eks-ami/blob/main/nodeadm/internal/kubelet/config.go (kube-reserved)
# ref: https://kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/#hard-eviction-thresholds

A replica is the Triton container (requests = limits = the deployment's `cpu` / `memory`,
ephemeral storage = its model volume + `EPHEMERAL_OVERHEAD_GIB`) and the agent sidecar
(`AGENT_REQUESTS`); the agent's init container runs before them and asks less than their sum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.gpu.gpu_instances import INSTANCE_SIZES

MI = 1024 * 1024
GI = 1024 * MI

# The agent sidecar's and init container's requests (components/triton_deployment.py sets them).
AGENT_REQUESTS = {"cpu": "100m", "memory": "256Mi"}
AGENT_INIT_REQUESTS = {"cpu": "500m", "memory": "512Mi"}
# The Triton container's ephemeral-storage request is its model volume plus this (the 1 GiB
# /tmp emptyDir and the container's writable layer and logs).
EPHEMERAL_OVERHEAD_GIB = 2
# What DaemonSets request on one GPU node, at most: the EKS add-ons' (VPC CNI, kube-proxy, the
# Pod Identity agent, the EBS CSI node plugin: `EKS_ADDON_DAEMONSETS`) and the platform's own
# (the NVIDIA device plugin and MPS daemon, the DCGM exporter, node-exporter), which the test
# sums from the rendered charts.
DAEMONSET_BUDGET = {"cpu_millis": 700, "memory_bytes": 1280 * MI}
EKS_ADDON_DAEMONSETS = {"cpu_millis": 300, "memory_bytes": 512 * MI}
# Node root disk not available to pods: the images (an NGC tritonserver image unpacks to
# about 17 GiB, plus its compressed layers while it is pulled, the agent and the DaemonSets).
IMAGE_DISK_GIB = 30
# kubelet's default hard eviction thresholds on the EKS AMIs.
EVICTION_MEMORY_BYTES = 100 * MI
EVICTION_NODEFS_FRACTION = 0.10

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")
_FACTORS = {
    None: 1,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 1024,
    "Mi": MI,
    "Gi": GI,
    "Ti": 1024 * GI,
}


def quantity(value: str) -> float:
    """A Kubernetes quantity as a number (cores for CPU, bytes for memory): `500m` -> 0.5."""
    m = _QUANTITY.match(value)
    if m is None:
        raise ValueError(f"quantity: {value!r} is not a Kubernetes quantity; allowed: such as 4, 500m, 16Gi")
    return float(m.group(1)) * _FACTORS[m.group(2)]


def _max_pods(vcpus: int) -> int:
    # The EKS-recommended max pods: 110 below 30 vCPUs, 250 above (the reserve grows with it).
    return 110 if vcpus < 30 else 250


def _reserved_cpu_millis(vcpus: int) -> int:
    """kube-reserved CPU of the EKS AMIs: 6 % of the first core, 1 % of the second,
    0.5 % of the next two, 0.25 % of every core above four."""
    millis = 0.0
    for core in range(vcpus):
        millis += 1000 * (0.06 if core == 0 else 0.01 if core == 1 else 0.005 if core < 4 else 0.0025)
    return round(millis)


@dataclass(frozen=True)
class Allocatable:
    cpu_millis: int
    memory_bytes: int
    ephemeral_gib: float


def allocatable(instance_type: str, disk_size_gib: int) -> Allocatable:
    """What one node of `instance_type` with a `disk_size_gib` root disk leaves for a Triton pod."""
    size = INSTANCE_SIZES[instance_type]
    reserved_memory = (255 + 11 * _max_pods(size.vcpus)) * MI
    return Allocatable(
        cpu_millis=size.vcpus * 1000 - _reserved_cpu_millis(size.vcpus) - DAEMONSET_BUDGET["cpu_millis"],
        memory_bytes=size.memory_gib * GI - reserved_memory - EVICTION_MEMORY_BYTES - DAEMONSET_BUDGET["memory_bytes"],
        ephemeral_gib=disk_size_gib * (1 - EVICTION_NODEFS_FRACTION) - IMAGE_DISK_GIB,
    )


@dataclass(frozen=True)
class ReplicaRequests:
    cpu_millis: int
    memory_bytes: int
    ephemeral_gib: int

    def times(self, count: int) -> ReplicaRequests:
        """What `count` such replicas on one node ask together (the replicas sharing a node's GPUs)."""
        return ReplicaRequests(self.cpu_millis * count, self.memory_bytes * count, self.ephemeral_gib * count)


def replica_requests(cpu: str, memory: str, model_volume_gib: int) -> ReplicaRequests:
    """What the scheduler reserves for one Triton pod: its containers' requests summed, or its
    init container's when that is larger (Kubernetes' effective pod request)."""
    cpu_millis = round(1000 * (quantity(cpu) + quantity(AGENT_REQUESTS["cpu"])))
    memory_bytes = round(quantity(memory) + quantity(AGENT_REQUESTS["memory"]))
    init_cpu = round(1000 * quantity(AGENT_INIT_REQUESTS["cpu"]))
    init_memory = round(quantity(AGENT_INIT_REQUESTS["memory"]))
    return ReplicaRequests(
        max(cpu_millis, init_cpu), max(memory_bytes, init_memory), model_volume_gib + EPHEMERAL_OVERHEAD_GIB
    )


def misfit(requests: ReplicaRequests, node: Allocatable) -> tuple[str, str, str] | None:
    """(field, what is asked, what a node gives) for the first request a node cannot hold."""
    if requests.cpu_millis > node.cpu_millis:
        return "cpu", f"{requests.cpu_millis}m", f"{node.cpu_millis}m"
    if requests.memory_bytes > node.memory_bytes:
        return "memory", f"{requests.memory_bytes / GI:.1f}Gi", f"{node.memory_bytes / GI:.1f}Gi"
    if requests.ephemeral_gib > node.ephemeral_gib:
        return "modelVolumeGiB", f"{requests.ephemeral_gib}Gi of disk", f"{node.ephemeral_gib:.0f}Gi"
    return None
