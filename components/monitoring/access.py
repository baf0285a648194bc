"""Who reaches what in the monitoring namespace: its NetworkPolicies, and the canary analysis' read
of Prometheus through the EKS API server's service proxy.

The canary analysis (`model-sync canary`, docs/architecture.md#gray-release): a CI job queries
Prometheus through the API server's service proxy
(`<endpoint>/api/v1/namespaces/monitoring/services/http:kube-prometheus-stack-prometheus:9090/proxy`,
stack output `prometheusUrl`) with its IAM-derived bearer token. The Role `prometheus-query`
grants exactly `get` on `services/proxy` of that one name (the API server authorizes the proxy
path's whole `[scheme:]name[:port]` segment as the resource name) to the Kubernetes group the
CI roles' access entries carry (naming.PROMETHEUS_QUERY_GROUP, components/identities.py); the
API server proxies from the control plane's network interfaces in the cluster's subnets, which
Prometheus' NetworkPolicy admits on 9090 (`control_plane_cidrs`) and nothing wider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.kubernetes import naming, network_policies
from components.kubernetes.network_policies import (
    from_api_server_rule,
    from_prometheus_rule,
    pods_anywhere,
    pods_in,
    rule,
    tcp,
)
from components.monitoring.chart_values import PROMETHEUS_PORT, PROMETHEUS_SERVICE, RELEASE

if TYPE_CHECKING:
    from components.monitoring.args import MonitoringArgs

# The service proxy's `[scheme:]name[:port]` path segment, which is also the resource name the API
# server authorizes (`get` on services/proxy): the URL must spell it exactly so.
# ref: https://kubectl.docs.kubernetes.io/references/kubectl/proxy/ ("Literal Syntax": the proxy URL format)
PROMETHEUS_PROXY_NAME = f"http:{PROMETHEUS_SERVICE}:{PROMETHEUS_PORT}"
PROMETHEUS_QUERY_ROLE = "prometheus-query"
NODE_EXPORTER_PORT = 9100
KUBELET_PORT = 10250
ALERTMANAGER_PORT = 9093
ALERTMANAGER_MESH_PORT = 9094
GRAFANA_PORT = 3000
OPERATOR_PORT = 10250  # the operator's https port: admission webhook and metrics
ADAPTER_PORT = 6443  # prometheus-adapter's aggregated API (custom.metrics.k8s.io)
KUBE_STATE_METRICS_PORT = 8080
CONFIG_RELOADER_PORT = 8080  # the operator's config-reloader sidecars (reloader-web)
# Every pod port the cluster's ServiceMonitors scrape (tests/manifests/test_network_policies.py
# checks each monitor's targets): Triton 8002, its agent 8003, DCGM 9400, the cluster autoscaler 8085, CoreDNS
# 9153, and in this namespace Prometheus 9090, Alertmanager 9093, Grafana 3000,
# kube-state-metrics 8080, the operator 10250 and the config reloaders 8080. (Traefik,
# cert-manager, Loki and Alloy have no ServiceMonitor: their metrics ports stay closed.)
SCRAPE_PORTS = (
    8002,
    8003,
    9400,
    8085,
    9153,
    PROMETHEUS_PORT,
    ALERTMANAGER_PORT,
    GRAFANA_PORT,
    KUBE_STATE_METRICS_PORT,
    OPERATOR_PORT,
    CONFIG_RELOADER_PORT,
)
SLACK_PORT = 443
POD_LABELS = {
    "prometheus": network_policies.PROMETHEUS_POD_LABELS,
    "alertmanager": {"app.kubernetes.io/name": "alertmanager"},
    "grafana": {"app.kubernetes.io/name": "grafana"},
    "kube-state-metrics": {"app.kubernetes.io/name": "kube-state-metrics"},
    "operator": {"app": f"{RELEASE}-operator"},
    "admission": {"app.kubernetes.io/component": "prometheus-operator-webhook"},
    "adapter": {"app.kubernetes.io/name": "prometheus-adapter"},
}


def network_policy_specs(args: MonitoringArgs) -> dict[str, dict[str, Any]]:
    """The monitoring namespace's allow policies (role -> spec), on top of its default deny."""
    api = network_policies.api_server_rule(args.vpc_cidr)
    return {
        **_prometheus_policies(args),
        **_alertmanager_and_grafana_policies(args),
        # The operator's admission webhook and the adapter's aggregated API are called by the API server.
        "webhooks": network_policies.policy(
            None,
            ingress=[
                from_api_server_rule(args.vpc_cidr, *tcp(OPERATOR_PORT, ADAPTER_PORT)),
            ],
        ),
        "adapter": network_policies.policy(
            POD_LABELS["adapter"],
            egress=[rule([pods_in(args.namespace, POD_LABELS["prometheus"])], *tcp(PROMETHEUS_PORT))],
        ),
        # Clients of the API server: the operator, kube-state-metrics, the admission Jobs, the adapter.
        "api-server": network_policies.policy(None, egress=[api]),
    }


