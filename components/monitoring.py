"""Metrics, alerts and dashboards and the custom metric
the Triton HPAs scale on.

- kube-prometheus-stack: Prometheus (retention and volume per stack; selects every
  ServiceMonitor/PrometheusRule in the cluster, so the Triton and DCGM monitors need no
  release label), Alertmanager (Slack through a mounted Secret, never in Helm values),
  Grafana (admin password generated into a Secret; dashboards and datasources picked
  up by the sidecars from labelled ConfigMaps).
- prometheus-adapter: serves `triton_queue_time_per_request_us` per pod (queue_time_query):
  increase(nv_inference_queue_duration_us[2m]) / increase(nv_inference_request_success[2m])
  while a request succeeded in the window (a ratio of counter increases, not a rate;
  increase() handles the counter resets of a tritonserver restart, delta() is for gauges);
  while none did, Little's law over the pending-request gauge and every completed request
  (failed ones included), so failing requests that wait never read as an idle pod.
- ConfigMap `triton-dashboard` (grafana_dashboard=1): Triton + GPU dashboard, with Loki log
  panels (tritonserver per deployment, the agent), filtered by a `model` variable.
- PrometheusRule `triton-alerts`: queue p99, failure ratio (all requests failing included),
  no ready replica, model load failures, restarts, a gray release left running past its
  deadline (two versions of a model taking requests), GPU idle, GPU saturated. Each summary
  states the wait the rule really has (tests/components/test_monitoring_rules.py checks it
  with promtool).
- The canary analysis' access (`model-sync canary`, docs/architecture.md#gray-release): a CI job
  queries Prometheus through the EKS API server's service proxy
  (`<endpoint>/api/v1/namespaces/monitoring/services/http:kube-prometheus-stack-prometheus:9090/proxy`,
  stack output `prometheusUrl`) with its IAM-derived bearer token. The Role `prometheus-query`
  grants exactly `get` on `services/proxy` of that one name (the API server authorizes the proxy
  path's whole `[scheme:]name[:port]` segment as the resource name) to the Kubernetes group the
  CI roles' access entries carry (naming.PROMETHEUS_QUERY_GROUP, components/identities.py); the
  API server proxies from the control plane's network interfaces in the cluster's subnets, which
  Prometheus' NetworkPolicy admits on 9090 (`control_plane_cidrs`) and nothing wider.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components import gpu_contract, naming, network_policies, versions
from components.helm import pinned_release as _release
from components.network_policies import from_api_server_rule, from_prometheus_rule, pods_anywhere, pods_in, rule, tcp
from components.serving_namespace import ServingNamespace, ServingNamespaceArgs
from components.triton_deployment import QUEUE_TIME_METRIC

RELEASE = "kube-prometheus-stack"  # also the chart's fullname: services are `<RELEASE>-<component>`
# The Service the pinned chart renders for Prometheus (port 9090 `http-web`; tests/manifests checks it).
PROMETHEUS_SERVICE = f"{RELEASE}-prometheus"
PROMETHEUS_URL = f"http://{PROMETHEUS_SERVICE}.{naming.MONITORING_NAMESPACE}.svc"
PROMETHEUS_PORT = 9090
# The service proxy's `[scheme:]name[:port]` path segment, which is also the resource name the API
# server authorizes (`get` on services/proxy): the URL must spell it exactly so.
# ref: https://kubectl.docs.kubernetes.io/references/kubectl/proxy/ ("Literal Syntax": the proxy URL format)
PROMETHEUS_PROXY_NAME = f"http:{PROMETHEUS_SERVICE}:{PROMETHEUS_PORT}"
PROMETHEUS_QUERY_ROLE = "prometheus-query"
GRAFANA_ADMIN_SECRET = "grafana-admin"  # noqa: S105 (a Secret name)
SLACK_SECRET = "alertmanager-slack"  # noqa: S105 (a Secret name)
DASHBOARD_LABEL = {"grafana_dashboard": "1"}
DATASOURCE_LABEL = {"grafana_datasource": "1"}
QUEUE_WINDOW = "2m"
FAILURE_WINDOW = "5m"
# The rate window of the gray-release alert and panels: a version "takes requests" while its rate
# over this window is above 0, so it still does for up to this long after its last request.
CANARY_WINDOW = "5m"
# The dashboard's log panels: the containers of a Triton pod (components/triton_deployment.py).
TRITON_CONTAINER = "tritonserver"
AGENT_CONTAINERS = ("agent-init", "agent")
AGENT_SIDECAR = AGENT_CONTAINERS[1]  # the native sidecar (an init container with restartPolicy Always)
# node-exporter reads the node's network interfaces, processes and filesystems: hostNetwork,
# hostPID and hostPath, which only the `privileged` Pod Security level admits. It runs in a
# namespace of its own so that `monitoring` (Prometheus, Grafana, Alertmanager, ...) enforces
# `restricted`.
NODE_EXPORTER_NAMESPACE = "node-exporter"
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
# checks each monitor's targets): Triton 8002, DCGM 9400, the cluster autoscaler 8085, CoreDNS
# 9153, and in this namespace Prometheus 9090, Alertmanager 9093, Grafana 3000,
# kube-state-metrics 8080, the operator 10250 and the config reloaders 8080. (Traefik,
# cert-manager, Loki and Alloy have no ServiceMonitor: their metrics ports stay closed.)
SCRAPE_PORTS = (
    8002,
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


# --------------------------------------------------------------------------------------
# Builders.
# --------------------------------------------------------------------------------------


def _seconds(duration: str) -> int:
    """A PromQL duration of one unit ("90s", "2m", "1h") in seconds."""
    return int(duration[:-1]) * {"s": 1, "m": 60, "h": 3600}[duration[-1]]


def queue_time_query(
    matchers: str = "<<.LabelMatchers>>", group_by: str = "<<.GroupBy>>", window: str = QUEUE_WINDOW
) -> str:
    """Average queue time per request (µs) over `window`, what the HPA scales on.

    Measured: the increase of the queue-duration counter over the increase of the success
    counter, while at least one request succeeded in the window. Both are counters, so
    increase() (reset-aware: a tritonserver restart starts them at 0 again) and never
    delta(), which is for gauges and turns a reset into a large negative value.

    Triton adds queue time for successful requests only (measured on 2.51: a request whose
    model raised counts in nv_inference_request_failure and nowhere in the queue duration).
    So while no request succeeds, the measured ratio does not exist and the second branch
    answers: Little's law, time waited = (average pending requests x window) / requests
    completed (success + failure), from Triton's nv_inference_pending_request_count gauge.
    Failing requests that queue therefore keep the HPA from scaling down (a queue timeout
    under overload is a failure), and a pod where nothing waits reads 0 (an idle pod,
    or a model that fails at once: more replicas would not help; the failure-ratio alert
    fires). The estimate is coarse (a gauge sampled at the scrape interval) and reads high
    for a pod younger than the window: the safe direction for an autoscaler.
    It always has a value for a pod that serves a model, so the HPA enforces minReplicas.
    ref: https://prometheus.io/docs/prometheus/latest/querying/functions/#increase
    ref: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/metrics.md#pending-request-count"""

    def increase(metric: str) -> str:
        return f"sum(increase({metric}{{{matchers}}}[{window}])) by ({group_by})"

    measured = f"{increase('nv_inference_queue_duration_us')} / ({increase('nv_inference_request_success')} > 0)"
    pending = (
        f"sum(avg_over_time(nv_inference_pending_request_count{{{matchers}}}[{window}])) by ({group_by}) "
        f"* {_seconds(window) * 1_000_000} / "
        f"clamp_min({increase('nv_inference_request_success')} + {increase('nv_inference_request_failure')}, 1)"
    )
    return f"({measured}) or ({pending})"


