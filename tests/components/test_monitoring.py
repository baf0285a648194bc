"""Monitoring: pinned kube-prometheus-stack + prometheus-adapter, HPA metric, dashboard, alerts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components import gpu_contract, naming, versions
from components.monitoring import (
    PROMETHEUS_PORT,
    PROMETHEUS_PROXY_NAME,
    PROMETHEUS_SERVICE,
    MonitoredDeployment,
    MonitoringArgs,
    adapter_rules,
    alertmanager_config,
    network_policy_specs,
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
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p.get("targets", []))
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


def test_canary_stuck_alert_per_deployment_waits_its_deadline_plus_the_rate_window(prod: Run) -> None:
    """prod: `default` keeps the canary defaults (1 h), `large` sets deadlineSeconds 5400; the
    rule of each deployment selects its own pods and waits its deadline + the 5-minute window."""
    rules = _obj(prod, "PrometheusRule", "triton-alerts")["spec"]["groups"]
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
    from components.monitoring import canary_stuck_rule

    rule = canary_stuck_rule('namespace="triton"', MonitoredDeployment("default", 1000, 3630))
    assert rule["for"] == "3930s"
    assert "for 3930 seconds (the canary deadline, 3630 seconds, plus" in rule["annotations"]["summary"]


def test_canary_vs_stable_row_compares_versions_side_by_side(prod: Run) -> None:
    board = json.loads(_obj(prod, "ConfigMap", "triton-dashboard")["data"]["triton.json"])
    panels = board["panels"]
    (row,) = [p for p in panels if p["type"] == "row"]
    assert row["title"] == "Canary vs stable"
    following = [p for p in panels if p["gridPos"]["y"] == row["gridPos"]["y"] + 1]
    assert [p["title"] for p in following] == [
        "Canary vs stable: requests / s by version",
        "Canary vs stable: failure ratio by version",
        "Canary vs stable: request p99 by version",
    ]
    # Side by side: one line of the 24-column grid, below the row, above the log panels.
    assert [(p["gridPos"]["x"], p["gridPos"]["w"]) for p in following] == [(0, 8), (8, 8), (16, 8)]
    logs = [p for p in panels if p["type"] == "logs"]
    assert min(p["gridPos"]["y"] for p in logs) >= row["gridPos"]["y"] + 1 + 8
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for p in following:
        (target,) = p["targets"]
        assert "by (model, version)" in target["expr"]
        assert 'model=~"$model"' in target["expr"]
        assert target["legendFormat"] == "{{model}} v{{version}}"
    p99 = following[2]["targets"][0]["expr"]
    assert p99 == (
        'max by (model, version) (nv_inference_request_summary_us{namespace="triton",model=~"$model",quantile="0.99"})'
    )
    # The queries run on a real Prometheus: tests/components/test_monitoring_rules.py.


def test_canary_analysis_reads_prometheus_through_the_api_server_proxy_only(prod: Run) -> None:
    """The Role grants `get` on exactly the service proxy the exported URL names, to exactly
    the group the CI roles' access entries carry (components/identities.py)."""
    role = _obj(prod, "Role", "prometheus-query")
    assert role["metadata"]["namespace"] == naming.MONITORING_NAMESPACE
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["services/proxy"],
            "resourceNames": ["http:kube-prometheus-stack-prometheus:9090"],
            "verbs": ["get"],
        }
    ]
    binding = _obj(prod, "RoleBinding", "prometheus-query")
    assert binding["metadata"]["namespace"] == naming.MONITORING_NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "prometheus-query"}
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "triton-platform-prometheus-query"}
    ]
    assert naming.PROMETHEUS_QUERY_GROUP == "triton-platform-prometheus-query"
    # The URL: the cluster's endpoint + the proxy path whose name segment is the Role's resource name.
    endpoint = prod.one("aws:eks/cluster:Cluster").state["endpoint"]
    url = prod.exports["prometheusUrl"]
    assert url == f"{endpoint}/api/v1/namespaces/monitoring/services/{PROMETHEUS_PROXY_NAME}/proxy"
    assert url.split("/services/")[1].removesuffix("/proxy") == role["rules"][0]["resourceNames"][0]
    assert PROMETHEUS_PROXY_NAME == f"http:{PROMETHEUS_SERVICE}:{PROMETHEUS_PORT}"
    # No other Role or binding names the group or the proxy.
    for r in prod.kubernetes_objects():
        if r.inputs["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"):
            text = json.dumps(r.inputs)
            if r.inputs["metadata"]["name"] != "prometheus-query":
                assert "services/proxy" not in text
                assert naming.PROMETHEUS_QUERY_GROUP not in text


