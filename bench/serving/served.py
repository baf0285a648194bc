"""The serving benchmark's Triton phase: a tritonserver serves the exported models (`Server`: which
models, which backend directory, which environment); perf_analyzer sweeps the concurrency per model
and per shared-memory mode (`--sweep-shm`; bench.serving.perf_points); the best model runs again with
its tensors in CUDA shared memory (when the sweep did not); and the HTTP cross-check drives it with
the baseline's own client (bench.serving.loadgen), one probe request first.

Under the PyTorch backend (`--backend pytorch_libtorch`) TorchScript models are served by the r24.10
build in the bundle's backends directory, and `.pt2` models by a second server: the main measurement
build (`--pt2-backends`), each config rewritten for Triton 2.51 (`served_config`)."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.serving import loadgen, stats
from bench.serving.instruments import GpuSampler, log, metrics_text
from bench.serving.perf_points import perf_point
from bench.serving.state import RunState
from model_sync.sandbox.procs import LOOPBACK, Process, free_port, http_status
from model_sync.sandbox.runtime import stub_environment
from model_sync.triton_model import model_config
from model_sync.triton_model.formats import MODEL_FILES


def served_config(text: str, pt2: bool) -> str:
    """The config a server of this run loads: export's own, except a torch_aoti one for the 2.51
    measurement build's server, whose core knows no such platform: no platform, backend "pytorch", the
    package named (that build takes every model as a .pt2: bench.serving.pytorch_backend)."""
    if not pt2:
        return text
    cfg = model_config.parse(text)
    cfg.ClearField("platform")
    cfg.backend = "pytorch"
    cfg.default_model_filename = MODEL_FILES["pt2"]
    return str(model_config.dumps(cfg))


@dataclass(frozen=True)
class Server:
    """One tritonserver of the run: its tag (its repository's name), the models it serves, its
    backend directory, extra environment, and whether its configs are rewritten for a .pt2 build."""

    tag: str
    names: tuple[str, ...]
    backends: Path
    env: dict[str, str] = field(default_factory=dict)
    pt2: bool = False
    extras: bool = True  # the CUDA shared-memory and HTTP checks of the best model


class Served:
    def __init__(self, state: RunState, server: Server) -> None:
        self.state = state
        self.server = server
        self.repo = state.work / f"served-{self.server.tag}"

    def stage(self) -> None:
        """The server's own repository: a copy of each of its models, its config as served."""
        shutil.rmtree(self.repo, ignore_errors=True)
        for name in self.server.names:
            shutil.copytree(self.state.repo / name, self.repo / name)
            text = (self.repo / name / "config.pbtxt").read_text()
            (self.repo / name / "config.pbtxt").write_text(served_config(text, self.server.pt2))
            if self.server.pt2:
                self.entry(name)["served_config_pbtxt"] = (self.repo / name / "config.pbtxt").read_text()

    def argv(self, http: int, grpc: int, metrics: int) -> list[str]:
        root = Path(self.state.a.triton_root)
        shm = self.state.a.python_shm_mb * 1024 * 1024
        return [
            str(root / "pytriton/tritonserver/bin/tritonserver"),
            f"--model-repository={self.repo}",
            f"--backend-directory={self.server.backends}",
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

    def run(self) -> None:
        self.stage()
        http, grpc, metrics = free_port(), free_port(), free_port()
        env = dict(os.environ)
        if self.state.a.stub_python:
            env = stub_environment(env, python=self.state.a.stub_python)
        env.update(self.server.env)
        log_path = self.state.out / (
            "tritonserver.log" if self.server.tag == "all" else f"tritonserver-{self.server.tag}.log"
        )
        srv = Process("tritonserver", self.argv(http, grpc, metrics), log_path, env=env).start()
        try:
            limit = time.monotonic() + self.state.a.load_timeout_s
            pending = list(self.server.names)
            while pending:
                if not srv.running:
                    raise RuntimeError(f"tritonserver exited: {srv.log_tail()[-600:]}")
                if time.monotonic() > limit:
                    raise TimeoutError(f"{pending} not READY after {self.state.a.load_timeout_s:.0f}s (log {log_path})")
                pending = [n for n in pending if http_status(f"http://{LOOPBACK}:{http}/v2/models/{n}/ready") != 200]
                for name, reason in self.failed_loads(http, pending).items():  # recorded, the others measured
                    self.state.doc["errors"].append({"phase": f"load {name}", "error": reason[:600]})
                    self.state.doc["triton"] = [t for t in self.state.doc["triton"] if t["name"] != name]
                    pending.remove(name)
                    log(f"!! load {name}: {reason[:300]}")
                time.sleep(1.0)
            with urllib.request.urlopen(f"http://{LOOPBACK}:{http}/v2", timeout=10) as r:
                self.state.doc["environment"]["triton"] = json.loads(r.read()).get("version", "unknown")
            served = [t for t in self.state.doc["triton"] if t["name"] in self.server.names]
            log(f"tritonserver {self.state.doc['environment']['triton']} ready with {[t['name'] for t in served]}")
            sid = srv.pid or 0
            batch = self.state.a.client_batch
            for entry in served:
                if not self.server.pt2:  # the pt2 server: its requests are whole batches (docs/gpu-benchmark.md)
                    self.sweep(entry, grpc, metrics, sid)
                if batch > 1 and (self.server.pt2 or entry["name"] == self.state.best_name(self.server.names)):
                    self.sweep(entry, grpc, metrics, sid, batch)
            if self.server.extras:
                if "cuda" not in self.state.a.sweep_shm:
                    self.state.guard("cuda shared memory", lambda: self.cuda_shm(grpc, metrics, sid))
                self.state.guard("http cross-check", lambda: self.http_check(http, metrics))
        finally:
            srv.stop(timeout=20)

    def sweep(self, entry: dict[str, Any], grpc: int, metrics: int, sid: int, batch: int = 1) -> None:
        """One model's concurrency sweep in each `--sweep-shm` mode: system shared memory into the
        export's own entry, CUDA shared memory into a sibling entry of client CUDA_SHM_CLIENT. With
        `batch` > 1 (`--client-batch`), requests of that many images at `--client-batch-concurrency`,
        each into an entry of its own."""
        name = entry["name"]
        if self.state.left() < 40:
            entry["skipped"] = "deadline"
            return
        if batch == 1 or self.server.pt2:  # the pt2 server's single-image warm-up shows how it batches
            self.state.guard(f"warm-up {name}", lambda: perf_point(self.state, name, grpc, metrics, sid, 64, 1500))
        concurrency = self.state.a.concurrency if batch == 1 else self.state.a.client_batch_concurrency
        for shm in self.state.a.sweep_shm:
            if shm == "cuda" and self.state.a.device != "cuda":
                continue
            target = entry
            if shm == "cuda" or batch > 1:
                client = stats.CUDA_SHM_CLIENT if shm == "cuda" else entry["client"]
                target = {k: entry[k] for k in ("name", "format", "backend", "variant", "config_pbtxt") if k in entry}
                target.update(client=client + (f" ({batch}-image requests)" if batch > 1 else ""), points=[],
                              client_batch=batch)  # fmt: skip
                self.state.doc["triton"].append(target)
            for c in concurrency:
                if self.state.left() < 25:
                    target.setdefault("skipped_concurrency", []).append(c)
                    continue
                p = self.state.guard(
                    f"perf {name} {shm} shm b={batch} c={c}",
                    lambda c=c, shm=shm: perf_point(
                        self.state, name, grpc, metrics, sid, c, self.state.a.measure_ms, shm=shm, batch=batch
                    ),
                )
                if p:
                    log(
                        f"{name} {shm} shm b={batch} c={c}: {p['throughput']:.0f}/s p50 {p['p50_ms']:.1f} p99 "
                        f"{p['p99_ms']:.1f} ms batch {p['avg_batch']:.1f} gpu {p['gpu_util_pct'] or 0:.0f}% "
                        f"server cpu {p['server_cpu_cores']:.1f} client cpu {p['client_cpu_cores']:.1f}"
                    )
                    target["points"].append(p)

    def entry(self, name: str) -> dict[str, Any]:
        """The export's own result entry of `name`."""
        return next(t for t in self.state.doc["triton"] if t["name"] == name)

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

    def cuda_shm(self, grpc: int, metrics: int, sid: int) -> None:
        """The best variant again with the client's tensors in CUDA shared memory: Triton hands the
        inputs to the wrapper on the GPU (FORCE_CPU_ONLY_INPUT_TENSORS "no", DLPack), no host copy."""
        if not self.state.a.cuda_shm_concurrency or self.state.a.device != "cuda":
            return
        name = self.state.best_name(self.server.names)
        served = self.entry(name)
        entry = {
            "name": name,
            "backend": served.get("backend"),
            "variant": served.get("variant"),
            "config_pbtxt": served["config_pbtxt"],
            "client": stats.CUDA_SHM_CLIENT,
            "points": [],
        }
        for c in self.state.a.cuda_shm_concurrency:
            if self.state.left() < 25:
                entry.setdefault("skipped_concurrency", []).append(c)
                continue
            p = perf_point(self.state, name, grpc, metrics, sid, c, self.state.a.measure_ms, shm="cuda")
            log(
                f"{name} cuda shm c={c}: {p['throughput']:.0f} req/s p99 {p['p99_ms']:.1f} ms batch {p['avg_batch']:.1f}"
            )
            entry["points"].append(p)
        self.state.doc["triton"].append(entry)

    def http_check(self, http: int, metrics: int) -> None:
        """The best variant driven over HTTP by the baseline's own client (no shared memory). One probe
        request first, its answer recorded (`probe`): Triton 2.51 on the GPU answered the binary form
        with the JSON header alone, no tensor after it (no Inference-Header-Content-Length), which left
        the earlier run's check at 0 req/s; then the load asks for the output in a form the probes
        show Triton answers in full (binary first, else the JSON `data` array), and says which."""
        best = self.state.best()
        name = self.state.best_name(self.server.names)
        c = int(best["concurrency"]) if best and best["variant"] == name else 64
        if self.state.left() < self.state.a.baseline_seconds + 20:
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
                    duration_s=self.state.a.baseline_seconds,
                    warmup_s=2.0,
                    binary_output=binary,
                )
            )
        r.update(stats.batch_stats(before, metrics_text(metrics), name), gpu_util_pct=gpu.mean)
        entry = {
            "name": f"{name} (HTTP, loadgen)",
            "backend": self.entry(name).get("backend"),
            "variant": None,
            "config_pbtxt": self.entry(name)["config_pbtxt"],
            "client": "bench.serving.loadgen HTTP " + ("binary output" if binary else "JSON output"),
            "probe": probes,
            "points": [r],
        }
        if not r["requests"]:
            entry["failed"] = f"no request completed without error: {(r['error_samples'] or ['no sample'])[0][:400]}"
        self.state.doc["triton"].append(entry)
        log(
            f"http check {name} c={c} ({entry['client']}): {r['throughput']:.0f} req/s p50 {r['p50_ms']:.1f} p99 "
            f"{r['p99_ms']:.1f} batch {r['avg_batch']:.1f} client cpu {r['client_cpu_cores']:.1f}"
        )
