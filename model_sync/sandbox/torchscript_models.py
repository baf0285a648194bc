"""Small TorchScript models for the gray-release lab, exported as users export theirs: the real
`model-sync export --target local` (in a subprocess) of a torch module factory, so what Triton
serves is `model.pt` inside the python-backend wrapper (model_sync/export/torch_python_backend.py).

    good     OUTPUT__0 = INPUT__0 * 2, no sleep
    errors   as good, but forward() raises when round(x[:, 0]) % ERROR_MODULUS == ERROR_RESIDUE for
             any row (1 in 20 inputs, 5 %, when x[0] counts 0, 1, 2, ...); `fails(x)` says which.
             The wrapper turns the raise into a TritonModelException naming model and version, so
             Triton fails and counts (nv_inference_request_failure{reason="BACKEND"}) every request
             of that execute() call: with dynamic batching, the requests batched with a failing one
             fail too.

Both take one float32 input x of shape [batch, 4] and return one output of the same shape.
`export_local()` writes `<dest_dir>/<name>/config.pbtxt` + `<dest_dir>/<name>/1/{model.pt,model.py}`
(+ export.json), which `model-sync push <dest_dir>/<name>` takes as it is. Tensors are named as
`export` names them: INPUT__0 / OUTPUT__0 (TYPE_FP32). With max_batch_size 0 the config declares
dims [1, 4] (the example's whole shape), with max_batch_size > 0 dims [4]. Neither export's
checks (random normal examples), the zero-filled warm-up nor the smoke inference (ones) is a
failing input.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from model_sync.contract import layout

KINDS = ("good", "errors")
INPUT = "INPUT__0"
OUTPUT = "OUTPUT__0"
ERROR_MODULUS = 20  # `errors` fails a batch in which some round(x[i, 0]) % 20 ...
ERROR_RESIDUE = 13  # ... == 13 (Python's modulo: round(-7) fails too)
MODULE = "torchscript_lab_factories"  # the factory file's module name (export's MODULE:FACTORY)
EXPORT_TIMEOUT_S = 300.0  # one export measured 4-6 s here (2 cores), ~2 s of it importing torch

# The factories `export` imports. Scripted (export --method script): a trace would freeze the
# data-dependent branch, TorchScript keeps it and its `raise`.
FACTORY_PY = f'''\
"""TorchScript lab models (model_sync/sandbox/torchscript_models.py): good() and errors()."""

import torch


class Doubler(torch.nn.Module):
    def __init__(self, fail: bool):
        super().__init__()
        self.fail = fail

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fail:
            bad = torch.remainder(torch.round(x[:, 0]), {float(ERROR_MODULUS)!r}) == {float(ERROR_RESIDUE)!r}
            if bool(bad.any()):
                first = int(torch.round(x[:, 0][bad][0]))
                raise ValueError("torchscript lab model 'errors': an input rounding to " + str(first) + " rejected")
        return x * 2


def good():
    return Doubler(False)


def errors():
    return Doubler(True)
'''


def fails(x: Any) -> bool:
    """Whether `errors` raises on input `x` ([rows, 4], or one row [4]): some row's x[0] rounded
    is ERROR_RESIDUE mod ERROR_MODULUS. Python's round and modulo, as torch.round/remainder do."""
    rows = [x] if not hasattr(x[0], "__len__") else list(x)
    return any(round(float(row[0])) % ERROR_MODULUS == ERROR_RESIDUE for row in rows)


def write_factory(directory: Path | str) -> Path:
    """Write `<directory>/<MODULE>.py` (FACTORY_PY); returns its path."""
    path = Path(directory) / f"{MODULE}.py"
    path.write_text(FACTORY_PY)
    return path


def export_local(
    dest_dir: Path | str,
    name: str,
    kind: str,
    max_batch_size: int = 0,
    *,
    instance_count: int = 1,
    preferred_batch_sizes: tuple[int, ...] = (),
    max_queue_delay_us: int | None = None,
    overwrite: bool = False,
    timeout: float = EXPORT_TIMEOUT_S,
) -> Path:
    """`python -m model_sync export <MODULE>:<kind> --target local --method script` into
    `<dest_dir>/<name>`, with the factory file's directory on PYTHONPATH; returns the model
    directory. The example batch is 1 with max_batch_size 0, else min(2, max_batch_size). A
    failing export is a RuntimeError with its last error line."""
    if kind not in KINDS:
        raise ValueError(f"torchscript lab model kind: {kind!r}; allowed: {', '.join(KINDS)}")
    layout.check_model_name(name)
    if max_batch_size < 0:
        raise ValueError(f"max_batch_size: {max_batch_size}; allowed: 0 (no batching) or more")
    dest = Path(dest_dir).resolve()
    batch = min(2, max_batch_size) if max_batch_size > 0 else 1
    argv = [sys.executable, "-m", "model_sync", "export", f"{MODULE}:{kind}", "--name", name,
            "--output", str(dest), "--example-shape", f"{batch},4", "--example-dtype", "float32",
            "--method", "script", "--target", "local", "--max-batch-size", str(max_batch_size),
            "--instance-count", str(instance_count), "--quiet"]  # fmt: skip
    for size in preferred_batch_sizes:
        argv += ["--preferred-batch-size", str(size)]
    if max_queue_delay_us is not None:
        argv += ["--max-queue-delay-us", str(max_queue_delay_us)]
    if overwrite:
        argv.append("--overwrite")
    with tempfile.TemporaryDirectory(prefix="torchscript-lab-") as src:
        write_factory(src)
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")  # no __pycache__ beside the factory
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        raise RuntimeError(
            f"model-sync export {name} ({kind}): exit {proc.returncode}: {lines[-1] if lines else 'no output'}"
        )
    return dest / name
