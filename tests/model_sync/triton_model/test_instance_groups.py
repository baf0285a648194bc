"""model_sync/triton_model/instance_groups.py: the instance groups of a parsed config.pbtxt as Triton
places them (kind, count, GPUs), what the manifest records and the GPU plan counts."""

from __future__ import annotations

import pytest

from model_sync.triton_model import instance_groups, model_config


def _group(kind: str = "KIND_GPU", count: int = 1, gpus: tuple[int, ...] = ()) -> dict:
    return {"kind": kind, "count": count, "gpus": list(gpus)}


@pytest.mark.parametrize(
    ("text", "groups"),
    [
        ("", [_group("KIND_AUTO")]),  # Triton's default: one instance per GPU
        ("instance_group [{kind: KIND_GPU, count: 4}]", [_group(count=4)]),
        ("instance_group [{kind: KIND_GPU}]", [_group()]),  # count unset is 1
        (
            "instance_group [{kind: KIND_GPU, count: 2, gpus: [0, 1]}, {kind: KIND_CPU, count: 3}]",
            [_group(count=2, gpus=(0, 1)), _group("KIND_CPU", 3)],
        ),
        ("instance_group [{kind: KIND_MODEL, count: 1}]", [_group("KIND_MODEL")]),
    ],
)
def test_instance_groups_as_triton_places_them(text: str, groups: list[dict]) -> None:
    cfg = model_config.parse(f'name: "m"\nbackend: "python"\n{text}\n')
    assert instance_groups.of(cfg) == groups
