"""`export`: torch.nn.Module -> a Triton model directory (model_sync/triton_model/model_directory.py),
in one of three formats, each produced by the framework's own exporter:

    torchscript  torch.jit.trace (default) or torch.jit.script -> 1/model.pt (model_sync/export/torchscript.py)
    pt2          torch.export + AOTInductor (aoti_compile_and_package) -> 1/model.pt2 (model_sync/export/pt2.py)
    onnx         torch.onnx.export, the dynamo exporter -> 1/model.onnx (model_sync/export/onnx.py)

  1. `module:factory` is imported (the current directory is on sys.path) and called with no
     arguments; it must return a torch.nn.Module (put in eval mode);
  2. the format's exporter writes the model file into a temporary directory beside the destination;
     pt2 and onnx declare the batch dimension dynamic (1..max_batch_size) when max_batch_size > 1;
  3. check: the file is RE-LOADED from disk (torch.jit.load, aoti_load_package, an ONNX Runtime CPU
     session) and gets the same seeded example inputs as eager, and a second example with another
     batch size (catches shapes baked in); every output must match eager within --rtol/--atol
     (torch.testing.assert_close; defaults per format: FORMAT_TABLE) or export fails with exit code 6;
  4. config.pbtxt built as a ModelConfig protobuf: INPUT__i / OUTPUT__i (the names every backend
     here takes: the PyTorch backend's `<name>__<index>` convention for pytorch_libtorch and
     torch_aoti, the graph's own names for onnxruntime_onnx, which the ONNX export gives them) with
     dtypes and dims from the example (the batch dimension stripped when max_batch_size > 0),
     max_batch_size, dynamic batching, instance groups, and (unless --no-warmup) model_warmup:
     zero-filled samples of every input at batch 1 and at the largest preferred batch
     (model_config.add_warmup), which Triton runs on every instance before the model is READY;
  5. renamed into place.

Targets: cloud -> the format's Triton platform (PLATFORMS: pytorch_libtorch, torch_aoti,
onnxruntime_onnx) + the model file; local -> backend "python" + the model file + 1/model.py, the
python-backend model that serves it in the local tritonserver, which has only the python backend
(model_sync/export/torch_python_backend.py for model.pt and model.pt2, model_sync/export/onnx_python_backend.py
for model.onnx). A local KIND_GPU model also gets FORCE_CPU_ONLY_INPUT_TENSORS "no", so inputs Triton
holds on the GPU reach it through DLPack.

export.json (beside config.pbtxt, never uploaded) records what `push` copies into the manifest and
checks against the target's Triton (model_sync/admission/alignment.py): the format, the exporting torch
version; TorchScript's file format version and operators (torch.jit.export_opnames); a .pt2's device
and the GPU architectures it was compiled for; an ONNX model's opset and IR version; and
`gpu_memory`, one instance's GPU memory at the largest batch, measured on a GPU or estimated without
one (model_sync/export/gpu_memory.py), which push and promote plan with (model_sync/admission/gpu_plan.py).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from typing import Any

from model_sync import __version__, errors
from model_sync.contract import layout
from model_sync.export import gpu_memory
from model_sync.export.options import KINDS, TRITON_DTYPES, Artefact, ExportOptions, example_inputs
from model_sync.triton_model import model_config
from model_sync.triton_model.formats import FORMAT_TABLE, FORMATS, MODEL_FILES, PLATFORMS
from model_sync.ui import error

__all__ = ["FORMATS", "KINDS", "MODEL_FILES", "PLATFORMS", "TRITON_DTYPES", "Artefact", "ExportOptions", "command",
           "compare", "example_inputs", "facts"]  # fmt: skip


def load_factory(spec: str) -> Any:
    import torch

    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise errors.usage(
            f"factory: {spec!r} cannot be imported ({e}); allowed: an importable module:callable"
        ) from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise errors.usage(
                f"factory: {spec!r} has no attribute {part!r}; allowed: module:callable returning a torch.nn.Module"
            )
        obj = getattr(obj, part)
    model = obj() if callable(obj) and not isinstance(obj, torch.nn.Module) else obj
    if not isinstance(model, torch.nn.Module):
        raise errors.usage(f"factory: {spec!r} returned {type(model).__name__}; allowed: a torch.nn.Module")
    return model.eval()


def _as_tuple(out: Any) -> tuple[Any, ...]:
    import torch

    if isinstance(out, torch.Tensor):
        return (out,)
    if isinstance(out, list | tuple) and all(isinstance(t, torch.Tensor) for t in out):
        return tuple(out)
    raise errors.usage(f"model output: {type(out).__name__}; allowed: a tensor or a tuple/list of tensors")


def _run(model: Any, inputs: list[Any], what: str, check: str = "", fmt: str = FORMATS[0]) -> tuple[Any, ...]:
    import torch

    try:
        with torch.no_grad():
            return _as_tuple(model(*inputs))
    except errors.SyncError:
        raise
    except Exception as e:
        shapes = "; ".join(f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}" for t in inputs)
        if check:
            raise errors.SyncError(
                errors.CHECK_FAILED,
                f"export check ({check}): the {FORMAT_TABLE[fmt].label} model failed where eager did not on {shapes} "
                f"({' '.join(str(e).split())[:160]}); allowed: {FORMAT_TABLE[fmt].hint}",
            ) from None
        raise errors.usage(
            f"example inputs: {shapes} rejected by the {what} model ({' '.join(str(e).split())[:200]}); "
            "allowed: shapes/dtypes its forward accepts"
        ) from None


def compare(
    expected: tuple[Any, ...], actual: tuple[Any, ...], rtol: float, atol: float, what: str, fmt: str = FORMATS[0]
) -> None:
    import torch

    label = FORMAT_TABLE[fmt].label
    if len(expected) != len(actual):
        raise errors.SyncError(
            errors.CHECK_FAILED,
            f"export check ({what}): {label} returned {len(actual)} outputs, eager {len(expected)}; "
            "allowed: the same outputs",
        )
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        try:
            torch.testing.assert_close(a.to(e.device), e, rtol=rtol, atol=atol)
        except AssertionError as err:
            detail = " ".join(str(err).split())[:240]
            raise errors.SyncError(
                errors.CHECK_FAILED,
                f"export check ({what}): OUTPUT__{i} {label} differs from eager ({detail}); "
                f"allowed: within --rtol {rtol} --atol {atol}",
            ) from None


def build_config(opts: ExportOptions, inputs: list[Any], outputs: tuple[Any, ...]) -> Any:
    cfg = model_config.ModelConfig()
    cfg.name = opts.name
    if opts.target == "cloud":
        cfg.platform = PLATFORMS[opts.format]
    else:
        cfg.backend = "python"
    cfg.max_batch_size = opts.max_batch_size
    strip = 1 if opts.max_batch_size > 0 else 0
    for i, t in enumerate(inputs):
        io = cfg.input.add()
        io.name = f"INPUT__{i}"
        io.data_type = model_config.pb2.DataType.Value(TRITON_DTYPES[str(t.dtype).removeprefix("torch.")])
        io.dims.extend(list(t.shape)[strip:])
    for i, t in enumerate(outputs):
        dtype = str(t.dtype).removeprefix("torch.")
        if dtype not in TRITON_DTYPES:
            raise errors.usage(f"model output OUTPUT__{i} dtype: {dtype!r}; allowed: {', '.join(TRITON_DTYPES)}")
        if strip and (t.dim() == 0 or t.shape[0] != inputs[0].shape[0]):
            raise errors.usage(
                f"model output OUTPUT__{i} shape: {tuple(t.shape)}; "
                f"allowed: batch dimension {inputs[0].shape[0]} first when --max-batch-size > 0 "
                "(or use --max-batch-size 0)"
            )
        io = cfg.output.add()
        io.name = f"OUTPUT__{i}"
        io.data_type = model_config.pb2.DataType.Value(TRITON_DTYPES[dtype])
        io.dims.extend(list(t.shape)[strip:] or [1])
    if opts.max_batch_size > 0 and opts.dynamic_batching:
        cfg.dynamic_batching.preferred_batch_size.extend(opts.preferred_batch_sizes)
        cfg.dynamic_batching.max_queue_delay_microseconds = opts.max_queue_delay_us
    group = cfg.instance_group.add()
    group.kind = model_config.pb2.ModelInstanceGroup.Kind.Value(
        opts.instance_kind or ("KIND_GPU" if opts.target == "cloud" else "KIND_CPU")
    )
    group.count = opts.instance_count
    if (
        opts.target == "local"
        and FORMAT_TABLE[opts.format].wrapper == "torch_python_backend"
        and group.kind == model_config.pb2.ModelInstanceGroup.Kind.Value("KIND_GPU")
    ):
        # The python backend copies every input to the CPU unless told otherwise; the torch wrapper
        # takes GPU inputs (CUDA shared-memory clients) through DLPack instead.
        # ref: https://github.com/triton-inference-server/python_backend#input-tensor-device-placement
        cfg.parameters["FORCE_CPU_ONLY_INPUT_TENSORS"].string_value = "no"
    if opts.warmup:
        model_config.add_warmup(cfg)
    model_config.parse(model_config.dumps(cfg), "generated config.pbtxt")  # round-trips through the parser
    return cfg


def _format_module(fmt: str) -> Any:
    """The format's module, model_sync/export/<fmt>.py (FORMAT_TABLE's row names it), imported when it
    is used: `export --format torchscript` loads neither AOTInductor nor ONNX."""
    return importlib.import_module(f"model_sync.export.{FORMAT_TABLE[fmt].name}")


def _export(opts: ExportOptions, model: Any, inputs: list[Any], version_dir: str) -> Artefact:
    """The format's exporter: writes the model file into `version_dir` and re-loads it."""
    artefact: Artefact = _format_module(opts.format).export(opts, model, inputs, version_dir)
    return artefact


