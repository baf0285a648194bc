"""Which replicas a gray release runs on (docs/architecture.md#gray-release): the live replicas of
a deployment that report the model, the ones that stopped reporting, and k of the N live ones for
a step's share.

A replica is live while its Triton metrics answer (asked at every poll: a pod that died stops
answering at once, long before its report ages) and its last status report
(model_sync.observation.replicas) is younger than LIVE_HEARTBEATS of its own heartbeat
(`heartbeat_seconds` in the report: 30 s by default, so 90 s): an agent rewrites its report at
least once per heartbeat, so a replica silent for three of them has stopped (its pod died or was replaced; Kubernetes brings a new one under a new name, which
reports as a new replica). Silence counts only while S3 answers: after an outage every report is
old, because no agent could write one, so a report is never taken for older than the time since
`reachable_since`: the gray release passes S3's return plus twice the outage it saw, since an agent
backing off exponentially may first retry that long after S3 answers again.

N counts the live replicas that take traffic: a replica that appeared during the run joins N
(restarting the step's window) once it serves a version and its metrics show it has answered more
requests since the run first saw it than its own agent sends it (the smoke inference after its
READY report), i.e. once the Service sends it clients (a pod is in the Service only after its
readiness probe passes and its endpoint propagates, seconds after it serves).
The share is replica-based: k = floor(share x N / 100), at least 1, at most N x MAX_STEP_PERCENT
/ 100, so the canary never takes more than the configured share, except that one replica is the
least it can run on (with N < 100 / share, that one replica is 1/N of the traffic, more than the
share: the record states that effective share).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from model_sync import errors
from model_sync.contract.canary_policy import MAX_STEP_PERCENT
from model_sync.observation import replicas

LIVE_HEARTBEATS = 3  # a replica whose report is older than this many of its heartbeats has stopped


@dataclass(frozen=True)
class Fleet:
    """One deployment's replicas reporting a model: `live` (replica id -> what it serves, an entry
    of model_sync.observation.replicas.served) and `silent` (replica id -> seconds since its last report, for
    those past LIVE_HEARTBEATS of their heartbeat)."""

    deployment: str
    live: dict[str, dict[str, Any]]
    silent: dict[str, float]
    unanswering: frozenset[str] = frozenset()  # reporting, but their metrics do not answer: not live

    @property
    def ids(self) -> list[str]:
        return sorted(self.live)

    def serving(self, listed: list[str]) -> Fleet:
        """The replicas that take traffic: those that serve a version of the model (a replica
        still loading its first one is not in the Service yet), and the `listed` canary replicas
        (switching to the canary)."""
        live = {r: e for r, e in self.live.items() if e["serving"] or r in listed}
        return dataclasses.replace(self, live=live)

    def answering(self, answered: Collection[str]) -> Fleet:
        """The fleet without the live replicas whose metrics did not answer (`answered`: those that did)."""
        mute = frozenset(r for r in self.live if r not in answered)
        return dataclasses.replace(self, live={r: e for r, e in self.live.items() if r not in mute}, unanswering=mute)

    def without(self, joining: Collection[str]) -> Fleet:
        """The fleet without `joining`: replicas not in the Service yet (they report and serve, but
        have answered no request)."""
        return dataclasses.replace(self, live={r: e for r, e in self.live.items() if r not in joining})

    def describe_gone(self, listed: list[str]) -> str:
        """Why each of `listed` is not live, one clause each ("" when every one is)."""
        parts = []
        for replica in listed:
            if replica in self.live:
                continue
            if replica in self.unanswering:
                parts.append(f"{replica}'s metrics do not answer")
            elif replica in self.silent:
                parts.append(f"{replica} stopped reporting ({self.silent[replica]:.0f}s since its last report)")
            else:
                parts.append(f"{replica} no longer reports the model")
        return "; ".join(parts)


def observe(repo: Any, model: str, deployment: str | None, now: _dt.datetime | None = None,
            reachable_since: _dt.datetime | None = None) -> Fleet:  # fmt: skip
    """The fleet of `deployment` for `model` (None: the one deployment that reports it; refused
    when several do), from the replicas' status records; `reachable_since`: no report counts as
    older than the time since then (after an outage: S3's return plus the agents' backoff; None:
    no outage seen)."""
    now = now or _dt.datetime.now(_dt.UTC)
    docs = replicas.read_status_docs(repo)
    found = replicas.served(docs, model, now)  # reported the model within replicas.DEFAULT_DEPARTED
    deployments = sorted({key.split("/")[0] for key in found})
    if deployment is None:
        if len(deployments) > 1:
            raise errors.refused(f"canary: {model} is served by deployments {', '.join(deployments)}; allowed: one")
        deployment = deployments[0] if deployments else "-"
    live: dict[str, dict[str, Any]] = {}
    silent: dict[str, float] = {}
    for key, entry in found.items():
        name, _, replica = key.partition("/")
        if name != deployment:
            continue
        doc = docs[key]
        age = (now - (replicas.reported_at(doc) or now)).total_seconds()
        if reachable_since is not None:  # no agent could report while S3 was away
            age = min(age, (now - reachable_since).total_seconds())
        if age > LIVE_HEARTBEATS * float(doc["heartbeat_seconds"]):  # the strict reader requires it
            silent[replica] = age
        else:
            live[replica] = entry
    return Fleet(deployment, live, silent)


def share_count(n: int, share: int) -> int:
    """k of n replicas for `share` percent: floor, at least 1, at most MAX_STEP_PERCENT of n (0 when
    n < 2: one replica alone stays stable)."""
    return min(max(1, share * n // 100), n * MAX_STEP_PERCENT // 100)


def canary_replicas(fleet: list[str], current: list[str], share: int, canary_id: str) -> list[str]:
    """The replicas (of `fleet`, replica ids) to serve the canary at `share` percent: share_count
    of them; those already serving it first, then in an order fixed per canary (sha256 of id and
    replica), so a re-balance moves as few as possible."""
    k = share_count(len(fleet), share)
    ranked = sorted(fleet, key=lambda r: (r not in current, hashlib.sha256(f"{canary_id}/{r}".encode()).digest()))
    return sorted(ranked[:k])
