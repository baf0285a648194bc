"""The Monitoring component: kube-prometheus-stack and prometheus-adapter (Helm, pinned), the
Grafana admin and Slack Secrets, the dashboard ConfigMap, the PrometheusRule `triton-alerts`, and
the Role and RoleBinding `prometheus-query` of the canary analysis; with its Args.

The values, queries, dashboard, alerts and policies it wires are built in the package's other
modules (chart_values, queries, dashboard, alerts, access) and unit-tested there.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components import naming, network_policies, versions
from components.helm import pinned_release as _release
from components.monitoring.access import (
    PROMETHEUS_QUERY_ROLE,
    network_policy_specs,
    prometheus_proxy_path,
    prometheus_query_rules,
)
from components.monitoring.alerts import alert_rule_groups
from components.monitoring.chart_values import (
    DASHBOARD_LABEL,
    GRAFANA_ADMIN_SECRET,
    NODE_EXPORTER_NAMESPACE,
    SLACK_SECRET,
    adapter_values,
    kube_prometheus_stack_values,
)
from components.monitoring.dashboard import dashboard
from components.serving_namespace import ServingNamespace, ServingNamespaceArgs

# An absolute https URL of a page: alerts append `#<section>` to it.
RUNBOOKS_URL = re.compile(r"https://[^\s/?#]+/[^\s?#]*")


@dataclass(frozen=True)
class MonitoredDeployment:
    """A Triton deployment the alerts cover: its name, HPA queue-time target (µs) and the
    deadline of its gray releases (`tritonDeployments.<d>.canary.deadlineSeconds`, bounded by
    model_sync/contract/canary_policy.py), past which two versions taking requests is an alert."""

    name: str
    queue_time_target_microseconds: int
    canary_deadline_seconds: int

    def __post_init__(self) -> None:
        d = self.canary_deadline_seconds
        if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
            raise ValueError(
                f"MonitoredDeployment.canary_deadline_seconds: {d!r} is not allowed; allowed: a positive number of "
                "seconds (the deployment's canary.deadlineSeconds)"
            )


@dataclass(frozen=True)
class MonitoringArgs:
    """Inputs of `Monitoring`.

    deployments: the Triton deployments (required, >= 1): per-deployment queue and canary alerts.
    control_plane_cidrs: the CIDRs of the subnets the EKS control plane's network interfaces
        live in (the cluster's subnets: Network.private_subnet_cidrs), inside vpc_cidr (required,
        >= 1): the API server's service proxy reaches Prometheus (9090) from there.
    runbooks_url: the https:// URL of the runbook page, docs/runbooks.md as operators open it, without
        a query or fragment (required: alerts.runbooks_url builds it from the stack's githubRepository and
        first githubDeployRefs entry); every alert's `runbook_url` is `<runbooks_url>#<alert, lower case>`.
    query_group: the Kubernetes group granted `get` on Prometheus' service proxy (default
        naming.PROMETHEUS_QUERY_GROUP, what the CI roles' access entries carry).
    prometheus_retention_days: 1-365 (default 15). prometheus_storage_gib: 10-10000 (default 50).
    slack_webhook_url: Alertmanager's Slack webhook (secret); "" (default) keeps alerts in Alertmanager.
    replicas: Prometheus/Alertmanager/adapter replicas (default 1; 2 in prod).
    vpc_cidr: the cluster VPC's CIDR: the API server, the kubelets and node-exporter
        (host network) are reached there (default: the stack config's `vpcCidr` default).
    namespace / triton_namespace / logging_namespace: from components/naming.py.
    """

    deployments: tuple[MonitoredDeployment, ...]
    control_plane_cidrs: tuple[str, ...]
    runbooks_url: str
    query_group: str = naming.PROMETHEUS_QUERY_GROUP
    prometheus_retention_days: int = 15
    prometheus_storage_gib: int = 50
    slack_webhook_url: pulumi.Input[str] = ""
    replicas: int = 1
    vpc_cidr: str = network_policies.DEFAULT_VPC_CIDR
    namespace: str = naming.MONITORING_NAMESPACE
    triton_namespace: str = naming.TRITON_NAMESPACE
    logging_namespace: str = naming.LOGGING_NAMESPACE

    def __post_init__(self) -> None:
        network_policies.check_vpc_cidr("MonitoringArgs", self.vpc_cidr)
        if not self.deployments:
            raise ValueError("MonitoringArgs.deployments: () is not allowed; allowed: at least one Triton deployment")
        vpc = ipaddress.IPv4Network(self.vpc_cidr)
        cidrs = tuple(self.control_plane_cidrs)
        for c in cidrs:
            try:
                subnet = ipaddress.IPv4Network(c, strict=True)
            except ValueError:
                subnet = None
            if subnet is None or not subnet.subnet_of(vpc):
                raise ValueError(
                    f"MonitoringArgs.control_plane_cidrs: {c!r} is not allowed; allowed: the CIDRs of the cluster's "
                    f"subnets, inside the VPC {self.vpc_cidr}"
                )
        if not cidrs or len(set(cidrs)) != len(cidrs):
            raise ValueError(
                f"MonitoringArgs.control_plane_cidrs: {list(cidrs)!r} is empty or repeats a CIDR; allowed: the "
                "distinct CIDRs of the cluster's subnets"
            )
        if not RUNBOOKS_URL.fullmatch(self.runbooks_url):
            raise ValueError(
                f"MonitoringArgs.runbooks_url: {self.runbooks_url!r} is not allowed; allowed: the https:// URL of "
                "the runbook page, without a query or fragment (alerts.runbooks_url)"
            )
        if not naming.KUBERNETES_GROUP.fullmatch(self.query_group):
            raise ValueError(
                f"MonitoringArgs.query_group: {self.query_group!r} is not allowed; allowed: "
                f"{naming.KUBERNETES_GROUP_RULE}"
            )
        if not 1 <= self.prometheus_retention_days <= 365:
            raise ValueError(
                f"MonitoringArgs.prometheus_retention_days: {self.prometheus_retention_days!r} is out of range; "
                "allowed: 1 to 365"
            )
        if not 10 <= self.prometheus_storage_gib <= 10_000:
            raise ValueError(
                f"MonitoringArgs.prometheus_storage_gib: {self.prometheus_storage_gib!r} is out of range; "
                "allowed: 10 to 10000"
            )
        if not 1 <= self.replicas <= 5:
            raise ValueError(f"MonitoringArgs.replicas: {self.replicas!r} is out of range; allowed: 1 to 5")
        if (
            isinstance(self.slack_webhook_url, str)
            and self.slack_webhook_url
            and not self.slack_webhook_url.startswith("https://hooks.slack.com/")
        ):
            raise ValueError(
                "MonitoringArgs.slack_webhook_url: '<secret>' is not a Slack webhook URL; "
                "allowed: https://hooks.slack.com/... or ''"
            )

    @property
    def slack_enabled(self) -> bool:
        return not (isinstance(self.slack_webhook_url, str) and not self.slack_webhook_url)


class Monitoring(pulumi.ComponentResource):
    """kube-prometheus-stack + prometheus-adapter + Triton dashboard and alerts."""

    namespace_name: pulumi.Output[str]
    grafana_admin_password: pulumi.Output[str]
    prometheus_proxy_path: str  # append to the cluster endpoint: stack output prometheusUrl

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:serving:Monitoring", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        ns = ServingNamespace(
            f"{name}-namespace", ServingNamespaceArgs(args.namespace, allow=network_policy_specs(args)), opts=child
        )
        # privileged: node-exporter's hostNetwork, hostPID and hostPath (NODE_EXPORTER_NAMESPACE).
        # Host-network pods are outside NetworkPolicy; the default deny covers anything else there.
        exporter_ns = ServingNamespace(
            f"{name}-node-exporter-namespace",
            ServingNamespaceArgs(NODE_EXPORTER_NAMESPACE, pod_security="privileged"),
            opts=child,
        )
        after_ns = pulumi.ResourceOptions(parent=self, depends_on=[ns])

        def meta(obj: str, extra: dict[str, str] | None = None) -> Any:
            return {
                "name": obj,
                "namespace": args.namespace,
                "labels": {"app.kubernetes.io/part-of": "triton-platform", **(extra or {})},
            }

        password = random.RandomPassword(f"{name}-grafana-admin-password", length=32, special=False, opts=child)
        self.grafana_admin_password = pulumi.Output.secret(password.result)
        grafana_secret = k8s.core.v1.Secret(
            f"{name}-grafana-admin",
            metadata=meta(GRAFANA_ADMIN_SECRET),
            type="Opaque",
            string_data={"admin-user": "admin", "admin-password": password.result},
            opts=after_ns,
        )
        release_deps: list[pulumi.Resource] = [ns, exporter_ns, grafana_secret]
        if args.slack_enabled:
            release_deps.append(
                k8s.core.v1.Secret(
                    f"{name}-alertmanager-slack",
                    metadata=meta(SLACK_SECRET),
                    type="Opaque",
                    string_data={"url": pulumi.Output.secret(args.slack_webhook_url)},
                    opts=after_ns,
                )
            )

        self.stack = _release(
            f"{name}-kube-prometheus-stack",
            versions.KUBE_PROMETHEUS_STACK_CHART,
            args.namespace,
            kube_prometheus_stack_values(args),
            pulumi.ResourceOptions(parent=self, depends_on=release_deps),
        )
        after_stack = pulumi.ResourceOptions(parent=self, depends_on=[self.stack])
        self.adapter = _release(
            f"{name}-prometheus-adapter",
            versions.PROMETHEUS_ADAPTER_CHART,
            args.namespace,
            adapter_values(args),
            after_stack,
        )

        self.dashboard = k8s.core.v1.ConfigMap(
            f"{name}-dashboard",
            metadata=meta("triton-dashboard", DASHBOARD_LABEL),
            data={
                "triton.json": json.dumps(dashboard(args.triton_namespace, args.deployments), indent=1, sort_keys=True)
            },
            opts=after_ns,
        )
        rules_spec: Any = {"groups": alert_rule_groups(args)}
        self.rules = k8s.apiextensions.CustomResource(
            f"{name}-rules",
            api_version="monitoring.coreos.com/v1",
            kind="PrometheusRule",
            metadata=meta("triton-alerts"),
            spec=rules_spec,
            opts=after_stack,
        )

        # The canary analysis' read of Prometheus through the API server (access.py's docstring).
        query_rules: Any = prometheus_query_rules()
        query_role = k8s.rbac.v1.Role(
            f"{name}-prometheus-query-role", metadata=meta(PROMETHEUS_QUERY_ROLE), rules=query_rules, opts=after_ns
        )
        role_ref: Any = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PROMETHEUS_QUERY_ROLE}
        subjects: Any = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": args.query_group}]
        k8s.rbac.v1.RoleBinding(
            f"{name}-prometheus-query-binding",
            metadata=meta(PROMETHEUS_QUERY_ROLE),
            role_ref=role_ref,
            subjects=subjects,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[query_role]),
        )

        self.namespace_name = ns.namespace_name
        self.prometheus_proxy_path = prometheus_proxy_path(args.namespace)
        self.register_outputs(
            {
                "namespaceName": self.namespace_name,
                "grafanaAdminPassword": self.grafana_admin_password,
                "prometheusProxyPath": self.prometheus_proxy_path,
            }
        )
