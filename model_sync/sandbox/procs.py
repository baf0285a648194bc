"""Process supervision for the local environment: free loopback ports, child processes
with their own log file and process group, stopped with SIGTERM then SIGKILL.

Every helper here touches only processes it started (by pid / process group id).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

LOOPBACK = "127.0.0.1"


# Every port free_port() handed out in this process, with the socket that holds it: bound
# (SO_REUSEADDR), never listening, until this process exits.
_RESERVED: dict[int, socket.socket] = {}


class ProcessExited(RuntimeError):
    """A supervised process ended while something waited on it: wait_until raises it at once."""


def free_port() -> int:
    """A TCP port on 127.0.0.1, reserved for a server this process starts.

    The port stays bound by a socket of this process (SO_REUSEADDR, never listening) until the
    process exits. No other process's bind(0) can pick it, nor can an outgoing connection use it as
    its source port (the kernel skips ports that bind() holds). The tests run in several processes
    at once: a port picked and then closed can be picked again by another of them before
    tritonserver binds it, and tritonserver then exits at start ("already in use", measured).

    The server binds the port over the reservation. tritonserver's HTTP, gRPC and metrics
    endpoints, rclone, moto and the agent's metrics endpoint all set SO_REUSEADDR. A client that
    connects to a reserved port that nothing serves is refused, as it would be on a free port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, 0))
    port = int(sock.getsockname()[1])
    _RESERVED[port] = sock
    return port


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.2, what: str = "condition") -> None:
    """Poll `predicate` until it returns True; TimeoutError naming `what` after `timeout` seconds.
    Any error of the predicate counts as "not yet", except ProcessExited: that is raised at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except ProcessExited:
            raise
        except Exception:  # noqa: S110 - a predicate's error means "not yet" (e.g. a refused connection)
            pass
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def http_status(url: str, timeout: float = 2.0, method: str = "GET") -> int:
    """HTTP status of `url` (loopback only), 0 when nothing answers."""
    req = urllib.request.Request(url, method=method)  # noqa: S310 - URLs are built from our own loopback ports
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except (OSError, ValueError):
        return 0


class Process:
    """One supervised child process: own session (process group), stdout+stderr to `log_path`."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        if self.running:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen else None

    def require_running(self) -> None:
        """ProcessExited naming this process, its exit code and the end of its log, if it has ended."""
        if not self.running:
            raise ProcessExited(f"{self.name} exited {self.returncode}: {self.log_tail()}")

    def signal(self, sig: int) -> None:
        """Send `sig` to this child's process group (the child and what it spawned, e.g. python stubs)."""
        if self.running and self.popen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, wait up to `timeout` seconds, then SIGKILL. Returns the exit code."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.popen.wait(timeout=10)
        # Reap anything left in the group (e.g. a python backend stub orphaned by a killed server).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        return self.popen.returncode

    def kill(self) -> None:
        """SIGKILL the group immediately (crash simulation)."""
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait(timeout=10)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
