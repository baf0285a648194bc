"""The GPU serving benchmark, one command on an NVIDIA GPU host (bench/serving/device.sh):

  1. `model-sync export` writes one Triton model per configuration variant (instance count,
     preferred batch sizes, queue delay; KIND_GPU) and export format (--formats; the name gets -pt2 /
     -onnx), ResNet-18 random weights: `--target cloud` under `--backend pytorch_libtorch` (the
     production config, served by Triton's own PyTorch backend that bench.serving.pytorch_backend
     built into the triton root; a .pt2 compiled by bench.serving.aoti_package), `--target local`
     under `--backend python` (the python-backend wrapper: CPU runs of the harness);
  2. raw limit: each format's exported file on the GPU at batch 64 and 256 (bench.serving.raw; ONNX
     through ONNX Runtime's CUDA provider), each in its own process;
  3. baseline: the one-request-at-a-time HTTP server (bench.serving.baseline_server) driven by
     bench.serving.loadgen at concurrency 1;
  4. tritonserver serves every variant (bench.serving.served: .pt2 models on a server of their own);
     perf_analyzer (gRPC, the tensors in system and/or CUDA shared memory: --sweep-shm) sweeps the
     concurrency per variant, while Triton's /metrics (batches actually executed), GPU utilisation
     and client/server CPU are recorded; with --client-batch, whole-batch requests too; the best
     variant is also driven over HTTP by the same client as the baseline (transport check: one
     probe request first records Triton's raw answer, and the load asks for the output in the form
     that answer showed works);
  5. writes <out>/serving.json (bench.serving.stats.SCHEMA; its environment and every entry name the
     backend) and the server logs.

Every phase is guarded: a failure is recorded in `errors` and the run goes on, so one run returns
everything that worked. `--deadline-s` keeps the whole run inside a wall-clock budget.

    python -m bench.serving.run --triton-root W/triton --perf-analyzer W/triton/perf/bin/perf_analyzer \
        --stub-python W/stubpy/bin/python3 --export-pythonpath W/exsite --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from bench.serving import loadgen, pytorch_backend, stats
from bench.serving.exports import export_all, model_file, model_pt
from bench.serving.instruments import GpuSampler, log, sh
from bench.serving.served import Served, Server
from bench.serving.state import BACKEND_NAMES, RunState
from bench.serving.variants import DEFAULT_VARIANTS, ROOT
from model_sync.sandbox.procs import LOOPBACK, Process, free_port, http_status, wait_until
from model_sync.triton_model.formats import FORMATS


class Bench:
    """The run's phases in order (`run`): the environment, the exports (bench.serving.exports), each
    format's raw limit, the CUDA context, the baseline, Triton (bench.serving.served), the result."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def environment(self) -> None:
        env = self.state.doc["environment"]
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
            perf_analyzer=self.state.a.perf_analyzer,
            label=self.state.a.label or None,
            mps=bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")),
        )
        env["dev_shm"] = sh(["df", "-h", "/dev/shm"]).splitlines()[-1:]
        env["backend_builds"] = [json.loads(Path(p).read_text()) for p in self.state.a.backend_info if Path(p).exists()]
        log(f"environment: {json.dumps(env)}")

    def raw(self) -> None:
        """Each format's raw limit, each in its own process (a loader that crashes takes only its own)."""
        self.state.doc["raw_by_format"] = {}
        for fmt in self.state.formats:
            path = model_file(self.state, fmt)
            if path is not None:
                self.state.guard(f"raw {fmt}", lambda fmt=fmt, path=path: self.raw_one(fmt, path))
        self.state.doc["raw"] = self.state.doc["raw_by_format"].get("torchscript") or next(
            iter(self.state.doc["raw_by_format"].values()), []
        )

    def raw_one(self, fmt: str, path: Path) -> None:
        cmd = [
            sys.executable,
            "-m",
            "bench.serving.raw",
            "--model",
            str(path),
            "--device",
            self.state.a.device,
            "--repeats",
            str(self.state.a.raw_repeats),
        ]
        for b in self.state.a.raw_batch:
            cmd += ["--batch", str(b)]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, cwd=ROOT, env=self.state.child_env(), timeout=300, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"raw {fmt}: exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
        self.state.doc["raw_by_format"][fmt] = json.loads(proc.stdout.strip().splitlines()[-1])
        log(f"raw {fmt}: {self.state.doc['raw_by_format'][fmt]}")

    def cuda_context(self) -> None:
        """The per-instance CUDA context allowance of GPU memory planning (bench.serving.cuda_context)."""
        cmd = [
            sys.executable,
            "-m",
            "bench.serving.cuda_context",
            "--model-pt",
            str(model_pt(self.state)),
            "--batch",
            "32",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=180, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"cuda_context: exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
        self.state.doc["cuda_context"] = json.loads(proc.stdout.strip().splitlines()[-1])
        log(f"cuda context: {self.state.doc['cuda_context']}")

    def baseline(self) -> None:
        port = free_port()
        srv = Process(
            "baseline",
            [
                sys.executable,
                "-m",
                "bench.serving.baseline_server",
                "--model-pt",
                str(model_pt(self.state)),
                "--port",
                str(port),
                "--device",
                self.state.a.device,
            ],
            self.state.out / "baseline.log",
            cwd=ROOT,
        ).start()
        try:
            wait_until(
                lambda: http_status(f"http://{LOOPBACK}:{port}/v2/health/ready") == 200,
                180,
                what="baseline server ready",
            )
            for c in self.state.a.baseline_concurrency:
                with GpuSampler() as gpu:
                    r = loadgen.run(
                        loadgen.LoadSpec(
                            LOOPBACK,
                            port,
                            "resnet18",
                            concurrency=c,
                            duration_s=self.state.a.baseline_seconds,
                            warmup_s=2.0,
                            processes=1,
                        )
                    )
                r["gpu_util_pct"] = gpu.mean
                log(
                    f"baseline c={c}: {r['throughput']:.0f} req/s p50 {r['p50_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms "
                    f"errors {r['errors']}"
                )
                self.state.doc["baseline"]["points"].append(r)
        finally:
            srv.stop(timeout=10)

    def serve(self) -> None:
        """Triton (bench.serving.served): under the PyTorch backend, TorchScript on the r24.10 build
        installed in the bundle's backends directory, .pt2 on the main measurement build."""
        backends = Path(self.state.a.triton_root) / "pytriton/tritonserver/backends"
        names = [t["name"] for t in self.state.doc["triton"]]
        if self.state.backend != "pytorch_libtorch":
            Served(self.state, Server("all", tuple(names), backends)).run()
            return
        pt2 = tuple(t["name"] for t in self.state.doc["triton"] if t["format"] == "pt2")
        rest = tuple(n for n in names if n not in pt2)
        if rest:
            env = pytorch_backend.runtime_env(dict(os.environ), backends)
            self.state.guard("triton pytorch_libtorch", Served(self.state, Server("all", rest, backends, env)).run)
        if pt2:
            if not self.state.a.pt2_backends:
                raise RuntimeError("--pt2-backends: not given; allowed: the main measurement build's directory")
            where = Path(self.state.a.pt2_backends)
            env = pytorch_backend.runtime_env(dict(os.environ), where, pt2=True)
            server = Server("pt2", pt2, where, env, pt2=True, extras=False)
            self.state.guard("triton torch_aoti", Served(self.state, server).run)

    def write(self) -> Path:
        if (
            self.state.doc["raw"]
            and self.state.doc["baseline"]["points"]
            and any(t["points"] for t in self.state.doc["triton"])
        ):
            self.state.doc["summary"] = stats.summarize(self.state.doc)
            self.state.doc["summary"]["p4"] = stats.p4_summary(self.state.doc)
            self.state.doc["summary"]["batched"] = stats.batched_summary(self.state.doc)
            try:
                stats.validate_result(self.state.doc)
            except stats.ResultError as e:
                self.state.doc["errors"].append({"phase": "validate", "error": str(e)})
        path = self.state.out / "serving.json"
        path.write_text(json.dumps(stats.finite(self.state.doc), indent=2, default=str, allow_nan=False) + "\n")
        return path

    def run(self) -> int:
        self.state.out.mkdir(parents=True, exist_ok=True)
        if self.state.work.exists():
            shutil.rmtree(self.state.work)
        self.state.work.mkdir(parents=True)
        self.state.guard("environment", self.environment)
        self.state.guard("export", lambda: export_all(self.state))
        if self.state.doc["triton"]:
            self.state.guard("raw", self.raw)
            if self.state.a.device == "cuda":
                self.state.guard("cuda context", self.cuda_context)
            self.state.guard("baseline", self.baseline)
            self.state.guard("triton", self.serve)
        path = self.write()
        s = self.state.doc.get("summary")
        log(f"wrote {path}; errors: {len(self.state.doc['errors'])}")
        if s:
            log(f"summary: {json.dumps(s)}")
        return 0 if not self.state.doc["errors"] else 1


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
        "--backend",
        choices=sorted(BACKEND_NAMES),
        help="what serves the models: pytorch_libtorch (export --target cloud, Triton's PyTorch backend built by "
        "bench.serving.pytorch_backend into the triton root's backends/; the default with --device cuda) or "
        "python (export --target local's wrapper; the default with --device cpu)",
    )
    p.add_argument(
        "--backend-info",
        action="append",
        default=[],
        help="bench.serving.pytorch_backend's JSON of a build this run serves (repeat): recorded in environment",
    )
    p.add_argument(
        "--pt2-backends",
        default="",
        help="backend directory of the main measurement build (bench.serving.pytorch_backend --pt2-by-env) that "
        "serves .pt2 models under --backend pytorch_libtorch",
    )
    p.add_argument(
        "--client-batch",
        type=int,
        default=0,
        help="also drive the best TorchScript model and every .pt2 model with requests of this many images "
        "(perf_analyzer -b) at --client-batch-concurrency; a .pt2 is driven that way only (0: none)",
    )
    p.add_argument("--client-batch-concurrency", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument(
        "--pt2-variants",
        nargs="+",
        default=[],
        help="export only these variants as .pt2 (each an AOTInductor compile of about a minute; default: all)",
    )
    p.add_argument(
        "--sweep-shm",
        nargs="+",
        default=["system"],
        choices=("system", "cuda"),
        help="perf_analyzer's shared memory for the sweep, each mode a sweep of its own (default: system; cuda "
        "needs --device cuda)",
    )
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
    return Bench(RunState(p.parse_args(argv))).run()


if __name__ == "__main__":
    sys.exit(main())
