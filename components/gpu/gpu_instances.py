"""What each supported GPU EC2 instance size carries: NVIDIA GPUs, vCPUs and memory, and which GPU
(its model and memory per GPU: `gpu_of`, the input of GPU memory planning; its CUDA architecture:
`architectures`, what an AOTInductor .pt2 must have been compiled for).

Used by the capacity validation (a GPU node group must be able to hold the Triton
replicas scheduled on it, and one replica must fit on one of its nodes: components/gpu/node_fit.py)
and by the node autoscaler's scale-from-zero node template (the `nvidia.com/gpu` capacity a
node of an empty group would bring).
# ref: https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html (accelerated computing)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class InstanceSize(NamedTuple):
    gpus: int
    vcpus: int
    memory_gib: int


_G4DN_G5_G6 = {
    "xlarge": (1, 4, 16),
    "2xlarge": (1, 8, 32),
    "4xlarge": (1, 16, 64),
    "8xlarge": (1, 32, 128),
    "16xlarge": (1, 64, 256),
    "12xlarge": (4, 48, 192),
}

INSTANCE_SIZES: dict[str, InstanceSize] = {
    **{f"g4dn.{s}": InstanceSize(*v) for s, v in _G4DN_G5_G6.items()},
    "g4dn.metal": InstanceSize(8, 96, 384),
    **{f"{f}.{s}": InstanceSize(*v) for f in ("g5", "g6") for s, v in _G4DN_G5_G6.items()},
    **{f"{f}.24xlarge": InstanceSize(4, 96, 384) for f in ("g5", "g6")},
    **{f"{f}.48xlarge": InstanceSize(8, 192, 768) for f in ("g5", "g6")},
    # g6e: twice the memory of g6 at every size.
    **{f"g6e.{s}": InstanceSize(g, c, 2 * m) for s, (g, c, m) in _G4DN_G5_G6.items()},
    "g6e.24xlarge": InstanceSize(4, 96, 768),
    "g6e.48xlarge": InstanceSize(8, 192, 1536),
    "gr6.4xlarge": InstanceSize(1, 16, 128),
    "gr6.8xlarge": InstanceSize(1, 32, 256),
    "p3.2xlarge": InstanceSize(1, 8, 61),
    "p3.8xlarge": InstanceSize(4, 32, 244),
    "p3.16xlarge": InstanceSize(8, 64, 488),
    "p3dn.24xlarge": InstanceSize(8, 96, 768),
    "p4d.24xlarge": InstanceSize(8, 96, 1152),
    "p4de.24xlarge": InstanceSize(8, 96, 1152),
    "p5.4xlarge": InstanceSize(1, 16, 256),
    "p5.48xlarge": InstanceSize(8, 192, 2048),
    "p5e.48xlarge": InstanceSize(8, 192, 2048),
    "p5en.48xlarge": InstanceSize(8, 192, 2048),
}

GPUS_PER_INSTANCE: dict[str, int] = {t: s.gpus for t, s in INSTANCE_SIZES.items()}


def gpus_per_node(instance_types: tuple[str, ...] | list[str]) -> int:
    """GPUs a node of a group is guaranteed to have: the smallest of its instance types."""
    return min(GPUS_PER_INSTANCE[t] for t in instance_types)


class Gpu(NamedTuple):
    model: str  # NVIDIA's name of the GPU
    memory_gib: int  # memory of ONE GPU, GiB (AWS lists the instance's total: GPUs x this)


# Per instance family (the part before the dot); the sizes of a family carry the same GPU, except
# the two listed by type. From the "GPU memory" column of the accelerated computing table (ref above).
_GPU_BY_FAMILY: dict[str, Gpu] = {
    "g4dn": Gpu("T4", 16),
    "g5": Gpu("A10G", 24),
    "g6": Gpu("L4", 24),
    "gr6": Gpu("L4", 24),
    "g6e": Gpu("L40S", 48),
    "p3": Gpu("V100", 16),
    "p4d": Gpu("A100", 40),
    "p4de": Gpu("A100", 80),
    "p5": Gpu("H100", 80),
    "p5e": Gpu("H200", 141),
    "p5en": Gpu("H200", 141),
}
_GPU_BY_TYPE: dict[str, Gpu] = {"p3dn.24xlarge": Gpu("V100", 32)}


def gpu_of(instance_type: str) -> Gpu:
    """The GPU of a supported instance type (KeyError for one INSTANCE_SIZES does not list)."""
    if instance_type not in INSTANCE_SIZES:
        raise KeyError(instance_type)
    return _GPU_BY_TYPE.get(instance_type) or _GPU_BY_FAMILY[instance_type.split(".", 1)[0]]


def gpus_of(instance_types: Sequence[str]) -> list[Gpu]:
    """The GPU of each of a node group's instance types, in their order."""
    return [gpu_of(t) for t in instance_types]


def guaranteed_gpu(instance_types: Sequence[str]) -> Gpu:
    """The GPU every node of a group is guaranteed to have: the one with the least memory among its
    instance types (the node autoscaler may launch any of them). Its model names that GPU, or
    every model that has that memory, joined by "|" (g5 with g6: "A10G|L4", both 24 GiB)."""
    gpus = gpus_of(instance_types)
    least = min(g.memory_gib for g in gpus)
    return Gpu("|".join(sorted({g.model for g in gpus if g.memory_gib == least})), least)


# Each GPU's CUDA compute capability, as nvcc names it (sm_<major><minor>): the kernels of an
# AOTInductor package (model.pt2) run on the architectures they were compiled for only.
# ref: https://developer.nvidia.com/cuda-gpus
ARCHITECTURES: dict[str, str] = {
    "T4": "sm_75",
    "A10G": "sm_86",
    "L4": "sm_89",
    "L40S": "sm_89",
    "V100": "sm_70",
    "A100": "sm_80",
    "H100": "sm_90",
    "H200": "sm_90",
}


def architectures(instance_types: Sequence[str]) -> list[str]:
    """The CUDA architectures a node group's nodes may have (every instance type the node autoscaler
    may launch), sorted, each once: the `architectures` of the stack output `tritonGpus`."""
    return sorted({ARCHITECTURES[g.model] for g in gpus_of(instance_types)})
