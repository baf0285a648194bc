"""The serving benchmark's first phase: each variant in each format through `model-sync export
--target local`, each recorded in the result's `triton` list (an export that fails is recorded and
the others go on); and where the exported model files lie (`model_file`, `model_pt`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench.serving.instruments import log
from bench.serving.state import RunState
from bench.serving.variants import FACTORY, INPUT_SHAPE, ROOT, Variant
from model_sync.triton_model.formats import MODEL_FILES


def export_all(state: RunState) -> None:
    """Every variant in every format; an export that fails is recorded and the others go on. Under
    the PyTorch backend a .pt2 takes its TorchScript sibling's config, so TorchScript goes first."""
    state.repo.mkdir(parents=True, exist_ok=True)
    for fmt in sorted(state.formats, key=lambda f: f != "torchscript"):
        for v in state.variants:
            if fmt == "pt2" and state.a.pt2_variants and v.name not in state.a.pt2_variants:
                continue
            state.guard(f"export {v.named(fmt)}", lambda v=v, fmt=fmt: export_one(state, v, fmt))
    if not state.doc["triton"]:
        raise RuntimeError("export: no model exported")
    state.doc["model"]["source"] = state.doc["triton"][0]["export_meta"].get("factory")


def export_one(state: RunState, v: Variant, fmt: str) -> None:
    name = v.named(fmt)
    if state.backend == "pytorch_libtorch" and fmt == "pt2":
        cmd = [sys.executable, "-m", "bench.serving.aoti_package", "--factory", FACTORY,
               "--shape", ",".join(map(str, INPUT_SHAPE)), "--max-batch-size", str(v.max_batch_size),
               "--config", str(state.repo / v.named("torchscript") / "config.pbtxt"), "--name", name,
               "--output", str(state.repo), "--device", state.a.device]  # fmt: skip
    else:
        args = v.export_args(state.repo, state.a.instance_kind, fmt, state.target)
        cmd = [sys.executable, "-m", "model_sync", "export", *args]
    shown = " ".join(["model-sync" if cmd[2] == "model_sync" else f"python3 -m {cmd[2]}", *cmd[3:]])
    log("$ " + shown)
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=state.child_env(), cwd=ROOT, timeout=900, check=False
    )
    log((proc.stdout + proc.stderr).strip()[-800:])
    if proc.returncode != 0:
        shutil.rmtree(state.repo / name, ignore_errors=True)
        raise RuntimeError(
            f"model-sync export {name}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-400:]}"
        )
    meta = json.loads((state.repo / name / "export.json").read_text())
    state.doc["triton"].append(
        {
            "name": name,
            "format": fmt,
            "backend": state.backend_of(fmt),
            "variant": asdict(v),
            "export_command": shown.replace(str(state.repo), "REPO"),
            "export_seconds": round(time.monotonic() - t0, 1),
            "export_meta": meta,
            "config_pbtxt": (state.repo / name / "config.pbtxt").read_text(),
            "client": "perf_analyzer grpc + system shm",
            "points": [],
        }
    )


def model_file(state: RunState, fmt: str) -> Path | None:
    """The first exported variant's model file in `fmt` (None: none exported)."""
    entry = next((t for t in state.doc["triton"] if t.get("format") == fmt), None)
    return state.repo / entry["name"] / "1" / MODEL_FILES[fmt] if entry else None


def model_pt(state: RunState) -> Path:
    path = model_file(state, "torchscript")
    if path is None:
        raise RuntimeError("no TorchScript export: the baseline and the CUDA context run model.pt")
    return path
