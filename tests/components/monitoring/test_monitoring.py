"""The Monitoring component under the mocks: its pinned releases, the Secrets it creates and the values
that reference them, what a stack without monitoring lacks, and every validation rule of its Args."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.kubernetes import naming
from components.monitoring.access import network_policy_specs
from components.monitoring.args import MonitoredDeployment, MonitoringArgs
from components.monitoring.chart_values import alertmanager_config
from components.upstream import versions
from tests.components.monitoring._helpers import RELEASE, recorded
from tests.pulumi_kit import SECRET_STAND_INS, Run, run_program


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


def test_grafana_password_generated_never_in_values(staging: Run) -> None:
    values = staging.one(RELEASE, "monitoring-kube-prometheus-stack").inputs["values"]
    assert "adminPassword" not in values["grafana"]
    assert values["grafana"]["admin"]["existingSecret"] == "grafana-admin"
    secret = recorded(staging, "Secret", "grafana-admin")["stringData"]
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
    assert recorded(run, "Secret", "alertmanager-slack")["stringData"]["url"] == url
    assert alertmanager_config(False)["route"]["receiver"] == "null"


def test_without_monitoring_no_prometheus_url_and_no_query_access() -> None:
    run = run_program("staging", overrides={"triton-platform:monitoringEnabled": False})
    assert "prometheusUrl" not in run.exports
    assert "canaryPolicies" in run.exports  # the policies are the stack's, whatever monitors it
    assert [r for r in run.kubernetes_objects() if r.inputs["kind"] == "Role"] == []
    entries = [e.name for e in run.of_type("aws:eks/accessEntry:AccessEntry")]
    assert "identities-publisher-access" not in entries


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"deployments": ()}, r"MonitoringArgs\.deployments: \(\) is not allowed"),
        (
            {"prometheus_retention_days": 0},
            r"prometheus_retention_days: 0 is out of range; allowed: an integer from 1 to 365",
        ),
        (
            {"prometheus_storage_gib": 5},
            r"prometheus_storage_gib: 5 is out of range; allowed: an integer from 10 to 10000",
        ),
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
        ({"runbooks_url": ""}, r"MonitoringArgs\.runbooks_url: '' is not allowed; allowed: the https:// URL"),
        ({"runbooks_url": "docs/runbooks.md"}, r"runbooks_url: 'docs/runbooks.md' is not allowed"),
        ({"runbooks_url": "http://github.com/o/r/blob/main/docs/runbooks.md"}, r"runbooks_url: 'http://.*' is not"),
        ({"runbooks_url": "https://github.com/o/r/blob/main/docs/runbooks.md#x"}, r"runbooks_url: .* is not allowed"),
        ({"runbooks_url": "https://github.com/o/r/blob/main/docs/runbooks.md?plain=1"}, r"runbooks_url: .* is not"),
    ],
)
def test_args_validation(overrides: dict[str, Any], match: str) -> None:
    base: dict[str, Any] = {
        "deployments": (MonitoredDeployment("default", 1000, 3600),),
        "control_plane_cidrs": ("10.0.0.0/19", "10.0.32.0/19"),
        "runbooks_url": "https://github.com/example-org/triton-platform/blob/main/docs/runbooks.md",
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
