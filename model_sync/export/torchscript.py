"""`export`: torch.nn.Module -> TorchScript -> a Triton model directory (model_sync/triton_model/model_directory.py).

  1. `module:factory` is imported (the current directory is on sys.path) and called with no
     arguments; it must return a torch.nn.Module (put in eval mode);
  2. TorchScript by `torch.jit.trace` (default) or `torch.jit.script`; saved and RE-LOADED from disk;
  3. check: the loaded TorchScript and the eager module get the same seeded example inputs, and a
     second example with another batch size (catches shapes baked in by tracing); every output must
     match within --rtol/--atol (torch.testing.assert_close) or export fails with exit code 6;
  4. config.pbtxt built as a ModelConfig protobuf: INPUT__i / OUTPUT__i with dtypes and dims from the
     example (the batch dimension stripped when max_batch_size > 0), max_batch_size, dynamic batching,
     instance groups, and (unless --no-warmup) model_warmup: zero-filled samples of every input at
     batch 1 and at the largest preferred batch (model_config.add_warmup), which Triton runs on
     every instance before the model is READY, so the first requests after a load or a hot reload
     do not pay the cold start;
  5. written to a temporary directory beside the destination, then renamed into place.

Targets: cloud -> platform "pytorch_libtorch" + 1/model.pt; local -> backend "python" + 1/model.pt +
1/model.py (model_sync/export/torchscript_python_backend.py, the python-backend model that torch.jit.load()s
model.pt and runs each dynamic batch through reused staging buffers: the same artefact served by the
local tritonserver, which has no libtorch backend). A local KIND_GPU model also gets
FORCE_CPU_ONLY_INPUT_TENSORS "no", so inputs Triton holds on the GPU reach it through DLPack.

export.json (beside config.pbtxt, never uploaded) records what `push` copies into the manifest
and checks against the target's Triton image (model_sync/contract/compat.py): the exporting torch version,
the TorchScript file format version and the operators the graph uses (torch.jit.export_opnames);
and `gpu_memory`, one instance's GPU memory at the largest batch, measured on a GPU or estimated
without one (model_sync/serving/gpu_memory.py), which push and promote plan with (model_sync/serving/gpu_plan.py).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_sync import __version__, errors
from model_sync.contract import compat, layout
from model_sync.serving import gpu_memory
from model_sync.triton_model import model_config
from model_sync.ui import error

TRITON_DTYPES = {
    "float32": "TYPE_FP32",
    "float16": "TYPE_FP16",
    "bfloat16": "TYPE_BF16",
    "float64": "TYPE_FP64",
    "int64": "TYPE_INT64",
    "int32": "TYPE_INT32",
    "int16": "TYPE_INT16",
    "int8": "TYPE_INT8",
    "uint8": "TYPE_UINT8",
    "bool": "TYPE_BOOL",
}
KINDS = ("KIND_AUTO", "KIND_CPU", "KIND_GPU")


@dataclass(frozen=True)
class ExportOptions:
    factory: str  # "package.module:function"
    output: str  # parent directory; the model is written to <output>/<name>/
    name: str
    shapes: tuple[tuple[int, ...], ...]  # example input shapes, batch dimension first when max_batch_size > 0
    dtypes: tuple[str, ...]
    method: str = "trace"
    target: str = "cloud"
    rtol: float = 1e-5
    atol: float = 1e-6
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
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
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
        if not (self.rtol >= 0 and self.atol >= 0):
            raise errors.usage(f"--rtol/--atol: {self.rtol}/{self.atol}; allowed: >= 0")

    def dtype_of(self, i: int) -> str:
        return self.dtypes[i] if len(self.dtypes) > 1 else self.dtypes[0]


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


def _as_tuple(out: Any) -> tuple[Any, ...]:
    import torch

    if isinstance(out, torch.Tensor):
        return (out,)
    if isinstance(out, list | tuple) and all(isinstance(t, torch.Tensor) for t in out):
        return tuple(out)
    raise errors.usage(f"model output: {type(out).__name__}; allowed: a tensor or a tuple/list of tensors")


def _run(model: Any, inputs: list[Any], what: str, check: str = "") -> tuple[Any, ...]:
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
                f"export check ({check}): the TorchScript model failed where eager did not on {shapes} "
                f"({' '.join(str(e).split())[:160]}); "
                "allowed: shapes not baked in by tracing (try --method script)",
            ) from None
        raise errors.usage(
            f"example inputs: {shapes} rejected by the {what} model ({' '.join(str(e).split())[:200]}); "
            "allowed: shapes/dtypes its forward accepts"
        ) from None


def compare(expected: tuple[Any, ...], actual: tuple[Any, ...], rtol: float, atol: float, what: str) -> None:
    import torch

    if len(expected) != len(actual):
        raise errors.SyncError(
            errors.CHECK_FAILED,
            f"export check ({what}): TorchScript returned {len(actual)} outputs, eager {len(expected)}; "
            "allowed: the same outputs",
        )
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        try:
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol)
        except AssertionError as err:
            detail = " ".join(str(err).split())[:240]
            raise errors.SyncError(
                errors.CHECK_FAILED,
                f"export check ({what}): OUTPUT__{i} TorchScript differs from eager ({detail}); "
                f"allowed: within --rtol {rtol} --atol {atol}",
            ) from None


def build_config(opts: ExportOptions, inputs: list[Any], outputs: tuple[Any, ...]) -> Any:
    cfg = model_config.ModelConfig()
    cfg.name = opts.name
    if opts.target == "cloud":
        cfg.platform = "pytorch_libtorch"
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
    if opts.target == "local" and group.kind == model_config.pb2.ModelInstanceGroup.Kind.Value("KIND_GPU"):
        # The python backend copies every input to the CPU unless told otherwise; the wrapper
        # takes GPU inputs (CUDA shared-memory clients) through DLPack instead.
        # ref: https://github.com/triton-inference-server/python_backend#input-tensor-device-placement
        cfg.parameters["FORCE_CPU_ONLY_INPUT_TENSORS"].string_value = "no"
    if opts.warmup:
        model_config.add_warmup(cfg)
    model_config.parse(model_config.dumps(cfg), "generated config.pbtxt")  # round-trips through the parser
    return cfg


def command(opts: ExportOptions) -> dict[str, Any]:
    import torch

    dest = os.path.join(opts.output, opts.name)
    if os.path.exists(dest) and not opts.overwrite:
        raise errors.refused(f"--output: {dest} exists; allowed: a new directory, or --overwrite to replace it")
    model = load_factory(opts.factory)
    inputs = example_inputs(opts, None, opts.seed)
    eager_out = _run(model, inputs, "eager")
    try:
        # torch prints TracerWarnings as multi-line noise; collect them. If the
        # eager-vs-TorchScript checks below pass they are reported in one line; if a check
        # fails, its one-line error is what the user needs.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scripted = torch.jit.trace(model, tuple(inputs)) if opts.method == "trace" else torch.jit.script(model)
        # torch 2.x deprecates TorchScript as a whole (every trace says so): not something a user
        # can act on, since Triton's libtorch backend loads TorchScript only (docs/model-sync.md).
        notes = [str(w.message).splitlines()[0] for w in caught if not _torchscript_deprecation(w)]
    except Exception as e:
        raise errors.SyncError(
            errors.CHECK_FAILED,
            f"torch.jit.{opts.method}: failed ({' '.join(str(e).split())[:240]}); "
            f"allowed: a module {opts.method}-able by TorchScript "
            f"(try --method {'script' if opts.method == 'trace' else 'trace'})",
        ) from None
    os.makedirs(opts.output, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{opts.name}.export-", dir=opts.output)
    try:
        os.makedirs(os.path.join(tmp, "1"))
        pt = os.path.join(tmp, "1", "model.pt")
        torch.jit.save(scripted, pt)
        loaded = torch.jit.load(pt).eval()
        compare(eager_out, _run(loaded, inputs, "TorchScript", "example 1"), opts.rtol, opts.atol, "example 1")
        if opts.max_batch_size > 1:
            other = opts.shapes[0][0] - 1 if opts.shapes[0][0] > 1 else min(2, opts.max_batch_size)
            second = example_inputs(opts, other, opts.seed + 1)
            compare(
                _run(model, second, "eager"),
                _run(loaded, second, "TorchScript", f"example 2, batch {other}"),
                opts.rtol,
                opts.atol,
                f"example 2, batch {other}",
            )
        if notes:
            error(
                f"warning: torch.jit.{opts.method}: {len(notes)} warning(s) while tracing, "
                f"first: {' '.join(notes[0].split())[:200]}; "
                "the outputs matched eager on every example, so the export stands"
            )
        cfg = build_config(opts, inputs, eager_out)
        model_config.write_file(os.path.join(tmp, layout.CONFIG_FILE), cfg)
        gpu = gpu_memory.record(
            pt, loaded, kind=model_config.pb2.ModelInstanceGroup.Kind.Name(cfg.instance_group[0].kind),
            max_batch_size=opts.max_batch_size, inputs=inputs, outputs=eager_out,
            make_inputs=lambda batch: example_inputs(opts, batch, opts.seed),
        )  # fmt: skip
        if opts.target == "local":
            from model_sync.export import torchscript_python_backend

            shutil.copyfile(torchscript_python_backend.__file__, os.path.join(tmp, "1", "model.py"))
        meta = {
            "tool": f"model-sync {__version__}",
            "factory": opts.factory,
            "method": opts.method,
            "target": opts.target,
            "torch_version": torch.__version__,
            "torchscript_format_version": compat.read_file_format_version(Path(pt)),
            # Operators the graph calls: what the serving LibTorch must provide (version alignment).
            # ref: https://pytorch.org/docs/stable/jit.html (torch.jit.export_opnames)
            "operators": sorted(torch.jit.export_opnames(scripted)),
            # One instance's GPU memory at the largest batch (model_sync/serving/gpu_memory.py): the input
            # of push/promote's GPU memory planning (model_sync/serving/gpu_plan.py).
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


def _torchscript_deprecation(w: warnings.WarningMessage) -> bool:
    """torch's "`torch.jit.trace` is deprecated. Please switch to torch.compile or torch.export"."""
    return issubclass(w.category, DeprecationWarning | FutureWarning) and str(w.message).startswith("`torch.jit.")
