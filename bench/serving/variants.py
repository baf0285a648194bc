"""The configurations the serving benchmark measures: one `Variant` per `--variant` (instance count,
preferred batch sizes, queue delay, max batch), each exported in each format (model_sync.triton_model.formats) as the
model `Variant.named(fmt)`, from the ResNet-18 factory (`FACTORY`, bench.serving.resnet)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INPUT_SHAPE = (3, 224, 224)
FACTORY = "bench.serving.resnet:build"


@dataclass(frozen=True)
class Variant:
    """One `model-sync export` configuration: NAME:COUNT:PREF1/PREF2:DELAY_US:MAX_BATCH."""

    name: str
    instance_count: int
    preferred: tuple[int, ...]
    max_queue_delay_us: int
    max_batch_size: int

    @classmethod
    def parse(cls, text: str) -> Variant:
        try:
            name, count, pref, delay, mbs = text.split(":")
            return cls(name, int(count), tuple(int(p) for p in pref.split("/") if p), int(delay), int(mbs))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--variant {text!r}; allowed: NAME:COUNT:PREF1/PREF2:DELAY_US:MAX_BATCH, e.g. "
                "resnet18-i4:4:64:2000:128"
            ) from None

    def named(self, fmt: str) -> str:
        """The model's name in `fmt`: the variant's own for TorchScript, `<name>-pt2` / `<name>-onnx`."""
        return self.name if fmt == "torchscript" else f"{self.name}-{fmt}"

    def export_args(self, output: Path, kind: str, fmt: str = "torchscript", target: str = "local") -> list[str]:
        """`model-sync export` arguments; `target` cloud writes the production config (the format's
        Triton platform: pytorch_libtorch for TorchScript), local the python-backend wrapper."""
        args = [
            FACTORY,
            "--name",
            self.named(fmt),
            "--format",
            fmt,
            "--output",
            str(output),
            "--example-shape",
            ",".join(map(str, (4, *INPUT_SHAPE))),
            "--target",
            target,
            "--max-batch-size",
            str(self.max_batch_size),
            "--max-queue-delay-us",
            str(self.max_queue_delay_us),
            "--instance-kind",
            kind,
            "--instance-count",
            str(self.instance_count),
            "--overwrite",
        ]
        for p in self.preferred:
            args += ["--preferred-batch-size", str(p)]
        return args


DEFAULT_VARIANTS = (
    # With the staging wrapper an instance pays less per image, so fewer instances with
    # larger batches should keep the GPU busy with fewer CUDA contexts to switch between.
    "resnet18-i2-p32:2:32:1000:64",
    "resnet18-i4-p32:4:32:1000:64",
    "resnet18-i6-p16-32:6:16/32:1000:64",
    "resnet18-i12-p16:12:16:1000:32",  # the best point of the 2026-11-30 run, with the earlier wrapper
)
