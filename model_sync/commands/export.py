"""`model-sync export MODULE:FACTORY --name NAME --output DIR --example-shape 4,3,224,224 [--format ...]`:
export a torch.nn.Module in one of three formats, check the re-loaded file against eager, and write a
Triton model directory <DIR>/<NAME>/ (config.pbtxt, 1/<model file>, and 1/model.py for --target local):

  torchscript  torch.jit.trace / script -> 1/model.pt, platform pytorch_libtorch (the default)
  pt2          torch.export + AOTInductor -> 1/model.pt2, platform torch_aoti (compiled for the
               instances' device: KIND_GPU needs a GPU here; runs only on the torch and GPU
               architecture it was compiled for, which push and promote check)
  onnx         torch.onnx.export (dynamo) -> 1/model.onnx, platform onnxruntime_onnx (its opset and IR
               version are checked against the target image's ONNX Runtime)

TorchScript stays the default until the pinned Triton image's torch_aoti platform states dynamic
batching (docs/model-sync.md says which release).

config.pbtxt carries model_warmup by default: zero-filled samples of every input (declared dims
and dtypes) at batch 1 and at the largest preferred batch size (max_batch_size without preferred
sizes; one sample at batch 1 with --max-batch-size 0). Triton runs them on every instance before
the model is READY, so the first requests after a load or hot reload are not cold.
--no-warmup writes none.

--profile NAME presets the batching and instance flags from a measured configuration (flags given
explicitly win); --target cloud without --profile takes gpu-throughput. The presets and the
measurements they come from:
"""

from __future__ import annotations

import argparse
from typing import Any

from model_sync import errors
from model_sync.commands import _common
from model_sync.export import profiles as _profiles
from model_sync.triton_model.formats import FORMATS
from model_sync.ui import Console

NAME = "export"


def _shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a shape; allowed: comma-separated integers, e.g. 4,3,224,224"
        ) from None


def register(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help="export a PyTorch module (TorchScript, .pt2 or ONNX) and write a Triton model directory",
        description=__doc__ + "\n".join(f"  {p.measured()}" for p in _profiles.PROFILES.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "factory", metavar="MODULE:FACTORY", help="callable returning a torch.nn.Module, e.g. mypkg.models:build"
    )
    p.add_argument("--name", required=True, help="model name (directory and Triton name)")
    p.add_argument("--output", required=True, metavar="DIR", help="parent directory; the model is written to DIR/NAME/")
    p.add_argument(
        "--example-shape",
        dest="shapes",
        action="append",
        type=_shape,
        required=True,
        metavar="D0,D1,...",
        help="example input shape (repeat per input); the first dimension is the batch when --max-batch-size > 0",
    )
    p.add_argument(
        "--example-dtype",
        dest="dtypes",
        action="append",
        default=None,
        metavar="DTYPE",
        help="example input dtype (one for all, or one per input; default float32)",
    )
    p.add_argument(
        "--format",
        dest="format",
        choices=FORMATS,
        default=FORMATS[0],
        help="the exported file (listed above; default torchscript)",
    )
    p.add_argument(
        "--method",
        choices=("trace", "script"),
        default="trace",
        help="--format torchscript: torch.jit.trace (default) or torch.jit.script",
    )
    p.add_argument(
        "--onnx-opset",
        type=int,
        default=None,
        metavar="N",
        help="--format onnx: the opset to export (default: the exporter's); an image's ONNX Runtime runs opsets up to "
        "its own",
    )
    p.add_argument(
        "--target",
        choices=("cloud", "local"),
        default="cloud",
        help="cloud: platform pytorch_libtorch; local: python backend wrapper (default cloud)",
    )
    p.add_argument(
        "--rtol",
        type=float,
        default=None,
        help="relative tolerance of the re-loaded model vs eager (default: torchscript 1e-5, pt2 and onnx 1e-4)",
    )
    p.add_argument(
        "--atol",
        type=float,
        default=None,
        help="absolute tolerance of the re-loaded model vs eager (default: torchscript 1e-6, pt2 and onnx 1e-5)",
    )
    p.add_argument(
        "--profile",
        choices=tuple(_profiles.PROFILES),
        default=None,
        help="batching/instance presets measured by the serving benchmark (listed above); "
        "default: gpu-throughput for --target cloud, none for local",
    )
    p.add_argument(
        "--max-batch-size",
        type=int,
        default=None,
        help="Triton max_batch_size; 0 disables batching (default: the profile's, else 8)",
    )
    p.add_argument(
        "--no-dynamic-batching", dest="dynamic_batching", action="store_false", help="do not enable the dynamic batcher"
    )
    p.add_argument(
        "--preferred-batch-size",
        dest="preferred",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="dynamic batching preferred size (repeatable)",
    )
    p.add_argument(
        "--max-queue-delay-us",
        type=int,
        default=None,
        help="dynamic batching max queue delay in microseconds (default: the profile's, else 100)",
    )
    p.add_argument(
        "--instance-kind",
        choices=("KIND_AUTO", "KIND_CPU", "KIND_GPU"),
        default=None,
        help="instance group kind (default: the profile's, else KIND_GPU for cloud, KIND_CPU for local)",
    )
    p.add_argument(
        "--instance-count", type=int, default=None, help="instances per device (default: the profile's, else 1)"
    )
    p.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help=(
            "write no model_warmup (default: zero-filled warm-up samples at batch 1 and the largest preferred "
            "batch size, run before READY)"
        ),
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing DIR/NAME atomically")
    _common.add_quiet(p)
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from model_sync.export import exporter

    preset = _profiles.resolve(
        args.target,
        args.profile,
        max_batch_size=args.max_batch_size,
        preferred_batch_sizes=tuple(args.preferred),
        max_queue_delay_us=args.max_queue_delay_us,
        instance_kind=args.instance_kind,
        instance_count=args.instance_count,
        dynamic_batching=args.dynamic_batching,
    )
    opts = exporter.ExportOptions(
        factory=args.factory,
        output=args.output,
        name=args.name,
        shapes=tuple(args.shapes),
        dtypes=tuple(args.dtypes or ["float32"]),
        method=args.method,
        format=args.format,
        onnx_opset=args.onnx_opset,
        target=args.target,
        rtol=args.rtol,
        atol=args.atol,
        dynamic_batching=args.dynamic_batching,
        warmup=args.warmup,
        overwrite=args.overwrite,
        **preset,
    )
    meta = exporter.command(opts)
    Console(args.quiet).line(
        f"exported: {args.name} ({meta['format']}, {meta['method']}, torch {meta['torch_version']}, {exporter.facts(meta)}) "
        f"to {args.output}/{args.name}"
    )
    return errors.OK
