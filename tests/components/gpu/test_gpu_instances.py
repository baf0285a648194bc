"""components/gpu/gpu_instances.py: every supported instance type names its GPUs, and which GPU with
how much memory each (AWS's accelerated computing table)."""

from __future__ import annotations

import pytest

from components.gpu.gpu_instances import INSTANCE_SIZES, Gpu, gpu_of, gpus_per_node, guaranteed_gpu


def test_every_supported_type_knows_its_gpu() -> None:
    for instance_type, size in INSTANCE_SIZES.items():
        gpu = gpu_of(instance_type)
        assert size.gpus >= 1
        assert gpu.memory_gib >= 16, instance_type


@pytest.mark.parametrize(
    ("instance_type", "gpu", "total_gib"),
    [
        ("g4dn.xlarge", Gpu("T4", 16), 16),
        ("g5.48xlarge", Gpu("A10G", 24), 192),
        ("g6.12xlarge", Gpu("L4", 24), 96),
        ("g6e.xlarge", Gpu("L40S", 48), 48),
        ("p3.16xlarge", Gpu("V100", 16), 128),
        ("p3dn.24xlarge", Gpu("V100", 32), 256),
        ("p4d.24xlarge", Gpu("A100", 40), 320),
        ("p4de.24xlarge", Gpu("A100", 80), 640),
        ("p5.48xlarge", Gpu("H100", 80), 640),
        ("p5e.48xlarge", Gpu("H200", 141), 1128),
    ],
)
def test_gpu_memory_matches_the_instance_totals_aws_lists(instance_type: str, gpu: Gpu, total_gib: int) -> None:
    assert gpu_of(instance_type) == gpu
    assert INSTANCE_SIZES[instance_type].gpus * gpu.memory_gib == total_gib


def test_an_unknown_type_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        gpu_of("g7.xlarge")
    assert gpus_per_node(["g5.xlarge", "g5.12xlarge"]) == 1


def test_the_guaranteed_gpu_of_a_group_is_the_one_with_the_least_memory() -> None:
    assert guaranteed_gpu(["p5.48xlarge"]) == Gpu("H100", 80)
    assert guaranteed_gpu(["g6e.xlarge", "g6.xlarge"]) == Gpu("L4", 24)
    assert guaranteed_gpu(["g5.xlarge", "g6.2xlarge"]) == Gpu("A10G|L4", 24)  # both 24 GiB: both named


def test_every_gpu_has_its_cuda_architecture_and_a_group_lists_each_it_may_launch() -> None:
    """An AOTInductor package runs on the architectures it was compiled for: a node group of g5 and
    g6 types may launch either, so it names both."""
    from components.gpu.gpu_instances import ARCHITECTURES, architectures

    assert {gpu_of(t).model for t in INSTANCE_SIZES} <= set(ARCHITECTURES)
    assert architectures(["p5.48xlarge", "p5e.48xlarge"]) == ["sm_90"]
    assert architectures(["g5.xlarge", "g6.xlarge", "g6e.xlarge"]) == ["sm_86", "sm_89"]
