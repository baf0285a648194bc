"""How a GPU node group shares its GPUs among Triton replicas: the one home of the sharing modes, their
bounds, the MIG profiles each GPU offers, what one share holds, and the node settings that apply them.

Modes (`nodeGroups.<group>.gpuSharing.mode`, docs/serving-plane.md#gpu-sharing):
- `whole` (the default): one replica per GPU.
- `time-slicing`: `replicas` replicas per GPU take turns on it; no memory or fault isolation, so each
  replica's models are planned in an equal share of the GPU's memory.
- `mps`: `replicas` CUDA MPS clients per GPU run side by side; the device plugin caps each client's
  memory at an equal share and its SMs at an equal percentage.
- `mig`: each GPU is cut into equal MIG instances of `migProfile` (memory and fault isolated in
  hardware); only the GPUs of A100, H100 and H200 instances offer it.

The mechanism is the device plugin that Bottlerocket's NVIDIA variants run on the host (the chart's
DaemonSet stays off those nodes, components/gpu_operators.py), configured by the node's settings at
boot: `bottlerocket_settings()` writes them as the launch template's user data (TOML), which EKS
merges into the settings it writes for a managed node group. A shared GPU is still advertised as
`nvidia.com/gpu` (rename-by-default off), `replicas` of them per GPU, or one per MIG instance (the
host plugin runs MIG strategy `single`), so a replica asks for exactly one and nothing else changes.
ref: https://bottlerocket.dev/en/os/1.54.x/api/settings/kubelet-device-plugins/
ref: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from components.gpu.gpu_instances import GPUS_PER_INSTANCE, Gpu, gpu_of

MODES = ("whole", "time-slicing", "mps", "mig")
# Replicas per GPU (the host plugin's bounds: time-slicing at least 2; MPS 2 to 48). Time-slicing is
# capped at 16 here: past that, each replica's share of an 80 GB GPU is under 5 GiB.
REPLICA_BOUNDS = {"time-slicing": (2, 16), "mps": (2, 48)}
# The AMI whose host device plugin takes these settings; AL2023 runs the chart's plugin, without them.
SHARING_AMI_TYPE = "BOTTLEROCKET_x86_64_NVIDIA"

# MIG profiles Bottlerocket can apply, per GPU (model, memory GiB as gpu_instances.Gpu names it): the
# uniform layouts (every instance of one profile), profile -> instances per GPU. 4g profiles and mixed
# layouts are not among them. From the MIG user guide's tables (ref above).
MIG_PROFILES: dict[Gpu, dict[str, int]] = {
    Gpu("A100", 40): {"1g.5gb": 7, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2},
    Gpu("A100", 80): {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2},
    Gpu("H100", 80): {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2},
    Gpu("H200", 141): {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2},
}
# Bottlerocket's key for each GPU in `mig.profile` (its GPU model and memory, lower case).
MIG_GPU_KEYS: dict[Gpu, str] = {gpu: f"{gpu.model.lower()}.{gpu.memory_gib}gb" for gpu in MIG_PROFILES}
_PROFILE_GB = re.compile(r"^[0-9]g\.([0-9]+)gb$")


@dataclass(frozen=True)
class GpuSharing:
    """One node group's sharing: `mode`, `replicas` (time-slicing, mps) or `mig_profile` (mig)."""

    mode: str = "whole"
    replicas: int = 1
    mig_profile: str = ""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"GpuSharing.mode: {self.mode!r} is not allowed; allowed: {' | '.join(MODES)}")
        lo, hi = REPLICA_BOUNDS.get(self.mode, (1, 1))
        if not lo <= self.replicas <= hi:
            raise ValueError(
                f"GpuSharing.replicas: {self.replicas!r} is out of range for {self.mode}; allowed: {lo} to {hi}"
            )
        if (self.mode == "mig") != bool(self.mig_profile):
            raise ValueError(
                f"GpuSharing.mig_profile: {self.mig_profile!r} does not match mode {self.mode}; allowed: a profile with "
                "mode mig only"
            )

    @property
    def shared(self) -> bool:
        return self.mode != "whole"

    def describe(self) -> str:
        """`whole`, `time-slicing x2`, `mps x4`, `mig 1g.10gb`: how status and the stack outputs name it."""
        if self.mode == "mig":
            return f"mig {self.mig_profile}"
        return self.mode if self.mode == "whole" else f"{self.mode} x{self.replicas}"


