"""The Monitoring component: kube-prometheus-stack and prometheus-adapter (Helm, pinned), the
Grafana admin and Slack Secrets, the dashboard ConfigMap, the PrometheusRule `triton-alerts`, and
the Role and RoleBinding `prometheus-query` of the canary analysis (its Args: args.py).

The values, queries, dashboard, alerts and policies it wires are built in the package's other
modules (chart_values, queries, dashboard, alerts, access) and unit-tested there.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.kubernetes import naming
from components.kubernetes.helm import pinned_release as _release
from components.kubernetes.serving_namespace import ServingNamespace, ServingNamespaceArgs
from components.monitoring.access import (
    PROMETHEUS_QUERY_ROLE,
    network_policy_specs,
    prometheus_proxy_path,
    prometheus_query_rules,
)
from components.monitoring.alerts import alert_rule_groups
from components.monitoring.args import MonitoringArgs
from components.monitoring.chart_values import (
    DASHBOARD_LABEL,
    GRAFANA_ADMIN_SECRET,
    NODE_EXPORTER_NAMESPACE,
    SLACK_SECRET,
    adapter_values,
    kube_prometheus_stack_values,
)
from components.monitoring.dashboard import dashboard
from components.upstream import versions


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
        secrets = self._secrets(name, args, after_ns)
        self.stack = _release(
            f"{name}-kube-prometheus-stack",
            versions.KUBE_PROMETHEUS_STACK_CHART,
            args.namespace,
            kube_prometheus_stack_values(args),
            pulumi.ResourceOptions(parent=self, depends_on=[ns, exporter_ns, *secrets]),
        )
        after_stack = pulumi.ResourceOptions(parent=self, depends_on=[self.stack])
        self.adapter = _release(
            f"{name}-prometheus-adapter",
            versions.PROMETHEUS_ADAPTER_CHART,
            args.namespace,
            adapter_values(args),
            after_stack,
        )
        self._dashboard_and_rules(name, args, after_ns, after_stack)
        self._prometheus_query_access(name, args, after_ns)

        self.namespace_name = ns.namespace_name
        self.prometheus_proxy_path = prometheus_proxy_path(args.namespace)
        self.register_outputs(
            {
                "namespaceName": self.namespace_name,
                "grafanaAdminPassword": self.grafana_admin_password,
                "prometheusProxyPath": self.prometheus_proxy_path,
            }
        )

    def _secrets(self, name: str, args: MonitoringArgs, after_ns: pulumi.ResourceOptions) -> list[pulumi.Resource]:
        """Grafana's generated admin password and, with a Slack webhook, Alertmanager's."""
        password = random.RandomPassword(
            f"{name}-grafana-admin-password", length=32, special=False, opts=pulumi.ResourceOptions(parent=self)
        )
        self.grafana_admin_password = pulumi.Output.secret(password.result)
        secrets: list[pulumi.Resource] = [
            k8s.core.v1.Secret(
                f"{name}-grafana-admin",
                metadata=_meta(args, GRAFANA_ADMIN_SECRET),
                type="Opaque",
                string_data={"admin-user": "admin", "admin-password": password.result},
                opts=after_ns,
            )
        ]
        if args.slack_enabled:
            secrets.append(
                k8s.core.v1.Secret(
                    f"{name}-alertmanager-slack",
                    metadata=_meta(args, SLACK_SECRET),
                    type="Opaque",
                    string_data={"url": pulumi.Output.secret(args.slack_webhook_url)},
                    opts=after_ns,
                )
            )
        return secrets

    def _dashboard_and_rules(
        self, name: str, args: MonitoringArgs, after_ns: pulumi.ResourceOptions, after_stack: pulumi.ResourceOptions
    ) -> None:
        """The Triton + GPU dashboard's ConfigMap and the PrometheusRule of the alerts."""
        self.dashboard = k8s.core.v1.ConfigMap(
            f"{name}-dashboard",
            metadata=_meta(args, "triton-dashboard", DASHBOARD_LABEL),
            data={
                "triton.json": json.dumps(
                    dashboard(args.triton_namespace, args.deployments, args.ingress_namespace), indent=1, sort_keys=True
                )
            },
            opts=after_ns,
        )
        rules_spec: Any = {"groups": alert_rule_groups(args)}
        self.rules = k8s.apiextensions.CustomResource(
            f"{name}-rules",
            api_version="monitoring.coreos.com/v1",
            kind="PrometheusRule",
            metadata=_meta(args, "triton-alerts"),
            spec=rules_spec,
            opts=after_stack,
        )

    def _prometheus_query_access(self, name: str, args: MonitoringArgs, after_ns: pulumi.ResourceOptions) -> None:
        """The canary analysis' read of Prometheus through the API server (access.py's docstring)."""
        query_rules: Any = prometheus_query_rules()
        query_role = k8s.rbac.v1.Role(
            f"{name}-prometheus-query-role",
            metadata=_meta(args, PROMETHEUS_QUERY_ROLE),
            rules=query_rules,
            opts=after_ns,
        )
        role_ref: Any = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PROMETHEUS_QUERY_ROLE}
        subjects: Any = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": args.query_group}]
        k8s.rbac.v1.RoleBinding(
            f"{name}-prometheus-query-binding",
            metadata=_meta(args, PROMETHEUS_QUERY_ROLE),
            role_ref=role_ref,
            subjects=subjects,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[query_role]),
        )


def _meta(args: MonitoringArgs, obj: str, extra: dict[str, str] | None = None) -> Any:
    """The metadata of an object in the monitoring namespace."""
    return {"name": obj, "namespace": args.namespace, "labels": {**naming.PART_OF_LABELS, **(extra or {})}}
