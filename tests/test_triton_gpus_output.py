"""`tritonGpus`, the stack output model-sync's GPU memory planning reads (model_sync/serving/gpu_plan.py):
every Triton deployment of every stack with the GPU its node group guarantees and its models, as
recorded by the real __main__.py under Pulumi's mocks."""

from __future__ import annotations

from tests.conftest import stack_run
from tests.pulumi_kit import Run


def test_every_deployment_exports_its_gpu_and_models(any_stack: Run) -> None:
    gpus = any_stack.exports["tritonGpus"]
    assert gpus, "no deployment recorded"
    for name, entry in gpus.items():
        assert set(entry) == {"gpu", "memoryGiB", "models"}, name
        assert entry["memoryGiB"] > 0
        assert entry["models"]
    assert set(gpus) == set(any_stack.exports["tritonDeployments"])


def test_prod_deployments_carry_their_node_groups_gpus() -> None:
    gpus = stack_run("prod").exports["tritonGpus"]
    assert gpus["default"] == {"gpu": "L4", "memoryGiB": 24, "models": ["resnet18", "text-encoder"]}  # g6.2xlarge
    assert gpus["large"] == {"gpu": "A10G", "memoryGiB": 24, "models": ["reranker-large"]}  # g5.4xlarge
