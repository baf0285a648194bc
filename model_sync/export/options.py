"""`export`'s options (ExportOptions, validated once), the formats and their constants, the
seeded example inputs, and what one format's exporter hands back (Artefact): the layer the
exporter (model_sync/export/exporter.py) and each format's module (torchscript.py, pt2.py, onnx.py)
share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from model_sync import errors
from model_sync.contract import layout
from model_sync.triton_model.formats import FORMAT_TABLE, FORMATS, TRITON_DTYPES

KINDS = ("KIND_AUTO", "KIND_CPU", "KIND_GPU")


@dataclass
class Artefact:
    """What one format's exporter wrote and re-loaded: `run(*inputs)` runs the re-loaded file on the
    CPU (or the device it was compiled for), `load(device)` loads it on a GPU for the memory
    measurement (None: GPU memory is measured from the device's free memory, not torch's allocator),
    `meta` its export.json fields, `notes` one-line warnings of its exporter."""

    path: str
    run: Callable[..., Any]
    meta: dict[str, Any]
    load: Callable[[Any], Callable[..., Any]] | None = None
    notes: list[str] = field(default_factory=list)
    device_wide: bool = False  # its GPU memory is not torch's allocator's (ONNX Runtime's arena)


@dataclass(frozen=True)
class ExportOptions:
    factory: str  # "package.module:function"
    output: str  # parent directory; the model is written to <output>/<name>/
    name: str
    shapes: tuple[tuple[int, ...], ...]  # example input shapes, batch dimension first when max_batch_size > 0
    dtypes: tuple[str, ...]
    method: str = "trace"  # torchscript only; pt2 and onnx record "export" (torch.export)
    target: str = "cloud"
    rtol: float | None = None  # None: the format's (FORMAT_TABLE[format].tolerances)
    atol: float | None = None
    max_batch_size: int = 8
    dynamic_batching: bool = True
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 100
    instance_kind: str | None = None  # default: KIND_GPU for cloud, KIND_CPU for local
    instance_count: int = 1
    profile: str | None = None  # the export --profile the batching/instance defaults came from (export.profiles)
    warmup: bool = True  # model_warmup in config.pbtxt (model_config.add_warmup); --no-warmup turns it off
    overwrite: bool = False
    seed: int = 0
    format: str = "torchscript"
    onnx_opset: int | None = None  # --onnx-opset (onnx only); None: the exporter's default
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise errors.usage(f"--format: {self.format!r}; allowed: {', '.join(FORMATS)}")
        if FORMAT_TABLE[self.format].method is not None and self.method != "trace":
            raise errors.usage(
                f"--method: {self.method!r} with --format {self.format}; allowed: --method only with --format "
                "torchscript (pt2 and onnx are captured by torch.export)"
            )
        if self.onnx_opset is not None and (self.format != "onnx" or not 7 <= self.onnx_opset <= 30):
            raise errors.usage(
                f"--onnx-opset: {self.onnx_opset} with --format {self.format}; allowed: 7..30, with --format onnx only"
            )
        rtol, atol = FORMAT_TABLE[self.format].tolerances
        object.__setattr__(self, "rtol", rtol if self.rtol is None else self.rtol)
        object.__setattr__(self, "atol", atol if self.atol is None else self.atol)
        if ":" not in self.factory or not all(self.factory.partition(":")[::2]):
            raise errors.usage(f"factory: {self.factory!r}; allowed: module.path:callable")
        try:
            layout.check_model_name(self.name)
        except layout.LayoutError as e:
            raise errors.usage(f"--name: {e}") from None
        if self.method not in ("trace", "script"):
            raise errors.usage(f"--method: {self.method!r}; allowed: trace, script")
        if self.target not in ("cloud", "local"):
            raise errors.usage(f"--target: {self.target!r}; allowed: cloud, local")
        if not self.shapes:
            raise errors.usage(
                "--example-shape: missing; allowed: one per model input, e.g. --example-shape 4,3,224,224"
            )
        for s in self.shapes:
            if not s or any(d < 1 for d in s):
                raise errors.usage(
                    f"--example-shape: {','.join(map(str, s))!r}; allowed: positive integers separated by commas"
                )
        if len(self.dtypes) not in (1, len(self.shapes)):
            raise errors.usage(
                f"--example-dtype: {len(self.dtypes)} given for {len(self.shapes)} inputs; "
                "allowed: one for all, or one per --example-shape"
            )
        for d in self.dtypes:
            if d not in TRITON_DTYPES:
                raise errors.usage(f"--example-dtype: {d!r}; allowed: {', '.join(TRITON_DTYPES)}")
        if not 0 <= self.max_batch_size <= 1 << 20:
            raise errors.usage(f"--max-batch-size: {self.max_batch_size}; allowed: 0 (no batching) .. 1048576")
        if self.max_batch_size > 0:
            for s in self.shapes:
                if s[0] > self.max_batch_size:
                    raise errors.usage(
                        f"--example-shape: batch {s[0]} > --max-batch-size {self.max_batch_size}; "
                        "allowed: a batch dimension <= max_batch_size"
                    )
            if len({s[0] for s in self.shapes}) != 1:
                raise errors.usage(
                    f"--example-shape: batch dimensions {[s[0] for s in self.shapes]} differ; "
                    "allowed: the same first dimension for every input"
                )
        for b in self.preferred_batch_sizes:
            if not 1 <= b <= max(self.max_batch_size, 1):
                raise errors.usage(f"--preferred-batch-size: {b}; allowed: 1..max_batch_size ({self.max_batch_size})")
        if self.preferred_batch_sizes and (not self.dynamic_batching or self.max_batch_size == 0):
            raise errors.usage(
                "--preferred-batch-size: set without dynamic batching; "
                "allowed: only with --max-batch-size > 0 and dynamic batching on"
            )
        if self.max_queue_delay_us < 0:
            raise errors.usage(f"--max-queue-delay-us: {self.max_queue_delay_us}; allowed: >= 0")
        if self.instance_kind is not None and self.instance_kind not in KINDS:
            raise errors.usage(f"--instance-kind: {self.instance_kind!r}; allowed: {', '.join(KINDS)}")
        if not 1 <= self.instance_count <= 64:
            raise errors.usage(f"--instance-count: {self.instance_count}; allowed: 1..64")
        if not (self.rtol is not None and self.atol is not None and self.rtol >= 0 and self.atol >= 0):
            raise errors.usage(f"--rtol/--atol: {self.rtol}/{self.atol}; allowed: >= 0")

    def dtype_of(self, i: int) -> str:
        return self.dtypes[i] if len(self.dtypes) > 1 else self.dtypes[0]


def example_inputs(opts: ExportOptions, batch: int | None, seed: int) -> list[Any]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    out = []
    for i, shape in enumerate(opts.shapes):
        if batch is not None:
            shape = (batch, *shape[1:])
        dtype = getattr(torch, opts.dtype_of(i))
        if dtype.is_floating_point:
            out.append(torch.randn(shape, generator=gen).to(dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, shape, generator=gen).bool())
        else:
            out.append(torch.randint(0, 100, shape, generator=gen).to(dtype))
    return out
