"""The fleet as a gray release sees it, poll by poll (model_sync.canary.gray_release): which live
replicas take traffic (N), and whether those of a window still answer once its figures are read.

- A replica counts in N from the run's start, or once clients reach it: a pod that appears during
  the run serves (and reports READY) before its readiness probe lets it into the Service, and its
  agent's smoke inference follows that report, so it counts once it has answered more than
  AGENT_REQUESTS_AFTER_READY requests since the run first saw it.
- A replica whose metrics do not answer is not live from that moment (model_sync.canary.placement:
  nor is one whose reports stopped, 3 heartbeats).
- After an S3 outage the run saw, reports are not taken for silent until S3's return plus twice the
  outage: an agent retries S3 with exponential backoff, so its first attempt after S3 returns can
  come up to about twice the outage later (a healthy fleet was taken for dead after a 6 s outage:
  its agents were still backing off).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping

from model_sync.canary import placement
from model_sync.canary.metrics import MetricsSource
from model_sync.s3.bucket import Bucket

# The requests a replica's own agent sends a version it has reported READY: one smoke inference
# (model_sync/agent/loads.py reports READY before it runs). Counting a new pod at its first answered
# request took the smoke for a client and put a pod in N that no client reached yet.
AGENT_REQUESTS_AFTER_READY = 1


class FleetWatch:
    """The live replicas of one model's deployment that take traffic, as one run counts them."""

    def __init__(self, repo: Bucket, model: str) -> None:
        self.repo, self.model = repo, model
        self.live: list[str] = []  # the live replicas of the last look (the window's fleet)
        self._counted: set[str] = set()  # N's replicas: those the run started with, then those clients reach
        self._first_answered: dict[str, float] = {}  # a replica not counted yet: its requests when first seen
        self._silence_from: _dt.datetime | None = None  # S3's return plus twice the outage (None: none seen)
        self._s3_down_at: _dt.datetime | None = None  # when the run first saw S3 fail (None: answering)

    def start(self, deployment: str | None) -> placement.Fleet:
        """The fleet at the run's start (or resumption): every live replica counts in N."""
        fleet = placement.observe(self.repo, self.model, deployment)
        self._counted = set(fleet.live)
        return fleet

    def look(self, metrics: MetricsSource, deployment: str, listed: list[str]) -> placement.Fleet:
        """The live replicas that take traffic (`listed`: the canary's, taking it or switching to it),
        their `metrics` answering now."""
        fleet = placement.observe(self.repo, self.model, deployment, reachable_since=self._silence_from)
        fleet = fleet.serving(listed)
        answered = metrics.answering(fleet.ids)
        fleet = fleet.answering(answered)
        joining = {
            r for r in fleet.live if r not in self._counted and r not in listed and not self._reached(r, answered)
        }
        fleet = fleet.without(joining)  # in no Service yet: joins N once clients reach it
        self._counted |= set(fleet.live)
        self.live = list(fleet.live)
        return fleet

    def whole(self, metrics: MetricsSource) -> bool:
        """Whether every replica of the last look still answers once a window's figures are read.
        One that died after the look is left out of the figures (they sum those that answer): its
        window is not judged, so a step never passes on the survivors of a replica that died just
        before the decision."""
        return set(self.live) <= set(metrics.answering(self.live))

    def s3_failed(self) -> None:
        self._s3_down_at = self._s3_down_at or _dt.datetime.now(_dt.UTC)

    def s3_answered(self) -> None:
        """S3 answers again after an outage the run saw: silence counts from its return plus twice it."""
        if self._s3_down_at is not None:
            back = _dt.datetime.now(_dt.UTC)
            self._silence_from, self._s3_down_at = back + 2 * (back - self._s3_down_at), None

    def _reached(self, replica: str, answered: Mapping[str, float]) -> bool:
        """Whether clients reach a replica not counted yet: it has answered more requests since the
        run first saw it than its agent's own (AGENT_REQUESTS_AFTER_READY)."""
        first = self._first_answered.setdefault(replica, answered[replica])
        return answered[replica] - first > AGENT_REQUESTS_AFTER_READY
