"""The gray release (docs/architecture.md#gray-release): `GrayRelease.run` takes a published,
unpinned version of a model through its policy's steps on the replicas serving the model, unattended,
and ends in one decision:

1. The canary record (model_sync.records.canary_record) names the replicas that serve the canary version;
   their agents follow it, every other replica keeps the stable pin. The share is replica-based:
   k of the N live replicas that take traffic (model_sync.canary.placement: k = floor(share x N),
   at least 1, at most N/2), k/N of the traffic a Service spreads evenly. At every poll the list
   follows the live fleet: a listed replica whose metrics stop answering or that stopped reporting
   (3 of its heartbeats) is replaced by a live one, a change of N (the HPA's scaling, a replica
   lost or back) re-balances it, and either restarts the step's window, so that a window holds
   one share on live replicas and the record states that share. With fewer than 2 live replicas
   the run aborts at once, naming the replicas lost (model_sync.canary.fleet_watch: which replicas N
   counts, and whether a window's replicas still answer when its figures are read).
2. Each step waits until its replicas serve the canary READY (a canary that fails to load, or
   takes longer than loadTimeoutSeconds, aborts the run: its replicas keep serving stable), then
   compares canary and stable from Triton's metrics over the step (model_sync.canary.metrics,
   model_sync.canary.analysis: the canary's worst replica against the stable replicas' k/(k+1)
   quantile) at every poll. A failure on errors aborts at once; a failure on latency (p99, p95,
   queue time) aborts when a fresh window confirms it, judged once every canary replica has served
   latencyConfirmAfterSeconds since its load (Triton's summaries cover the last 60 s: a replica just
   loaded answers its first requests cold, docs/agent.md) and holding REJUDGE_REQUESTS_PER_REPLICA
   canary requests per canary replica; a pass after stepSeconds moves to the next step;
   inconclusive keeps the step going.
3. After the last step the stable pin is flipped to the canary version (conditional, as every
   flip; a version no replica would serve is refused before the record is written and again
   before this flip: model_sync.versions.pinnable, exit 4) and the record ends `promoted`; an abort ends it `aborted`, and its replicas return to
   stable. Past the record's deadline the run aborts. The final record is the audit record.

Every poll re-reads the stable pin and the record: a release whose stable pin moved (a
`promote --no-canary`, a `rollback`) or whose record another writer changed (`canary --abort`,
`rollback`) is over. The run ends it (a moved pin: the record ends aborted, naming the move, and
every replica follows the pin as it now is) or leaves it as the other writer left it, and exits 4
naming what moved.

S3 or metrics failures during the run are retried at every poll until the deadline. An
interrupted run (SIGINT, SIGKILL) leaves the record running with its share: `status` shows it,
a re-run of the same version resumes it and `abort` ends it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NoReturn

from model_sync import errors
from model_sync.canary.analysis import FAIL, INCONCLUSIVE, PASS, Figures, Verdict, judge, tracks
from model_sync.canary.fleet_watch import FleetWatch
from model_sync.canary.metrics import MetricsSource
from model_sync.canary.owned_record import EXIT_MOVED, OwnedRecord
from model_sync.canary.placement import canary_replicas
from model_sync.contract import layout
from model_sync.contract.canary_policy import CanaryPolicy
from model_sync.observation import replicas
from model_sync.records import canary_record, codec
from model_sync.records.canary_record import ABORTED, PROMOTED, RUNNING
from model_sync.s3.bucket import Bucket
from model_sync.ui import Console
from model_sync.versions import catalog, pinnable

EXIT_ABORTED = errors.CHECK_FAILED  # a failing verdict, a canary that does not load, the deadline
# After a latency failure, the window that confirms it holds at least this many canary requests per
# canary replica (and comes latencyConfirmAfterSeconds after their load): each replica's p99 is then
# not one of its two slowest requests, whatever the traffic.
REJUDGE_REQUESTS_PER_REPLICA = 200

__all__ = ["EXIT_ABORTED", "EXIT_MOVED", "GrayRelease"]


class GrayRelease:
    """One model's gray release in one environment (see the module docstring)."""

    def __init__(self, repo: Bucket, model: str, version: int, policy: CanaryPolicy, metrics: MetricsSource, *,
                 console: Console, by: str, canary_id: str | None = None, poll: float = 2.0,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
        self.repo, self.model, self.version, self.policy, self.metrics = repo, model, version, policy, metrics
        self.console, self.by, self.poll, self.clock, self.sleep = console, by, poll, clock, sleep
        self.canary_id = canary_id or canary_record.new_id()
        self.record = OwnedRecord(repo, model, version, by)
        self._mark: Any = None  # the metrics at the start of the step's window (once its replicas serve it)
        self._served_at: float | None = None
        self._strike: str | None = None  # the step's latency failure waiting for the next window's verdict
        self._loaded_at: float | None = None  # when every listed replica first served the canary (this listing)
        self.fleet = FleetWatch(repo, model)  # N and liveness, poll by poll

    # -- the run --

    def run(self) -> dict[str, Any]:
        """Promote or abort; the final record. Exit 6 (SyncError) when aborted, 4 when the pin or
        the record moved under it."""
        pin = catalog.read_pin(self.repo, self.model)
        self.record.load()
        if pin.version == self.version:
            return self._already_pinned()
        if pin.version is None:
            raise errors.refused(
                f"canary: {self.model} has no stable pin in {self.repo.env.name}; allowed: a pinned stable version "
                "to compare with (promote --no-canary pins a first version)"
            )
        # Before the record is written: a version no replica would serve never starts (exit 4).
        config_text = pinnable.check(self.repo, self.model, self.version, "canary")["config_pbtxt"]
        self._start_or_resume(pin)
        while self.doc["state"] == RUNNING:
            step = self.doc["steps"][-1]
            later = [s for s in self.policy.steps if s > step["share_percent"]]
            if step["ended_at"] is not None and not later:  # every step passed
                self._promote(pin, config_text)
                continue
            try:  # a step begun or polled: S3's and the metrics' failures are retried until the deadline
                pin = self._begin_step(later[0]) if step["ended_at"] is not None else self._poll_step(step) or pin
            except errors.SyncError as e:
                if e.code != errors.S3:
                    raise
                self.fleet.s3_failed()
                self.console.warn(f"canary: {e}; retrying until the deadline {self.doc['deadline_at']}")
                self.sleep(self.poll)
        return self.doc

    @property
    def doc(self) -> dict[str, Any]:
        return self.record.doc

    def _already_pinned(self) -> dict[str, Any]:
        stored = self.record.stored
        if stored.running and stored.doc and stored.doc["canary_version"] == self.version:
            self.record.end(
                PROMOTED, "the stable pin already names the canary version (a run interrupted after its flip)"
            )
            return self.doc
        raise errors.refused(
            f"canary: {self.model} version {self.version} is already the stable pin in {self.repo.env.name}; "
            "allowed: an unpinned version"
        )

    def _start_or_resume(self, pin: catalog.Pin) -> None:
        doc = self.record.stored.doc
        if self.record.stored.running and doc is not None:
            if doc["canary_version"] != self.version:
                raise errors.refused(
                    f"canary: {self.model} version {doc['canary_version']} is in a gray release ({doc['id']}); "
                    f"allowed: one at a time (`model-sync canary {self.model} --abort` ends it)"
                )
            self.canary_id = doc["id"]
            self.policy = CanaryPolicy.from_mapping(doc["policy"], "canary record policy")  # the one it started with
            self.console.line(f"resuming: canary {doc['id']} of {self.model} version {self.version}")
            self.fleet.start(doc["deployment"])
            if doc["stable_version"] != pin.version:
                self.record.pin_moved(pin)
            if not doc["steps"]:
                self._begin_step(self.policy.steps[0])
            return
        now = self.clock()
        fleet = self.fleet.start(None)  # N starts with every live replica; later ones once clients reach them
        if len(fleet.live) < 2:
            raise errors.refused(
                f"canary: {len(fleet.live)} live replica(s) report {self.model} in {self.repo.env.name}; allowed: at "
                "least 2 (one keeps serving stable), or promote --no-canary"
            )
        assert pin.version is not None
        doc = canary_record.new(self.model, self.canary_id, fleet.deployment, pin.version, self.version,
                                self.policy.to_mapping(), self.by, now, self.policy.deadline_seconds)  # fmt: skip
        self.record.create(doc)
        self.console.line(
            f"canary: {self.model} version {self.version} against stable {pin.version} on {len(fleet.live)} replicas "
            f"of {fleet.deployment} (steps {list(self.policy.steps)} %, {self.policy.step_seconds}s each, deadline "
            f"{self.doc['deadline_at']})"
        )
        self._begin_step(self.policy.steps[0])

    def _begin_step(self, share: int) -> catalog.Pin:
        """The step at `share` %: its replicas listed, its window not started; the stable pin as read."""
        pin = self.record.unmoved()
        fleet = self.fleet.look(self.metrics, self.doc["deployment"], self.doc["replicas"])
        chosen = canary_replicas(fleet.ids, self.doc["replicas"], share, self.canary_id)
        step = canary_record.new_step(share, len(chosen), len(fleet.live), codec.now())
        self.record.save(replicas=chosen, share_percent=share, steps=[*self.doc["steps"], step])
        self.console.line(
            f"step: {share} % configured, {len(chosen)} of {len(fleet.live)} live replicas "
            f"({step['effective_percent']:g} % of the traffic): {', '.join(chosen)}"
        )
        self._mark, self._served_at, self._strike, self._loaded_at = None, None, None, None
        return pin

    def _poll_step(self, step: dict[str, Any]) -> catalog.Pin:
        """One poll of the running step: deadline, moved pin or record, liveness and load,
        figures, verdict. The stable pin as read."""
        if self.clock() >= codec.parse_time(self.doc["deadline_at"]).timestamp():
            self._abort(f"deadline {self.doc['deadline_at']} passed: last verdict {step['verdict'] or 'none'}")
        pin = self.record.unmoved()
        self.fleet.s3_answered()
        served = self._canary_served(step)
        step = self.doc["steps"][-1]  # re-balanced
        if not served:
            self.sleep(self.poll)
            return pin
        if self._mark is None:
            self._mark, self._served_at = self.metrics.mark(), self.clock()
            self._loaded_at = self._loaded_at or self._served_at  # a fresh window after a strike keeps it
            self.record.save(
                steps=[*self.doc["steps"][:-1], {**step, "window_from": codec.format_time(self._served_at)}]
            )
            self.sleep(self.poll)
            return pin
        figures = self.metrics.figures(self._mark, [self.version, self.doc["stable_version"]])
        if not self.fleet.whole(self.metrics):
            self.sleep(self.poll)  # the next poll relists the replica that stopped answering
            return pin
        self._judge(step, figures[self.version], figures[self.doc["stable_version"]])
        return pin

    def _judge(self, step: dict[str, Any], canary: Figures, stable: Figures) -> None:
        """Record the window's verdict and act on it: a failure on errors aborts at once; one on
        latency aborts when the next window fails on latency too (the first is judged again on a
        fresh window: a canary just loaded answers its first requests cold); a pass after
        stepSeconds ends the step."""
        canary, stable = tracks(canary, stable)
        verdict = judge(canary, stable, self.policy)
        if self._strike is not None and verdict.outcome == FAIL and verdict.latency and not self._confirmable(canary):
            verdict = Verdict(INCONCLUSIVE, f"{verdict.reason}; judged again once every canary replica has served "
                              f"{self.policy.latency_confirm_after_seconds}s since its load "
                              f"(latencyConfirmAfterSeconds) and {self._again()} canary requests in this window")  # fmt: skip
        strike = verdict.outcome == FAIL and verdict.latency and self._strike is None
        first = verdict.reason
        if strike:
            verdict = Verdict(INCONCLUSIVE, f"{first}; judged again on a fresh window before aborting "
                              "(a latency failure must repeat)")  # fmt: skip
        elif verdict.outcome == PASS:
            self._strike = None
        done = verdict.outcome == FAIL or (
            verdict.outcome == PASS and self.clock() - (self._served_at or 0) >= self.policy.step_seconds
        )
        both = canary.requests + stable.requests
        update = {"verdict": verdict.outcome, "reason": verdict.reason, "ended_at": codec.now() if done else None,
                  "figures": {"canary": canary.record(), "stable": stable.record()},
                  "strikes": step.get("strikes", 0) + strike,
                  "observed_percent": round(100 * canary.requests / both, 2) if both else None}  # fmt: skip
        if step["verdict"] != verdict.outcome or done or strike:
            self.console.line(f"step {step['share_percent']} %: {verdict.outcome}: {verdict.reason}")
        self.record.save(steps=[*self.doc["steps"][:-1], {**step, **update}])
        if verdict.outcome == FAIL:
            self._abort(f"step {step['share_percent']} %: {verdict.reason}"
                        + (f" (and in the window before: {self._strike})" if self._strike and verdict.latency else ""))  # fmt: skip
        if strike:
            self._strike, self._mark = first, None  # the next poll starts a fresh window
        if not done:
            self.sleep(self.poll)

    def _again(self) -> int:
        return REJUDGE_REQUESTS_PER_REPLICA * len(self.doc["replicas"])

    def _confirmable(self, canary: Figures) -> bool:
        """Whether a window may confirm a latency failure: every canary replica has served
        latencyConfirmAfterSeconds since its load, and the window holds _again() canary requests."""
        served = self.clock() - (self._loaded_at or self.clock())
        return served >= self.policy.latency_confirm_after_seconds and canary.requests >= self._again()

    def _canary_served(self, step: dict[str, Any]) -> bool:
        """True once every listed replica serves the canary READY; first re-lists the live fleet
        (a replica that stopped reporting is replaced, a scaled fleet re-balanced: the window
        restarts), and aborts with fewer than 2 live replicas, on a load failure or past
        loadTimeoutSeconds."""
        listed = self.doc["replicas"]
        fleet = self.fleet.look(self.metrics, self.doc["deployment"], listed)
        gone = fleet.describe_gone(listed)
        if len(fleet.live) < 2:
            self._abort(
                f"no live replica can take the canary: {len(fleet.live)} live replica(s) of {self.doc['deployment']} "
                f"report {self.model} (at least 2 are needed){'; ' + gone if gone else ''}"
            )
        chosen = canary_replicas(fleet.ids, [r for r in listed if r in fleet.live], step["share_percent"],
                                 self.canary_id)  # fmt: skip
        if chosen != listed or len(fleet.live) != step["fleet"]:
            self._relist(step, chosen, len(fleet.live), gone)
            return False
        for replica in chosen:
            entry = fleet.live[replica]
            if self.version in entry["failed"]:
                self._abort(f"the canary failed to load on {replica}: {entry['error'] or entry['state']}")
        if all(replicas.serves(fleet.live[r], self.version) for r in chosen) and chosen:
            return True
        waited = self.clock() - codec.parse_time(step.get("listed_at") or step["started_at"]).timestamp()
        if waited > self.policy.load_timeout_seconds:
            self._abort(f"the canary is not served by {', '.join(chosen)} after {waited:.0f}s (loadTimeoutSeconds)")
        return False

    def _relist(self, step: dict[str, Any], chosen: list[str], live: int, gone: str) -> None:
        """The step's replicas become `chosen` of `live` replicas; its window starts again."""
        why = gone or f"{live} live replicas now (was {step['fleet']})"
        step = {**canary_record.new_step(step["share_percent"], len(chosen), live, step["started_at"]),
                "listed_at": codec.now(), "restarts": step.get("restarts", 0) + 1}  # fmt: skip
        self.console.line(
            f"re-balance: {why}; canary on {', '.join(chosen)}, {len(chosen)} of {live} "
            f"({step['effective_percent']:g} % of the traffic); the step's window starts again"
        )
        self.record.save(replicas=chosen, steps=[*self.doc["steps"][:-1], step])
        self._mark, self._served_at, self._loaded_at = None, None, None

    # -- the decision --

    def _promote(self, pin: catalog.Pin, config_text: str) -> None:
        try:  # the version may have lost a file since the start: the flip checks again, else ends the run (exit 4)
            pinnable.check(self.repo, self.model, self.version, "canary")
        except errors.SyncError as e:
            self.record.end(ABORTED, f"not pinned: {e}")
            raise
        try:
            catalog.flip_pin(self.repo, self.model, self.version, config_text, "promote", self.by, pin,
                                warn=self.console.warn)  # fmt: skip
        except errors.SyncError as e:
            if e.code != errors.REFUSED:
                raise
            self.record.pin_moved(catalog.read_pin(self.repo, self.model))
        self.record.end(PROMOTED, f"every step passed ({', '.join(str(s) for s in self.policy.steps)} %)")
        self.console.line(f"promoted: {self.model} version {self.version} is the stable pin in {self.repo.env.name}")

    def _abort(self, reason: str) -> NoReturn:
        self.record.end(ABORTED, reason)
        raise errors.SyncError(
            EXIT_ABORTED,
            f"canary: {self.model} version {self.version} aborted ({reason}); allowed: a version that passes the "
            f"analysis (its replicas are back on stable {self.doc['stable_version']}; the record is "
            f"{self.repo.uri(layout.canary_audit_key(self.model, self.doc['id']))})",
        )
