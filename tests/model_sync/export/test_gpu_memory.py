"""model_sync/export/gpu_memory.py: what `export` records in export.json as one instance's GPU memory,
estimated here (no GPU: parameters + buffers + inputs and outputs at the largest batch, asserted
against the real tensors of the module), `cpu` for KIND_CPU, measured where torch sees a GPU. Its
strict reading by `push` is in tests/model_sync/records/test_version_manifest.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model_sync.export import gpu_memory
from tests.model_sync.helpers import export_model, gpu_factories


@pytest.fixture
def out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    gpu_factories(tmp_path / "src", monkeypatch)
    return tmp_path / "out"


def _eager_weight_bytes(factory: str) -> int:
    import gpufactories  # type: ignore[import-not-found]  # written by gpu_factories

    module = getattr(gpufactories, factory)()
    return sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))


def _record(model: Path) -> dict:
    return json.loads((model / "export.json").read_text())["gpu_memory"]


def test_export_estimates_without_a_gpu_from_the_real_tensors(out, capsys) -> None:
    weights = _eager_weight_bytes("narrow")
    assert weights == (16 * 8 + 8) * 4 + 2 * 8 * 4 + 2 * 8 * 4 + 8  # fc, bn affine, running stats, batches tracked
    io = 8 * 16 * 4 + 8 * 8 * 4  # input and output at batch 8, the max_batch_size (the example has 2)
    assert _record(export_model(capsys, out, "narrow", "narrow", "--max-batch-size", "8")) == {
        "bytes_per_instance": weights + io,
        "method": "estimated",
        "batch": 8,
        "device": None,
        "basis": f"estimated without a GPU: parameters and buffers ({weights} bytes) + inputs and outputs at batch 8 "
        f"({io} bytes); intermediate activations and the CUDA context are not counted",
    }
    wide = _record(export_model(capsys, out, "wide", "wide", "--max-batch-size", "32", "--instance-kind", "KIND_AUTO"))
    assert wide["bytes_per_instance"] == _eager_weight_bytes("wide") + 32 * 16 * 4 + 32 * 32 * 4
    assert (wide["method"], wide["batch"]) == ("estimated", 32)


def test_a_model_that_does_not_batch_is_estimated_at_its_example_shape(out, capsys) -> None:
    model = export_model(capsys, out, "flat", "narrow", "--max-batch-size", "0", shape="3,16")
    record = _record(model)
    assert record["bytes_per_instance"] == _eager_weight_bytes("narrow") + 3 * 16 * 4 + 3 * 8 * 4
    assert (record["method"], record["batch"]) == ("estimated", 1)
    assert "at the example's own shape (max_batch_size 0)" in record["basis"]


def test_a_cpu_instance_needs_no_gpu_memory(out, capsys) -> None:
    assert _record(export_model(capsys, out, "local", "narrow", "--target", "local")) == {  # local: KIND_CPU
        "bytes_per_instance": 0,
        "method": "cpu",
        "batch": 8,
        "device": None,
        "basis": "KIND_CPU: its instances use no GPU memory",
    }


def test_tied_weights_are_counted_once() -> None:
    import torch

    tied = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False), torch.nn.Linear(4, 4, bias=False))
    tied[1].weight = tied[0].weight
    assert gpu_memory.parameter_bytes(tied) == 4 * 4 * 4
    assert gpu_memory.parameter_bytes(torch.nn.Linear(4, 4)) == (16 + 4) * 4


@pytest.mark.skipif(
    "not __import__('torch').cuda.is_available()",
    reason="the measured path needs CUDA, which this CPU machine lacks; it ran on the H200 "
    "(export_meta.gpu_memory in bench/results/serving-latency.json)",
)
def test_export_measures_the_allocators_peak_on_a_gpu(tmp_path, capsys, monkeypatch) -> None:
    import torch

    gpu_factories(tmp_path / "src", monkeypatch, cuda=True)
    record = _record(export_model(capsys, tmp_path / "out", "wide", "wide", "--max-batch-size", "64"))
    assert (record["method"], record["batch"], record["device"]) == ("measured", 64, torch.cuda.get_device_name())
    # max_memory_reserved holds at least the weights, the batch and its output; the allocator reserves in blocks
    assert record["bytes_per_instance"] >= _eager_weight_bytes("wide") + 64 * 16 * 4 + 64 * 32 * 4
    assert record["basis"].startswith("torch.cuda.max_memory_reserved() over one inference at batch 64 on ")
