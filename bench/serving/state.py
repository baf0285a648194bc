"""One serving-benchmark run: its arguments, the result document its phases fill
(bench.serving.stats.SCHEMA), its deadline (`--deadline-s`), and the guard every phase runs under:
a failure is recorded in `errors` and the run goes on, so one run returns everything that worked."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time
import traceback
from pathlib import Path
from typing import Any

from bench.serving import stats
from bench.serving.instruments import log
from bench.serving.variants import DEFAULT_VARIANTS, FACTORY, INPUT_SHAPE, ROOT, Variant
from model_sync.triton_model.formats import FORMATS

# What serves the exported models (`--backend`): Triton's own PyTorch backend, built from the pinned
# sources on the GPU host (bench.serving.pytorch_backend) and fed `export --target cloud`'s config,
# which is what production serves; or the python-backend wrapper of `export --target local`, kept for
# CPU runs of the harness.
BACKEND_NAMES = {
    "pytorch_libtorch": "pytorch_libtorch: Triton's PyTorch backend (r24.10, built from the pinned sources)",
    "python": "python: the python-backend wrapper of export --target local",
}
# .pt2 under the PyTorch backend is its torch_aoti platform, served by the main measurement build
PT2_BACKEND_NAME = (
    "torch_aoti: Triton's PyTorch backend (main 266fd38, built from the pinned sources; MEASUREMENT build: "
    "Triton 2.51's core refuses the torch_aoti platform, so the model is served as backend pytorch and the "
    "backend told by bench.serving.pytorch_backend.PT2_ENV that every model of its server is a .pt2)"
)
BACKEND_FORMATS = {"pytorch_libtorch": ("torchscript", "pt2"), "python": FORMATS}
TARGETS = {"pytorch_libtorch": "cloud", "python": "local"}  # the `export --target` each backend serves


class RunState:
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
        self.backend = a.backend or ("pytorch_libtorch" if a.device == "cuda" else "python")
        allowed = BACKEND_FORMATS[self.backend]
        if any(f not in allowed for f in self.formats):
            raise SystemExit(f"--formats: {a.formats!r} with --backend {self.backend}; allowed: {', '.join(allowed)}")
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
        self.doc["environment"]["backend"] = BACKEND_NAMES[self.backend]

    @property
    def target(self) -> str:
        return TARGETS[self.backend]

    def backend_of(self, fmt: str) -> str:
        """What serves a model of `fmt` in this run (recorded in each result entry)."""
        return PT2_BACKEND_NAME if self.backend == "pytorch_libtorch" and fmt == "pt2" else BACKEND_NAMES[self.backend]

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

    def best(self) -> dict[str, Any] | None:
        """The summary's best point so far (None before the raw limit and the baseline are measured)."""
        if not (self.doc["raw"] and self.doc["baseline"]["points"]):
            return None
        best: dict[str, Any] | None = stats.summarize(self.doc).get("best")
        return best

    def best_name(self, among: tuple[str, ...] | None = None) -> str:
        """The model the extra checks (CUDA shared memory, HTTP) drive: the best point's when it is
        `among` the server's models (default: any), else the last of them (default: the last variant)."""
        best = self.best()
        if best and (among is None or best["variant"] in among):
            return str(best["variant"])
        return among[-1] if among else self.variants[-1].name

    def child_env(self) -> dict[str, str]:
        """The environment of the run's Python children (export, raw): this repository and
        `--export-pythonpath` on PYTHONPATH."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), self.a.export_pythonpath or "") if p)
        return env
