"""Deployments for a set of models from their measured profiles (model_sync/planning/inputs.py).

Per model, from its profile measured alone on one instance: the **capacity** of one instance at the
model's p99 target is the highest throughput of the steps, from the lowest rate up, that met the target
(and served their offered rate) before the first that did not; the GPU share that step kept busy, per
request, is its **GPU cost**. Of a GPU profiled more than once (draws), the lowest capacity and the
highest cost are read. A model whose lowest measured rate already missed its target (in any draw) is
refused (exit 4), naming it and that step's p99.

Models are then placed, largest GPU cost first. A model busier than BUSY_TARGET of --min-replicas GPUs
gets a deployment of its own with as many replicas (one GPU each) as its cost needs; the others share: as many
deployments as their summed cost needs at BUSY_TARGET (at least one), each model into the least busy of
them where each replica's GPU stays within BUSY_TARGET and its planned memory (model_sync/admission/
gpu_plan.py: the server process, each instance) within the GPU's allowance, or into a new one. Every
deployment has at least --min-replicas replicas, and each replica runs, of each of its models, enough
instances for that model's rate over the replicas at LOAD_TARGET of an instance's capacity, and at least
SHARED_MIN_INSTANCES of each model where models share the GPU.

The prediction sums costs measured alone, and models sharing a GPU contend for it: BUSY_TARGET is set
from the plan's GPU check (docs/model-sync.md#plan), not from what one GPU could hold alone.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from model_sync import errors
from model_sync.admission import gpu_plan
from model_sync.environments import MAX_GPU_MEMORY_GIB, DeploymentGpu
from model_sync.planning.inputs import PROFILED_BACKEND, Demand, Point, Profile, Profiles

LOAD_TARGET = 0.8  # an instance planned at this share of its measured capacity
# A GPU planned at most this busy: the sum of its models' GPU cost, each measured alone. Measured on one H100
# (bench/results/): the twelve zoo models sharing one GPU met every p99 <= 80 ms at a summed cost of 0.368
# (consolidation.json) and missed two at 0.393 (plan-check-busy80.json, p99 95 and 205 ms); 0.3 leaves about a
# fifth of margin below the pass for noise and other model mixes.
BUSY_TARGET = 0.3
# Instances of each model on a GPU that models share: with one, a model's requests wait behind its own batch
# while the other models' kernels stretch it. Measured on one H100 (bench/results/): the twelve models at two
# instances each met every p99 at a summed cost of 0.368 (consolidation.json); at one instance each, resnet50
# missed 80 ms at 0.393 (plan-check-busy80.json, 94.7 ms) and again beside six models at 0.196 predicted,
# 31 % busy measured (plan-check-one-instance.json, 100.7 ms); at two, those seven met (plan-check.json, 70.5 ms).
SHARED_MIN_INSTANCES = 2


@dataclass(frozen=True)
class Need:
    """One model's demand against its profile: capacity of one instance at its target, GPU cost."""

    demand: Demand
    profile: Profile
    capacity: float  # requests a second one instance serves within the p99 target
    busy_per_request: float  # GPU busy fraction per request a second (measured alone)

    @property
    def busy(self) -> float:
        return self.demand.rate * self.busy_per_request

    def instances(self, replicas: int) -> int:
        """Instances on each of `replicas` replicas for the model's rate, at LOAD_TARGET of capacity."""
        return max(1, math.ceil(self.demand.rate / replicas / (self.capacity * LOAD_TARGET)))


@dataclass
class Deployment:
    name: str
    replicas: int
    needs: list[Need] = field(default_factory=list)

    def busy(self, extra: Need | None = None) -> float:
        """One replica's GPU busy fraction (the models' costs, their rates split over the replicas)."""
        return sum(n.busy for n in [*self.needs, *([extra] if extra else [])]) / self.replicas

    def instances(self, need: Need, extra: Need | None = None) -> int:
        """Instances of `need`'s model on each replica (with `extra` placed too): its rate's, and at least
        SHARED_MIN_INSTANCES where models share the GPU."""
        shared = len(self.needs) + (extra is not None) > 1
        return max(need.instances(self.replicas), SHARED_MIN_INSTANCES if shared else 1)

    def memory(self, extra: Need | None = None) -> int:
        """One replica's planned GPU memory: gpu_plan's plan of its models' instances (Triton's PyTorch
        backend, the profiles' backend: the server process once, then each instance)."""
        needs = [*self.needs, *([extra] if extra else [])]
        planned = [gpu_plan.Need(n.demand.model, n.demand.model, n.profile.bytes_per_instance,
                                 ({"kind": "KIND_GPU", "count": self.instances(n, extra), "gpus": []},),
                                 backend=PROFILED_BACKEND) for n in needs]  # fmt: skip
        # the card's size does not enter `planned` (the sum); what it allows is checked by plan()
        card = DeploymentGpu(self.name, "plan", MAX_GPU_MEMORY_GIB, tuple(n.demand.model for n in needs))
        return gpu_plan.plan(card, planned).planned


