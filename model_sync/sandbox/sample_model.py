"""The demo's sample PyTorch module: a small MLP with fixed weights (seeded), 4 -> 3."""

from __future__ import annotations

from typing import Any


def build(seed: int = 20261130) -> Any:
    import torch

    gen = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return model.eval()


def build_retrained() -> Any:
    """The same MLP with other weights: the demo's next version of the model."""
    return build(seed=20261202)


def build_finetuned() -> Any:
    """The same MLP with a third set of weights: the demo's third version, when it runs one."""
    return build(seed=20261204)
