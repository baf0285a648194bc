"""Deployments for a set of models from their measured profiles (model_sync/planning/inputs.py).

Per model, from its profile measured alone on one instance: the **capacity** of one instance at the
model's p99 target is the highest throughput of a measured step whose p99 met the target (and that
served its offered rate); the GPU share that step kept busy, per request, is its **GPU cost**. A model
whose target no measured step met is refused (exit 4), naming it and the lowest p99 measured.

Models are then placed, largest GPU cost first, into deployments (one GPU per replica): into the first
deployment where, with its replicas, each replica's GPU stays under BUSY_TARGET and its planned memory
(model_sync/admission/gpu_plan.py: the server process, each instance) under the GPU's allowance; else
into a new deployment of as many replicas as the model's GPU cost needs (at least --min-replicas).
Each replica runs, of each of its models, enough instances for that model's rate over the replicas at
LOAD_TARGET of an instance's capacity. The prediction sums costs measured alone: models sharing a GPU
contend for it, which the plan's GPU check measures (docs/model-sync.md#plan).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from model_sync import errors
from model_sync.admission import gpu_plan
from model_sync.environments import MAX_GPU_MEMORY_GIB, DeploymentGpu
from model_sync.planning.inputs import PROFILED_BACKEND, Demand, Profile, Profiles

LOAD_TARGET = 0.8  # an instance planned at this share of its measured capacity
BUSY_TARGET = 0.8  # a GPU planned at most this busy (the sum of its models' measured GPU cost)


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

    def memory(self, extra: Need | None = None) -> int:
        """One replica's planned GPU memory: gpu_plan's plan of its models' instances (Triton's PyTorch
        backend, the profiles' backend: the server process once, then each instance)."""
        needs = [*self.needs, *([extra] if extra else [])]
        planned = [gpu_plan.Need(n.demand.model, n.demand.model, n.profile.bytes_per_instance,
                                 ({"kind": "KIND_GPU", "count": n.instances(self.replicas), "gpus": []},),
                                 backend=PROFILED_BACKEND) for n in needs]  # fmt: skip
        # the card's size does not enter `planned` (the sum); what it allows is checked by plan()
        card = DeploymentGpu(self.name, "plan", MAX_GPU_MEMORY_GIB, tuple(n.demand.model for n in needs))
        return gpu_plan.plan(card, planned).planned


def need_of(demand: Demand, profiles: Profiles) -> Need:
    profile = profiles.models.get(demand.model)
    if profile is None:
        raise errors.SyncError(errors.USAGE, f"plan: model {demand.model}: no profile; allowed: one of "
                                             f"{', '.join(sorted(profiles.models))}")  # fmt: skip
    met = [p for p in profile.points if p.p99_ms <= demand.p99_ms]
    if not met:
        low = min(profile.points, key=lambda p: p.p99_ms, default=None)
        seen = f"the lowest p99 measured is {low.p99_ms:g} ms at {low.rate:g} req/s" if low else "no step served"
        raise errors.SyncError(errors.REFUSED, f"plan: model {demand.model}: no measured step of one instance meets "
                                               f"p99 {demand.p99_ms:g} ms ({seen}); allowed: a p99 target the "
                                               "profile met, or a profile measured at lower rates")  # fmt: skip
    best = max(met, key=lambda p: p.throughput)
    return Need(demand, profile, best.throughput, best.gpu_util_pct / 100 / best.throughput)


def allowed_bytes(gpu_memory_gib: float) -> int:
    """What one GPU of `gpu_memory_gib` allows a replica's models: gpu_plan's headroom of it."""
    return int(gpu_memory_gib * (1 << 30) * gpu_plan.HEADROOM)


def plan(demands: list[Demand], profiles: Profiles, gpu_memory_gib: float, min_replicas: int = 1) -> list[Deployment]:
    """The deployments (see the module docstring); a model too big for one GPU's memory is refused."""
    allowed = allowed_bytes(gpu_memory_gib)
    deployments: list[Deployment] = []
    for need in sorted((need_of(d, profiles) for d in demands), key=lambda n: -n.busy):
        home = next((d for d in deployments if d.busy(need) <= BUSY_TARGET and d.memory(need) <= allowed), None)
        if home is None:
            home = Deployment(f"plan-{len(deployments) + 1}", max(min_replicas, math.ceil(need.busy / BUSY_TARGET)))
            if home.memory(need) > allowed:
                raise errors.SyncError(errors.REFUSED, f"plan: model {need.demand.model}: "
                                       f"{need.instances(home.replicas)} instances need {gpu_plan.human(home.memory(need))}"
                                       f" of GPU memory per replica, more than the {gpu_plan.human(allowed)} allowed; "
                                       "allowed: a GPU with more memory, or a lower rate")  # fmt: skip
            deployments.append(home)
        home.needs.append(need)
    return deployments