def need_of(demand: Demand, profiles: Profiles) -> Need:
    profile = profiles.models.get(demand.model)
    if profile is None:
        raise errors.SyncError(errors.USAGE, f"plan: model {demand.model}: no profile; allowed: one of "
                                             f"{', '.join(sorted(profiles.models))}")  # fmt: skip
    bests = [_best_met(demand, steps) for steps in profile.draws]
    # Of several draws, the lowest capacity and the highest GPU cost per request: a draw's best is chance
    # near the knee (docs/gpu-benchmark.md, "Repeatable in memory, not in the best rate").
    return Need(demand, profile, min(b.throughput for b in bests),
                max(b.gpu_util_pct / 100 / b.throughput for b in bests))  # fmt: skip


def _best_met(demand: Demand, steps: tuple[Point, ...]) -> Point:
    """The step of most throughput from the lowest rate up to the first that missed the target (or its
    rate): a step that met it above one that missed is not read as capacity (near the knee one step's p99
    is chance). Refused when the lowest rate measured already missed."""
    met = list(itertools.takewhile(lambda p: p.served and p.p99_ms <= demand.p99_ms, steps))
    if not met:
        first = steps[0] if steps else None
        seen = (f"its lowest rate measured, {first.rate:g} req/s, took p99 {first.p99_ms:g} ms"
                f"{'' if first.served else ' and was not served'}" if first else "no step measured")  # fmt: skip
        raise errors.SyncError(errors.REFUSED, f"plan: model {demand.model}: no measured step of one instance meets "
                                               f"p99 {demand.p99_ms:g} ms ({seen}); allowed: a p99 target the "
                                               "profile met, or a profile measured at lower rates")  # fmt: skip
    return max(met, key=lambda p: p.throughput)


def allowed_bytes(gpu_memory_gib: float) -> int:
    """What one GPU of `gpu_memory_gib` allows a replica's models: gpu_plan's headroom of it."""
    return int(gpu_memory_gib * (1 << 30) * gpu_plan.HEADROOM)


def plan(demands: list[Demand], profiles: Profiles, gpu_memory_gib: float, min_replicas: int = 1) -> list[Deployment]:
    """The deployments, named plan-1, plan-2, ... (see the module docstring); a model too big for one GPU's
    memory is refused."""
    allowed = allowed_bytes(gpu_memory_gib)
    needs = sorted((need_of(d, profiles) for d in demands), key=lambda n: -n.busy)
    alone = [n for n in needs if n.busy > BUSY_TARGET * min_replicas]
    shared = [n for n in needs if n not in alone]
    deployments = [_new("plan", max(min_replicas, math.ceil(n.busy / BUSY_TARGET)), n, allowed) for n in alone]
    opened = math.ceil(sum(n.busy for n in shared) / (BUSY_TARGET * min_replicas))
    pool = [Deployment("plan", min_replicas) for _ in range(opened)]
    for need in shared:
        fits = [d for d in pool if d.busy(need) <= BUSY_TARGET and d.memory(need) <= allowed]
        if fits:
            min(fits, key=lambda d: d.busy()).needs.append(need)
        else:
            pool.append(_new("plan", min_replicas, need, allowed))
    planned = deployments + [d for d in pool if d.needs]
    for i, d in enumerate(planned):
        d.name = f"plan-{i + 1}"
    return planned


def _new(name: str, replicas: int, need: Need, allowed: int) -> Deployment:
    """A deployment of `need` alone; refused when its instances outgrow one GPU's memory."""
    home = Deployment(name, replicas)
    if home.memory(need) > allowed:
        raise errors.SyncError(errors.REFUSED, f"plan: model {need.demand.model}: {need.instances(replicas)} instances "
                               f"need {gpu_plan.human(home.memory(need))} of GPU memory per replica, more than the "
                               f"{gpu_plan.human(allowed)} allowed; allowed: a GPU with more memory, or a lower rate")  # fmt: skip
    home.needs.append(need)
    return home
