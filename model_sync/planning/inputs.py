"""What `model-sync plan` reads, strictly: the models' measured serving profiles (the GPU benchmark's
model-profiles.json, bench.consolidation.profile) and the declared demand (a YAML file: per model its
peak rate and p99 target). Anything else is one line, exit 2 (USAGE)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from model_sync import errors
from model_sync.contract import layout

PROFILES_SCHEMA = "triton-platform/bench-model-profiles/v1"
# The backend the profiles were served by, and the one gpu_plan plans their memory for.
PROFILED_BACKEND = "pytorch_libtorch"
DEMAND_KEYS = ("rate", "p99Ms")  # models.<name>: both required, nothing else


@dataclass(frozen=True)
class Point:
    """One measured step of one instance: the offered rate, what it served, its p99, the GPU's busy %, and
    whether it served the profile's share of its rate (a step that did not is a failure at any target)."""

    rate: float
    throughput: float
    p99_ms: float
    gpu_util_pct: float
    served: bool


@dataclass(frozen=True)
class Profile:
    """One model measured alone on one instance: GPU memory per instance and its steps, in one draw (a
    profiles file) or several of the same GPU (`combine`)."""

    model: str
    bytes_per_instance: int  # the highest of the draws'
    draws: tuple[tuple[Point, ...], ...]  # per draw, every measured step by rate
    complete: bool  # every draw's search found a failing rate above its best: the best is not a lower bound


@dataclass(frozen=True)
class Profiles:
    gpu: str
    backend: str
    models: dict[str, Profile]


@dataclass(frozen=True)
class Demand:
    model: str
    rate: float  # peak requests a second
    p99_ms: float  # the p99 latency target


def _fail(path: Path, what: str, allowed: str) -> errors.SyncError:
    return errors.usage(f"plan: {path}: {what}; allowed: {allowed}")


def read_profiles(path: Path) -> Profiles:
    """model-profiles.json: its schema, GPU, and per model its memory per instance and its steps."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise _fail(path, f"not readable as JSON ({type(e).__name__})", "a model-profiles.json file") from None
    if not isinstance(doc, dict) or doc.get("schema") != PROFILES_SCHEMA:
        raise _fail(path, f"schema {doc.get('schema') if isinstance(doc, dict) else None!r}", PROFILES_SCHEMA)
    try:
        share = float(doc["served_share"])
        models = {}
        for name, m in doc["models"].items():
            points = tuple(sorted((_point(p, share) for p in m["curve"]), key=lambda p: p.rate))
            models[name] = Profile(name, int(m["bytes_per_instance"]), (points,), bool(m["complete"]))
        backend = str(doc["backend"])
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise _fail(
            path, f"a profile lacks {e}", f"{PROFILES_SCHEMA} as bench.consolidation.profile writes it"
        ) from None
    if not backend.startswith(PROFILED_BACKEND):
        raise _fail(path, f"backend {backend!r}", f"profiles served by {PROFILED_BACKEND} (the memory plan's backend)")
    return Profiles(str(doc["gpu"]), backend, models)


def combine(draws: list[Profiles]) -> Profiles:
    """Profiles of one GPU measured more than once: per model, every draw's steps (the plan reads the
    lowest capacity of them) and the highest memory per instance. Draws of another GPU or backend are
    one usage line."""
    first = draws[0]
    for other in draws[1:]:
        if (other.gpu, other.backend) != (first.gpu, first.backend):
            raise errors.usage(f"plan: draws of {first.gpu} ({first.backend}) and {other.gpu} ({other.backend}); "
                               "allowed: repeated profiles of one GPU served by one backend")  # fmt: skip
    models: dict[str, Profile] = {}
    for name in dict.fromkeys(n for d in draws for n in d.models):
        each = [d.models[name] for d in draws if name in d.models]
        models[name] = Profile(name, max(p.bytes_per_instance for p in each),
                               tuple(steps for p in each for steps in p.draws), all(p.complete for p in each))  # fmt: skip
    return Profiles(first.gpu, first.backend, models)


def _point(step: dict[str, Any], share: float) -> Point:
    """A curve's step; one perf_analyzer could not measure (no throughput) served nothing."""
    served = step["throughput"] is not None and step["throughput"] >= share * step["rate"]
    p99 = float("inf") if step["p99_ms"] is None else float(step["p99_ms"])
    return Point(float(step["rate"]), float(step["throughput"] or 0.0), p99, float(step["gpu_util_pct"] or 0.0), served)


def read_demand(path: Path) -> list[Demand]:
    """The demand file: `models: {<name>: {rate: <req/s>, p99Ms: <ms>}}`, at least one model."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise _fail(path, f"not readable as YAML ({type(e).__name__})", "models: {NAME: {rate, p99Ms}}") from None
    models = doc.get("models") if isinstance(doc, dict) else None
    if not isinstance(models, dict) or not models or set(doc) != {"models"}:
        raise _fail(path, "no `models` mapping (or other top-level keys)", "models: {NAME: {rate, p99Ms}}, only")
    out = []
    for name, body in models.items():
        if not isinstance(name, str) or not layout.MODEL_NAME_RE.match(name):
            raise _fail(path, f"models.{name!r}", f"model names ({layout.MODEL_NAME_ALLOWED})")
        if not isinstance(body, dict) or set(body) != set(DEMAND_KEYS):
            raise _fail(path, f"models.{name}: {body!r}", "{rate: requests a second, p99Ms: milliseconds}, both")
        values: list[Any] = [body[k] for k in DEMAND_KEYS]
        if any(isinstance(v, bool) or not isinstance(v, int | float) or v <= 0 for v in values):
            raise _fail(path, f"models.{name}: {body!r}", "rate and p99Ms as positive numbers")
        out.append(Demand(name, float(values[0]), float(values[1])))
    return out
