"""Every benchmark entry point answers --help with its usage and does nothing else (no build, no
server, no result file written)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = [
    "bench.serving.bundle",
    "bench.serving.report",
    "bench.serving.run",
    "bench.serving.loadgen",
    "bench.serving.raw",
    "bench.serving.cuda_context",
    "bench.serving.baseline_server",
    "bench.serving.pytorch_backend",
    "bench.serving.aoti_package",
    "bench.serving.memory",
    "bench.consolidation.run",
    "bench.consolidation.profile",
    "bench.consolidation.plan_check",
    "bench.agent.p1_switch",
    "bench.agent.p2_requests",
    "bench.agent.ready_many",
    "bench.transfer.run",
    "bench.warmup.run",
    "bench.canary.run",
    "bench.s3.race",
]


def _snapshot() -> dict[str, float]:
    watched = [
        *(ROOT / "bench" / "results").glob("*"),
        ROOT / "docs" / "gpu-benchmark.md",
        ROOT / "docs" / "model-sync.md",
    ]
    dist = ROOT / "bench" / "serving" / ".dist"
    if dist.exists():
        watched += [p for p in dist.rglob("*") if p.is_file()]
    return {str(p): p.stat().st_mtime_ns for p in watched}


def test_every_python_entry_point_is_listed() -> None:
    mains = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "bench").rglob("*.py")
        if 'if __name__ == "__main__":' in p.read_text()
    }
    assert mains == set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_help_prints_usage_and_does_nothing(module: str) -> None:
    before = _snapshot()
    proc = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: python -m {module} [-h]")
    assert "options:" in proc.stdout
    assert proc.stderr == ""
    assert _snapshot() == before


def test_device_script_help() -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "bench" / "serving" / "device.sh"), "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={"PATH": "/usr/bin:/bin", "OUT": "/nonexistent/out"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "bench.serving.bundle" in proc.stdout
    assert "bench.serving.run" in proc.stdout
    assert not Path("/nonexistent/out").exists()