def test_without_monitoring_no_prometheus_url_and_no_query_access() -> None:
    run = run_program("staging", overrides={"triton-platform:monitoringEnabled": False})
    assert "prometheusUrl" not in run.exports
    assert "canaryPolicies" in run.exports  # the policies are the stack's, whatever monitors it
    assert [r for r in run.kubernetes_objects() if r.inputs["kind"] == "Role"] == []
    entries = [e.name for e in run.of_type("aws:eks/accessEntry:AccessEntry")]
    assert "identities-publisher-access" not in entries


def test_prometheus_admits_the_api_server_proxy_from_the_cluster_subnets_only(prod: Run) -> None:
    """The API server proxies from the control plane's interfaces in the cluster's subnets (the
    private subnets): those CIDRs, on 9090, and no wider block (not the VPC, not the public subnets)."""
    (policy,) = [
        r.inputs
        for r in prod.kubernetes_objects()
        if r.inputs["kind"] == "NetworkPolicy"
        and r.inputs["metadata"]["namespace"] == "monitoring"
        and r.inputs["metadata"]["name"] == "allow-prometheus"
    ]
    blocks = [
        (peer["ipBlock"], rule["ports"])
        for rule in policy["spec"]["ingress"]
        for peer in rule["from"]
        if "ipBlock" in peer
    ]
    private = sorted(
        r.inputs["cidrBlock"] for r in prod.of_type("aws:ec2/subnet:Subnet") if r.inputs["tags"]["tier"] == "private"
    )
    cluster = prod.one("aws:eks/cluster:Cluster")
    subnet_ids = {r.state["id"]: r for r in prod.of_type("aws:ec2/subnet:Subnet")}
    assert sorted(subnet_ids[i].inputs["cidrBlock"] for i in cluster.inputs["vpcConfig"]["subnetIds"]) == private
    assert len(private) == 3
    assert sorted(b["cidr"] for b, _ in blocks) == private
    assert all("except" not in b for b, _ in blocks)
    assert all(p == [{"port": 9090, "protocol": "TCP"}] for _, p in blocks)  # (mocks record 9090.0 == 9090)


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
        ({"control_plane_cidrs": ()}, r"control_plane_cidrs: \[\] is empty or repeats a CIDR"),
        ({"control_plane_cidrs": ("10.0.0.0/19", "10.0.0.0/19")}, r"control_plane_cidrs: .* repeats a CIDR"),
        (
            {"control_plane_cidrs": ("10.1.0.0/19",)},
            r"control_plane_cidrs: '10.1.0.0/19' is not allowed; allowed: the CIDRs of the cluster's subnets, inside "
            r"the VPC 10.0.0.0/16",
        ),
        ({"control_plane_cidrs": ("0.0.0.0/0",)}, r"control_plane_cidrs: '0.0.0.0/0' is not allowed"),
        ({"control_plane_cidrs": ("10.0.0.1/19",)}, r"control_plane_cidrs: '10.0.0.1/19' is not allowed"),
        ({"query_group": "system:masters"}, r"query_group: 'system:masters' is not allowed; allowed: a group name"),
        ({"query_group": ""}, r"query_group: '' is not allowed"),
    ],
)
def test_args_validation(overrides: dict[str, Any], match: str) -> None:
    base: dict[str, Any] = {
        "deployments": (MonitoredDeployment("default", 1000, 3600),),
        "control_plane_cidrs": ("10.0.0.0/19", "10.0.32.0/19"),
    }
    with pytest.raises(ValueError, match=match):
        MonitoringArgs(**{**base, **overrides})
    assert MonitoringArgs(**base).slack_enabled is False
    specs = network_policy_specs(MonitoringArgs(**base))
    assert specs["prometheus"]["ingress"][-1] == {
        "from": [{"ipBlock": {"cidr": "10.0.0.0/19"}}, {"ipBlock": {"cidr": "10.0.32.0/19"}}],
        "ports": [{"port": 9090, "protocol": "TCP"}],
    }


@pytest.mark.parametrize("deadline", [0, -60, True, 60.5, "3600"])
def test_monitored_deployment_needs_a_positive_canary_deadline(deadline: Any) -> None:
    with pytest.raises(
        ValueError, match=r"^MonitoredDeployment\.canary_deadline_seconds: .* is not allowed; allowed: "
    ):
        MonitoredDeployment("default", 1000, deadline)
