"""Which GPU kind a plan is for, when models were profiled on several (`model-sync plan` with --profiles,
--gpu-memory-gib and --gpu-hour-usd once per kind): each kind is planned on its own profiles and memory
(model_sync/planning/placement.py), and the plan kept is the cheapest a month when every kind has a price,
else the one of fewest GPUs; a tie goes to the kind given first. A kind whose plan is refused (a target its
profiles never met, a model too big for its memory) is left out with its reason; when every kind is
refused, so is the plan, in one line naming each kind's reason. Profiles of one GPU given more than once
are repeated draws of that kind: the plan reads each model's lowest capacity of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from model_sync import errors
from model_sync.planning import inputs, placement


@dataclass(frozen=True)
class Kind:
    """One GPU kind: the models' profiles measured on it, its memory, and its on-demand GPU-hour price."""

    profiles: inputs.Profiles
    memory_gib: float
    hour_usd: float | None


@dataclass(frozen=True)
class Outcome:
    """One kind's plan, or why it was refused."""

    kind: Kind
    deployments: tuple[placement.Deployment, ...]
    refused: str | None

    @property
    def gpus(self) -> int:
        return sum(d.replicas for d in self.deployments)


def kinds_of(given: list[Kind]) -> list[Kind]:
    """One Kind per GPU, in the order first given: profiles of a GPU given more than once are draws of it
    (inputs.combine), which must have been given the same memory and price."""
    by_gpu: dict[str, list[Kind]] = {}
    for kind in given:
        by_gpu.setdefault(kind.profiles.gpu, []).append(kind)
    kinds = []
    for gpu, draws in by_gpu.items():
        if len({(k.memory_gib, k.hour_usd) for k in draws}) > 1:
            raise errors.usage(f"plan: {gpu} profiled {len(draws)} times with different --gpu-memory-gib or "
                               "--gpu-hour-usd; allowed: the same memory and price for each draw of one GPU")  # fmt: skip
        kinds.append(Kind(inputs.combine([k.profiles for k in draws]), draws[0].memory_gib, draws[0].hour_usd))
    return kinds


def choose(demands: list[inputs.Demand], kinds: list[Kind], min_replicas: int) -> tuple[Outcome, list[Outcome]]:
    """The kept plan and every kind's outcome (in the order given, one per GPU); refused when no kind plans."""
    kinds = kinds_of(kinds)
    outcomes = [_outcome(demands, k, min_replicas) for k in kinds]
    planned = [o for o in outcomes if o.refused is None]
    if not planned:
        if len(kinds) == 1:
            raise errors.SyncError(errors.REFUSED, outcomes[0].refused or "")
        raise errors.SyncError(errors.REFUSED, "plan: no GPU kind plans every model: " + " | ".join(
            f"{o.kind.profiles.gpu}: {(o.refused or '').removeprefix('plan: ')}" for o in outcomes))  # fmt: skip
    priced = all(k.hour_usd is not None for k in kinds)
    # min keeps the first of equal costs: a tie goes to the kind given first
    kept = min(planned, key=lambda o: o.gpus * (o.kind.hour_usd or 0) if priced else o.gpus)
    return kept, outcomes


def _outcome(demands: list[inputs.Demand], kind: Kind, min_replicas: int) -> Outcome:
    try:
        return Outcome(kind, tuple(placement.plan(demands, kind.profiles, kind.memory_gib, min_replicas)), None)
    except errors.SyncError as e:
        if e.code != errors.REFUSED:
            raise
        return Outcome(kind, (), str(e))
