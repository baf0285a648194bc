"""The demo's sample PyTorch module: a small MLP with fixed weights (seeded), 4 -> 3."""

from __future__ import annotations

from typing import Any


def build() -> Any:
    import torch

    gen = torch.Generator().manual_seed(20261130)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return model.eval()
