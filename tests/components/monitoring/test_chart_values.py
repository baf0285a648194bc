"""The Helm values of kube-prometheus-stack and prometheus-adapter as each stack records them: retention,
storage and selectors, bounded resources for every workload, restricted contexts, Grafana's namespaced
reads, the adapter's narrowed grant."""

from __future__ import annotations

from typing import Any

import pytest

from components.gpu import gpu_contract
from components.kubernetes import naming
from components.kubernetes.triton_server import QUEUE_TIME_METRIC
from components.monitoring import chart_values
from tests.components._helpers import assert_bounded_resources, assert_restricted_container, assert_restricted_pod
from tests.components.monitoring._helpers import RELEASE
from tests.pulumi_kit import Run


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


def test_the_slack_message_carries_each_alerts_runbook() -> None:
    """An operator paged in Slack gets the link to what to do, not only the alert's summary."""
    slack = chart_values.alertmanager_config(slack=True)["receivers"]
    texts = [c["text"] for r in slack for c in r.get("slack_configs", [])]
    assert texts
    assert all("{{ .Annotations.runbook_url }}" in t and "{{ .Annotations.summary }}" in t for t in texts)
