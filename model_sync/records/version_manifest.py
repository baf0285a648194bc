"""The manifest `push` writes for a version (manifests/<model>/<N>.json, schema
manifest.MANIFEST_V4): every file's sha256 and size (`file_entries`, also what the no-op decision
compares with the pinned manifest), the pinned config text, source, exporter, compatibility with
the target image, export.json's GPU memory per instance (read strictly: `read_gpu_memory`) and the
config's instance groups (GPU memory planning, model_sync/admission/gpu_plan.py), who and when
(`build_manifest`, validated before it is returned)."""

from __future__ import annotations

import os
import socket
from typing import Any

from model_sync import __version__, errors
from model_sync.records import codec
from model_sync.records.schemas import GPU_MEMORY
from model_sync.triton_model import instance_groups
from model_sync.triton_model.model_directory import EXPORT_META, LocalModel


def file_entries(m: LocalModel) -> dict[str, dict[str, Any]]:
    assert m.hashes is not None
    return {rel: {"sha256": m.hashes[rel], "size": f.size} for rel, f in sorted(m.files.items())}


def read_gpu_memory(value: Any, where: str) -> dict[str, Any] | None:
    """export.json's `gpu_memory` (None when absent: a directory export did not write), strictly:
    a bad one is a usage error (exit 2) naming the file and the field, before any S3 request."""
    if value is None:
        return None
    try:
        codec.validate_part(value, GPU_MEMORY, "gpu_memory")
    except codec.RecordError as e:
        raise errors.usage(f"{where} {e}") from None
    if value["method"] == "cpu" and value["bytes_per_instance"] != 0:
        raise errors.usage(
            f"{where} gpu_memory.bytes_per_instance: {value['bytes_per_instance']} with method 'cpu'; allowed: 0"
        )
    if (value["method"] == "measured") != (value["device"] is not None):
        raise errors.usage(
            f"{where} gpu_memory.device: {value['device']!r} with method {value['method']!r}; allowed: the GPU's "
            "name for 'measured' only, null otherwise"
        )
    return dict(value)


def gpu_memory_of(m: LocalModel) -> dict[str, Any] | None:
    """export.json's `gpu_memory`, strictly (exit 2 naming the file); None when it has none."""
    return read_gpu_memory(m.export_meta.get("gpu_memory"), os.path.join(m.dir, EXPORT_META))


def build_manifest(m: LocalModel, version: int, by: str, compatibility: dict[str, Any]) -> dict[str, Any]:
    meta = m.export_meta
    doc = {
        "schema": codec.MANIFEST_V4,
        "model": m.name,
        "version": version,
        "files": file_entries(m),
        "config_pbtxt": m.pinned_text(version),
        "backend": m.backend,
        "platform": m.platform,
        "source": {
            "path": m.dir,
            "host": socket.gethostname(),
            "git_commit": os.environ.get("GITHUB_SHA") or meta.get("git_commit"),
            "promoted_from": None,
        },
        "exporter": {
            "tool": f"model-sync {__version__}",
            "method": meta.get("method"),
            "torch_version": meta.get("torch_version"),
            "torchscript_format_version": meta.get("torchscript_format_version"),
            "target": meta.get("target"),
            "operators": meta.get("operators"),
            "format": meta.get("format"),
            "device": meta.get("device"),
            "gpu_architectures": meta.get("gpu_architectures"),
            "onnx_opset": meta.get("onnx_opset"),
            "onnx_ir_version": meta.get("onnx_ir_version"),
        },
        "compatibility": compatibility,
        "gpu_memory": gpu_memory_of(m),
        "instance_groups": instance_groups.of(m.cfg),
        "created_by": by,
        "created_at": codec.now(),
    }
    codec.validate(doc, codec.MANIFEST_V4)
    return doc
