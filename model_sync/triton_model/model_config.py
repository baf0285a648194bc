"""config.pbtxt: Triton's model configuration in protobuf text format, read and written only
through `tritonclient.grpc.model_config_pb2.ModelConfig` + `google.protobuf.text_format`
(a misspelled field is a parse error; nothing is ever produced from string templates).

The pin: `repository/<model>/config.pbtxt` is the model's config with
    version_policy { specific { versions: [N] } }
so Triton (or the repository agent) serves exactly version N. `pin()` sets it,
`pinned_version()` reads it (None for latest/all policies or several versions).

Backend file contract (`required_files()`), what a version directory must contain:
    backend "python"                          -> model.py (+ the model file it wraps: model.pt, model.pt2, model.onnx)
    platform "pytorch_libtorch" / "pytorch"   -> default_model_filename or model.pt
    platform "torch_aoti"                     -> default_model_filename or model.pt2
    platform "onnxruntime_onnx" / "onnxruntime" -> default_model_filename or model.onnx
    platform "tensorrt_plan" / "tensorrt"     -> default_model_filename or model.plan

Warm-up (`add_warmup()`): `model_warmup` samples Triton runs on every instance before it reports
the model READY, derived from the config's own inputs and batching (see the function).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from types import ModuleType
from typing import Any

from google.protobuf import text_format

from model_sync.contract import layout
from model_sync.triton_model.formats import TRITON_DTYPES


def _load_pb2() -> ModuleType:
    """`tritonclient.grpc.model_config_pb2` without importing `tritonclient.grpc` (which pulls in
    grpc: 0.22 s vs 0.05 s, measured). The generated module only needs google.protobuf; it is
    registered under its real name so a later `import tritonclient.grpc` reuses it."""
    name = "tritonclient.grpc.model_config_pb2"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec("tritonclient")
    path = (
        os.path.join(next(iter(spec.submodule_search_locations or [])), "grpc", "model_config_pb2.py") if spec else ""
    )
    if not os.path.isfile(path):  # pragma: no cover - layout of another tritonclient release
        from tritonclient.grpc import model_config_pb2

        return model_config_pb2
    file_spec = importlib.util.spec_from_file_location(name, path)
    assert file_spec is not None
    assert file_spec.loader is not None
    module = importlib.util.module_from_spec(file_spec)
    sys.modules[name] = module
    file_spec.loader.exec_module(module)
    return module


pb2: Any = _load_pb2()
ModelConfig = pb2.ModelConfig


class ConfigPbtxtError(ValueError):
    """A config.pbtxt that does not parse or breaks a rule (one line)."""


_DEFAULT_FILES = {
    "pytorch_libtorch": "model.pt",
    "pytorch": "model.pt",
    "torch_aoti": "model.pt2",
    "onnxruntime_onnx": "model.onnx",
    "onnxruntime": "model.onnx",
    "tensorrt_plan": "model.plan",
    "tensorrt": "model.plan",
}


def parse(text: str | bytes, source: str = "config.pbtxt") -> Any:
    """Text -> ModelConfig; one-line ConfigPbtxtError naming the source and the parser's complaint."""
    if isinstance(text, bytes):
        try:
            text = text.decode()
        except UnicodeDecodeError:
            raise ConfigPbtxtError(f"{source}: not UTF-8 text; allowed: a protobuf text-format ModelConfig") from None
    cfg = ModelConfig()
    try:
        text_format.Parse(text, cfg)
    except text_format.ParseError as e:
        msg = " ".join(str(e).split())
        raise ConfigPbtxtError(
            f"{source}: does not parse ({msg}); allowed: a protobuf text-format ModelConfig"
        ) from None
    return cfg


def dumps(cfg: Any) -> str:
    return text_format.MessageToString(cfg)


