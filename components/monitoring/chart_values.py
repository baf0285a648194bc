"""The Helm values of kube-prometheus-stack and prometheus-adapter, and Alertmanager's configuration.

- kube-prometheus-stack: Prometheus (retention and volume per stack; selects every
  ServiceMonitor/PrometheusRule in the cluster, so the Triton and DCGM monitors need no
  release label), Alertmanager (Slack through a mounted Secret, never in Helm values),
  Grafana (admin password generated into a Secret; dashboards and datasources picked
  up by the sidecars from labelled ConfigMaps).
- prometheus-adapter: the HPA metric (queries.adapter_rules), nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.gpu import gpu_contract
from components.kubernetes import naming
from components.kubernetes.triton_server import QUEUE_TIME_METRIC
from components.monitoring.queries import adapter_rules

if TYPE_CHECKING:
    from components.monitoring.args import MonitoringArgs

RELEASE = "kube-prometheus-stack"  # also the chart's fullname: services are `<RELEASE>-<component>`
# The Service the pinned chart renders for Prometheus (port 9090 `http-web`; tests/manifests checks it).
PROMETHEUS_SERVICE = f"{RELEASE}-prometheus"
PROMETHEUS_URL = f"http://{PROMETHEUS_SERVICE}.{naming.MONITORING_NAMESPACE}.svc"
PROMETHEUS_PORT = 9090
GRAFANA_ADMIN_SECRET = "grafana-admin"  # noqa: S105 (a Secret name)
SLACK_SECRET = "alertmanager-slack"  # noqa: S105 (a Secret name)
# The labels Grafana's sidecars pick dashboards and datasources up by (the values below).
DASHBOARD_LABEL = {"grafana_dashboard": "1"}
DATASOURCE_LABEL = {"grafana_datasource": "1"}
# node-exporter reads the node's network interfaces, processes and filesystems: hostNetwork,
# hostPID and hostPath, which only the `privileged` Pod Security level admits. It runs in a
# namespace of its own so that `monitoring` (Prometheus, Grafana, Alertmanager, ...) enforces
# `restricted`.
NODE_EXPORTER_NAMESPACE = "node-exporter"


def adapter_values(args: MonitoringArgs) -> dict[str, Any]:
    """prometheus-adapter's values: the in-cluster Prometheus, adapter_rules, system nodes, bounded resources."""
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
    """Alertmanager's configuration: every alert to Slack (the mounted SLACK_SECRET) when `slack`, else
    to the `null` receiver; critical alerts inhibit warnings of the same alert and namespace."""
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
                        "text": "{{ range .Alerts }}{{ .Annotations.summary }} (runbook: {{ .Annotations.runbook_url }})\n{{ end }}",
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
    """kube-prometheus-stack's values: Prometheus, Alertmanager, Grafana, the operator and kube-state-metrics
    on the system nodes, node-exporter on every node (GPU nodes included), each with bounded resources."""
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
        **_exporter_values(system),
        "prometheus": _prometheus_values(args, system),
        "alertmanager": _alertmanager_values(args, system),
        "grafana": _grafana_values(args, system),
    }


def _exporter_values(system: dict[str, str]) -> dict[str, Any]:
    """The operator, kube-state-metrics and node-exporter."""
    return {
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
    }


def _prometheus_values(args: MonitoringArgs, system: dict[str, str]) -> dict[str, Any]:
    """Prometheus: replicas, retention, its encrypted volume, every monitor and rule selected."""
    return {
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
    }


def _alertmanager_values(args: MonitoringArgs, system: dict[str, str]) -> dict[str, Any]:
    """Alertmanager: its routes (Slack when a webhook is set) and replicas."""
    return {
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
    }


def _grafana_values(args: MonitoringArgs, system: dict[str, str]) -> dict[str, Any]:
    """Grafana: its admin Secret, a namespaced Role, a read-only root, sidecars reading its own namespace only."""
    return {
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
    }
