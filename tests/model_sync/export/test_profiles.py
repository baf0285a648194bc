"""`export --profile`: each preset is the configuration the serving benchmark measured (its figures
equal bench/results/*.json), --target cloud defaults to gpu-throughput, explicit flags win, and the
help names where each preset comes from."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from model_sync.export import profiles
from model_sync.triton_model import model_config
from tests.model_sync.helpers import run_cli

RESULTS = Path(__file__).resolve().parents[3] / "bench" / "results"
FACTORY = textwrap.dedent(
    """
    import torch

    def lin():
        torch.manual_seed(0)
        return torch.nn.Linear(4, 2)
    """
)


@pytest.mark.parametrize("name", sorted(profiles.PROFILES))
def test_every_preset_is_a_measured_point_of_its_results_file(name: str) -> None:
    p = profiles.PROFILES[name]
    doc = json.loads((RESULTS / p.results).read_text())
    (entry,) = [t for t in doc["triton"] if t["name"] == p.variant and t.get("client", "").endswith("system shm")]
    v = entry["variant"]
    assert (v["instance_count"], tuple(v["preferred"]), v["max_queue_delay_us"], v["max_batch_size"]) == (
        p.instance_count,
        p.preferred_batch_sizes,
        p.max_queue_delay_us,
        p.max_batch_size,
    )
    assert f"--instance-kind {p.instance_kind}" in entry["export_command"]
    (point,) = [x for x in entry["points"] if x["concurrency"] == p.concurrency]
    assert (point["throughput"], point["p99_ms"]) == (p.throughput, p.p99_ms)
    assert doc["environment"]["gpu"] == p.device
    assert not doc["environment"].get("mps")  # measured without MPS, as a pod runs


def test_gpu_throughput_is_the_best_point_of_the_committed_sweep() -> None:
    summary = json.loads((RESULTS / "serving.json").read_text())["summary"]["best"]
    p = profiles.PROFILES["gpu-throughput"]
    assert (summary["variant"], summary["concurrency"], summary["throughput"]) == (
        p.variant,
        p.concurrency,
        p.throughput,
    )


@pytest.fixture
def factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "profilefactory.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "out"


def _export(capsys, out: Path, name: str, *flags: str, shape: str = "2,4") -> tuple[object, dict]:
    r = run_cli(capsys, "export", "profilefactory:lin", "--name", name, "--output", str(out),
                "--example-shape", shape, *flags)  # fmt: skip
    assert r.code == 0, r.err
    cfg = model_config.read_file(str(out / name / "config.pbtxt"))
    return cfg, json.loads((out / name / "export.json").read_text())


def _batching(cfg: object) -> tuple:
    g = cfg.instance_group[0]  # type: ignore[attr-defined]
    return (
        cfg.max_batch_size,  # type: ignore[attr-defined]
        list(cfg.dynamic_batching.preferred_batch_size),  # type: ignore[attr-defined]
        cfg.dynamic_batching.max_queue_delay_microseconds,  # type: ignore[attr-defined]
        model_config.pb2.ModelInstanceGroup.Kind.Name(g.kind),
        g.count,
    )


def test_cloud_defaults_to_gpu_throughput_and_local_keeps_its_defaults(factory: Path, capsys) -> None:
    cfg, meta = _export(capsys, factory, "cloud")
    assert _batching(cfg) == (32, [16], 1000, "KIND_GPU", 12)
    assert meta["profile"] == "gpu-throughput"
    cfg, meta = _export(capsys, factory, "local", "--target", "local")
    assert _batching(cfg) == (8, [], 100, "KIND_CPU", 1)
    assert meta["profile"] is None


def test_a_profile_sets_defaults_and_explicit_flags_win(factory: Path, capsys) -> None:
    cfg, meta = _export(capsys, factory, "lat", "--profile", "gpu-latency", "--target", "local")
    assert _batching(cfg) == (8, [4, 8], 100, "KIND_GPU", 4)
    assert meta["profile"] == "gpu-latency"
    cfg, _ = _export(capsys, factory, "mine", "--profile", "gpu-throughput", "--instance-count", "2",
                     "--max-batch-size", "8")  # fmt: skip
    assert _batching(cfg) == (8, [], 1000, "KIND_GPU", 2)  # preferred 16 does not fit max batch 8: dropped
    cfg, _ = _export(capsys, factory, "nobatch", "--max-batch-size", "0", shape="4")
    assert (cfg.max_batch_size, cfg.HasField("dynamic_batching")) == (0, False)


def test_an_unknown_profile_is_a_usage_error(factory: Path, capsys) -> None:
    r = run_cli(capsys, "export", "profilefactory:lin", "--name", "x", "--output", str(factory),
                "--example-shape", "2,4", "--profile", "cpu")  # fmt: skip
    assert r.code == 2
    assert "invalid choice: 'cpu'" in r.err


def test_the_help_says_where_each_preset_comes_from(capsys) -> None:
    r = run_cli(capsys, "export", "--help")
    for p in profiles.PROFILES.values():
        assert p.measured() in " ".join(r.out.split()) or p.measured() in r.out
    assert "bench/results/serving.json" in r.out
