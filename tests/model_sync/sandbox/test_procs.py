"""model_sync/sandbox/procs.py on real processes: a port free_port() hands out stays this process's
until it exits, so a test process beside it cannot pick it too; a server that exits while something
waits on it fails that wait at once, with its log, instead of after the whole timeout."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model_sync.sandbox.procs import LOOPBACK, ProcessExited, free_port
from model_sync.sandbox.runtime import TritonRuntime, TritonServer
from tests.support.triton import triton_runtime as triton_runtime_fixture

triton_runtime = triton_runtime_fixture

pytestmark = pytest.mark.timeout(120)

# Another process asking the kernel for ports, as a second test process does: bind(0), then close.
_PICKER = """
import json, socket
seen = set()
for _ in range(20000):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        seen.add(s.getsockname()[1])
print(json.dumps(sorted(seen)))
"""


def _picked_by_another_process() -> set[int]:
    out = subprocess.run([sys.executable, "-c", _PICKER], capture_output=True, text=True, check=True, timeout=60)
    return set(json.loads(out.stdout))


def _picked_and_closed() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def test_a_port_handed_out_is_never_picked_by_another_process_while_this_one_lives() -> None:
    """Protects the tests run side by side (pytest-xdist): a port picked and closed was picked again
    by the other test process before tritonserver bound it, and that tritonserver exited."""
    reserved = {free_port() for _ in range(200)}
    closed = {_picked_and_closed() for _ in range(200)} - reserved
    picked = _picked_by_another_process()
    assert closed & picked, "the other process's picks did not reach the ports closed here: the check proves nothing"
    assert not reserved & picked


def test_a_server_binds_its_reserved_ports_and_serves(tmp_path: Path, triton_runtime: TritonRuntime) -> None:
    """Protects every local tritonserver: it binds HTTP, gRPC and metrics over the reservations."""
    server = TritonServer(tmp_path / "models", tmp_path / "triton.log", runtime=triton_runtime)
    try:
        server.start(timeout=60)
        assert server._live()
    finally:
        server.stop()


def test_a_server_that_exits_at_start_fails_its_wait_at_once_with_its_log(
    tmp_path: Path, triton_runtime: TritonRuntime
) -> None:
    """Protects the test run's time and its failure message: a tritonserver whose port is taken
    exits in about a second, and the wait for it to be live said only "timed out after 90s"."""
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        server = TritonServer(tmp_path / "models", tmp_path / "triton.log", runtime=triton_runtime, http_port=port)
        started = time.monotonic()
        try:
            with pytest.raises(
                ProcessExited, match=rf"tritonserver exited 1: (.|\n)*'127.0.0.1:{port}' already in use"
            ):
                server.start(timeout=60)
        finally:
            server.stop()
    assert time.monotonic() - started < 30
