"""The gray release (docs/architecture.md#gray-release): `GrayRelease.run` takes a published,
unpinned version of a model through its policy's steps on the replicas serving the model, unattended,
and ends in one decision:

1. The canary record (model_sync.canary_record) names the replicas that serve the canary version;
   their agents follow it, every other replica keeps the stable pin. The share is replica-based:
   k of the N replicas reporting the model (k = round(share x N), at least 1, at most N/2), k/N
   of the traffic a Service spreads evenly. It is re-balanced at every poll as the HPA scales N.
2. Each step waits until its replicas serve the canary READY (a canary that fails to load, or
   takes longer than loadTimeoutSeconds, aborts the run: its replicas keep serving stable), then
   compares canary and stable from Triton's metrics over the step (model_sync.canary_metrics,
   canary_analysis) at every poll. A failing verdict aborts at once; a pass after stepSeconds
   moves to the next step; inconclusive keeps the step going.
3. After the last step the stable pin is flipped to the canary version (conditional, as every
   flip) and the record ends `promoted`; an abort ends it `aborted`, and its replicas return to
   stable. Past the record's deadline the run aborts. The final record is the audit record.

S3 or metrics failures during the run are retried at every poll until the deadline. An
interrupted run (SIGINT, SIGKILL) leaves the record running with its share: `status` shows it,
a re-run of the same version resumes it and `abort` ends it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import time
from collections.abc import Callable
from typing import Any

from model_sync import canary_record, errors, layout, manifest, replicas, repository
from model_sync.canary_analysis import FAIL, PASS, judge
from model_sync.canary_metrics import MetricsSource
from model_sync.canary_policy import MAX_STEP_PERCENT, CanaryPolicy
from model_sync.canary_record import ABORTED, PROMOTED, RUNNING, Stored
from model_sync.s3 import Repo
from model_sync.ui import Console

EXIT_ABORTED = errors.CHECK_FAILED  # a failing verdict, a canary that does not load, the deadline


def canary_replicas(fleet: list[str], current: list[str], share: int, canary_id: str) -> list[str]:
    """The replicas (of `fleet`, replica ids) to serve the canary at `share` percent: k of them,
    k = round(share x N / 100) clamped to 1..N // 2; those already serving it first, then in an
    order fixed per canary (sha256 of id and replica), so a re-balance moves as few as possible."""
    n = len(fleet)
    k = min(max(1, round(share * n / 100)), n * MAX_STEP_PERCENT // 100)
    ranked = sorted(fleet, key=lambda r: (r not in current, hashlib.sha256(f"{canary_id}/{r}".encode()).digest()))
    return sorted(ranked[:k])


class GrayRelease:
    """One model's gray release in one environment (see the module docstring)."""

    def __init__(self, repo: Repo, model: str, version: int, policy: CanaryPolicy, metrics: MetricsSource, *,
                 console: Console, by: str, canary_id: str | None = None, poll: float = 2.0,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
        self.repo, self.model, self.version, self.policy, self.metrics = repo, model, version, policy, metrics
        self.console, self.by, self.poll, self.clock, self.sleep = console, by, poll, clock, sleep
        self.canary_id = canary_id or canary_record.new_id()
        self.stored = Stored(None, None)
        self._mark: Any = None  # the metrics at the start of the step's window (once its replicas serve it)
        self._served_at: float | None = None

    # -- the run --

    def run(self) -> dict[str, Any]:
        """Promote or abort; the final record. Exit 6 (SyncError) when aborted."""
        pin = repository.read_pin(self.repo, self.model)
        self.stored = canary_record.read(self.repo, self.model)
        if pin.version == self.version:
            return self._already_pinned()
        if pin.version is None:
            raise errors.refused(
                f"canary: {self.model} has no stable pin in {self.repo.env.name}; allowed: a pinned stable version "
                "to compare with (promote --no-canary pins a first version)"
            )
        config_text = repository.read_manifest(self.repo, self.model, self.version)["config_pbtxt"]  # type: ignore[index]
        self._start_or_resume(pin.version)
        while self.doc["state"] == RUNNING:
            step = self.doc["steps"][-1]
            if step["ended_at"] is not None:  # passed: the next step, or promote after the last
                later = [s for s in self.policy.steps if s > step["share_percent"]]
                self._begin_step(later[0]) if later else self._promote(pin, config_text)
                continue
            self._poll_step(step)
        return self.doc

    @property
    def doc(self) -> dict[str, Any]:
        assert self.stored.doc is not None
        return self.stored.doc

    def _already_pinned(self) -> dict[str, Any]:
        if self.stored.running and self.stored.doc and self.stored.doc["canary_version"] == self.version:
            self._end(PROMOTED, "the stable pin already names the canary version (a run interrupted after its flip)")
            return self.doc
        raise errors.refused(
            f"canary: {self.model} version {self.version} is already the stable pin in {self.repo.env.name}; "
            "allowed: an unpinned version"
        )

    def _start_or_resume(self, stable: int) -> None:
        doc = self.stored.doc
        if self.stored.running and doc is not None:
            if doc["canary_version"] != self.version:
                raise errors.refused(
                    f"canary: {self.model} version {doc['canary_version']} is in a gray release ({doc['id']}); "
                    f"allowed: one at a time (`model-sync canary {self.model} --abort` ends it)"
                )
            self.canary_id = doc["id"]
            self.policy = CanaryPolicy.from_mapping(doc["policy"], "canary record policy")  # the one it started with
            self.console.line(f"resuming: canary {doc['id']} of {self.model} version {self.version}")
            if doc["stable_version"] != stable:
                self._abort(f"the stable pin moved from {doc['stable_version']} to {stable} during the gray release")
            if not doc["steps"]:
                self._begin_step(self.policy.steps[0])
            return
        now = self.clock()
        fleet, deployment, _ = self._fleet(None)
        if len(fleet) < 2:
            raise errors.refused(
                f"canary: {len(fleet)} replica(s) report {self.model} in {self.repo.env.name}; allowed: at least 2 "
                "(one keeps serving stable), or promote --no-canary"
            )
        self.stored = canary_record.write(self.repo, self.stored, {
            "schema": "model-sync.canary/v1", "model": self.model, "id": self.canary_id, "state": RUNNING,
            "deployment": deployment, "stable_version": stable, "canary_version": self.version, "replicas": [],
            "share_percent": 0, "steps": [], "policy": self.policy.to_mapping(), "started_by": self.by,
            "started_at": manifest.format_time(now), "deadline_at": manifest.format_time(now + self.policy.deadline_seconds),
            "updated_at": manifest.format_time(now), "decision": None,
        })  # fmt: skip
        self.console.line(
            f"canary: {self.model} version {self.version} against stable {stable} on {len(fleet)} replicas of "
            f"{deployment} (steps {list(self.policy.steps)} %, {self.policy.step_seconds}s each, deadline "
            f"{self.doc['deadline_at']})"
        )
        self._begin_step(self.policy.steps[0])

    def _fleet(self, deployment: str | None) -> tuple[list[str], str, dict[str, dict[str, Any]]]:
        """Replica ids of `deployment` (None: the one deployment) reporting the model recently, the
        deployment, and what each reports (replica id -> model_sync.replicas.served's entry)."""
        found = replicas.served(replicas.read_status_docs(self.repo), self.model, _dt.datetime.now(_dt.UTC))
        deployments = sorted({key.split("/")[0] for key in found})
        if deployment is None:
            if len(deployments) > 1:
                raise errors.refused(
                    f"canary: {self.model} is served by deployments {', '.join(deployments)}; allowed: one"
                )
            deployment = deployments[0] if deployments else "-"
        mine = {key.split("/", 1)[1]: entry for key, entry in found.items() if key.startswith(deployment + "/")}
        return sorted(mine), deployment, mine

    def _begin_step(self, share: int) -> None:
        fleet, _, _ = self._fleet(self.doc["deployment"])
        chosen = canary_replicas(fleet, self.doc["replicas"], share, self.canary_id)
        step = {"share_percent": share, "replicas": len(chosen), "fleet": len(fleet),
                "effective_percent": round(100 * len(chosen) / max(1, len(fleet)), 2),
                "started_at": manifest.now(), "window_from": None, "ended_at": None, "verdict": None, "reason": None,
                "figures": None}  # fmt: skip
        self._save(replicas=chosen, share_percent=share, steps=[*self.doc["steps"], step])
        self.console.line(
            f"step: {share} % configured, {len(chosen)} of {len(fleet)} replicas ({step['effective_percent']:g} % of "
            f"the traffic): {', '.join(chosen)}"
        )
        self._mark, self._served_at = None, None

    def _poll_step(self, step: dict[str, Any]) -> None:
        """One poll of the running step: deadline, load, re-balance, figures, verdict."""
        try:
            if self.clock() >= manifest.parse_time(self.doc["deadline_at"]).timestamp():
                self._abort(f"deadline {self.doc['deadline_at']} passed: last verdict {step['verdict'] or 'none'}")
                return
            served = self._canary_served(step)
            step = self.doc["steps"][-1]  # re-balanced, or an abort ended the run
            if self.doc["state"] != RUNNING:
                return
            if not served:
                self.sleep(self.poll)
                return
            if self._mark is None:
                self._mark, self._served_at = self.metrics.mark(), self.clock()
                self._save(
                    steps=[*self.doc["steps"][:-1], {**step, "window_from": manifest.format_time(self._served_at)}]
                )
                self.sleep(self.poll)
                return
            figures = self.metrics.figures(self._mark, [self.version, self.doc["stable_version"]])
        except errors.SyncError as e:
            if e.code not in (errors.S3,):
                raise
            self.console.warn(f"canary: {e}; retrying until the deadline {self.doc['deadline_at']}")
            self.sleep(self.poll)
            return
        canary, stable = figures[self.version], figures[self.doc["stable_version"]]
        verdict = judge(canary, stable, self.policy)
        done = verdict.outcome == FAIL or (
            verdict.outcome == PASS and self.clock() - (self._served_at or 0) >= self.policy.step_seconds
        )
        update = {"verdict": verdict.outcome, "reason": verdict.reason, "ended_at": manifest.now() if done else None,
                  "figures": {"canary": canary.record(), "stable": stable.record()}}  # fmt: skip
        if step["verdict"] != verdict.outcome or done:
            self.console.line(f"step {step['share_percent']} %: {verdict.outcome}: {verdict.reason}")
        self._save(steps=[*self.doc["steps"][:-1], {**step, **update}])
        if verdict.outcome == FAIL:
            self._abort(f"step {step['share_percent']} %: {verdict.reason}")
        elif not done:
            self.sleep(self.poll)

    def _canary_served(self, step: dict[str, Any]) -> bool:
        """True once every listed replica serves the canary READY; aborts on a load failure or
        past loadTimeoutSeconds; re-balances the list when the fleet changed."""
        fleet, _, found = self._fleet(self.doc["deployment"])
        chosen = canary_replicas(fleet, self.doc["replicas"], step["share_percent"], self.canary_id)
        if chosen != self.doc["replicas"] and len(fleet) >= 2:
            self.console.line(f"re-balance: {len(fleet)} replicas now, canary on {', '.join(chosen)}")
            step = {**step, "replicas": len(chosen), "fleet": len(fleet),
                    "effective_percent": round(100 * len(chosen) / len(fleet), 2)}  # fmt: skip
            self._save(replicas=chosen, steps=[*self.doc["steps"][:-1], step])
        for replica in chosen:
            entry = found[replica]
            if self.version in entry["failed"]:
                self._abort(f"the canary failed to load on {replica}: {entry['error'] or entry['state']}")
                return False
        if all(replicas.serves(found[r], self.version) for r in chosen) and chosen:
            return True
        waited = self.clock() - manifest.parse_time(step["started_at"]).timestamp()
        if waited > self.policy.load_timeout_seconds:
            self._abort(f"the canary is not served by {', '.join(chosen)} after {waited:.0f}s (loadTimeoutSeconds)")
        return False

    # -- the decision --

    def _promote(self, pin: repository.Pin, config_text: str) -> None:
        try:
            repository.flip_pin(self.repo, self.model, self.version, config_text, "promote", self.by, pin,
                                warn=self.console.warn)  # fmt: skip
        except errors.SyncError as e:
            if e.code != errors.REFUSED:
                raise
            self._abort(f"the stable pin moved during the gray release ({e})")
        self._end(PROMOTED, f"every step passed ({', '.join(str(s) for s in self.policy.steps)} %)")
        self.console.line(f"promoted: {self.model} version {self.version} is the stable pin in {self.repo.env.name}")

    def _abort(self, reason: str) -> None:
        self._end(ABORTED, reason)
        raise errors.SyncError(
            EXIT_ABORTED,
            f"canary: {self.model} version {self.version} aborted ({reason}); allowed: a version that passes the "
            f"analysis (its replicas are back on stable {self.doc['stable_version']}; the record is "
            f"{self.repo.uri(layout.canary_audit_key(self.model, self.doc['id']))})",
        )

    def _end(self, outcome: str, reason: str) -> None:
        decision = {"outcome": outcome, "reason": errors.one_line(reason), "by": self.by, "at": manifest.now()}
        self._save(state=outcome, replicas=[], decision=decision)
        canary_record.archive(self.repo, self.doc)

    def _save(self, **changes: Any) -> None:
        self.stored = canary_record.write(self.repo, self.stored, {**self.doc, **changes})


def abort(repo: Repo, model: str, by: str, reason: str = "aborted by an operator") -> dict[str, Any] | None:
    """End a running gray release of `model` (`model-sync canary --abort`): its replicas return to
    stable. None when none is running."""
    stored = canary_record.read(repo, model)
    if not stored.running or stored.doc is None:
        return None
    decision = {"outcome": ABORTED, "reason": reason, "by": by, "at": manifest.now()}
    stored = canary_record.write(repo, stored, {**stored.doc, "state": ABORTED, "replicas": [], "decision": decision})
    assert stored.doc is not None
    canary_record.archive(repo, stored.doc)
    return stored.doc