def read_file(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigPbtxtError(f"{path}: cannot read ({e.strerror}); allowed: a readable config.pbtxt") from None
    return parse(data, path)


def write_file(path: str, cfg: Any) -> None:
    """Atomic: write a temp file beside it, then rename over (readers never see half a file)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".config.pbtxt.", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(dumps(cfg))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def pinned_version(cfg: Any) -> int | None:
    policy = cfg.version_policy
    if policy.WhichOneof("policy_choice") == "specific" and len(policy.specific.versions) == 1:
        return int(policy.specific.versions[0])
    return None


def pin(cfg: Any, version: int) -> Any:
    """A copy of cfg with version_policy { specific { versions: [version] } }."""
    layout.check_version(version)
    out = ModelConfig()
    out.CopyFrom(cfg)
    out.version_policy.Clear()
    out.version_policy.specific.versions.append(version)
    return out


def pinned_text(cfg: Any, version: int, name: str | None = None) -> str:
    """The exact text written to repository/<model>/config.pbtxt for version N."""
    out = pin(cfg, version)
    if name is not None:
        out.name = name
    return dumps(out)


def check_io_types(cfg: Any, example_dtypes: Any, source: str) -> None:
    """Every input's data_type against what the export says it is: export.json's `example_dtypes`
    (input i is INPUT__i) and each model_warmup sample's data for it. Triton refuses a warm-up of
    another type at load, and a model exported for float32 gets garbage as TYPE_STRING."""
    pb = _load_pb2()
    exported = list(example_dtypes) if isinstance(example_dtypes, list) else []
    for inp in cfg.input:
        declared = pb.DataType.Name(inp.data_type)
        says: dict[str, list[str]] = {}
        index = inp.name.removeprefix("INPUT__")
        if index.isdigit() and int(index) < len(exported) and exported[int(index)] in TRITON_DTYPES:
            dtype = exported[int(index)]
            says.setdefault(TRITON_DTYPES[dtype], []).append(f"export.json example_dtypes: {dtype}")
        for sample in cfg.model_warmup:
            if inp.name in sample.inputs:
                name = pb.DataType.Name(sample.inputs[inp.name].data_type)
                says.setdefault(name, []).append(f"model_warmup {sample.name}: {name}")
        for want, where in says.items():
            if want != declared:
                raise ConfigPbtxtError(
                    f"{source} input {inp.name}: data_type {declared}, but the export says {want} "
                    f"({'; '.join(where)}); allowed: data_type: {want}, what the model was exported with (or "
                    "export it again)"
                )


def check(cfg: Any, source: str, model_name: str | None = None) -> None:
    """Rules model_sync enforces beyond parsing."""
    if cfg.name and model_name is not None and cfg.name != model_name:
        raise ConfigPbtxtError(f"{source} name: {cfg.name!r}; allowed: {model_name!r} (the model directory / --name)")
    if cfg.name:
        try:
            layout.check_model_name(cfg.name)
        except layout.LayoutError as e:
            raise ConfigPbtxtError(f"{source}: {e}") from None
    if not cfg.backend and not cfg.platform:
        raise ConfigPbtxtError(
            f"{source}: neither backend nor platform set; "
            'allowed: e.g. backend: "python" or platform: "pytorch_libtorch"'
        )
    if cfg.max_batch_size < 0:
        raise ConfigPbtxtError(f"{source} max_batch_size: {cfg.max_batch_size}; allowed: >= 0")


def warmup_batch_sizes(cfg: Any) -> tuple[int, ...]:
    """The batch sizes `add_warmup` warms: 1, and the largest batch the scheduler forms (the
    largest preferred batch size under dynamic batching, else max_batch_size); (1,) when the
    model does not batch (max_batch_size 0: Triton requires batch_size 1 there)."""
    if cfg.max_batch_size <= 0:
        return (1,)
    preferred = list(cfg.dynamic_batching.preferred_batch_size) if cfg.HasField("dynamic_batching") else []
    largest = max(preferred) if preferred else cfg.max_batch_size
    return tuple(sorted({1, largest}))


def add_warmup(cfg: Any) -> Any:
    """Replace cfg.model_warmup with one sample per warmup_batch_sizes(), named `batch_<N>`, each
    with every input at its declared dims and data_type; returns cfg.

    Triton runs each sample once per instance before the model is READY (a failed sample fails the
    load), as `batch_size` requests of batch 1 (dims without the batch dimension), so the dynamic
    batcher / a python-backend model sees the same shape a full batch has.
    ref: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#model-warmup
    ref: https://github.com/triton-inference-server/common/blob/main/protobuf/model_config.proto (message ModelWarmup)
    Data: zero_data, not random_data. What warm-up pays for (CUDA context, cuDNN/oneDNN algorithm
    choice, allocator growth, TorchScript's profiling runs) depends on shapes and dtypes, not on
    values; and zeros are valid for any input (an index into an embedding, a mask, a length),
    where random integers can be out of range and fail the load."""
    for i in cfg.input:
        if any(d < 0 for d in i.dims):
            raise ConfigPbtxtError(f"input {i.name} dims: {list(i.dims)}; allowed: fixed dims for model_warmup (no -1)")
    del cfg.model_warmup[:]
    for batch in warmup_batch_sizes(cfg):
        sample = cfg.model_warmup.add()
        sample.name = f"batch_{batch}"
        sample.batch_size = batch
        for i in cfg.input:
            data = sample.inputs[i.name]
            data.data_type = i.data_type
            data.dims.extend(i.dims)
            data.zero_data = True
    return cfg


def required_files(cfg: Any) -> tuple[str, ...]:
    """Files a version directory must contain for its backend to load (see module docstring)."""
    if cfg.backend == "python":
        return ("model.py",)
    key = cfg.platform or cfg.backend
    if key in _DEFAULT_FILES:
        return (cfg.default_model_filename or _DEFAULT_FILES[key],)
    return (cfg.default_model_filename,) if cfg.default_model_filename else ()
