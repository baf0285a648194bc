"""ResNet-18 (random weights) for the serving benchmark: the `MODULE:FACTORY` given to
`model-sync export` (`bench.serving.resnet:build`).

`build()` returns torchvision's `resnet18(weights=None)` where torchvision imports (the H200 machine)
and otherwise the same architecture written out here (this CPU machine's torchvision wheel cannot
import beside torch 2.13). Both have 11,689,512 parameters and the same layer structure, so the
measured work per image is the same; `SOURCE` records which one was built.
ref: https://github.com/pytorch/vision/blob/main/torchvision/models/resnet.py
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

SEED = 0
SOURCE = "unset"


class BasicBlock(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample: nn.Module | None = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """torchvision's resnet18 layer for layer (BasicBlock, [2, 2, 2, 2], 1000 classes)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(64, 64), BasicBlock(64, 64))
        self.layer2 = nn.Sequential(BasicBlock(64, 128, 2), BasicBlock(128, 128))
        self.layer3 = nn.Sequential(BasicBlock(128, 256, 2), BasicBlock(256, 256))
        self.layer4 = nn.Sequential(BasicBlock(256, 512, 2), BasicBlock(512, 512))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build() -> nn.Module:
    """ResNet-18 with seeded random weights, in eval mode."""
    global SOURCE
    torch.manual_seed(SEED)
    model: Any
    try:
        import torchvision  # type: ignore[import-untyped]

        model = torchvision.models.resnet18(weights=None)
        SOURCE = f"torchvision {torchvision.__version__}"
    except Exception:  # torchvision missing or not importable beside this torch
        model = ResNet18()
        SOURCE = "bench.serving.resnet.ResNet18"
    return model.eval()
