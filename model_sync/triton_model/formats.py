"""The export formats (`model-sync export --format`) and, for each, the Triton platform whose backend
loads it under `--target cloud` and the file that backend loads. Export writes by this table,
alignment checks by it, the manifest's schema and the demo accept its names."""

from __future__ import annotations

from model_sync.contract.compat import LIBTORCH_PLATFORM

FORMATS = ("torchscript", "pt2", "onnx")
AOTI_PLATFORM = "torch_aoti"  # PyTorch backend, 26.03 and later (compat.TRITON_RELEASES)
ONNX_PLATFORM = "onnxruntime_onnx"
# ref: https://github.com/triton-inference-server/pytorch_backend (pytorch_libtorch; torch_aoti since 26.03)
# ref: https://github.com/triton-inference-server/onnxruntime_backend
PLATFORMS = {"torchscript": LIBTORCH_PLATFORM, "pt2": AOTI_PLATFORM, "onnx": ONNX_PLATFORM}
# A platform's format, Triton's short ONNX Runtime name included (a version recorded no format).
FORMAT_OF_PLATFORM = {platform: fmt for fmt, platform in PLATFORMS.items()} | {"onnxruntime": "onnx"}
MODEL_FILES = {"torchscript": "model.pt", "pt2": "model.pt2", "onnx": "model.onnx"}
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