def _prometheus_policies(args: MonitoringArgs) -> dict[str, dict[str, Any]]:
    """Prometheus' own policy, and the one that lets it scrape every pod of the namespace."""
    ns, pods = args.namespace, POD_LABELS
    return {
        # Scrapes every monitor's target (pods anywhere on SCRAPE_PORTS; the kubelets,
        # node-exporter on the host network and the API server by the VPC's addresses),
        # and sends alerts; Grafana and the adapter query it.
        "prometheus": network_policies.policy(
            pods["prometheus"],
            ingress=[
                rule([pods_in(ns, pods["grafana"]), pods_in(ns, pods["adapter"])], *tcp(PROMETHEUS_PORT)),
                # The API server's service proxy (the canary analysis' queries, `prometheusUrl`), from
                # the control plane's network interfaces in the cluster's subnets only.
                rule([network_policies.cidr(c) for c in args.control_plane_cidrs], *tcp(PROMETHEUS_PORT)),
            ],
            egress=[
                rule([pods_anywhere()], *tcp(*SCRAPE_PORTS)),
                rule(
                    [network_policies.cidr(args.vpc_cidr)],
                    *tcp(network_policies.API_SERVER_PORT, KUBELET_PORT, NODE_EXPORTER_PORT),
                ),
            ],
        ),
        # Every pod here serves metrics to Prometheus.
        "metrics": network_policies.policy(
            None,
            ingress=[
                from_prometheus_rule(
                    ns,
                    *tcp(
                        PROMETHEUS_PORT,
                        ALERTMANAGER_PORT,
                        GRAFANA_PORT,
                        OPERATOR_PORT,
                        CONFIG_RELOADER_PORT,
                        KUBE_STATE_METRICS_PORT,
                    ),
                ),
            ],
        ),
    }


def _alertmanager_and_grafana_policies(args: MonitoringArgs) -> dict[str, dict[str, Any]]:
    """Alertmanager's and Grafana's policies."""
    ns, pods = args.namespace, POD_LABELS
    api = network_policies.api_server_rule(args.vpc_cidr)
    return {
        # Alertmanager: alerts from Prometheus, Grafana's alertmanager datasource, the HA mesh
        # between replicas, Slack's webhook (HTTPS).
        "alertmanager": network_policies.policy(
            pods["alertmanager"],
            ingress=[
                rule([pods_in(ns, pods["prometheus"]), pods_in(ns, pods["grafana"])], *tcp(ALERTMANAGER_PORT)),
                rule(
                    [pods_in(ns, pods["alertmanager"])],
                    (ALERTMANAGER_MESH_PORT, network_policies.TCP),
                    (ALERTMANAGER_MESH_PORT, network_policies.UDP),
                ),
            ],
            egress=[
                rule(
                    [pods_in(ns, pods["alertmanager"])],
                    (ALERTMANAGER_MESH_PORT, network_policies.TCP),
                    (ALERTMANAGER_MESH_PORT, network_policies.UDP),
                ),
                rule([network_policies.internet()], *tcp(SLACK_PORT)),
            ],
        ),
        # Grafana queries Prometheus, Alertmanager and Loki; its sidecars watch ConfigMaps.
        "grafana": network_policies.policy(
            pods["grafana"],
            egress=[
                rule([pods_in(ns, pods["prometheus"])], *tcp(PROMETHEUS_PORT)),
                rule([pods_in(ns, pods["alertmanager"])], *tcp(ALERTMANAGER_PORT)),
                rule([pods_in(args.logging_namespace, {"app.kubernetes.io/name": "loki"})], *tcp(3100)),
                api,
            ],
        ),
    }


def prometheus_proxy_path(namespace: str = naming.MONITORING_NAMESPACE) -> str:
    """The API server path of Prometheus' service proxy (append it to the cluster endpoint; the
    Prometheus HTTP API is below it: `<endpoint><path>/api/v1/query`)."""
    return f"/api/v1/namespaces/{namespace}/services/{PROMETHEUS_PROXY_NAME}/proxy"


def prometheus_query_rules() -> list[dict[str, Any]]:
    """The Role `prometheus-query`: `get` (an HTTP GET through the proxy) on Prometheus' service
    proxy, by the name the API server authorizes, and nothing else: no other Service or port, no
    POST/PUT/DELETE (Prometheus' admin and write endpoints), no read of the Service itself.
    ref: https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources"""
    return [
        {"apiGroups": [""], "resources": ["services/proxy"], "resourceNames": [PROMETHEUS_PROXY_NAME], "verbs": ["get"]}
    ]
