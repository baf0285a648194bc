"""The entry file the Pulumi CLI runs: started the way the CLI starts it (python, working
directory policy/), it must import the policies and the GPU contract from the repository
and serve the analyzer: pulumi_policy prints the gRPC port on stdout, then blocks."""

from __future__ import annotations

import select
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_entry_file_starts_the_analyzer_from_the_policy_directory() -> None:
    proc = subprocess.Popen(
        [sys.executable, "__main__.py"], cwd=ROOT / "policy", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "policy pack printed no port within 60 s"
        line = proc.stdout.readline().strip()
        if not line:
            proc.wait(timeout=10)
            raise AssertionError(
                f"policy pack exited {proc.returncode} without serving: {proc.stderr.read() if proc.stderr else ''}"
            )
        assert line.isdigit(), line
        assert 0 < int(line) < 65536
        assert proc.poll() is None  # still serving
    finally:
        proc.kill()
        proc.wait(timeout=10)
