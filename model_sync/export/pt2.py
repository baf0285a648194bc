"""`export --format pt2`: torch.export.export -> AOTInductor (torch._inductor.aoti_compile_and_package)
-> 1/model.pt2, re-loaded with torch._inductor.aoti_load_package for export's check
(model_sync/export/exporter.py). Triton serves it with the PyTorch backend's `torch_aoti` platform.

A .pt2 is compiled code: kernels generated and built for one device, linked against the torch that
compiled them. So:
  - the device is the instances': KIND_GPU compiles for CUDA, on the GPU torch sees here (there must
    be one: exit 2 without), KIND_CPU for the CPU; KIND_AUTO is refused (a package runs on one
    device kind, and Triton's AUTO placement depends on the node);
  - export.json records `device` and, for CUDA, `gpu_architectures` (the compute capability the
    kernels were built for, as nvcc names it: sm_90) beside `torch_version`; push and promote refuse
    an environment whose image runs another torch minor, or whose deployment's GPUs have another
    architecture (model_sync/admission/alignment.py);
  - with max_batch_size > 1 the batch dimension is exported dynamic (torch.export.Dim, 1..max_batch_size),
    captured from an example of at least 2 rows (an example of 1 row would specialise it to 1).
A CPU package is built for this machine's vector instructions (inductor's ISA detection): it is the
local environment's format, not one to copy to other CPUs.
ref: https://docs.pytorch.org/docs/stable/torch.compiler_aot_inductor.html
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from model_sync import errors
from model_sync.export import exporter_log
from model_sync.export.options import Artefact, ExportOptions, example_inputs


def device_of(opts: ExportOptions) -> str:
    """'cuda' or 'cpu': where the package runs, from the instance kind (see the module docstring)."""
    import torch

    kind = opts.instance_kind or ("KIND_GPU" if opts.target == "cloud" else "KIND_CPU")
    if kind == "KIND_AUTO":
        raise errors.usage(
            "--instance-kind: KIND_AUTO with --format pt2; allowed: KIND_GPU or KIND_CPU (a .pt2 is compiled for "
            "one device)"
        )
    if kind == "KIND_GPU" and not torch.cuda.is_available():
        raise errors.usage(
            "--format pt2: KIND_GPU instances need a package compiled for CUDA, and torch sees no GPU here; allowed: "
            "export on a machine with the serving GPU's architecture, or --instance-kind KIND_CPU"
        )
    return "cuda" if kind == "KIND_GPU" else "cpu"


def compile_package(model: Any, capture: list[Any], target: Any, max_batch_size: int, path: str, log: str) -> None:
    """torch.export `model` on `target` from the example `capture` (batch dimension dynamic,
    1..max_batch_size, when max_batch_size > 1: see the docstring) and AOTInductor-compile it to
    `path`; torch's own output goes to `log` (kept when it fails), failures exit 6 with one line
    (model_sync/export/exporter_log.py). Not loaded here (export re-loads it; the GPU benchmark
    serves it from Triton's C++ loader instead)."""
    import torch
    import torch._inductor

    dynamic = max_batch_size > 1
    shapes = None
    if dynamic:
        batch = torch.export.Dim("batch", min=1, max=max_batch_size)
        shapes = tuple({0: batch} for _ in capture)
    try:
        with exporter_log.captured(log):
            on_device = model.to(target)
            with warnings.catch_warnings():  # torch's own deprecation notices (pytree): not the user's to act on
                warnings.simplefilter("ignore", FutureWarning)
                program = torch.export.export(on_device, tuple(t.to(target) for t in capture), dynamic_shapes=shapes)
    except Exception as e:
        raise exporter_log.refusal(
            e, "torch.export", "pt2", log, "a module torch.export captures"
            + (f" with a dynamic batch dimension 1..{max_batch_size}" if dynamic else ""),
        ) from None  # fmt: skip
    try:
        with exporter_log.captured(log):
            torch._inductor.aoti_compile_and_package(program, package_path=path)
    except Exception as e:
        raise exporter_log.refusal(
            e, "aoti_compile_and_package", "pt2", log, "a program AOTInductor compiles (a C++ compiler on PATH for "
            "the CPU, the CUDA toolkit's for a GPU)",
        ) from None  # fmt: skip
    finally:
        model.to("cpu")


def export(opts: ExportOptions, model: Any, inputs: list[Any], version_dir: str) -> Artefact:
    import torch
    import torch._inductor

    device = device_of(opts)
    dynamic = opts.max_batch_size > 1
    capture = example_inputs(opts, max(2, int(inputs[0].shape[0])), opts.seed) if dynamic else inputs
    target = torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else torch.device("cpu")
    path = os.path.join(version_dir, "model.pt2")
    # torch's own output goes beside the model directory (exporter_log), kept when it fails
    compile_package(model, capture, target, opts.max_batch_size, path, exporter_log.log_path(opts.output, opts.name))
    runner = torch._inductor.aoti_load_package(path)
    archs: list[str] | None = None
    if device == "cuda":
        major, minor = torch.cuda.get_device_capability(target)
        archs = [f"sm_{major}{minor}"]
    return Artefact(
        path=path,
        run=lambda *xs: runner(*(t.to(target) for t in xs)),
        meta={"device": device, "gpu_architectures": archs},
        load=(lambda _device: torch._inductor.aoti_load_package(path)) if device == "cuda" else None,
    )


def facts(meta: dict[str, Any]) -> str:
    """What `export` prints of export.json for a .pt2 package."""
    return f"AOTInductor for {', '.join(meta.get('gpu_architectures') or []) or meta.get('device')}"
