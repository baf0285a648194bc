"""The agent's metrics (model_sync.agent.metrics): one state series per model (REJECTED or FAILED
with its bounded reason, the previous series removed when the state changes), the pinned and
served versions, and /metrics served over HTTP in Prometheus' text format, read back with
prometheus-client's own parser; a port that cannot listen is one AgentError line."""

from __future__ import annotations

import socket

import pytest

from model_sync.agent.exceptions import AgentError, Rejection
from model_sync.agent.metrics import AgentMetrics, state_of
from model_sync.agent.state import ModelState
from model_sync.records.codec import ReplicaState
from tests.support.prometheus import Samples, scrape
from tests.support.s3_servers import free_port


def _scrape(port: int) -> Samples:
    return scrape(f"http://127.0.0.1:{port}/metrics")


@pytest.mark.parametrize(
    ("state", "reason", "labels"),
    [
        (ReplicaState.READY, None, ("READY", "")),
        (ReplicaState.LOADING, "load_failed", ("LOADING", "")),  # a reason outside FAILED means nothing
        (ReplicaState.FAILED, Rejection.BACKEND_FILES_MISSING, ("REJECTED", "backend_files_missing")),
        (ReplicaState.FAILED, Rejection.CHECKSUM_MISMATCH, ("REJECTED", "checksum_mismatch")),
        (ReplicaState.FAILED, Rejection.LOAD_TIMEOUT, ("FAILED", "load_timeout")),
        (ReplicaState.FAILED, None, ("FAILED", "load_failed")),
    ],
)
def test_a_failed_version_is_rejected_or_failed_with_its_reason(
    state: ReplicaState, reason: str | None, labels: tuple[str, str]
) -> None:
    assert state_of(ModelState(state=state, reason=reason)) == labels


def test_each_model_has_one_state_series_and_its_versions_served_over_http() -> None:
    metrics = AgentMetrics()
    port = free_port()
    metrics.serve(port, "127.0.0.1")
    try:
        slow = ModelState(pin_text="x", pinned=(7,), serving=(6,), state=ReplicaState.LOADING)
        models = {"slow": slow, "new": ModelState()}
        metrics.observe(models)
        metrics.passed(1234.5)
        metrics.failed("unavailable")
        metrics.downloaded(2048, 0.5)
        metrics.loaded(3.0, "ready")
        metrics.smoked(0.02, True)
        got = _scrape(port)
        assert got[("model_sync_agent_model_pinned_version", (("model", "slow"),))] == 7
        assert got[("model_sync_agent_model_served_version", (("model", "slow"),))] == 6
        assert got[("model_sync_agent_model_pinned_version", (("model", "new"),))] == 0  # nothing pinned
        assert got[("model_sync_agent_model_state", (("model", "slow"), ("reason", ""), ("state", "LOADING")))] == 1
        assert got[("model_sync_agent_last_success_timestamp_seconds", ())] == 1234.5
        assert got[("model_sync_agent_passes_total", ())] == 1
        assert got[("model_sync_agent_pass_failures_total", (("kind", "unavailable"),))] == 1
        assert got[("model_sync_agent_download_bytes_total", ())] == 2048
        assert got[("model_sync_agent_load_duration_seconds_count", (("outcome", "ready"),))] == 1
        assert got[("model_sync_agent_smoke_duration_seconds_count", (("outcome", "ok"),))] == 1

        slow.transition(ReplicaState.FAILED, reason=Rejection.LOAD_TIMEOUT.value)
        metrics.observe(models)
        states = {k: v for k, v in _scrape(port).items() if k[0] == "model_sync_agent_model_state" and
                  dict(k[1])["model"] == "slow"}  # fmt: skip
        assert states == {
            ("model_sync_agent_model_state", (("model", "slow"), ("reason", "load_timeout"), ("state", "FAILED"))): 1
        }
    finally:
        metrics.close()


def test_a_port_that_cannot_listen_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(AgentError, match=rf"^metrics_port: {port} on '127.0.0.1' cannot listen \(.*\); allowed"):
            AgentMetrics().serve(port, "127.0.0.1")
