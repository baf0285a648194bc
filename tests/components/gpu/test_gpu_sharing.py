"""GPU sharing's one home (components/gpu/gpu_sharing.py): the modes' bounds, the MIG profiles each GPU
offers, what one share of a GPU holds, and the Bottlerocket settings that apply a mode (parsed as TOML,
as a node would read them)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from components.gpu.gpu_instances import Gpu, gpu_of
from components.gpu.gpu_sharing import (
    MIG_GPU_KEYS,
    MIG_PROFILES,
    REPLICA_BOUNDS,
    SHARING_AMI_TYPE,
    GpuSharing,
    bottlerocket_settings,
    guaranteed_share_gib,
    refusal,
    share_memory_gib,
    shares_per_node,
)
from components.stack_config.vocabulary import GPU_AMI_TYPES

H100 = Gpu("H100", 80)
BR = "BOTTLEROCKET_x86_64_NVIDIA"


def _nvidia(text: str) -> dict:
    return tomllib.loads(text)["settings"]["kubelet-device-plugins"]["nvidia"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "vgpu"}, r"GpuSharing\.mode: 'vgpu' is not allowed; allowed: whole \| time-slicing \| mps \| mig"),
        ({"mode": "time-slicing", "replicas": 1}, r"replicas: 1 is out of range for time-slicing; allowed: 2 to 16"),
        ({"mode": "mps", "replicas": 49}, r"replicas: 49 is out of range for mps; allowed: 2 to 48"),
        ({"mode": "whole", "replicas": 2}, r"replicas: 2 is out of range for whole; allowed: 1 to 1"),
        ({"mode": "mig"}, r"mig_profile: '' does not match mode mig"),
        ({"mode": "mps", "replicas": 2, "mig_profile": "1g.10gb"}, r"mig_profile: '1g.10gb' does not match mode mps"),
    ],
)
def test_a_sharing_outside_its_bounds_is_refused_in_one_line(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GpuSharing(**kwargs)


def test_mig_profiles_are_the_uniform_layouts_of_each_mig_capable_gpu_of_the_instance_table() -> None:
    """Every GPU of a MIG-capable instance family has its profiles, keyed as Bottlerocket names the GPU,
    and a profile's instances times its compute slices never exceed the GPU's 7."""
    assert {gpu_of(t) for t in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge")} == set(MIG_PROFILES)
    assert MIG_GPU_KEYS == {
        Gpu("A100", 40): "a100.40gb", Gpu("A100", 80): "a100.80gb", H100: "h100.80gb", Gpu("H200", 141): "h200.141gb"
    }  # fmt: skip
    for gpu, profiles in MIG_PROFILES.items():
        assert sorted(profiles.values()) == [2, 3, 4, 7], gpu
        for profile, count in profiles.items():
            slices, gb = profile.split("g.")
            assert int(slices) * count <= 7, profile
            assert int(gb.removesuffix("gb")) * count <= gpu.memory_gib + 1, profile


def test_a_share_holds_the_gpus_memory_over_its_replicas_or_the_mig_profiles_gb() -> None:
    assert share_memory_gib(GpuSharing(), Gpu("L4", 24)) == 24
    assert share_memory_gib(GpuSharing("time-slicing", 2), Gpu("L4", 24)) == 12
    assert share_memory_gib(GpuSharing("mps", 3), H100) == 26.66
    assert share_memory_gib(GpuSharing("mig", 1, "1g.10gb"), H100) == 9.31  # 10 GB, below nvidia-smi's 9.75 GiB
    assert share_memory_gib(GpuSharing("mig", 1, "3g.40gb"), H100) == 37.25
    assert shares_per_node(GpuSharing("mig", 1, "1g.10gb"), ["p5.48xlarge"]) == 56  # 8 GPUs x 7
    assert shares_per_node(GpuSharing("time-slicing", 4), ["g6.xlarge", "g6.12xlarge"]) == 4  # the fewest
    assert guaranteed_share_gib(GpuSharing("mig", 1, "1g.20gb"), ["p4de.24xlarge", "p5.48xlarge"]) == 18.62


def test_sharing_needs_bottlerockets_host_plugin_and_a_profile_the_gpu_offers() -> None:
    ts = GpuSharing("time-slicing", 2)
    assert refusal(ts, BR, [Gpu("L4", 24)]) is None
    assert refusal(GpuSharing(), "AL2023_x86_64_NVIDIA", [Gpu("L4", 24)]) is None
    assert refusal(ts, "AL2023_x86_64_NVIDIA", [Gpu("L4", 24)]) == (
        "mode",
        "needs the host device plugin of amiType BOTTLEROCKET_x86_64_NVIDIA, not AL2023_x86_64_NVIDIA",
        "whole on AL2023_x86_64_NVIDIA, or amiType BOTTLEROCKET_x86_64_NVIDIA",
    )
    mig = GpuSharing("mig", 1, "1g.10gb")
    assert refusal(mig, BR, [H100, Gpu("A100", 80)]) is None
    assert refusal(mig, BR, [Gpu("L4", 24)]) == (
        "migProfile", "is not a MIG profile of the L4 24 GB GPU", "none (L4 24 GB has no MIG): whole, time-slicing or mps"
    )  # fmt: skip
    assert refusal(GpuSharing("mig", 1, "3g.40gb"), BR, [Gpu("A100", 40)]) == (
        "migProfile", "is not a MIG profile of the A100 40 GB GPU", "1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb"
    )  # fmt: skip


def test_the_settings_are_bottlerockets_keys_for_each_mode_and_none_for_whole_gpus() -> None:
    assert bottlerocket_settings(GpuSharing(), [H100]) == ""
    assert _nvidia(bottlerocket_settings(GpuSharing("time-slicing", 3), [H100])) == {
        "device-sharing-strategy": "time-slicing",
        "time-slicing": {"replicas": 3, "rename-by-default": False, "fail-requests-greater-than-one": True},
    }
    assert _nvidia(bottlerocket_settings(GpuSharing("mps", 4), [H100])) == {
        "device-sharing-strategy": "mps",
        "mps": {"replicas": 4, "rename-by-default": False},
    }
    text = bottlerocket_settings(GpuSharing("mig", 1, "2g.20gb"), [H100, Gpu("A100", 80), H100])
    assert _nvidia(text) == {
        "device-partitioning-strategy": "mig",
        "mig": {"profile": {"a100.80gb": "2g.20gb", "h100.80gb": "2g.20gb"}},
    }
    # EKS's merge of launch-template user data refuses a table header with a quoted key: the GPU's quoted
    # key is on its own line under a plain header.
    assert all('"' not in line for line in text.splitlines() if line.startswith("["))


def test_the_docs_state_the_bounds_the_profiles_and_the_ami_the_code_holds() -> None:
    """docs/serving-plane.md#gpu-sharing is what users read: its table's bounds, its MIG rows and the AMI it
    names are these, and that AMI is one a GPU group may take."""
    doc = " ".join((Path(__file__).resolve().parents[3] / "docs" / "serving-plane.md").read_text().split())
    for mode, (lo, hi) in REPLICA_BOUNDS.items():
        assert f"| `{mode}` | " in doc, mode
        assert f"({lo} to {hi})" in doc, mode
    for gpu, profiles in MIG_PROFILES.items():
        row = ", ".join(f"{p} x{n}" for p, n in profiles.items())
        assert f"| {gpu.model} {gpu.memory_gib} GB (" in doc, gpu
        assert f") | {row} |" in doc, gpu
    assert f"`amiType: {SHARING_AMI_TYPE}`" in doc
    assert SHARING_AMI_TYPE in GPU_AMI_TYPES
