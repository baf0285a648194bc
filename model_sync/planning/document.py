"""The plan as a document: `model-sync plan`'s output (text lines or one JSON document), its monthly cost,
and the one strict reader of that JSON (what the stack writer, tools/stack_plan.py, and the plan's GPU
check, bench.consolidation.plan_check, take).

The monthly cost is every planned GPU on for a month of HOURS_PER_MONTH at the on-demand price of one
GPU-hour the user gives (--gpu-hour-usd): prices differ per region and change, so none is built in.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_sync import errors
from model_sync.environments import MAX_GPU_MEMORY_GIB
from model_sync.planning import choice, inputs, placement

SCHEMA = "triton-platform/model-sync-plan/v1"
HOURS_PER_MONTH = 730  # the month of AWS's on-demand prices and its pricing calculator


@dataclass(frozen=True)
class PlannedDeployment:
    name: str
    replicas: int  # at the declared peak rates, one GPU each
    instances: dict[str, int]  # per model (in placement order): instances on each replica


@dataclass(frozen=True)
class Plan:
    gpu: str  # the GPU the profiles were measured on, as the driver names it
    gpu_memory_gib: float
    min_replicas: int
    deployments: tuple[PlannedDeployment, ...]


def monthly_usd(gpus: int, gpu_hour_usd: float | None) -> float | None:
    return None if gpu_hour_usd is None else round(gpus * gpu_hour_usd * HOURS_PER_MONTH, 2)


def to_json(deployments: list[placement.Deployment], profiles: inputs.Profiles, gpu_memory_gib: float,
            min_replicas: int, gpu_hour_usd: float | None) -> dict[str, Any]:  # fmt: skip
    allowed = placement.allowed_bytes(gpu_memory_gib)
    gpus = sum(d.replicas for d in deployments)
    return {
        "schema": SCHEMA, "gpu": profiles.gpu, "gpu_memory_gib": gpu_memory_gib, "backend": profiles.backend,
        "load_target": placement.LOAD_TARGET, "busy_target": placement.BUSY_TARGET, "min_replicas": min_replicas,
        "gpus": gpus, "gpu_hour_usd": gpu_hour_usd, "monthly_usd": monthly_usd(gpus, gpu_hour_usd),
        "deployments": [
            {"name": d.name, "replicas": d.replicas, "gpu_busy_pct": round(100 * d.busy(), 1),
             "memory_bytes": d.memory(), "memory_allowed_bytes": allowed,
             "models": [{"model": n.demand.model, "rate": n.demand.rate, "p99_ms": n.demand.p99_ms,
                         "instances": d.instances(n), "instance_capacity": round(n.capacity, 1),
                         "profile_complete": n.profile.complete, **_draws(n)} for n in d.needs]}
            for d in deployments
        ],
    }  # fmt: skip


def _draws(need: placement.Need) -> dict[str, int]:
    """`draws`: how many profiles of the model its capacity is the lowest of, where more than one."""
    return {"draws": len(need.profile.draws)} if len(need.profile.draws) > 1 else {}


def kind_rows(kept: choice.Outcome, outcomes: list[choice.Outcome]) -> list[dict[str, Any]]:
    """Each GPU kind weighed (when profiles of more than one were given): its plan's GPUs and cost, or why
    it was refused, and which was kept."""
    return [
        {"gpu": o.kind.profiles.gpu, "gpu_memory_gib": o.kind.memory_gib, "gpu_hour_usd": o.kind.hour_usd,
         "gpus": None if o.refused else o.gpus, "monthly_usd": None if o.refused else monthly_usd(o.gpus, o.kind.hour_usd),
         "refused": o.refused, "chosen": o is kept}
        for o in outcomes
    ]  # fmt: skip


def _draws_text(doc: dict[str, Any]) -> str:
    draws = max((m.get("draws", 1) for d in doc["deployments"] for m in d["models"]), default=1)
    return f"; each model's lowest capacity of up to {draws} profile draws" if draws > 1 else ""


def text_lines(doc: dict[str, Any]) -> list[str]:
    lines = [f"plan: {sum(len(d['models']) for d in doc['deployments'])} models on {doc['gpus']} GPU(s) "
             f"({doc['gpu']}, {doc['gpu_memory_gib']:g} GiB; {doc['backend'].split(':')[0]}{_draws_text(doc)})"]  # fmt: skip
    for d in doc["deployments"]:
        models = ", ".join(f"{m['model']} x{m['instances']}" for m in d["models"])
        lines.append(f"{d['name']}: {d['replicas']} replica(s), each GPU {d['gpu_busy_pct']:g} % busy, "
                     f"{d['memory_bytes'] / 2**30:.1f} of {d['memory_allowed_bytes'] / 2**30:.1f} GiB: {models}")  # fmt: skip
    if doc["monthly_usd"] is None:
        lines.append("cost: not computed; give --gpu-hour-usd, the on-demand price of one GPU-hour")
    else:
        lines.append(f"cost: {doc['gpus']} GPU(s) x ${doc['gpu_hour_usd']:g} a GPU-hour x {HOURS_PER_MONTH} h = "
                     f"${doc['monthly_usd']:,.2f} a month on demand")  # fmt: skip
    for k in doc.get("kinds", []):
        what = (f"refused: {k['refused'].removeprefix('plan: ')}" if k["refused"] else f"{k['gpus']} GPU(s)"
                + ("" if k["monthly_usd"] is None else f", ${k['monthly_usd']:,.2f} a month"))  # fmt: skip
        lines.append(f"kind {k['gpu']} ({k['gpu_memory_gib']:g} GiB): {what}{' (kept)' if k['chosen'] else ''}")
    return lines


def command(profiles_paths: list[Path], demand_path: Path, gpu_memory_gib: list[float], min_replicas: int,
            gpu_hour_usd: list[float], output: str) -> None:  # fmt: skip
    """`model-sync plan`: read the files, plan each GPU kind, print the kept plan (text lines, or one JSON
    document), with every kind weighed when there are several."""
    counts = (len(profiles_paths), len(gpu_memory_gib), len(gpu_hour_usd))
    if counts[1] != counts[0] or counts[2] not in (0, counts[0]):
        raise errors.usage(f"plan: {counts[0]} --profiles, {counts[1]} --gpu-memory-gib, {counts[2]} --gpu-hour-usd; "
                           "allowed: one --gpu-memory-gib per --profiles (its GPU kind), and one --gpu-hour-usd "
                           "per --profiles or none")  # fmt: skip
    if min_replicas < 1:
        raise errors.usage(f"plan: --min-replicas {min_replicas}; allowed: at least 1 replica")
    for memory in gpu_memory_gib:
        if not 0 < memory <= MAX_GPU_MEMORY_GIB:
            raise errors.usage(
                f"plan: --gpu-memory-gib {memory:g}; allowed: a GPU memory in (0, {MAX_GPU_MEMORY_GIB}] GiB"
            )
    for price in gpu_hour_usd:
        if not price > 0:
            raise errors.usage(f"plan: --gpu-hour-usd {price:g}; allowed: a positive price of one GPU-hour in USD")
    demands = inputs.read_demand(demand_path)
    kinds = [choice.Kind(inputs.read_profiles(path), memory, price) for path, memory, price
             in itertools.zip_longest(profiles_paths, gpu_memory_gib, gpu_hour_usd)]  # fmt: skip
    kept, outcomes = choice.choose(demands, kinds, min_replicas)
    doc = to_json(list(kept.deployments), kept.kind.profiles, kept.kind.memory_gib, min_replicas, kept.kind.hour_usd)
    if len(outcomes) > 1:
        doc["kinds"] = kind_rows(kept, outcomes)
    print(json.dumps(doc, indent=2, sort_keys=True) if output == "json" else "\n".join(text_lines(doc)))


def read_plan(path: Path) -> Plan:
    """A plan's JSON (`model-sync plan --output json`), strictly: one line, exit 2, on anything else."""

    def fail(what: str) -> errors.SyncError:
        return errors.usage(
            f"plan file {path}: {what}; allowed: the JSON of `model-sync plan --output json` ({SCHEMA})"
        )

    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise fail(f"not readable as JSON ({type(e).__name__})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise fail(f"schema {doc.get('schema') if isinstance(doc, dict) else None!r}")
    try:
        deployments = tuple(
            PlannedDeployment(str(d["name"]), int(d["replicas"]), {str(m["model"]): int(m["instances"]) for m in d["models"]})
            for d in doc["deployments"]
        )  # fmt: skip
        plan = Plan(str(doc["gpu"]), float(doc["gpu_memory_gib"]), int(doc["min_replicas"]), deployments)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise fail(f"lacks {e}") from None
    if not deployments or any(d.replicas < 1 or not d.instances for d in deployments):
        raise fail("a deployment without replicas or models")
    return plan