def failure_ratio_query(matchers: str, by: str, window: str = FAILURE_WINDOW) -> str:
    """Failed requests / all requests (failed + successful) over `window`, by `by`: 1 when
    every request fails, 0 when idle. (nv_inference_count counts successful inferences
    only: it is no denominator.) The alert and the dashboard both use this one query."""
    failed = f"sum by ({by}) (rate(nv_inference_request_failure{{{matchers}}}[{window}]))"
    succeeded = f"sum by ({by}) (rate(nv_inference_request_success{{{matchers}}}[{window}]))"
    return f"{failed} / clamp_min({failed} + {succeeded}, 1e-9)"


def adapter_rules() -> dict[str, Any]:
    # ref: https://github.com/kubernetes-sigs/prometheus-adapter/blob/master/docs/config.md
    return {
        "default": False,
        "custom": [
            {
                "seriesQuery": 'nv_inference_queue_duration_us{namespace!="",pod!=""}',
                "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
                "name": {"matches": "^nv_inference_queue_duration_us$", "as": QUEUE_TIME_METRIC},
                "metricsQuery": queue_time_query(),
            }
        ],
    }


def adapter_values(args: MonitoringArgs) -> dict[str, Any]:
    # ref: https://github.com/prometheus-community/helm-charts/blob/main/charts/prometheus-adapter/values.yaml
    return {
        "prometheus": {"url": PROMETHEUS_URL, "port": PROMETHEUS_PORT},
        "rules": adapter_rules(),
        "replicas": args.replicas,
        "nodeSelector": gpu_contract.system_node_labels(),
        # maxUnavailable only: the chart defaults it to 1 and renders every key that is set,
        # so adding minAvailable gives a PDB with both, which the API server rejects.
        "podDisruptionBudget": {"enabled": args.replicas > 1, "maxUnavailable": 1},
        # The chart's pod and container contexts are already restricted; it leaves resources empty.
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
        # The chart grants its own ServiceAccount every verb on `custom.metrics.k8s.io/*` (the
        # `-hpa-controller` binding). The HPA controller reads the metric with its built-in
        # role (system:controller:horizontal-pod-autoscaler), so the grant is narrowed to the
        # one metric served; the verbs stay `*` (the template hard-codes them, .checkov.yaml).
        "rbac": {"customMetrics": {"resources": [f"pods/{QUEUE_TIME_METRIC}"]}},
    }


