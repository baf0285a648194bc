"""The instance groups of a model's config.pbtxt as Triton places them: what the manifest records as
`instance_groups`, and what GPU memory planning (model_sync/admission/gpu_plan.py) counts per GPU."""

from __future__ import annotations

from typing import Any


def of(cfg: Any) -> list[dict[str, Any]]:
    """The instance groups of a ModelConfig: kind, count (0, unset, is 1) and the GPUs listed ([]:
    every GPU); a config without any group gets Triton's default, one KIND_AUTO instance per GPU."""
    groups = [{"kind": g.Kind.Name(g.kind), "count": g.count or 1, "gpus": list(g.gpus)} for g in cfg.instance_group]
    return groups or [{"kind": "KIND_AUTO", "count": 1, "gpus": []}]
