"""The models of the GPU memory calibration and the consolidation benchmark: twelve TorchScript-able
models of mixed sizes, random weights (seeded), fp32, eval mode. Each is a `MODULE:FACTORY` for
`model-sync export` (`bench.zoo:resnet50`) with the shape of one input (`ZOO[name].shape`, batch
dimension excluded).

  - torchvision classifiers (weights=None; torchvision must import: on the GPU host it does, on this
    CPU machine it does not beside torch 2.13, where only the other four build);
  - two MLPs (a small and a wide one) and a small transformer encoder (4 layers, d_model 256, 64 tokens).
ref: https://docs.pytorch.org/vision/stable/models.html
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

SEED = 0
IMAGE = (3, 224, 224)


@dataclass(frozen=True)
class Entry:
    factory: str  # MODULE:FACTORY for model-sync export
    shape: tuple[int, ...]  # one input, no batch dimension
    torchvision: bool  # needs torchvision


def _vision(name: str) -> nn.Module:
    import torchvision  # type: ignore[import-untyped]

    torch.manual_seed(SEED)
    model: nn.Module = getattr(torchvision.models, name)(weights=None)
    return model.eval()


# The torchvision classifiers, each a `MODULE:FACTORY` (load_factory calls it with no argument).
resnet18 = functools.partial(_vision, "resnet18")
resnet34 = functools.partial(_vision, "resnet34")
resnet50 = functools.partial(_vision, "resnet50")
mobilenet_v3_small = functools.partial(_vision, "mobilenet_v3_small")
mobilenet_v3_large = functools.partial(_vision, "mobilenet_v3_large")
efficientnet_b0 = functools.partial(_vision, "efficientnet_b0")
regnet_y_400mf = functools.partial(_vision, "regnet_y_400mf")
shufflenet_v2_x1_0 = functools.partial(_vision, "shufflenet_v2_x1_0")
squeezenet1_1 = functools.partial(_vision, "squeezenet1_1")


def _mlp(sizes: tuple[int, ...]) -> nn.Module:
    torch.manual_seed(SEED)
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1]).eval()


def mlp_small() -> nn.Module:
    """512 -> 1024 -> 1024 -> 10 (about 1.6 M parameters)."""
    return _mlp((512, 1024, 1024, 10))


def mlp_wide() -> nn.Module:
    """2048 -> 4096 -> 4096 -> 1000 (about 29 M parameters)."""
    return _mlp((2048, 4096, 4096, 1000))


class Block(nn.Module):
    """One pre-norm transformer encoder block (4 heads, feed-forward 4x), written out: torch's own
    TransformerEncoderLayer takes a fast path in eval mode that torch.jit.trace's check rejects."""

    def __init__(self, width: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.ff = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        attn = nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, w)
        x = x + self.proj(attn)
        return x + self.ff(self.norm2(x))


class Encoder(nn.Module):
    """A small transformer encoder: 4 blocks over 64 tokens of width 256, mean-pooled to one vector."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(Block() for _ in range(4)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x).mean(dim=1)


def encoder() -> nn.Module:
    torch.manual_seed(SEED)
    return Encoder().eval()


ZOO: dict[str, Entry] = {
    "resnet18": Entry("bench.zoo:resnet18", IMAGE, True),
    "resnet34": Entry("bench.zoo:resnet34", IMAGE, True),
    "resnet50": Entry("bench.zoo:resnet50", IMAGE, True),
    "mobilenet-v3-small": Entry("bench.zoo:mobilenet_v3_small", IMAGE, True),
    "mobilenet-v3-large": Entry("bench.zoo:mobilenet_v3_large", IMAGE, True),
    "efficientnet-b0": Entry("bench.zoo:efficientnet_b0", IMAGE, True),
    "regnet-y-400mf": Entry("bench.zoo:regnet_y_400mf", IMAGE, True),
    "shufflenet-v2": Entry("bench.zoo:shufflenet_v2_x1_0", IMAGE, True),
    "squeezenet": Entry("bench.zoo:squeezenet1_1", IMAGE, True),
    "mlp-small": Entry("bench.zoo:mlp_small", (512,), False),
    "mlp-wide": Entry("bench.zoo:mlp_wide", (2048,), False),
    "encoder": Entry("bench.zoo:encoder", (64, 256), False),
}


def export_args(name: str, output: Any, *, max_batch: int, preferred: tuple[int, ...], delay_us: int,
                instances: int, kind: str = "KIND_GPU") -> list[str]:  # fmt: skip
    """`model-sync export` arguments for zoo model `name`: --target cloud (the production config)."""
    e = ZOO[name]
    args = [e.factory, "--name", name, "--output", str(output), "--target", "cloud",
            "--example-shape", ",".join(map(str, (2, *e.shape))), "--max-batch-size", str(max_batch),
            "--max-queue-delay-us", str(delay_us), "--instance-kind", kind, "--instance-count", str(instances),
            "--overwrite", "--quiet"]  # fmt: skip
    for p in preferred:
        args += ["--preferred-batch-size", str(p)]
    return args
