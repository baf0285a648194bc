"""How many NVIDIA GPUs each supported EC2 instance size carries.

Used by the capacity validation (a GPU node group must be able to hold the Triton
replicas scheduled on it) and by the node autoscaler's scale-from-zero node template
(the `nvidia.com/gpu` capacity a node of an empty group would bring).
# ref: https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html (accelerated computing)
"""

from __future__ import annotations

_ONE_GPU_SIZES = ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")

GPUS_PER_INSTANCE: dict[str, int] = {
    **{f"g4dn.{s}": 1 for s in _ONE_GPU_SIZES}, "g4dn.12xlarge": 4, "g4dn.metal": 8,
    **{f"g5.{s}": 1 for s in _ONE_GPU_SIZES}, "g5.12xlarge": 4, "g5.24xlarge": 4, "g5.48xlarge": 8,
    **{f"g6.{s}": 1 for s in _ONE_GPU_SIZES}, "g6.12xlarge": 4, "g6.24xlarge": 4, "g6.48xlarge": 8,
    **{f"g6e.{s}": 1 for s in _ONE_GPU_SIZES}, "g6e.12xlarge": 4, "g6e.24xlarge": 4, "g6e.48xlarge": 8,
    "gr6.4xlarge": 1, "gr6.8xlarge": 1,
    "p3.2xlarge": 1, "p3.8xlarge": 4, "p3.16xlarge": 8, "p3dn.24xlarge": 8,
    "p4d.24xlarge": 8, "p4de.24xlarge": 8,
    "p5.4xlarge": 1, "p5.48xlarge": 8, "p5e.48xlarge": 8, "p5en.48xlarge": 8,
}


def gpus_per_node(instance_types: tuple[str, ...] | list[str]) -> int:
    """GPUs a node of a group is guaranteed to have: the smallest of its instance types."""
    return min(GPUS_PER_INSTANCE[t] for t in instance_types)
