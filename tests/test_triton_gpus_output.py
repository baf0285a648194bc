"""`tritonGpus`, the stack output model-sync's GPU memory planning reads (model_sync/admission/gpu_plan.py)
and its alignment of a .pt2 (model_sync/admission/alignment.py): every Triton deployment of every stack
with the GPU its node group guarantees, one replica's share of its memory and how the group shares it,
the CUDA architectures its instance types may bring, and its models, as recorded by the real __main__.py under Pulumi's mocks, and read back by model-sync's own
environment parser."""

from __future__ import annotations

from tests.conftest import stack_run
from tests.pulumi_kit import Run


def test_every_deployment_exports_its_gpu_and_models(any_stack: Run) -> None:
    gpus = any_stack.exports["tritonGpus"]
    assert gpus, "no deployment recorded"
    for name, entry in gpus.items():
        assert set(entry) == {"gpu", "memoryGiB", "sharing", "models", "architectures"}, name
        assert entry["memoryGiB"] > 0
        assert entry["architectures"], name
        assert all(a.startswith("sm_") for a in entry["architectures"]), name
        assert entry["models"]
    assert set(gpus) == set(any_stack.exports["tritonDeployments"])


def test_prod_deployments_carry_their_node_groups_gpus() -> None:
    gpus = stack_run("prod").exports["tritonGpus"]
    assert gpus["default"] == {
        "gpu": "L4", "memoryGiB": 24, "sharing": "whole", "models": ["resnet18", "text-encoder"],
        "architectures": ["sm_89"],
    }  # g6.2xlarge  # fmt: skip
    assert gpus["large"] == {
        "gpu": "A10G", "memoryGiB": 24, "sharing": "whole", "models": ["reranker-large"], "architectures": ["sm_86"]
    }  # g5.4xlarge  # fmt: skip
    # model-sync reads the output as it reads tritonGpus in model-sync.yaml (a pulumiStack environment).
    from model_sync.environments import _triton_gpus

    parsed = {d.deployment: d.architectures for d in _triton_gpus("pulumi stack prod", gpus) or ()}
    assert parsed == {"default": ("sm_89",), "large": ("sm_86",)}


def test_a_time_sliced_groups_deployment_is_planned_in_its_share_of_the_gpu() -> None:
    """Dev's `light` runs on L4s time-sliced two ways: model-sync plans its models in 12 of the 24 GiB,
    and reads how the GPU is shared from the output."""
    gpus = stack_run("dev").exports["tritonGpus"]
    assert gpus["light"] == {
        "gpu": "L4", "memoryGiB": 12.0, "sharing": "time-slicing x2", "models": ["sentiment", "reranker"],
        "architectures": ["sm_89"],
    }  # fmt: skip
    assert (gpus["default"]["memoryGiB"], gpus["default"]["sharing"]) == (24, "whole")
    from model_sync.environments import _triton_gpus

    light = {d.deployment: d for d in _triton_gpus("pulumi stack dev", gpus) or ()}["light"]
    assert (light.memory_bytes, light.sharing) == (12 << 30, "time-slicing x2")
