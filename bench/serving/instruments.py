"""What the serving benchmark reads beside its clients' own figures: GPU utilisation and memory
(`GpuSampler`), the CPU of the server's process session (`session_cpu_seconds`) and Triton's
/metrics text (`metrics_text`); and its log line (`log`) and one-shot shell reads (`sh`)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import urllib.request
from typing import Any

from model_sync.sandbox.procs import LOOPBACK


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd: list[str], timeout: float = 30) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({type(e).__name__})"


def process_gpu_bytes(pid: int | None) -> int:
    """GPU 0's memory NVML attributes to process `pid` (0 where it attributes none to it: some
    virtualised drivers do not), or with pid None the device's memory in use."""
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    if pid is None:
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
        if proc.pid == pid and proc.usedGpuMemory is not None:
            return int(proc.usedGpuMemory)
    return 0


class GpuSampler:
    """GPU utilisation (%) sampled every `interval` s through NVML (nvidia-ml-py) or nvidia-smi, and
    the device's peak memory in use (MiB, NVML only)."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self.memory_mib: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = (pynvml, pynvml.nvmlDeviceGetHandleByIndex(0))
        except Exception:
            self._nvml = None

    def _read(self) -> float | None:
        if self._nvml is not None:
            mod, handle = self._nvml
            self.memory_mib.append(mod.nvmlDeviceGetMemoryInfo(handle).used / (1024 * 1024))
            return float(mod.nvmlDeviceGetUtilizationRates(handle).gpu)
        out = sh(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"], timeout=5)
        try:
            return float(out.splitlines()[0])
        except (ValueError, IndexError):
            return None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            v = self._read()
            if v is not None:
                self.samples.append(v)

    def __enter__(self) -> GpuSampler:
        self.samples = []
        self.memory_mib = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None

    @property
    def peak_memory_mib(self) -> float | None:
        return round(max(self.memory_mib), 1) if self.memory_mib else None


def session_cpu_seconds(sid: int) -> float:
    """user+system CPU seconds of every live process in session `sid` (tritonserver + its python stubs)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # fields after "pid (comm)": state ppid pgrp session ...
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=10) as r:
        return r.read().decode()
