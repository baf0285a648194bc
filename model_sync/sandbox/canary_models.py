"""Small python-backend models for the gray-release (canary) scenarios: four kinds of one model,
so that any two of them can be versions N and N+1 of the same name.

    good     OUTPUT0 = INPUT0 * 2, after GOOD_DELAY_S (10 ms) per request
    errors   as good, but the request whose INPUT0[0] rounds to r with r % ERROR_MODULUS ==
             ERROR_RESIDUE (1 in 20: 5 %) fails: execute() raises TritonModelException; `fails(values)`
             says which, so a test can predict every failure from the inputs it sent, and the
             message names the version (`injected_version(error)` reads it back)
    slow     as good, after SLOW_FACTOR x GOOD_DELAY_S (30 ms): its p99 is far above CPU noise
    tail     as slow, but the requests whose INPUT0[0] rounds to r with r % 100 < TAIL_PERCENT (3 %)
             sleep TAIL_EXTRA_S (150 ms) more: against a stable `slow`, a regression of the slowest
             requests only, which moves p99 ~5x and the mean by a sixth (`slowed(values)` says
             which); it runs TAIL_INSTANCES instances, so a slowed request holds one and the
             others answer on (with one, every request queued behind it would be slow too)
    broken   initialize() raises: the load fails and the version is never READY
    cold     as good, but its first instance answers its first COLD_REQUESTS requests after its
             load (the warm-up's zeros and the smoke's ones aside) COLD_EXTRA_S later: identical
             code whose replicas just loaded it answer a few requests cold, what a cold canary is;
             it runs TAIL_INSTANCES instances, so no request waits behind a cold one

Every kind declares the same config (INPUT0 / OUTPUT0, TYPE_FP32, dims [4], max_batch_size 0, one
CPU instance but tail's TAIL_INSTANCES, zero-filled model_warmup as `export` writes it), written through ModelConfig (model_sync.triton_model.model_config), and `model-sync push` takes the
directory as it is: `<dest>/<name>/config.pbtxt` + `<dest>/<name>/<version_dir>/model.py`. Neither the
warm-up (zeros) nor the smoke inference (model_sync.observation.smoke: ones) is a failing input, so Triton, the
agent and `verify` accept an `errors` version as a load that works.

Why raise (measured on tritonserver 2.51, CPU): a request answered with
`pb_utils.InferenceResponse(error=pb_utils.TritonError(...))` reaches the client as HTTP 500 but is
counted in `nv_inference_request_success`, never in `nv_inference_request_failure`, so an analysis
of /metrics would not see it; an exception raised by execute() fails the request(s) of that call,
counted as `nv_inference_request_failure{reason="BACKEND"}`. Without dynamic batching (max_batch_size
0) each execute() call holds one request, so only the chosen input fails.

Latency: python-backend dispatch adds ~2-3 ms to each sleep on this 2-core machine, so slow's
measured latency is ~2.6x good's (p50 ~33 ms vs ~12.5 ms), its added 20 ms well above noise.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from model_sync.contract import layout
from model_sync.triton_model import model_config

KINDS = ("good", "errors", "slow", "broken", "tail", "cold")
INPUT = "INPUT0"
OUTPUT = "OUTPUT0"
DIMS = (4,)
GOOD_DELAY_S = 0.010  # seconds each request of `good` and `errors` sleeps in execute()
SLOW_FACTOR = 3  # `slow` sleeps SLOW_FACTOR x GOOD_DELAY_S
ERROR_MODULUS = 20  # `errors` fails the inputs whose first value, rounded, is ERROR_RESIDUE mod 20 ...
ERROR_RESIDUE = 13  # ... i.e. 1 request in 20 (5 %) when INPUT0[0] counts 0, 1, 2, ...; never the smoke's 1.0
TAIL_PERCENT = 3  # `tail` slows the inputs whose first value, rounded, is below 3 mod 100 (never the smoke's 1.0 ...
TAIL_EXTRA_S = 0.150  # ... nor the warm-up's 0: both are below 3, so `tail` skips values under 100) by this much
# `cold` answers its first instance's first 3 requests after its load 250 ms late: they are the p99
# of its replica's summary while it holds fewer than 300 requests (0.99 n > n - 3), which a first
# verdict (minRequests in the window, a few seconds after the load) always does, and they are gone
# from the summary in the window that confirms a latency failure at the product's
# latencyConfirmAfterSeconds (60 s: Triton's summaries hold the last 60 s). 250 ms keeps a cold p99
# far above a loaded machine's stable p99 plus make test's 80 ms floor.
COLD_REQUESTS = 3
COLD_EXTRA_S = 0.250
TAIL_INSTANCES = 4  # `tail`'s CPU instances: as many as the lab's client threads, so no request waits for a slow one
# What `errors` raises; it names the version that failed, so a client can attribute the failure exactly
# (injected_version) instead of by the replica's nearest answer in time.
INJECTED_MESSAGE = "canary model 'errors' version {version}: input {first:g} rejected on purpose"
_INJECTED = re.compile(
    re.escape(INJECTED_MESSAGE).replace(r"\{version\}", r"(?P<version>[0-9]+)").replace(r"\{first:g\}", r"\S+")
)

# The model.py of every kind; the kind's constants are filled in. It runs inside tritonserver's
# python backend stub: numpy<2 and the standard library only.
MODEL_PY = '''\
"""Canary scenario model {kind!r} (model_sync/sandbox/canary_models.py)."""

import time

import numpy as np
import triton_python_backend_utils as pb_utils

KIND = {kind!r}
DELAY_S = {delay!r}
ERROR_MODULUS = {modulus!r}
MESSAGE = {message!r}
ERROR_RESIDUE = {residue!r}
TAIL_PERCENT = {tail_percent!r}
TAIL_EXTRA_S = {tail_extra!r}
COLD_REQUESTS = {cold_requests!r}
COLD_EXTRA_S = {cold_extra!r}


class TritonPythonModel:
    def initialize(self, args):
        self.version = args["model_version"]
        self.answered = 0  # requests answered since the load, the warm-up's and the smoke's aside
        self.first = args["model_instance_name"].endswith("_0")  # cold: only the first instance is
        if KIND == "broken":
            raise RuntimeError("canary model 'broken': initialize fails on purpose")

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, {input!r}).as_numpy()
            time.sleep(DELAY_S)
            first = float(x.flat[0])
            if first not in (0.0, 1.0):
                self.answered += 1
                if KIND == "cold" and self.first and self.answered <= COLD_REQUESTS:
                    time.sleep(COLD_EXTRA_S)
            if KIND == "tail" and first >= 100 and int(round(first)) % 100 < TAIL_PERCENT:
                time.sleep(TAIL_EXTRA_S)
            if KIND == "errors" and int(round(first)) % ERROR_MODULUS == ERROR_RESIDUE:
                # Raised, not returned as InferenceResponse(error=...): Triton 2.51 counts a returned
                # error response as a success in /metrics; a raised one as a BACKEND failure.
                raise pb_utils.TritonModelException(MESSAGE.format(version=self.version, first=first))
            out = (x * np.float32(2)).astype(np.float32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor({output!r}, out)]))
        return responses
'''


def delay_s(kind: str) -> float:
    """Seconds one request of `kind` sleeps in execute() (0 for broken: it never executes)."""
    _check_kind(kind)
    return {"slow": SLOW_FACTOR * GOOD_DELAY_S, "tail": SLOW_FACTOR * GOOD_DELAY_S, "broken": 0.0}.get(
        kind, GOOD_DELAY_S
    )


def fails(values: Iterable[float]) -> bool:
    """Whether the `errors` kind answers an input whose INPUT0 holds `values` with a TritonError."""
    first = float(next(iter(values)))
    return round(first) % ERROR_MODULUS == ERROR_RESIDUE


def slowed(values: Iterable[float]) -> bool:
    """Whether the `tail` kind adds TAIL_EXTRA_S to an input whose INPUT0 holds `values`."""
    first = float(next(iter(values)))
    return first >= 100 and round(first) % 100 < TAIL_PERCENT


def injected_version(error: str) -> int | None:
    """The version an `errors` failure names (INJECTED_MESSAGE, anywhere in the client's error
    line); None for any other failure."""
    found = _INJECTED.search(error)
    return int(found["version"]) if found else None


def config(name: str, instances: int = 1) -> Any:
    """The ModelConfig every kind shares (the same tensors: they are versions of one model), with
    `instances` CPU instances."""
    layout.check_model_name(name)
    pb2 = model_config.pb2
    cfg = model_config.ModelConfig()
    cfg.name = name
    cfg.backend = "python"
    cfg.max_batch_size = 0
    for io, tensor in ((cfg.input.add(), INPUT), (cfg.output.add(), OUTPUT)):
        io.name = tensor
        io.data_type = pb2.DataType.Value("TYPE_FP32")
        io.dims.extend(DIMS)
    group = cfg.instance_group.add()
    group.kind = pb2.ModelInstanceGroup.Kind.Value("KIND_CPU")
    group.count = instances
    # Zero-filled warm-up samples, as `export` writes them: the stub's first execution (~0.1-0.5 s
    # here) happens before READY, not in the first requests the canary analysis judges.
    return model_config.add_warmup(cfg)


def model_py(kind: str) -> str:
    """The model.py of `kind`."""
    return MODEL_PY.format(
        kind=kind,
        delay=delay_s(kind),
        modulus=ERROR_MODULUS,
        message=INJECTED_MESSAGE,
        residue=ERROR_RESIDUE,
        tail_percent=TAIL_PERCENT,
        tail_extra=TAIL_EXTRA_S,
        cold_requests=COLD_REQUESTS,
        cold_extra=COLD_EXTRA_S,
        input=INPUT,
        output=OUTPUT,
    )


def write_model(dest_dir: Path | str, name: str, kind: str, version_dir: int = 1, *, overwrite: bool = False) -> Path:
    """Write `<dest_dir>/<name>/config.pbtxt` and `<dest_dir>/<name>/<version_dir>/model.py` for
    `kind` (one of KINDS); returns the model directory. An existing `<dest_dir>/<name>` is a
    FileExistsError unless `overwrite` (then it is replaced: push wants exactly one version dir)."""
    _check_kind(kind)
    layout.check_version(version_dir)
    cfg = config(name, TAIL_INSTANCES if kind in ("tail", "cold") else 1)
    model_dir = Path(dest_dir) / name
    if model_dir.exists():
        if not overwrite:
            raise FileExistsError(f"{model_dir}: exists; allowed: a new directory, or overwrite=True")
        shutil.rmtree(model_dir)
    (model_dir / str(version_dir)).mkdir(parents=True)
    model_config.write_file(str(model_dir / layout.CONFIG_FILE), cfg)
    (model_dir / str(version_dir) / "model.py").write_text(model_py(kind))
    return model_dir


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"canary model kind: {kind!r}; allowed: {', '.join(KINDS)}")
