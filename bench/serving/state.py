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

    def best(self) -> dict[str, Any] | None:
        """The summary's best point so far (None before the raw limit and the baseline are measured)."""
        if not (self.doc["raw"] and self.doc["baseline"]["points"]):
            return None
        best: dict[str, Any] | None = stats.summarize(self.doc).get("best")
        return best

    def best_name(self) -> str:
        """The model the extra checks (CUDA shared memory, HTTP) drive: the best point's, else the
        last variant's."""
        best = self.best()
        return str(best["variant"]) if best else self.variants[-1].name

    def child_env(self) -> dict[str, str]:
        """The environment of the run's Python children (export, raw): this repository and
        `--export-pythonpath` on PYTHONPATH."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), self.a.export_pythonpath or "") if p)
        return env