def alertmanager_config(slack: bool) -> dict[str, Any]:
    receivers: list[dict[str, Any]] = [{"name": "null"}]
    if slack:
        receivers.append(
            {
                "name": "slack",
                "slack_configs": [
                    {
                        # ref: https://prometheus.io/docs/alerting/latest/configuration/#slack_config
                        "api_url_file": f"/etc/alertmanager/secrets/{SLACK_SECRET}/url",
                        "send_resolved": True,
                        "title": "[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }}",
                        "text": "{{ range .Alerts }}{{ .Annotations.summary }}\n{{ end }}",
                    }
                ],
            }
        )
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": "slack" if slack else "null",
            "group_by": ["alertname", "namespace"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}],
        },
        "receivers": receivers,
        "inhibit_rules": [
            {
                "source_matchers": ['severity = "critical"'],
                "target_matchers": ['severity = "warning"'],
                "equal": ["alertname", "namespace"],
            }
        ],
    }


def kube_prometheus_stack_values(args: MonitoringArgs) -> dict[str, Any]:
    # ref: https://github.com/prometheus-community/helm-charts/blob/main/charts/kube-prometheus-stack/values.yaml
    system = gpu_contract.system_node_labels()
    return {
        # EKS runs the control plane: these endpoints cannot be scraped.
        # ref: https://docs.aws.amazon.com/eks/latest/userguide/prometheus.html
        "kubeControllerManager": {"enabled": False},
        "kubeScheduler": {"enabled": False},
        "kubeEtcd": {"enabled": False},
        "kubeProxy": {"enabled": False},
        # Resources for every workload of the chart (memory limits 2x the request, CPU limits
        # well above steady use). The operator, its admission Jobs and kube-state-metrics
        # already run non-root, read-only, without capabilities, under seccomp RuntimeDefault
        # (the charts' defaults); node-exporter and Grafana get what their defaults lack.
        "prometheusOperator": {
            "nodeSelector": system,
            "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
            # Both admission-webhook certificate Jobs (create, patch) take these.
            "admissionWebhooks": {
                "patch": {
                    "resources": {
                        "requests": {"cpu": "10m", "memory": "32Mi"},
                        "limits": {"cpu": "500m", "memory": "64Mi"},
                    }
                }
            },
        },
        "kube-state-metrics": {
            "nodeSelector": system,
            "resources": {"requests": {"cpu": "20m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        },
        # node-exporter keeps hostNetwork/hostPID (node network and process metrics,
        # .checkov.yaml); it runs as nobody, so nothing it needs is lost by dropping every
        # capability. The subchart merges these into its defaults (non-root 65534, read-only root).
        # ref: https://github.com/prometheus-community/helm-charts/blob/main/charts/prometheus-node-exporter/values.yaml
        "prometheus-node-exporter": {
            # Every node, GPU nodes through the exact GPU toleration (the chart's default
            # tolerates every NoSchedule taint).
            "tolerations": gpu_contract.gpu_tolerations(),
            # Its own `privileged` namespace (NODE_EXPORTER_NAMESPACE says why).
            "namespaceOverride": NODE_EXPORTER_NAMESPACE,
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65534,
                "runAsGroup": 65534,
                "fsGroup": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containerSecurityContext": {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
            },
        },
        "prometheus": {
            "prometheusSpec": {
                "replicas": args.replicas,
                "retention": f"{args.prometheus_retention_days}d",
                # Keep 15 % of the volume free so compaction never fills it.
                "retentionSize": f"{int(args.prometheus_storage_gib * 0.85)}GB",
                # The encrypted gp3 class by name: EKS has no usable default StorageClass.
                "storageSpec": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "storageClassName": naming.STORAGE_CLASS,
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": f"{args.prometheus_storage_gib}Gi"}},
                        }
                    }
                },
                # Select every ServiceMonitor/PodMonitor/PrometheusRule, not only this release's.
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
                "nodeSelector": system,
                "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "8Gi"}},
            }
        },
        "alertmanager": {
            "config": alertmanager_config(args.slack_enabled),
            "alertmanagerSpec": {
                "replicas": args.replicas,
                "nodeSelector": system,
                "secrets": [SLACK_SECRET] if args.slack_enabled else [],
                "resources": {
                    "requests": {"cpu": "50m", "memory": "128Mi"},
                    "limits": {"cpu": "500m", "memory": "256Mi"},
                },
            },
        },
        "grafana": {
            "admin": {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": "admin-user", "passwordKey": "admin-password"},
            # A Role in the monitoring namespace instead of a ClusterRole (the sidecars below).
            # ref: https://github.com/grafana/helm-charts/blob/main/charts/grafana/values.yaml (rbac.namespaced)
            "rbac": {"namespaced": True},
            "nodeSelector": system,
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
            # The chart's context plus a read-only root: Grafana writes to /var/lib/grafana and
            # /var/lib/grafana-search (the chart's emptyDirs) and to /tmp (an emptyDir here).
            # ref: https://github.com/grafana/helm-charts/blob/main/charts/grafana/values.yaml
            # (containerSecurityContext, extraEmptyDirMounts)
            "containerSecurityContext": {
                "allowPrivilegeEscalation": False,
                "privileged": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "extraEmptyDirMounts": [{"name": "tmp", "mountPath": "/tmp"}],  # noqa: S108 (the container's own emptyDir)
            "sidecar": {
                # Both sidecars (dashboards, datasources) take these; they write only into
                # their mounted folders, so the root can be read-only (Loki's chart runs the
                # same k8s-sidecar image that way by default).
                "resources": {
                    "requests": {"cpu": "10m", "memory": "128Mi"},
                    "limits": {"cpu": "500m", "memory": "256Mi"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                # Only Grafana's own namespace, where every dashboard and datasource of the
                # platform lives (the charts' and this component's ConfigMaps, the Loki
                # datasource): with rbac.namespaced the sidecars read ConfigMaps and Secrets
                # there only, instead of every Secret in the cluster.
                # (kube-prometheus-stack's own default for the dashboards is ALL.)
                "dashboards": {
                    "enabled": True,
                    "label": "grafana_dashboard",
                    "labelValue": "1",
                    "searchNamespace": args.namespace,
                },
                "datasources": {
                    "enabled": True,
                    "label": "grafana_datasource",
                    "labelValue": "1",
                    "searchNamespace": args.namespace,
                },
            },
            "defaultDashboardsTimezone": "utc",
        },
    }


def _panel(pid: int, title: str, expr: str, unit: str, y: int, x: int, legend: str, w: int = 12) -> dict[str, Any]:
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": "A", "expr": expr, "legendFormat": legend}],
    }


def _log_panel(pid: int, title: str, expr: str, y: int, x: int) -> dict[str, Any]:
    # ref: https://grafana.com/docs/grafana/latest/panels-visualizations/visualizations/logs/
    return {
        "id": pid,
        "type": "logs",
        "title": title,
        "datasource": {"type": "loki", "uid": "${logs}"},
        "gridPos": {"h": 10, "w": 12, "x": x, "y": y},
        "options": {
            "showTime": True,
            "wrapLogMessage": True,
            "sortOrder": "Descending",
            "enableLogDetails": True,
            "dedupStrategy": "none",
            "prettifyLogMessage": False,
            "showLabels": False,
            "showCommonLabels": False,
        },
        "targets": [{"refId": "A", "expr": expr, "queryType": "range"}],
    }


def canary_queries(triton_namespace: str) -> dict[str, tuple[str, str]]:
    """The "Canary vs stable" row (title -> (PromQL, unit)): every request, the failure ratio and
    the request p99 of each model's versions side by side, as `model-sync canary` compares them
    (a gray release serves the canary version on some replicas, the stable one on the rest),
    filtered by the dashboard's `model` variable. The p99 is Triton's own summary quantile
    (`--metrics-config summary_latencies=true`), the highest replica's."""
    m = f'namespace="{triton_namespace}",model=~"$model"'
    by = "model, version"
    every = (
        f"sum by ({by}) (rate(nv_inference_request_success{{{m}}}[{CANARY_WINDOW}])) + "
        f"sum by ({by}) (rate(nv_inference_request_failure{{{m}}}[{CANARY_WINDOW}]))"
    )
    return {
        "Canary vs stable: requests / s by version": (every, "reqps"),
        "Canary vs stable: failure ratio by version": (failure_ratio_query(m, by, CANARY_WINDOW), "percentunit"),
        "Canary vs stable: request p99 by version": (
            f'max by ({by}) (nv_inference_request_summary_us{{{m},quantile="0.99"}})',
            "µs",
        ),
    }


def log_queries(triton_namespace: str, deployments: tuple[MonitoredDeployment, ...]) -> dict[str, str]:
    """LogQL of the dashboard's log panels (title -> query): tritonserver per deployment and
    the agent (its init run and the sidecar) of every deployment, each filtered by the
    dashboard's `model` variable (`.*` for all: Triton and the agent name the model in every
    line about it). Labels as Alloy attaches them (components/log_shipping.py).
    ref: https://grafana.com/docs/loki/latest/query/log_queries/"""
    ns = f'namespace="{triton_namespace}"'
    queries = {
        f"Triton logs: deployment {d.name}": (
            f'{{{ns}, container="{TRITON_CONTAINER}", pod=~"{naming.triton_app_name(d.name)}-.*"}} |~ "$model"'
        )
        for d in deployments
    }
    queries["Agent logs (model sync, every deployment)"] = (
        f'{{{ns}, container=~"{"|".join(AGENT_CONTAINERS)}"}} |~ "$model"'
    )
    return queries


def dashboard(triton_namespace: str, deployments: tuple[MonitoredDeployment, ...]) -> dict[str, Any]:
    """The Triton + GPU dashboard (Grafana JSON model), log panels last."""
    ns = f'namespace="{triton_namespace}"'
    panels = [
        _panel(
            1,
            "Inference requests / s by model",
            f"sum by (model) (rate(nv_inference_request_success{{{ns}}}[5m]))",
            "reqps",
            0,
            0,
            "{{model}}",
        ),
        _panel(2, "Failure ratio by model", failure_ratio_query(ns, "model"), "percentunit", 0, 12, "{{model}}"),
        _panel(
            3, "Queue time per request (HPA metric) by pod", queue_time_query(ns, "pod", "2m"), "µs", 8, 0, "{{pod}}"
        ),
        _panel(
            4,
            "Queue time p99 by model",
            f'max by (model) (nv_inference_queue_summary_us{{{ns},quantile="0.99"}})',
            "µs",
            8,
            12,
            "{{model}}",
        ),
        _panel(
            5,
            "Compute time per request by model",
            (
                f"sum by (model) (rate(nv_inference_compute_infer_duration_us{{{ns}}}[5m])) / "
                f"clamp_min(sum by (model) (rate(nv_inference_request_success{{{ns}}}[5m])), 1e-9)"
            ),
            "µs",
            16,
            0,
            "{{model}}",
        ),
        _panel(
            6,
            "Ready Triton replicas",
            f'sum by (deployment) (kube_deployment_status_replicas_available{{{ns},deployment=~"triton-.*"}})',
            "short",
            16,
            12,
            "{{deployment}}",
        ),
        _panel(
            7,
            "GPU utilisation",
            "avg by (Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL)",
            "percent",
            24,
            0,
            "{{Hostname}} gpu {{gpu}}",
        ),
        _panel(
            8,
            "GPU memory used",
            "sum by (Hostname, gpu) (DCGM_FI_DEV_FB_USED) * 1024 * 1024",
            "bytes",
            24,
            12,
            "{{Hostname}} gpu {{gpu}}",
        ),
    ]
    # Canary vs stable: a row, then its three panels side by side.
    panels.append(
        {
            "id": len(panels) + 1,
            "type": "row",
            "title": "Canary vs stable",
            "collapsed": False,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": 32},
            "panels": [],
        }
    )
    for i, (title, (expr, unit)) in enumerate(canary_queries(triton_namespace).items()):
        panels.append(_panel(len(panels) + 1, title, expr, unit, 33, 8 * i, "{{model}} v{{version}}", w=8))
    for i, (title, expr) in enumerate(log_queries(triton_namespace, deployments).items()):
        panels.append(_log_panel(len(panels) + 1, title, expr, 41 + 10 * (i // 2), 12 * (i % 2)))
    return {
        "uid": "triton-platform",
        "title": "Triton inference + GPU",
        "schemaVersion": 39,
        "version": 1,
        "timezone": "utc",
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "tags": ["triton", "gpu"],
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Datasource"},
                {"name": "logs", "type": "datasource", "query": "loki", "label": "Logs"},
                # The models Triton serves here; "All" is `.*` (the log panels' line filter).
                # ref: https://grafana.com/docs/grafana/latest/datasources/prometheus/template-variables/
                {
                    "name": "model",
                    "type": "query",
                    "label": "Model",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": {"query": f"label_values(nv_inference_request_success{{{ns}}}, model)", "refId": "model"},
                    "definition": f"label_values(nv_inference_request_success{{{ns}}}, model)",
                    "refresh": 2,
                    "includeAll": True,
                    "allValue": ".*",
                    "multi": False,
                    "current": {"text": "All", "value": "$__all"},
                },
            ]
        },
        "panels": panels,
    }


def _duration(seconds: int) -> tuple[str, str]:
    """(PromQL duration, words) of a whole number of seconds: minutes where they are whole."""
    if seconds % 60 == 0:
        return f"{seconds // 60}m", f"{seconds // 60} minutes"
    return f"{seconds}s", f"{seconds} seconds"


def canary_stuck_rule(ns: str, d: MonitoredDeployment) -> dict[str, Any]:
    """TritonCanaryStuck for deployment `d`: a model of its pods with two (or more) versions taking
    requests, for longer than a gray release may run. The wait is the deadline plus CANARY_WINDOW:
    a version's rate stays above 0 for that window after its last request, so a release that
    promotes or aborts right at its deadline never fires (tests/components/test_monitoring_rules.py)."""
    pods = f'{ns},pod=~"{naming.triton_app_name(d.name)}-.*"'
    versions = (
        f"count by (namespace, model, version) (rate(nv_inference_request_success{{{pods}}}[{CANARY_WINDOW}]) > 0)"
    )
    wait, wait_words = _duration(d.canary_deadline_seconds + _seconds(CANARY_WINDOW))
    _, deadline_words = _duration(d.canary_deadline_seconds)
    return {
        "alert": "TritonCanaryStuck",
        "expr": f"count by (namespace, model) ({versions}) > 1",
        "for": wait,
        "labels": {"severity": "warning", "deployment": d.name},
        "annotations": {
            "summary": (
                f"Triton {d.name}: two versions of {{{{ $labels.model }}}} took requests at once for {wait_words} "
                f"(the canary deadline, {deadline_words}, plus the {CANARY_WINDOW} rate window): a gray release "
                "is stuck or was left behind; run `model-sync status` and `model-sync canary --abort`"
            ),
            "description": (
                "A gray release serves a new version on some replicas and the stable one on the rest; "
                "`model-sync canary` (or `model-sync promote --to prod`) promotes or aborts it by its deadline "
                f"(tritonDeployments.{d.name}.canary.deadlineSeconds). Past it, the run that owns the canary "
                "record died (a cancelled CI job, a lost runner) or cannot finish: `model-sync status` shows the "
                "canary record and which replicas serve which version; `model-sync canary --abort` returns every "
                "replica to the stable version."
            ),
        },
    }


def restarting_rule(alert: str, restarts: str, who: str, why: str) -> dict[str, Any]:
    """`alert`: the container whose restart count is the series `restarts` restarted more than twice
    within 30 minutes. Restarts seen within the window, counted exactly: increase() extrapolates to
    the window's edges (2 restarts read 2.06 and fired). A pod's restart count never goes down; a
    new pod is a new series."""
    return {
        "alert": alert,
        "expr": f"max_over_time({restarts}[30m]) - min_over_time({restarts}[30m]) > 2",
        "for": "0m",
        "labels": {"severity": "warning"},
        "annotations": {"summary": f"{who} restarted more than twice in 30 minutes ({why})"},
    }


def alert_rule_groups(args: MonitoringArgs) -> list[dict[str, Any]]:
    ns = f'namespace="{args.triton_namespace}"'
    triton: list[dict[str, Any]] = []
    for d in args.deployments:
        threshold = 5 * d.queue_time_target_microseconds
        pods = f'{ns},pod=~"{naming.triton_app_name(d.name)}-.*"'
        triton.append(
            {
                "alert": "TritonQueueLatencyP99High",
                "expr": (
                    f'max by (namespace, model) (nv_inference_queue_summary_us{{{pods},quantile="0.99"}}) > {threshold}'
                ),
                "for": "10m",
                "labels": {"severity": "warning", "deployment": d.name},
                "annotations": {
                    "summary": (
                        f"Triton {d.name}: p99 queue time of {{{{ $labels.model }}}} above {threshold} µs "
                        "(5x the HPA target) for 10 minutes"
                    ),
                    "description": (
                        "Requests wait in Triton's queue: the HPA is at maxReplicas, GPU nodes cannot be added, "
                        "or batching is misconfigured. (Triton times successful requests only: "
                        "while every request fails, TritonInferenceFailureRatioHigh fires instead.)"
                    ),
                },
            }
        )
    triton += [canary_stuck_rule(ns, d) for d in args.deployments]
    triton += [
        {
            "alert": "TritonInferenceFailureRatioHigh",
            # 1 when every request fails (the dashboard's failure-ratio panel is the same query).
            "expr": f"{failure_ratio_query(ns, 'namespace, model')} > 0.05",
            "for": "10m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": (
                    "Triton: more than 5 % of requests to {{ $labels.model }} fail (up to all of them) for 10 minutes"
                )
            },
        },
        {
            "alert": "TritonNoReadyReplica",
            # Only while replicas are wanted: dev scales the Deployment to 0 on purpose
            # (docs/node-autoscaling.md). Both series carry namespace + deployment, so the
            # vector match is one-to-one on exactly those labels.
            # ref: https://prometheus.io/docs/prometheus/latest/querying/operators/#logical-set-binary-operators
            "expr": (
                f'(kube_deployment_status_replicas_available{{{ns},deployment=~"triton-.*"}} < 1) '
                f'and on (namespace, deployment) (kube_deployment_spec_replicas{{{ns},deployment=~"triton-.*"}} > 0)'
            ),
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "Triton deployment {{ $labels.deployment }} has no ready replica for 5 minutes"},
        },
        {
            "alert": "TritonModelLoadFailure",
            # The agent sidecar is ready exactly while every model it placed is READY in Triton
            # (--ready-file); a live tritonserver whose agent stays unready has a placed model
            # that neither loads nor was rolled back / removed. (A failed NEW push is rolled
            # back or removed by the agent and surfaces through `model-sync verify` instead.)
            # The agent is a native sidecar (an init container with restartPolicy Always):
            # kube-state-metrics reports its readiness as kube_pod_init_container_status_ready.
            # ref: https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/workload/pod-metrics.md
            "expr": (
                f'(kube_pod_init_container_status_ready{{{ns},container="{AGENT_SIDECAR}"}} == 0) and on (namespace, pod) '
                f'(kube_pod_container_status_ready{{{ns},container="{TRITON_CONTAINER}"}} == 1)'
            ),
            "for": "15m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": (
                    "Triton pod {{ $labels.pod }} is live but a placed model is not READY for 15 minutes "
                    "(see the agent and tritonserver logs)"
                )
            },
        },
        restarting_rule(
            "TritonServerRestarting",
            f'kube_pod_container_status_restarts_total{{{ns},container="{TRITON_CONTAINER}"}}',
            "tritonserver in {{ $labels.pod }}",
            "startup budget exceeded or crash",
        ),
        # The agent is a native sidecar: kube-state-metrics counts its restarts as an init
        # container's. While it crash-loops no new pin is placed, and tritonserver (which a sidecar's
        # restart leaves running) keeps serving what it has; its readiness alert
        # (TritonModelLoadFailure) would name a model load instead.
        restarting_rule(
            "TritonAgentRestarting",
            f'kube_pod_init_container_status_restarts_total{{{ns},container="{AGENT_SIDECAR}"}}',
            "the model-sync agent in {{ $labels.pod }}",
            "no new pin is placed while it crash-loops; tritonserver keeps serving what it loaded; see the agent's log",
        ),
    ]
    gpu = [
        # The wait is the `for:` over a short (5-minute) average: a long averaging window
        # adds nothing for a GPU idle or saturated from its first sample (the average is
        # true at once) and its own length for one that becomes so, so the wait would
        # depend on the history. The summary states what the rule does.
        {
            "alert": "GpuIdle",
            "expr": "avg by (Hostname, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m])) < 5",
            "for": "2h",
            "labels": {"severity": "info"},
            "annotations": {
                "summary": (
                    "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} below 5 % utilisation (5-minute average) "
                    "for 2 hours: paying for an idle GPU"
                )
            },
        },
        {
            "alert": "GpuSaturated",
            "expr": "avg by (Hostname, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m])) > 95",
            "for": "30m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": (
                    "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} above 95 % utilisation (5-minute average) "
                    "for 30 minutes"
                )
            },
        },
    ]
    return [{"name": "triton", "rules": triton}, {"name": "gpu", "rules": gpu}]


def network_policy_specs(args: MonitoringArgs) -> dict[str, dict[str, Any]]:
    """The monitoring namespace's allow policies (role -> spec), on top of its default deny."""
    ns, pods = args.namespace, POD_LABELS
    api = network_policies.api_server_rule(args.vpc_cidr)
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
        # The operator's admission webhook and the adapter's aggregated API are called by the API server.
        "webhooks": network_policies.policy(
            None,
            ingress=[
                from_api_server_rule(args.vpc_cidr, *tcp(OPERATOR_PORT, ADAPTER_PORT)),
            ],
        ),
        "adapter": network_policies.policy(
            pods["adapter"], egress=[rule([pods_in(ns, pods["prometheus"])], *tcp(PROMETHEUS_PORT))]
        ),
        # Clients of the API server: the operator, kube-state-metrics, the admission Jobs, the adapter.
        "api-server": network_policies.policy(None, egress=[api]),
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


# --------------------------------------------------------------------------------------
# The component.
# --------------------------------------------------------------------------------------


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

        # The canary analysis' read of Prometheus through the API server (module docstring).
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