def facts(meta: dict[str, Any]) -> str:
    """What export.json says of the exported file, in one phrase, by its format's module."""
    return str(_format_module(meta["format"]).facts(meta))


def command(opts: ExportOptions) -> dict[str, Any]:
    import torch

    dest = os.path.join(opts.output, opts.name)
    if os.path.exists(dest) and not opts.overwrite:
        raise errors.refused(f"--output: {dest} exists; allowed: a new directory, or --overwrite to replace it")
    model = load_factory(opts.factory)
    inputs = example_inputs(opts, None, opts.seed)
    eager_out = _run(model, inputs, "eager")
    assert opts.rtol is not None
    assert opts.atol is not None
    os.makedirs(opts.output, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{opts.name}.export-", dir=opts.output)
    try:
        os.makedirs(os.path.join(tmp, "1"))
        art = _export(opts, model, inputs, os.path.join(tmp, "1"))
        label = FORMAT_TABLE[opts.format].label
        compare(eager_out, _run(art.run, inputs, label, "example 1", opts.format), opts.rtol, opts.atol,
                "example 1", opts.format)  # fmt: skip
        if opts.max_batch_size > 1:
            other = opts.shapes[0][0] - 1 if opts.shapes[0][0] > 1 else min(2, opts.max_batch_size)
            second = example_inputs(opts, other, opts.seed + 1)
            check = f"example 2, batch {other}"
            compare(_run(model, second, "eager"), _run(art.run, second, label, check, opts.format), opts.rtol,
                    opts.atol, check, opts.format)  # fmt: skip
        for note in art.notes:
            error(note)
        cfg = build_config(opts, inputs, eager_out)
        model_config.write_file(os.path.join(tmp, layout.CONFIG_FILE), cfg)
        gpu = gpu_memory.record(
            art.load, model, kind=model_config.pb2.ModelInstanceGroup.Kind.Name(cfg.instance_group[0].kind),
            max_batch_size=opts.max_batch_size, inputs=inputs, outputs=eager_out,
            make_inputs=lambda batch: example_inputs(opts, batch, opts.seed), what=label, device_wide=art.device_wide,
        )  # fmt: skip
        if opts.target == "local":
            shutil.copyfile(_wrapper_file(opts.format), os.path.join(tmp, "1", "model.py"))
        meta = {
            "tool": f"model-sync {__version__}",
            "format": opts.format,
            "factory": opts.factory,
            "method": FORMAT_TABLE[opts.format].method or opts.method,
            "target": opts.target,
            "torch_version": torch.__version__,
            **art.meta,
            # One instance's GPU memory at the largest batch (model_sync/export/gpu_memory.py): the input
            # of push/promote's GPU memory planning (model_sync/admission/gpu_plan.py).
            "gpu_memory": gpu,
            "example_shapes": [list(s) for s in opts.shapes],
            "example_dtypes": [opts.dtype_of(i) for i in range(len(opts.shapes))],
            "rtol": opts.rtol,
            "atol": opts.atol,
            "profile": opts.profile,
            "git_commit": os.environ.get("GITHUB_SHA"),
        }
        with open(os.path.join(tmp, "export.json"), "w") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
        if os.path.exists(dest):
            old = dest + ".old-" + os.path.basename(tmp)
            os.rename(dest, old)
            os.rename(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, dest)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return meta


def _wrapper_file(fmt: str) -> str:
    """The python-backend model.py `--target local` copies for `fmt` (located, not imported: it runs
    inside Triton)."""
    spec = importlib.util.find_spec(f"model_sync.export.{FORMAT_TABLE[fmt].wrapper}")
    origin = spec.origin if spec is not None else None
    assert origin is not None
    return origin
