"""The GPU serving benchmark, one command on an NVIDIA GPU host (bench/serving/device.sh):

  1. `model-sync export --target local` writes one Triton model per configuration variant
     (instance count, preferred batch sizes, queue delay; KIND_GPU) and export format (--formats:
     TorchScript, AOTInductor .pt2, ONNX; the name gets -pt2 / -onnx), ResNet-18 random weights;
  2. raw limit: each format's exported file on the GPU at batch 64 and 256 (bench.serving.raw; ONNX
     through ONNX Runtime's CUDA provider), each in its own process;
  3. baseline: the one-request-at-a-time HTTP server (bench.serving.baseline_server) driven by
     bench.serving.loadgen at concurrency 1;
  4. tritonserver (python backend on the GPU) serves every variant; perf_analyzer (gRPC, system
     shared memory for the input and output tensors) sweeps the concurrency per variant, while
     Triton's /metrics (batches actually executed), GPU utilisation and client/server CPU are recorded;
     the best variant is also driven over HTTP by the same client as the baseline (transport check:
     one probe request first records Triton's raw answer, and the load asks for the output in the
     form that answer showed works);
  5. writes <out>/serving.json (bench.serving.stats.SCHEMA) and the server logs.

Every phase is guarded: a failure is recorded in `errors` and the run goes on, so one run returns
everything that worked. `--deadline-s` keeps the whole run inside a wall-clock budget.

    python -m bench.serving.run --triton-root W/triton --perf-analyzer W/triton/perf/bin/perf_analyzer \
        --stub-python W/stubpy/bin/python3 --export-pythonpath W/exsite --out $OUT
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.serving import loadgen, stats
from model_sync.sandbox.procs import LOOPBACK, Process, free_port, http_status, wait_until
from model_sync.sandbox.runtime import stub_environment

ROOT = Path(__file__).resolve().parents[2]
INPUT_SHAPE = (3, 224, 224)
FACTORY = "bench.serving.resnet:build"
FORMATS = ("torchscript", "pt2", "onnx")  # model-sync export --format
MODEL_FILES = {"torchscript": "model.pt", "pt2": "model.pt2", "onnx": "model.onnx"}


@dataclass(frozen=True)
class Variant:
    """One `model-sync export` configuration: NAME:COUNT:PREF1/PREF2:DELAY_US:MAX_BATCH."""

    name: str
    instance_count: int
    preferred: tuple[int, ...]
    max_queue_delay_us: int
    max_batch_size: int

    @classmethod
    def parse(cls, text: str) -> Variant:
        try:
            name, count, pref, delay, mbs = text.split(":")
            return cls(name, int(count), tuple(int(p) for p in pref.split("/") if p), int(delay), int(mbs))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--variant {text!r}; allowed: NAME:COUNT:PREF1/PREF2:DELAY_US:MAX_BATCH, e.g. "
                "resnet18-i4:4:64:2000:128"
            ) from None

    def named(self, fmt: str) -> str:
        """The model's name in `fmt`: the variant's own for TorchScript, `<name>-pt2` / `<name>-onnx`."""
        return self.name if fmt == "torchscript" else f"{self.name}-{fmt}"

    def export_args(self, output: Path, kind: str, fmt: str = "torchscript") -> list[str]:
        args = [
            FACTORY,
            "--name",
            self.named(fmt),
            "--format",
            fmt,
            "--output",
            str(output),
            "--example-shape",
            ",".join(map(str, (4, *INPUT_SHAPE))),
            "--target",
            "local",
            "--max-batch-size",
            str(self.max_batch_size),
            "--max-queue-delay-us",
            str(self.max_queue_delay_us),
            "--instance-kind",
            kind,
            "--instance-count",
            str(self.instance_count),
            "--overwrite",
        ]
        for p in self.preferred:
            args += ["--preferred-batch-size", str(p)]
        return args


DEFAULT_VARIANTS = (
    # With the staging wrapper an instance pays less per image, so fewer instances with
    # larger batches should keep the GPU busy with fewer CUDA contexts to switch between.
    "resnet18-i2-p32:2:32:1000:64",
    "resnet18-i4-p32:4:32:1000:64",
    "resnet18-i6-p16-32:6:16/32:1000:64",
    "resnet18-i12-p16:12:16:1000:32",  # the best point of the 2026-11-30 run, with the earlier wrapper
)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd: list[str], timeout: float = 30) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({type(e).__name__})"


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


class Bench:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.out = Path(a.out)
        self.work = Path(a.work)
        self.repo = self.work / "repository"
        self.deadline = time.monotonic() + a.deadline_s
        self.variants = [Variant.parse(v) for v in (a.variant or DEFAULT_VARIANTS)]
        self.formats = [f for f in a.formats.split(",") if f]
        if not self.formats or any(f not in FORMATS for f in self.formats):
            raise SystemExit(f"--formats: {a.formats!r}; allowed: a comma-separated subset of {', '.join(FORMATS)}")
        self.doc: dict[str, Any] = {
            "schema": stats.SCHEMA,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "environment": {},
            "model": {"factory": FACTORY, "input_shape": list(INPUT_SHAPE), "dtype": "FP32"},
            "raw": [],
            "baseline": {
                "server": (
                    "bench.serving.baseline_server (single-threaded http.server, batch 1, torch on the same device)"
                ),
                "client": "bench.serving.loadgen (HTTP, binary tensors)",
                "points": [],
            },
            "triton": [],
            "errors": [],
            "settings": {k: v for k, v in vars(a).items() if k not in ("out", "work")},
        }

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def guard(self, phase: str, fn: Any) -> Any:
        log(f"== {phase} ({self.left():.0f}s left)")
        try:
            return fn()
        except Exception as e:
            log(f"!! {phase}: {type(e).__name__}: {e}")
            self.doc["errors"].append(
                {
                    "phase": phase,
                    "error": f"{type(e).__name__}: {' '.join(str(e).split())[:600]}",
                    "trace": traceback.format_exc()[-1500:],
                }
            )
            return None

    # -- phases ---------------------------------------------------------------------------
    def environment(self) -> None:
        env = self.doc["environment"]
        q = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"])
        parts = [p.strip() for p in q.split(",")] if "," in q else [q, "n/a", "n/a", "n/a"]
        env.update(gpu=parts[0], driver=parts[1], gpu_memory=parts[2], gpu_max_sm_clock=parts[3])
        probe = (
            "import "
            "json,torch;print(json.dumps({'torch':torch.__version__,'cuda':torch.version.cuda,'cudnn':torch.backends."
            "cudnn.version(),'cuda_available':torch.cuda.is_available()}))"
        )
        try:
            env.update(json.loads(sh([sys.executable, "-c", probe], timeout=120).splitlines()[-1]))
        except (ValueError, IndexError):
            env["torch"] = "unknown"
        env.update(
            python=platform.python_version(),
            cpu_count=os.cpu_count(),
            kernel=platform.release(),
            triton="not started",
            perf_analyzer=self.a.perf_analyzer,
            label=self.a.label or None,
            mps=bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")),
        )
        env["dev_shm"] = sh(["df", "-h", "/dev/shm"]).splitlines()[-1:]
        log(f"environment: {json.dumps(env)}")

    def export(self) -> None:
        """Every variant in every format; an export that fails is recorded and the others go on."""
        self.repo.mkdir(parents=True, exist_ok=True)
        for fmt in self.formats:
            for v in self.variants:
                self.guard(f"export {v.named(fmt)}", lambda v=v, fmt=fmt: self.export_one(v, fmt))
        if not self.doc["triton"]:
            raise RuntimeError("export: no model exported")
        self.doc["model"]["source"] = self.doc["triton"][0]["export_meta"].get("factory")

    def export_one(self, v: Variant, fmt: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), self.a.export_pythonpath or "") if p)
        name = v.named(fmt)
        cmd = [sys.executable, "-m", "model_sync", "export", *v.export_args(self.repo, self.a.instance_kind, fmt)]
        log("$ model-sync " + " ".join(cmd[3:]))
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900, check=False)
        log((proc.stdout + proc.stderr).strip()[-800:])
        if proc.returncode != 0:
            shutil.rmtree(self.repo / name, ignore_errors=True)
            raise RuntimeError(
                f"model-sync export {name}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-400:]}"
            )
        meta = json.loads((self.repo / name / "export.json").read_text())
        self.doc["triton"].append(
            {
                "name": name,
                "format": fmt,
                "variant": asdict(v),
                "export_command": "model-sync export " + " ".join(cmd[4:]).replace(str(self.repo), "REPO"),
                "export_seconds": round(time.monotonic() - t0, 1),
                "export_meta": meta,
                "config_pbtxt": (self.repo / name / "config.pbtxt").read_text(),
                "client": "perf_analyzer grpc + system shm",
                "points": [],
            }
        )

    def model_file(self, fmt: str) -> Path | None:
        """The first exported variant's model file in `fmt` (None: none exported)."""
        entry = next((t for t in self.doc["triton"] if t.get("format") == fmt), None)
        return self.repo / entry["name"] / "1" / MODEL_FILES[fmt] if entry else None

    def model_pt(self) -> Path:
        path = self.model_file("torchscript")
        if path is None:
            raise RuntimeError("no TorchScript export: the baseline and the CUDA context run model.pt")
        return path

    def raw(self) -> None:
        """Each format's raw limit, each in its own process (a loader that crashes takes only its own)."""
        self.doc["raw_by_format"] = {}
        for fmt in self.formats:
            path = self.model_file(fmt)
            if path is not None:
                self.guard(f"raw {fmt}", lambda fmt=fmt, path=path: self.raw_one(fmt, path))
        self.doc["raw"] = self.doc["raw_by_format"].get("torchscript") or next(
            iter(self.doc["raw_by_format"].values()), []
        )

    def raw_one(self, fmt: str, path: Path) -> None:
        cmd = [
            sys.executable,
            "-m",
            "bench.serving.raw",
            "--model",
            str(path),
            "--device",
            self.a.device,
            "--repeats",
            str(self.a.raw_repeats),
        ]
        for b in self.a.raw_batch:
            cmd += ["--batch", str(b)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), self.a.export_pythonpath or "") if p)
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"raw {fmt}: exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
        self.doc["raw_by_format"][fmt] = json.loads(proc.stdout.strip().splitlines()[-1])
        log(f"raw {fmt}: {self.doc['raw_by_format'][fmt]}")

    def cuda_context(self) -> None:
        """The per-instance CUDA context allowance of GPU memory planning (bench.serving.cuda_context)."""
        cmd = [sys.executable, "-m", "bench.serving.cuda_context", "--model-pt", str(self.model_pt()), "--batch", "32"]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=180, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"cuda_context: exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
        self.doc["cuda_context"] = json.loads(proc.stdout.strip().splitlines()[-1])
        log(f"cuda context: {self.doc['cuda_context']}")

    def baseline(self) -> None:
        port = free_port()
        srv = Process(
            "baseline",
            [
                sys.executable,
                "-m",
                "bench.serving.baseline_server",
                "--model-pt",
                str(self.model_pt()),
                "--port",
                str(port),
                "--device",
                self.a.device,
            ],
            self.out / "baseline.log",
            cwd=ROOT,
        ).start()
        try:
            wait_until(
                lambda: http_status(f"http://{LOOPBACK}:{port}/v2/health/ready") == 200,
                180,
                what="baseline server ready",
            )
            for c in self.a.baseline_concurrency:
                with GpuSampler() as gpu:
                    r = loadgen.run(
                        loadgen.LoadSpec(
                            LOOPBACK,
                            port,
                            "resnet18",
                            concurrency=c,
                            duration_s=self.a.baseline_seconds,
                            warmup_s=2.0,
                            processes=1,
                        )
                    )
                r["gpu_util_pct"] = gpu.mean
                log(
                    f"baseline c={c}: {r['throughput']:.0f} req/s p50 {r['p50_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms "
                    f"errors {r['errors']}"
                )
                self.doc["baseline"]["points"].append(r)
        finally:
            srv.stop(timeout=10)

    def triton_argv(self, http: int, grpc: int, metrics: int) -> list[str]:
        root = Path(self.a.triton_root)
        shm = self.a.python_shm_mb * 1024 * 1024
        return [
            str(root / "pytriton/tritonserver/bin/tritonserver"),
            f"--model-repository={self.repo}",
            f"--backend-directory={root / 'pytriton/tritonserver/backends'}",
            "--disable-auto-complete-config",
            "--model-control-mode=none",
            # Each python-backend instance exchanges tensors with its stub through a shared-memory
            # region; a batch of 64 ResNet inputs is 38.5 MB, so start big instead of growing by 1 MB.
            # ref: https://github.com/triton-inference-server/python_backend#managing-shared-memory
            f"--backend-config=python,shm-default-byte-size={shm}",
            f"--backend-config=python,shm-growth-byte-size={shm}",
            f"--http-address={LOOPBACK}",
            f"--http-port={http}",
            f"--grpc-address={LOOPBACK}",
            f"--grpc-port={grpc}",
            f"--metrics-address={LOOPBACK}",
            f"--metrics-port={metrics}",
            "--exit-timeout-secs=15",
            # A model that fails its load (an ONNX model on a GPU instance without ONNX Runtime's CUDA
            # provider) is recorded; the others are still measured.
            "--exit-on-error=false",
        ]

    def perf_point(
        self, model: str, grpc: int, metrics: int, sid: int, c: int, measure_ms: int, shm: str = "system"
    ) -> dict[str, Any]:
        csv_path = self.work / f"pa-{model}-{c}-{shm}.csv"
        cmd = [
            self.a.perf_analyzer,
            "-m",
            model,
            "-u",
            f"{LOOPBACK}:{grpc}",
            "-i",
            "grpc",
            "--async",
            "--shared-memory",
            shm,
            "--output-shared-memory-size",
            "65536",
            "--concurrency-range",
            f"{c}:{c}",
            "--measurement-interval",
            str(measure_ms),
            "--stability-percentage",
            "100",
            "--max-trials",
            "6",
            "-f",
            str(csv_path),
        ]
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(Path(self.a.perf_analyzer).parent.parent / "lib"), env.get("LD_LIBRARY_PATH", "")) if p
        )
        before = metrics_text(metrics)
        cpu0 = session_cpu_seconds(sid)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        with GpuSampler() as gpu:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, env=env, timeout=max(60, measure_ms / 1000 * 12), check=False
            )
        wall = time.monotonic() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu1 = session_cpu_seconds(sid)
        after = metrics_text(metrics)
        if proc.returncode != 0 or not csv_path.exists():
            raise RuntimeError(
                f"perf_analyzer c={c}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-500:]}"
            )
        row = stats.parse_perf_analyzer_csv(csv_path.read_text())[0]
        point: dict[str, Any] = dict(row)
        point.update(stats.batch_stats(before, after, model))
        point.update(
            gpu_util_pct=gpu.mean,
            gpu_memory_used_mib=gpu.peak_memory_mib,
            server_cpu_cores=(cpu1 - cpu0) / wall,
            client_cpu_cores=((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)) / wall,
            errors=0,
        )
        return point

    def triton(self) -> None:
        http, grpc, metrics = free_port(), free_port(), free_port()
        env = dict(os.environ)
        if self.a.stub_python:
            env = stub_environment(env, python=self.a.stub_python)
        log_path = self.out / "tritonserver.log"
        srv = Process("tritonserver", self.triton_argv(http, grpc, metrics), log_path, env=env).start()
        try:
            limit = time.monotonic() + self.a.load_timeout_s
            pending = [t["name"] for t in self.doc["triton"]]
            while pending:
                if not srv.running:
                    raise RuntimeError(f"tritonserver exited: {srv.log_tail()[-600:]}")
                if time.monotonic() > limit:
                    raise TimeoutError(f"{pending} not READY after {self.a.load_timeout_s:.0f}s (log {log_path})")
                pending = [n for n in pending if http_status(f"http://{LOOPBACK}:{http}/v2/models/{n}/ready") != 200]
                for name, reason in self.failed_loads(http, pending).items():  # recorded, the others measured
                    self.doc["errors"].append({"phase": f"load {name}", "error": reason[:600]})
                    self.doc["triton"] = [t for t in self.doc["triton"] if t["name"] != name]
                    pending.remove(name)
                    log(f"!! load {name}: {reason[:300]}")
                time.sleep(1.0)
            with urllib.request.urlopen(f"http://{LOOPBACK}:{http}/v2", timeout=10) as r:
                self.doc["environment"]["triton"] = json.loads(r.read()).get("version", "unknown")
            log(
                f"tritonserver {self.doc['environment']['triton']} ready with {[t['name'] for t in self.doc['triton']]}"
            )
            sid = srv.pid or 0
            for entry in self.doc["triton"]:
                name = entry["name"]
                if self.left() < 40:
                    entry["skipped"] = "deadline"
                    continue
                self.guard(f"warm-up {name}", lambda name=name: self.perf_point(name, grpc, metrics, sid, 64, 1500))
                for c in self.a.concurrency:
                    if self.left() < 25:
                        entry.setdefault("skipped_concurrency", []).append(c)
                        continue
                    p = self.guard(
                        f"perf {name} c={c}",
                        lambda name=name, c=c: self.perf_point(name, grpc, metrics, sid, c, self.a.measure_ms),
                    )
                    if p:
                        log(
                            f"{name} c={c}: {p['throughput']:.0f} req/s p50 {p['p50_ms']:.1f} p99 {p['p99_ms']:.1f} "
                            f"ms batch {p['avg_batch']:.1f} "
                            f"gpu {p['gpu_util_pct'] or 0:.0f}% server cpu {p['server_cpu_cores']:.1f} client cpu "
                            f"{p['client_cpu_cores']:.1f}"
                        )
                        entry["points"].append(p)
            self.guard("cuda shared memory", lambda: self.cuda_shm(grpc, metrics, sid))
            self.guard("http cross-check", lambda: self.http_check(http, metrics))
        finally:
            srv.stop(timeout=20)

    @staticmethod
    def failed_loads(http: int, names: list[str]) -> dict[str, str]:
        """{model: Triton's reason} for each of `names` the repository index reports UNAVAILABLE."""
        if not names:
            return {}
        req = urllib.request.Request(f"http://{LOOPBACK}:{http}/v2/repository/index", data=b"{}", method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310 (http://127.0.0.1 built above)
                index = json.loads(r.read())
        except OSError:  # not listening yet
            return {}
        return {
            e["name"]: e.get("reason", "") for e in index if e.get("name") in names and e.get("state") == "UNAVAILABLE"
        }

    def best(self) -> dict[str, Any] | None:
        """The summary's best point so far (None before the raw limit and the baseline are measured)."""
        if not (self.doc["raw"] and self.doc["baseline"]["points"]):
            return None
        best: dict[str, Any] | None = stats.summarize(self.doc).get("best")
        return best

    def cuda_shm(self, grpc: int, metrics: int, sid: int) -> None:
        """The best variant again with the client's tensors in CUDA shared memory: Triton hands the
        inputs to the wrapper on the GPU (FORCE_CPU_ONLY_INPUT_TENSORS "no", DLPack), no host copy."""
        if not self.a.cuda_shm_concurrency or self.a.device != "cuda":
            return
        best = self.best()
        name = best["variant"] if best else self.variants[-1].name
        entry = {
            "name": name,
            "variant": next((t["variant"] for t in self.doc["triton"] if t["name"] == name), None),
            "config_pbtxt": next(t["config_pbtxt"] for t in self.doc["triton"] if t["name"] == name),
            "client": stats.CUDA_SHM_CLIENT,
            "points": [],
        }
        for c in self.a.cuda_shm_concurrency:
            if self.left() < 25:
                entry.setdefault("skipped_concurrency", []).append(c)
                continue
            p = self.perf_point(name, grpc, metrics, sid, c, self.a.measure_ms, shm="cuda")
            log(
                f"{name} cuda shm c={c}: {p['throughput']:.0f} req/s p99 {p['p99_ms']:.1f} ms batch {p['avg_batch']:.1f}"
            )
            entry["points"].append(p)
        self.doc["triton"].append(entry)

    def http_check(self, http: int, metrics: int) -> None:
        """The best variant driven over HTTP by the baseline's own client (no shared memory). One probe
        request first, its answer recorded (`probe`): Triton 2.51 on the GPU answered the binary form
        with the JSON header alone, no tensor after it (no Inference-Header-Content-Length), which left
        the earlier run's check at 0 req/s; then the load asks for the output in a form the probes
        show Triton answers in full (binary first, else the JSON `data` array), and says which."""
        best = self.best()
        name = best["variant"] if best else self.variants[-1].name
        c = int(best["concurrency"]) if best else 64
        if self.left() < self.a.baseline_seconds + 20:
            raise RuntimeError("deadline: no time left for the HTTP cross-check")
        probes = []
        for binary in (True, False):
            probes.append(loadgen.probe(loadgen.LoadSpec(LOOPBACK, http, name, binary_output=binary)))
            log(f"http probe {name} binary={binary}: {json.dumps(probes[-1])[:600]}")
            if probes[-1]["ok"]:
                break
        binary = bool(probes[-1]["ok"] and probes[-1]["binary_output"])
        before = metrics_text(metrics)
        with GpuSampler() as gpu:
            r = loadgen.run(
                loadgen.LoadSpec(
                    LOOPBACK,
                    http,
                    name,
                    concurrency=c,
                    duration_s=self.a.baseline_seconds,
                    warmup_s=2.0,
                    binary_output=binary,
                )
            )
        r.update(stats.batch_stats(before, metrics_text(metrics), name), gpu_util_pct=gpu.mean)
        entry = {
            "name": f"{name} (HTTP, loadgen)",
            "variant": None,
            "config_pbtxt": next(t["config_pbtxt"] for t in self.doc["triton"] if t["name"] == name),
            "client": "bench.serving.loadgen HTTP " + ("binary output" if binary else "JSON output"),
            "probe": probes,
            "points": [r],
        }
        if not r["requests"]:
            entry["failed"] = f"no request completed without error: {(r['error_samples'] or ['no sample'])[0][:400]}"
        self.doc["triton"].append(entry)
        log(
            f"http check {name} c={c} ({entry['client']}): {r['throughput']:.0f} req/s p50 {r['p50_ms']:.1f} p99 "
            f"{r['p99_ms']:.1f} batch {r['avg_batch']:.1f} client cpu {r['client_cpu_cores']:.1f}"
        )

    def write(self) -> Path:
        if self.doc["raw"] and self.doc["baseline"]["points"] and any(t["points"] for t in self.doc["triton"]):
            self.doc["summary"] = stats.summarize(self.doc)
            try:
                stats.validate_result(self.doc)
            except stats.ResultError as e:
                self.doc["errors"].append({"phase": "validate", "error": str(e)})
        path = self.out / "serving.json"
        path.write_text(json.dumps(stats.finite(self.doc), indent=2, default=str, allow_nan=False) + "\n")
        return path

    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        self.guard("environment", self.environment)
        self.guard("export", self.export)
        if self.doc["triton"]:
            self.guard("raw", self.raw)
            if self.a.device == "cuda":
                self.guard("cuda context", self.cuda_context)
            self.guard("baseline", self.baseline)
            self.guard("triton", self.triton)
        path = self.write()
        s = self.doc.get("summary")
        log(f"wrote {path}; errors: {len(self.doc['errors'])}")
        if s:
            log(f"summary: {json.dumps(s)}")
        return 0 if not self.doc["errors"] else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.serving.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--triton-root", required=True, help="directory holding pytriton/tritonserver/ and nvidia_pytriton.libs/"
    )
    p.add_argument(
        "--perf-analyzer", required=True, help="perf_analyzer binary (its lib/ sibling goes on LD_LIBRARY_PATH)"
    )
    p.add_argument(
        "--stub-python", default="", help="the python3 (numpy<2) whose site-packages the python backend stub uses"
    )
    p.add_argument(
        "--export-pythonpath", default="", help="extra PYTHONPATH for model-sync export (tritonclient, protobuf)"
    )
    p.add_argument("--out", required=True)
    p.add_argument("--label", default="", help="what is special about this run (e.g. mps), recorded in environment")
    p.add_argument("--work", default="/tmp/bench-serving")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--instance-kind", default="KIND_GPU", choices=("KIND_GPU", "KIND_CPU"))
    p.add_argument(
        "--variant",
        action="append",
        help=f"NAME:COUNT:PREF1/PREF2:DELAY_US:MAX_BATCH (repeat; default {' '.join(DEFAULT_VARIANTS)})",
    )
    p.add_argument(
        "--formats",
        default="torchscript",
        help=f"export formats, comma-separated, each variant exported in each (default torchscript; of {FORMATS})",
    )
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64, 128, 256, 512])
    p.add_argument("--measure-ms", type=int, default=3000, help="perf_analyzer measurement window")
    p.add_argument(
        "--cuda-shm-concurrency",
        type=int,
        nargs="*",
        default=[256, 512],
        help="the best variant again with perf_analyzer --shared-memory cuda at these concurrencies (none: skip)",
    )
    p.add_argument("--baseline-concurrency", type=int, nargs="+", default=[1])
    p.add_argument("--baseline-seconds", type=float, default=8.0)
    p.add_argument("--raw-batch", type=int, nargs="+", default=[64, 256])
    p.add_argument("--raw-repeats", type=int, default=20)
    p.add_argument("--python-shm-mb", type=int, default=64)
    p.add_argument("--load-timeout-s", type=float, default=240)
    p.add_argument("--deadline-s", type=float, default=520)
    return Bench(p.parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
