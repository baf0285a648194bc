"""The agent's own metrics, in Prometheus' text format on `--metrics-port` (prometheus-client, a
registry of each agent's own): its passes, per model what is pinned, what is served and in which
state, the versions it rejected, what it downloaded and how long loads and smoke inferences took.
The alerts and dashboard panels built on them: components/monitoring/agent.py; what each
series means: docs/agent.md ("Metrics").

    model_sync_agent_passes_total                          passes completed
    model_sync_agent_pass_failures_total{kind}             failed passes; kind: model_sync.s3.failures.Kind's
                                                           value (unavailable, denied, no-bucket, ...) or
                                                           `other` (not S3's: ENOSPC, a bug)
    model_sync_agent_last_success_timestamp_seconds        when the last pass completed (0: none yet)
    model_sync_agent_model_pinned_version{model}           the highest version of the pin it follows (0: none)
    model_sync_agent_model_served_version{model}           the highest version it serves (0: none)
    model_sync_agent_model_state{model,state,reason}       1, one series per model: state READY, LOADING,
                                                           PLACED, PENDING, REJECTED (refused before it was
                                                           placed) or FAILED (placed, did not load); reason
                                                           (REJECTED/FAILED only): exceptions.Rejection's value
    model_sync_agent_versions_rejected_total{model,reason} pinned versions rejected
    model_sync_agent_download_bytes_total                  bytes downloaded and verified
    model_sync_agent_download_seconds_total                seconds spent downloading them
    model_sync_agent_load_duration_seconds{outcome}        histogram: placed -> READY (ready), -> failed
                                                           (failed), -> given up (timeout)
    model_sync_agent_smoke_duration_seconds{outcome}       histogram: smoke inferences (ok, failed)
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from model_sync.agent.exceptions import AgentError, Rejection
from model_sync.agent.state import ModelState
from model_sync.records.codec import ReplicaState

log = logging.getLogger("model_sync.agent")

REJECTED = "REJECTED"  # the state label of a version refused before it was placed
LOAD_BUCKETS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
SMOKE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def state_of(st: ModelState) -> tuple[str, str]:
    """(state, reason) labels of a model: FAILED splits into REJECTED (never placed) and FAILED
    (placed, did not load) with its bounded reason; every other state has no reason."""
    if st.state != ReplicaState.FAILED:
        return ReplicaState(st.state).value, ""
    reason = Rejection(st.reason) if st.reason else Rejection.LOAD_FAILED
    return (ReplicaState.FAILED.value if reason.placed else REJECTED), reason.value


class AgentMetrics:
    """One agent's metrics (`registry`), updated by the pass, served by serve()."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.passes = Counter("model_sync_agent_passes", "Passes completed", registry=r)
        self.pass_failures = Counter(
            "model_sync_agent_pass_failures",
            "Failed passes, by S3 failure kind (other: not S3's)",
            ["kind"],
            registry=r,
        )
        self.last_success = Gauge(
            "model_sync_agent_last_success_timestamp_seconds", "When the last pass completed (0: none yet)", registry=r
        )
        self.pinned = Gauge(
            "model_sync_agent_model_pinned_version", "Highest version of the pin followed (0: none)", ["model"],
            registry=r,
        )  # fmt: skip
        self.served = Gauge(
            "model_sync_agent_model_served_version", "Highest version served (0: none)", ["model"], registry=r
        )
        self.state = Gauge(
            "model_sync_agent_model_state", "1 for the model's state here (reason: why REJECTED or FAILED)",
            ["model", "state", "reason"], registry=r,
        )  # fmt: skip
        self.rejected = Counter(
            "model_sync_agent_versions_rejected", "Pinned versions rejected, by reason", ["model", "reason"], registry=r
        )
        self.download_bytes = Counter("model_sync_agent_download_bytes", "Bytes downloaded and verified", registry=r)
        self.download_seconds = Counter("model_sync_agent_download_seconds", "Seconds spent downloading", registry=r)
        self.load_seconds = Histogram(
            "model_sync_agent_load_duration_seconds", "Placed to READY, failed or given up", ["outcome"],
            buckets=LOAD_BUCKETS, registry=r,
        )  # fmt: skip
        self.smoke_seconds = Histogram(
            "model_sync_agent_smoke_duration_seconds", "Smoke inferences", ["outcome"], buckets=SMOKE_BUCKETS,
            registry=r,
        )  # fmt: skip
        self._states: dict[str, tuple[str, str]] = {}  # model -> the (state, reason) exported
        self._lock = threading.Lock()
        self._server: Any = None

    # -- what the pass reports --

    def passed(self, at: float) -> None:
        self.passes.inc()
        self.last_success.set(at)

    def failed(self, kind: str) -> None:
        self.pass_failures.labels(kind).inc()

    def observe(self, models: Mapping[str, ModelState]) -> None:
        """Per model: the pinned and served version and the one state series (the previous one,
        when it changed, is removed: Prometheus marks it stale)."""
        with self._lock:
            for name, st in list(models.items()):
                self.pinned.labels(name).set(max(st.pinned, default=0) if st.pin_text is not None else 0)
                self.served.labels(name).set(max(st.serving, default=0))
                now = state_of(st)
                before = self._states.get(name)
                if before != now:
                    if before is not None:
                        with contextlib.suppress(KeyError):
                            self.state.remove(name, *before)
                    self.state.labels(name, *now).set(1)
                    self._states[name] = now

    def version_rejected(self, model: str, reason: Rejection) -> None:
        self.rejected.labels(model, reason.value).inc()

    def downloaded(self, size: int, seconds: float) -> None:
        self.download_bytes.inc(size)
        self.download_seconds.inc(max(0.0, seconds))

    def loaded(self, seconds: float, outcome: str) -> None:
        self.load_seconds.labels(outcome).observe(max(0.0, seconds))

    def smoked(self, seconds: float, ok: bool) -> None:
        self.smoke_seconds.labels("ok" if ok else "failed").observe(max(0.0, seconds))

    # -- the endpoint --

    def serve(self, port: int, address: str) -> None:
        """Serve /metrics on `address`:`port` from a daemon thread; AgentError when it cannot listen."""
        try:
            self._server, _ = start_http_server(port, address, registry=self.registry)
        except OSError as e:
            raise AgentError(
                f"metrics_port: {port} on {address!r} cannot listen ({e.strerror or e}); allowed: a free port"
            ) from None
        log.info("metrics on http://%s:%d/metrics", address, port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
