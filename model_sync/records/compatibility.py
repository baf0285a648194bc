"""The compatibility record: whether one version loads in one environment's Triton, as the manifest
(`compatibility`, v2 and later) and the promotion record carry it. Its one writer (`record`) and its
strict reader (`read`), both held to the schema (model_sync.records.schemas.COMPATIBILITY); the verdict
is an enum (`Result`). The rules that decide it are model_sync/admission/alignment.py's:

    {"triton_image": "nvcr.io/nvidia/tritonserver:25.10-py3" | null,   # the target's image
     "libtorch_version": "2.9.0a0" | null,     # the image's PyTorch, where the rules compared with it
     "result": "compatible" | "exempt" | "skew-allowed",
     "detail": "why (the skew / exemption message)" | null}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model_sync.records import codec
from model_sync.records.schemas import COMPATIBILITY
from model_sync.records.schemas import CompatibilityResult as Result

__all__ = ["Result", "read", "record"]


def record(image: str | None, libtorch_version: str | None, result: Result, detail: str | None) -> dict[str, Any]:
    """The compatibility record of one version for one target image (validated: a RecordError names
    the field)."""
    doc = {"triton_image": image, "libtorch_version": libtorch_version, "result": result.value, "detail": detail}
    return dict(codec.validate_part(doc, COMPATIBILITY, "compatibility"))


def read(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A compatibility record as a manifest or a promotion record carries it, read strictly."""
    return dict(codec.validate_part(dict(doc), COMPATIBILITY, "compatibility"))
