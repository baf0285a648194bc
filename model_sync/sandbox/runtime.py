"""The real tritonserver for the local environment, taken from the `nvidia-pytriton` wheel.

`ensure_tritonserver()` downloads the pinned wheel once with pip (`pip download --no-deps`
into .cache/wheels), checks its sha256 against the pin below, extracts it once into
.cache/tritonserver-<version>/ (atomic rename, safe with parallel test workers), marks the
binaries executable and copies the python backend stub for this interpreter into
backends/python/ (its RPATH finds the bundled libraries from there too).

`TritonServer` runs it on CPU over a LOCAL repository directory in poll mode, bound to
127.0.0.1 only. The python backend stub runs the `python3` first on PATH: we put this
virtualenv's bin first so the stub gets numpy<2 (and torch for TorchScript wrappers).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from model_sync.records.codec import sha256_file
from model_sync.sandbox.procs import LOOPBACK, Process, free_port, http_status, wait_until

PYTRITON_VERSION = "0.7.0"  # bundles tritonserver 2.51.0
PYTRITON_WHEEL = f"nvidia_pytriton-{PYTRITON_VERSION}-py3-none-manylinux_2_35_x86_64.whl"
# sha256 of the wheel on PyPI (https://pypi.org/project/nvidia-pytriton/0.7.0/#files), checked before extraction.
PYTRITON_SHA256 = "21f063ff93bb426d0c06b7a55e7eb9efcfe62c0dddd9a908e9877e18710128df"
TRITONSERVER_VERSION = "2.51.0"

DEFAULT_CACHE = Path(__file__).resolve().parents[2] / ".cache"


class LocalRuntimeError(Exception):
    """The local tritonserver runtime could not be fetched or verified (one line)."""


def fetch_wheel(cache: Path = DEFAULT_CACHE) -> Path:
    """The pinned wheel in cache/wheels, downloaded with pip if absent; sha256 verified."""
    wheels = cache / "wheels"
    wheel = wheels / PYTRITON_WHEEL
    if not wheel.exists():
        wheels.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--quiet",
            "-d",
            str(wheels),
            f"nvidia-pytriton=={PYTRITON_VERSION}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not wheel.exists():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise LocalRuntimeError(
                f"nvidia-pytriton=={PYTRITON_VERSION}: pip download failed ({last}); allowed: a reachable PyPI "
                f"index or the wheel placed in {wheels}"
            )
    digest = sha256_file(str(wheel))
    if digest != PYTRITON_SHA256:
        raise LocalRuntimeError(
            f"{wheel}: sha256 {digest}; allowed: {PYTRITON_SHA256} (the pinned "
            f"nvidia-pytriton=={PYTRITON_VERSION}); delete the file to re-download"
        )
    return wheel


@dataclass(frozen=True)
class TritonRuntime:
    """An extracted tritonserver: the binary, its backends directory."""

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "pytriton" / "tritonserver" / "bin" / "tritonserver"

    @property
    def backends(self) -> Path:
        return self.root / "pytriton" / "tritonserver" / "backends"


def ensure_tritonserver(cache: Path = DEFAULT_CACHE) -> TritonRuntime:
    """Fetch (once), verify and extract (once) the pinned tritonserver; returns where it is."""
    pyver = f"{sys.version_info.major}.{sys.version_info.minor}"
    target = cache / f"tritonserver-{TRITONSERVER_VERSION}-py{pyver}"
    marker = target / ".complete"
    if marker.exists() and marker.read_text().strip() == PYTRITON_SHA256:
        return TritonRuntime(target)
    wheel = fetch_wheel(cache)
    tmp = Path(tempfile.mkdtemp(prefix=".tritonserver-", dir=cache))
    try:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp)
        rt = TritonRuntime(tmp)
        stub_src = tmp / "pytriton" / "tritonserver" / "python_backend_stubs" / pyver / "triton_python_backend_stub"
        if not stub_src.exists():
            raise LocalRuntimeError(
                f"python {pyver}: no python backend stub in nvidia-pytriton=={PYTRITON_VERSION}; allowed: the "
                "Python versions under python_backend_stubs/"
            )
        stub = rt.backends / "python" / "triton_python_backend_stub"
        shutil.copy2(stub_src, stub)
        for exe in (rt.binary, stub):
            exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        (tmp / ".complete").write_text(PYTRITON_SHA256 + "\n")
        try:
            os.rename(tmp, target)
        except OSError:
            if not marker.exists():  # a concurrent extraction won only if it completed
                shutil.rmtree(target, ignore_errors=True)
                os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return TritonRuntime(target)


def stub_environment(base: dict[str, str] | None = None, python: str = sys.executable) -> dict[str, str]:
    """Environment for tritonserver: `python`'s bin first on PATH (by default this venv's). The stub
    takes the site-packages of the first python3 on PATH, and its pybind11 (2.10 in 2.51) knows
    numpy 1.x's array layout only: under numpy 2 every tensor it builds from an array has 0 bytes
    (outputs lost, inputs read wrong), so that python3 must have numpy<2."""
    env = dict(os.environ if base is None else base)
    env["PATH"] = f"{Path(python).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    # The stub's embedded interpreter runs isolated (sys.flags.ignore_environment == 1, measured on
    # 2.51), so no PYTHON* variable reaches it: a version keeps its __pycache__ out of Triton's
    # poller only by having it written first (agent.pod_disk.precompile_python).
    return env


# How long a local tritonserver drains on SIGTERM (--exit-timeout-secs): its in-flight requests (the
# local models answer in milliseconds, 250 ms at the slowest), then its models' unload. A python model
# that raised under concurrent requests is never unloaded by Triton 2.51, so its server waited out the
# whole timeout at every stop (measured: 10.7 s at 10 against 2.9 s for a model that never raised;
# a third of the monitoring e2e module's wall time). The cloud's is derived from the pod's grace period
# (components/triton_deployment.py, exit_timeout_seconds).
LOCAL_EXIT_TIMEOUT_S = 3


@dataclass
class TritonServer:
    """tritonserver (CPU) polling a local repository directory; HTTP/gRPC/metrics on 127.0.0.1."""

    repository: Path
    log_path: Path
    runtime: TritonRuntime | None = None
    poll_secs: int = 1
    http_port: int = 0
    grpc_port: int = 0
    metrics_port: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)
    stub_python: str = sys.executable  # the python3 (numpy<2) whose site-packages the stub uses
    process: Process | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.http_port = self.http_port or free_port()
        self.grpc_port = self.grpc_port or free_port()
        self.metrics_port = self.metrics_port or free_port()

    @property
    def http_url(self) -> str:
        return f"http://{LOOPBACK}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{LOOPBACK}:{self.grpc_port}"

    def argv(self) -> list[str]:
        rt = self.runtime or ensure_tritonserver()
        return [
            str(rt.binary),
            f"--model-repository={self.repository}",
            f"--backend-directory={rt.backends}",
            # The agent owns the repository: Triton only polls the LOCAL directory the agent fills with
            # atomic renames. ref:
            # https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_management.md#model-control-mode-poll
            "--model-control-mode=poll",
            f"--repository-poll-secs={self.poll_secs}",
            # Configs are complete and validated by export; never let Triton guess.
            "--disable-auto-complete-config",
            # Start even when a model fails to load: one bad model must not take the replica down.
            "--exit-on-error=false",
            f"--http-address={LOOPBACK}",
            f"--http-port={self.http_port}",
            f"--grpc-address={LOOPBACK}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-address={LOOPBACK}",
            f"--metrics-port={self.metrics_port}",
            # The cloud Deployment's metrics flags (components/triton_deployment.py triton_args), so
            # local tests see the series prod exports (p50-p99.9 latency summaries included).
            "--allow-metrics=true",
            "--metrics-config=summary_latencies=true",
            f"--exit-timeout-secs={LOCAL_EXIT_TIMEOUT_S}",
        ]

    def start(self, timeout: float = 90.0) -> TritonServer:
        self.repository.mkdir(parents=True, exist_ok=True)
        env = stub_environment(python=self.stub_python)
        env.update(self.extra_env)
        self.process = Process("tritonserver", self.argv(), self.log_path, env=env).start()
        wait_until(self._live, timeout, what=f"tritonserver live on {self.http_url} (log {self.log_path})")
        return self

    def _live(self) -> bool:
        """HTTP live and the metrics endpoint answering: Triton starts its metrics service after the
        HTTP one (~40 ms later, measured), and a caller reading /metrics at once was refused."""
        if self.process is not None:
            self.process.require_running()
        return (
            http_status(self.http_url + "/v2/health/live") == 200
            and http_status(f"http://{LOOPBACK}:{self.metrics_port}/metrics") == 200
        )

    def version_ready(self, model: str, version: int) -> bool:
        return http_status(f"{self.http_url}/v2/models/{model}/versions/{version}/ready") == 200

    def wait_version_ready(self, model: str, version: int, timeout: float = 90.0) -> None:
        wait_until(
            lambda: self.version_ready(model, version),
            timeout,
            what=f"{model} version {version} READY on {self.http_url}",
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(timeout=20)
