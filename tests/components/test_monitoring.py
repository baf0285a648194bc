"""Monitoring: pinned kube-prometheus-stack + prometheus-adapter, HPA metric, dashboard, alerts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components import gpu_contract, naming, versions
from components.monitoring import (
    MonitoredDeployment,
    MonitoringArgs,
    adapter_rules,
    alertmanager_config,
    queue_time_query,
)
from components.triton_deployment import QUEUE_TIME_METRIC
from tests.components._helpers import assert_bounded_resources, assert_restricted_container, assert_restricted_pod
from tests.pulumi_kit import SECRET_STAND_INS, Run, run_program

RELEASE = "kubernetes:helm.sh/v3:Release"


def _obj(run: Run, kind: str, name: str) -> dict[str, Any]:
    (found,) = [
        r.inputs
        for r in run.kubernetes_objects()
        if r.inputs.get("kind") == kind and r.inputs["metadata"]["name"] == name
    ]
    return found


@pytest.mark.parametrize(
    ("role", "chart"),
    [
        ("kube-prometheus-stack", versions.KUBE_PROMETHEUS_STACK_CHART),
        ("prometheus-adapter", versions.PROMETHEUS_ADAPTER_CHART),
    ],
)
def test_pinned_releases(any_stack: Run, role: str, chart: versions.HelmChart) -> None:
    r = any_stack.one(RELEASE, f"monitoring-{role}")
    assert (r.inputs["chart"], r.inputs["version"], r.inputs["repositoryOpts"]["repo"]) == (
        chart.chart,
        chart.version,
        chart.repository,
    )
    assert r.inputs["namespace"] == naming.MONITORING_NAMESPACE


def test_retention_storage_and_selectors_per_stack(prod: Run, dev: Run) -> None:
    spec = prod.one(RELEASE, "monitoring-kube-prometheus-stack").inputs["values"]["prometheus"]["prometheusSpec"]
    assert spec["retention"] == "30d"
    assert spec["storageSpec"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == "200Gi"
    assert (
        spec["storageSpec"]["volumeClaimTemplate"]["spec"]["storageClassName"]
        == naming.STORAGE_CLASS
        == "gp3-encrypted"
    )
    assert spec["serviceMonitorSelectorNilUsesHelmValues"] is False
    assert spec["ruleSelectorNilUsesHelmValues"] is False
    assert (
        dev.one(RELEASE, "monitoring-kube-prometheus-stack").inputs["values"]["prometheus"]["prometheusSpec"][
            "retention"
        ]
        == "3d"
    )


def test_grafana_password_generated_never_in_values(staging: Run) -> None:
    values = staging.one(RELEASE, "monitoring-kube-prometheus-stack").inputs["values"]
    assert "adminPassword" not in values["grafana"]
    assert values["grafana"]["admin"]["existingSecret"] == "grafana-admin"
    secret = _obj(staging, "Secret", "grafana-admin")["stringData"]
    assert secret["admin-password"] == staging.exports["grafanaAdminPassword"]
    assert len(secret["admin-password"]) >= 32
    assert "hooks.slack.com" not in json.dumps(values)


def test_slack_receiver_from_a_mounted_secret() -> None:
    # Set the README's way (`pulumi config set --secret`): a plaintext webhook is refused.
    url = SECRET_STAND_INS["triton-platform:alertmanagerSlackWebhookUrl"]
    run = run_program("staging", overrides={"triton-platform:alertmanagerSlackWebhookUrl": {"secure": "v1:AAAA"}})
    values = run.one(RELEASE, "monitoring-kube-prometheus-stack").inputs["values"]["alertmanager"]
    assert values["alertmanagerSpec"]["secrets"] == ["alertmanager-slack"]
    assert values["config"]["route"]["receiver"] == "slack"
    assert url not in json.dumps(values)
    assert _obj(run, "Secret", "alertmanager-slack")["stringData"]["url"] == url
    assert alertmanager_config(False)["route"]["receiver"] == "null"


def test_adapter_metric_is_a_ratio_of_counter_increases(dev: Run) -> None:
    rules = dev.one(RELEASE, "monitoring-prometheus-adapter").inputs["values"]["rules"]
    (rule,) = rules["custom"]
    assert rule["name"]["as"] == QUEUE_TIME_METRIC
    q = rule["metricsQuery"]
    measured, pending = q.split(" or ")
    # Counters: increase() survives a tritonserver restart (counter reset); delta() does not.
    # While a request succeeded in the window: queue time over successful requests.
    assert measured == (
        "(sum(increase(nv_inference_queue_duration_us{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>) / "
        "(sum(increase(nv_inference_request_success{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>) > 0))"
    )
    # Otherwise Little's law over every completed request (failures included); 0 when idle.
    assert pending.startswith(
        "(sum(avg_over_time(nv_inference_pending_request_count{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>) * "
        "120000000 / clamp_min("
    )
    assert "nv_inference_request_failure{<<.LabelMatchers>>}[2m]" in pending
    assert "delta(" not in q
    assert "rate(" not in q
    assert rules == adapter_rules()
    assert queue_time_query('namespace="x"', "pod", "5m").count("[5m]") == 5
    assert "* 300000000 /" in queue_time_query('namespace="x"', "pod", "5m")


# Where each kube-prometheus-stack workload the program configures takes its resources.
KPS_WORKLOADS = {
    "prometheus-operator": ("prometheusOperator",),
    "admission create/patch Jobs": ("prometheusOperator", "admissionWebhooks", "patch"),
    "kube-state-metrics": ("kube-state-metrics",),
    "node-exporter": ("prometheus-node-exporter",),
    "grafana": ("grafana",),
    "grafana sidecars": ("grafana", "sidecar"),
    "alertmanager": ("alertmanager", "alertmanagerSpec"),
}


def _at(values: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for key in path:
        values = values[key]
    return values


@pytest.mark.parametrize("workload", sorted(KPS_WORKLOADS))
def test_every_chart_workload_has_bounded_resources(any_stack: Run, workload: str) -> None:
    values = any_stack.one(RELEASE, "monitoring-kube-prometheus-stack").inputs["values"]
    assert_bounded_resources(workload, _at(values, KPS_WORKLOADS[workload])["resources"])


def test_node_exporter_keeps_only_the_host_namespaces(prod: Run) -> None:
    exporter = prod.one(RELEASE, "monitoring-kube-prometheus-stack").inputs["values"]["prometheus-node-exporter"]
    assert_restricted_pod("node-exporter", exporter["securityContext"])
    assert_restricted_container("node-exporter", exporter["containerSecurityContext"])
    assert exporter["tolerations"] == gpu_contract.gpu_tolerations()
    # hostNetwork / hostPID stay the chart's (true): node metrics, not the pod's (.checkov.yaml).
    assert "hostNetwork" not in exporter
    assert "hostPID" not in exporter


def test_grafana_reads_dashboards_and_datasources_in_its_namespace_only(prod: Run) -> None:
    grafana = prod.one(RELEASE, "monitoring-kube-prometheus-stack").inputs["values"]["grafana"]
    # A Role, not the chart's ClusterRole that reads every Secret in the cluster.
    assert grafana["rbac"] == {"namespaced": True}
    for sidecar in ("dashboards", "datasources"):
        assert grafana["sidecar"][sidecar]["searchNamespace"] == "monitoring"


def test_grafana_and_its_sidecars_run_on_a_read_only_root(prod: Run) -> None:
    grafana = prod.one(RELEASE, "monitoring-kube-prometheus-stack").inputs["values"]["grafana"]
    assert_restricted_container("grafana", grafana["containerSecurityContext"])
    assert_restricted_container("grafana sidecars", grafana["sidecar"]["securityContext"])
    for context in (grafana["containerSecurityContext"], grafana["sidecar"]["securityContext"]):
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert grafana["extraEmptyDirMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]


def test_adapter_resources_and_its_metrics_grant_narrowed_to_the_one_metric(dev: Run) -> None:
    values = dev.one(RELEASE, "monitoring-prometheus-adapter").inputs["values"]
    assert_bounded_resources("prometheus-adapter", values["resources"])
    # The chart's default is ["*"]: every custom metric, every verb.
    assert values["rbac"] == {"customMetrics": {"resources": [f"pods/{QUEUE_TIME_METRIC}"]}}


def test_dashboard_and_rules(prod: Run) -> None:
    cm = _obj(prod, "ConfigMap", "triton-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(cm["data"]["triton.json"])
    exprs = " ".join(p["targets"][0]["expr"] for p in board["panels"])
    assert "DCGM_FI_DEV_GPU_UTIL" in exprs
    assert "nv_inference_queue_duration_us" in exprs
    rules = _obj(prod, "PrometheusRule", "triton-alerts")["spec"]["groups"]
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


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"deployments": ()}, r"MonitoringArgs\.deployments: \(\) is not allowed"),
        ({"prometheus_retention_days": 0}, r"prometheus_retention_days: 0 is out of range; allowed: 1 to 365"),
        ({"prometheus_storage_gib": 5}, r"prometheus_storage_gib: 5 is out of range; allowed: 10 to 10000"),
        ({"replicas": 0}, r"MonitoringArgs\.replicas: 0 is out of range"),
        ({"vpc_cidr": "vpc"}, r"MonitoringArgs\.vpc_cidr: 'vpc' is not allowed; allowed: the VPC's IPv4 CIDR"),
        (
            {"slack_webhook_url": "https://evil.example.com/x"},
            r"slack_webhook_url: '<secret>' is not a Slack webhook URL",
        ),
    ],
)
def test_args_validation(overrides: dict[str, Any], match: str) -> None:
    base: dict[str, Any] = {"deployments": (MonitoredDeployment("default", 1000),)}
    with pytest.raises(ValueError, match=match):
        MonitoringArgs(**{**base, **overrides})
    assert MonitoringArgs(**base).slack_enabled is False