def refusal(sharing: GpuSharing, ami_type: str, gpus: list[Gpu]) -> tuple[str, str, str] | None:
    """(field, why, allowed) when a group of `ami_type` whose instance types carry `gpus` cannot apply
    `sharing`; None when it can."""
    if sharing.shared and ami_type != SHARING_AMI_TYPE:
        return (
            "mode",
            f"needs the host device plugin of amiType {SHARING_AMI_TYPE}, not {ami_type}",
            f"whole on {ami_type}, or amiType {SHARING_AMI_TYPE}",
        )
    if sharing.mode == "mig":
        for gpu in gpus:
            offered = MIG_PROFILES.get(gpu, {})
            if sharing.mig_profile not in offered:
                names = f"{gpu.model} {gpu.memory_gib} GB"
                allowed = ", ".join(offered) if offered else f"none ({names} has no MIG): whole, time-slicing or mps"
                return "migProfile", f"is not a MIG profile of the {names} GPU", allowed
    return None


def shares_per_gpu(sharing: GpuSharing, gpu: Gpu) -> int:
    """Replicas one GPU takes: 1 whole, `replicas` time-sliced or under MPS, the MIG instances of the profile."""
    if sharing.mode == "mig":
        return MIG_PROFILES[gpu][sharing.mig_profile]
    return sharing.replicas


def share_memory_gib(sharing: GpuSharing, gpu: Gpu) -> float:
    """GPU memory one replica's models are planned in, GiB rounded down to 0.01: the GPU's, its equal
    share, or the MIG profile's (the GB of its name, 10**9 bytes: below what nvidia-smi reports the
    instance can use)."""
    if sharing.mode == "mig":
        gb = int(_PROFILE_GB.match(sharing.mig_profile).group(1))  # type: ignore[union-attr]
        return math.floor(gb * 10**9 / 2**30 * 100) / 100
    return math.floor(gpu.memory_gib / sharing.replicas * 100) / 100


def bottlerocket_settings(sharing: GpuSharing, gpus: list[Gpu]) -> str:
    """The node settings (TOML, the launch template's user data) that apply `sharing` on Bottlerocket's host
    device plugin; '' for whole GPUs (the defaults)."""
    head = "[settings.kubelet-device-plugins.nvidia]\n"
    if sharing.mode in REPLICA_BOUNDS:
        lines = [f'device-sharing-strategy = "{sharing.mode}"', "", f"[settings.kubelet-device-plugins.nvidia.{sharing.mode}]",
                 f"replicas = {sharing.replicas}", "rename-by-default = false"]  # fmt: skip
        if sharing.mode == "time-slicing":
            lines.append("fail-requests-greater-than-one = true")
        return head + "\n".join(lines) + "\n"
    if sharing.mode == "mig":
        profiles = [f'"{MIG_GPU_KEYS[gpu]}" = "{sharing.mig_profile}"' for gpu in sorted(set(gpus))]
        return (
            head
            + 'device-partitioning-strategy = "mig"\n\n[settings.kubelet-device-plugins.nvidia.mig.profile]\n'
            + ("\n".join(profiles) + "\n")
        )
    return ""


def shares_per_node(sharing: GpuSharing, instance_types: tuple[str, ...] | list[str]) -> int:
    """Replicas a node of the group is guaranteed to take (its `nvidia.com/gpu` capacity): the fewest
    over the instance types it may launch, each GPUs x shares per GPU."""
    return min(GPUS_PER_INSTANCE[t] * shares_per_gpu(sharing, gpu_of(t)) for t in instance_types)


def guaranteed_share_gib(sharing: GpuSharing, instance_types: tuple[str, ...] | list[str]) -> float:
    """GPU memory every replica of the group is guaranteed: the smallest share over its instance types."""
    return min(share_memory_gib(sharing, gpu_of(t)) for t in instance_types)
