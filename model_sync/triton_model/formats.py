"""The export formats (`model-sync export --format`), one row each in FORMAT_TABLE: the Triton platform
whose backend loads it under `--target cloud`, the file that backend loads, and what `export` needs to
write and check it. Export writes by this table (its module: model_sync/export/<name>.py, which
`exporter` loads by the row's name), alignment checks by it, export.json's reader, the manifest's schema
and the demo accept its names. A new format is its module plus one row here (and its alignment rule:
model_sync/admission/alignment.py, held to this table by its tests)."""

from __future__ import annotations

from dataclasses import dataclass

from model_sync.contract.compat import LIBTORCH_PLATFORM


@dataclass(frozen=True)
class Format:
    """One export format. Its module (model_sync/export/<name>.py) has `export(opts, model, inputs,
    version_dir) -> Artefact` and `facts(meta) -> str` (what `export` prints of export.json)."""

    name: str  # --format NAME; the module model_sync/export/<name>.py
    platform: str  # the Triton platform of `--target cloud`
    model_file: str  # the file in <version>/ that platform's backend loads
    label: str  # how export's checks name the re-loaded model
    hint: str  # what to try when the re-loaded model fails where eager did not
    tolerances: tuple[float, float]  # --rtol, --atol defaults against eager
    wrapper: str  # the python-backend model.py `--target local` copies: model_sync/export/<wrapper>.py
    method: str | None  # the capture export.json records; None: --method's (trace or script)


AOTI_PLATFORM = "torch_aoti"  # PyTorch backend, 26.03 and later (compat.TRITON_RELEASES)
ONNX_PLATFORM = "onnxruntime_onnx"
# ref: https://github.com/triton-inference-server/pytorch_backend (pytorch_libtorch; torch_aoti since 26.03)
# ref: https://github.com/triton-inference-server/onnxruntime_backend
# Tolerances: TorchScript runs eager's own kernels; AOTInductor's generated kernels and ONNX Runtime's
# reorder floating-point sums (fused matmul/add, other reduction orders), so their results differ in
# the last bits.
FORMAT_TABLE: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "torchscript", LIBTORCH_PLATFORM, "model.pt", "TorchScript",
            "shapes not baked in by tracing (try --method script)", (1e-5, 1e-6), "torch_python_backend", None,
        ),
        Format(
            "pt2", AOTI_PLATFORM, "model.pt2", "AOTInductor (.pt2)",
            "a model torch.export captures with a dynamic batch dimension (no data-dependent Python branches)",
            (1e-4, 1e-5), "torch_python_backend", "export",
        ),
        Format(
            "onnx", ONNX_PLATFORM, "model.onnx", "ONNX Runtime",
            "a model the dynamo exporter captures with a dynamic batch dimension (or --format torchscript)",
            (1e-4, 1e-5), "onnx_python_backend", "export",
        ),
    )
}  # fmt: skip
FORMATS = tuple(FORMAT_TABLE)  # the first is export's default
PLATFORMS = {f.name: f.platform for f in FORMAT_TABLE.values()}
# A platform's format, Triton's short ONNX Runtime name included (a version recorded no format).
FORMAT_OF_PLATFORM = {platform: fmt for fmt, platform in PLATFORMS.items()} | {"onnxruntime": "onnx"}
MODEL_FILES = {f.name: f.model_file for f in FORMAT_TABLE.values()}


def allowed() -> str:
    """The format names as an error's `allowed:` says them: `'torchscript', 'pt2' or 'onnx'`."""
    return ", ".join(map(repr, FORMATS[:-1])) + f" or {FORMATS[-1]!r}"


# torch dtype (its name without `torch.`) -> Triton's config data_type: what export declares each
# input and output as, and what push holds a config.pbtxt's inputs to (model_config.check_io_types).
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
