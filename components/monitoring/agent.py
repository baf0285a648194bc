"""The repository agent as the monitoring stack sees it, on the agent's own metrics
(model_sync/agent/metrics.py, scraped from every Triton pod through its deployment's PodMonitor):
the alert group `model-sync-agent` and the dashboard's `Repository agent` row. Per deployment:

- TritonAgentStale: a replica's agent has completed no pass for longer than `stale_seconds` while
  another replica of the deployment has (S3 cut off from that pod, its credentials, a stuck pass);
- TritonPinnedVersionFailed: a pinned version REJECTED (never placed: a manifest or file that does
  not verify, a version without its backend's files) or FAILED (placed, did not load) on a replica;
- TritonPinNotServed: a replica pins a version other than the one it serves, neither rejected nor
  failed, for longer than the deployment's load timeout (`canary.loadTimeoutSeconds`): a load that
  never finishes, a download that never completes.

Every wait is a parameter (`AgentAlertTiming`, the deployment's load timeout), so that the
real-Prometheus test can shrink them (tests/components/monitoring/test_e2e.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from components.kubernetes import naming
from components.monitoring.queries import duration_of

if TYPE_CHECKING:
    from components.monitoring.args import MonitoredDeployment

# The series of model_sync/agent/metrics.py this module reads.
LAST_SUCCESS = "model_sync_agent_last_success_timestamp_seconds"
PINNED = "model_sync_agent_model_pinned_version"
SERVED = "model_sync_agent_model_served_version"
STATE = "model_sync_agent_model_state"
FAILED_PASSES = "model_sync_agent_pass_failures_total"
LOAD_SECONDS = "model_sync_agent_load_duration_seconds"
NOT_SERVING = 'state=~"REJECTED|FAILED"'  # the states of a pinned version a replica will not serve


@dataclass(frozen=True)
class AgentAlertTiming:
    """The waits of the agent's alerts, in seconds. stale_seconds: how long since a replica's last
    completed pass (longer than a pass can take: a failed load waits up to --ready-timeout, 300 s,
    for the previous version) while a peer completed one; stale_for_seconds: how long that holds
    before TritonAgentStale fires; failed_for_seconds: how long a pinned version stays REJECTED or
    FAILED before TritonPinnedVersionFailed fires (a gray release's canary that fails is aborted and
    its replicas back on stable within it)."""

    stale_seconds: int = 600
    stale_for_seconds: int = 120
    failed_for_seconds: int = 120

    def __post_init__(self) -> None:
        for name in ("stale_seconds", "stale_for_seconds", "failed_for_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"AgentAlertTiming.{name}: {value!r} is not allowed; allowed: a whole number >= 1")


def pods(ns: str, d: MonitoredDeployment) -> str:
    """The label matchers of deployment `d`'s pods."""
    return f'namespace="{ns}",pod=~"{naming.triton_app_name(d.name)}-.*"'


def agent_rules(ns: str, d: MonitoredDeployment, timing: AgentAlertTiming | None = None) -> list[dict[str, Any]]:
    """The three agent alerts of deployment `d` (module docstring), their waits from `timing` and
    d.load_timeout_seconds; `ns` is the Triton namespace."""
    timing = timing or AgentAlertTiming()
    p = pods(ns, d)
    failed_for, failed_for_words = duration_of(timing.failed_for_seconds)
    load_for, load_words = duration_of(d.load_timeout_seconds)
    by_pod = "namespace, pod, model"
    return [
        _stale_rule(d, p, timing),
        {
            "alert": "TritonPinnedVersionFailed",
            "expr": f"count by (namespace, model, state, reason) ({STATE}{{{p},{NOT_SERVING}}} == 1) > 0",
            "for": failed_for,
            "labels": {"severity": "critical", "deployment": d.name},
            "annotations": {
                "summary": (
                    f"Triton {d.name}: the pinned version of {{{{ $labels.model }}}} is {{{{ $labels.state }}}} "
                    f"({{{{ $labels.reason }}}}) on {{{{ $value }}}} replica(s) for {failed_for_words}: they keep "
                    "serving the previous version; run `model-sync status`"
                ),
            },
        },
        {
            "alert": "TritonPinNotServed",
            # The value is the pinned version. A version refused or failed has its own alert.
            "expr": (
                f"(max by ({by_pod}) ({PINNED}{{{p}}}) != max by ({by_pod}) ({SERVED}{{{p}}})) "
                f"unless on ({by_pod}) ({STATE}{{{p},{NOT_SERVING}}} == 1)"
            ),
            "for": load_for,
            "labels": {"severity": "warning", "deployment": d.name},
            "annotations": {
                "summary": (
                    f"Triton {d.name}: {{{{ $labels.pod }}}} pins {{{{ $labels.model }}}} version {{{{ $value }}}} "
                    f"but has not served it for {load_words} (the deployment's load timeout, "
                    "canary.loadTimeoutSeconds): a load or a download that does not finish"
                ),
            },
        },
    ]


