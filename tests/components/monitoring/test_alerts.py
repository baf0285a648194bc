"""The PrometheusRule `triton-alerts` as each stack records it: the alerts, their expressions and labels
per deployment, their waits. (Every alert on a real Prometheus: test_rules.py.)"""

from __future__ import annotations

from components.monitoring.alerts import canary_stuck_rule
from components.monitoring.monitoring import MonitoredDeployment
from tests.components.monitoring._helpers import recorded
from tests.pulumi_kit import Run


def test_rules_per_deployment_and_no_ready_replica_silent_at_zero(prod: Run) -> None:
    rules = recorded(prod, "PrometheusRule", "triton-alerts")["spec"]["groups"]
    alerts = [r["alert"] for g in rules for r in g["rules"]]
    for name in (
        "TritonQueueLatencyP99High",
        "TritonInferenceFailureRatioHigh",
        "TritonNoReadyReplica",
        "TritonModelLoadFailure",
        "GpuIdle",
        "GpuSaturated",
    ):
        assert name in alerts
    (no_ready,) = [r for g in rules for r in g["rules"] if r["alert"] == "TritonNoReadyReplica"]
    # Silent while the Deployment is scaled to 0 (dev's scale-to-zero), matched per deployment.
    available, wanted = no_ready["expr"].split(" and on (namespace, deployment) ")
    assert available.startswith("(kube_deployment_status_replicas_available{")
    assert available.endswith("} < 1)")
    assert wanted.startswith("(kube_deployment_spec_replicas{")
    assert wanted.endswith("} > 0)")
    assert 'namespace="triton"' in wanted
    p99 = [r for g in rules for r in g["rules"] if r["alert"] == "TritonQueueLatencyP99High"]
    assert sorted(r["labels"]["deployment"] for r in p99) == ["default", "large"]
    assert any("> 100000" in r["expr"] for r in p99)  # 5 x the default deployment's 20 ms target


def test_canary_stuck_alert_per_deployment_waits_its_deadline_plus_the_rate_window(prod: Run) -> None:
    """prod: `default` keeps the canary defaults (1 h), `large` sets deadlineSeconds 5400; the
    rule of each deployment selects its own pods and waits its deadline + the 5-minute window."""
    rules = recorded(prod, "PrometheusRule", "triton-alerts")["spec"]["groups"]
    stuck = {r["labels"]["deployment"]: r for g in rules for r in g["rules"] if r["alert"] == "TritonCanaryStuck"}
    assert sorted(stuck) == ["default", "large"]
    assert {d: r["for"] for d, r in stuck.items()} == {"default": "65m", "large": "95m"}
    for d, r in stuck.items():
        assert r["labels"] == {"severity": "warning", "deployment": d}
        assert r["expr"] == (
            "count by (namespace, model) (count by (namespace, model, version) "
            f'(rate(nv_inference_request_success{{namespace="triton",pod=~"triton-{d}-.*"}}[5m]) > 0)) > 1'
        )
        summary = r["annotations"]["summary"]
        assert "`model-sync status`" in summary
        assert "`model-sync canary --abort`" in summary
    assert "(the canary deadline, 90 minutes, plus the 5m rate window)" in stuck["large"]["annotations"]["summary"]


def test_an_odd_deadline_is_waited_in_seconds() -> None:
    rule = canary_stuck_rule('namespace="triton"', MonitoredDeployment("default", 1000, 3630))
    assert rule["for"] == "3930s"
    assert "for 3930 seconds (the canary deadline, 3630 seconds, plus" in rule["annotations"]["summary"]