def _stale_rule(d: MonitoredDeployment, p: str, timing: AgentAlertTiming) -> dict[str, Any]:
    """TritonAgentStale: one replica's agent has completed no pass for `timing.stale_seconds` while a peer's has."""
    age = f"(time() - {LAST_SUCCESS}{{{p}}})"
    stale_for, stale_for_words = duration_of(timing.stale_for_seconds)
    _, stale_words = duration_of(timing.stale_seconds)
    return {
        "alert": "TritonAgentStale",
        # A replica behind while a peer is current: one replica's S3 path, credentials or pass,
        # not the bucket (an outage of every replica leaves none current: the other alerts and
        # `model-sync verify` see that).
        "expr": (
            f"{age} > {timing.stale_seconds} and on (namespace) "
            f"(count by (namespace) ({age} <= {timing.stale_seconds}) > 0)"
        ),
        "for": stale_for,
        "labels": {"severity": "warning", "deployment": d.name},
        "annotations": {
            "summary": (
                f"Triton {d.name}: the model-sync agent in {{{{ $labels.pod }}}} has completed no pass for "
                f"more than {stale_words} while another replica's has, for {stale_for_words}: it keeps "
                "serving what it has, and new pins do not reach it"
            ),
        },
    }


def agent_panel_queries(triton_namespace: str) -> dict[str, tuple[str, str, str]]:
    """The dashboard's `Repository agent` row (title -> (PromQL, unit, legend)), filtered by the
    dashboard's `model` variable where a series has a model."""
    ns = f'namespace="{triton_namespace}"'
    m = f'{ns},model=~"$model"'
    return {
        "Agent: seconds since the last completed pass, by pod": (f"time() - {LAST_SUCCESS}{{{ns}}}", "s", "{{pod}}"),
        "Agent: failed passes / s, by kind": (
            f"sum by (kind) (rate({FAILED_PASSES}{{{ns}}}[5m]))",
            "short",
            "{{kind}}",
        ),
        "Agent: replicas not serving their pin, by model": (
            f"count by (model) (max by (pod, model) ({PINNED}{{{m}}}) != max by (pod, model) ({SERVED}{{{m}}}))",
            "short",
            "{{model}}",
        ),
        "Agent: pinned versions REJECTED or FAILED, by model and reason": (
            f"count by (model, state, reason) ({STATE}{{{m},{NOT_SERVING}}} == 1)",
            "short",
            "{{model}} {{state}} {{reason}}",
        ),
        "Agent: load duration p90, by outcome": (
            f"histogram_quantile(0.9, sum by (le, outcome) (rate({LOAD_SECONDS}_bucket{{{ns}}}[30m])))",
            "s",
            "{{outcome}}",
        ),
        "Agent: downloaded bytes / s": (
            f"sum(rate(model_sync_agent_download_bytes_total{{{ns}}}[5m]))",
            "Bps",
            "downloaded",
        ),
    }
