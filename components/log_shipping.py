"""Logs: Loki in single-binary mode, Grafana Alloy as the
shipper, and Loki as a Grafana datasource.

Why Alloy: Promtail is deprecated and reached end of life on 2026-03-02; Alloy is its
successor from the same team. It runs here as a clustered Deployment that tails pod logs
through the Kubernetes API (`loki.source.kubernetes`), so it needs no hostPath mount and
no privileged namespace, and the replicas share the targets between them.
ref: https://grafana.com/docs/alloy/latest/reference/components/loki/loki.source.kubernetes/

Loki keeps its chunks on a persistent volume with compactor-driven retention
(`loki_retention_days`); an S3 backend would need its own bucket and role (not in this
component).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.gpu import gpu_contract
from components.kubernetes import naming, network_policies
from components.kubernetes.helm import pinned_release as _release
from components.kubernetes.network_policies import pods_in, rule, tcp
from components.kubernetes.serving_namespace import ServingNamespace, ServingNamespaceArgs
from components.stack_config.declarations import check_declared
from components.upstream import versions

LOKI_PORT = 3100
LOKI_MEMBERLIST_PORT = 7946  # the single binary's ring (memberlist), to itself and its peers
ALLOY_PORT = 12345  # Alloy's HTTP server: clustering between replicas (and its metrics)
ALLOY_UID = 473  # the `alloy` user (and group) of the grafana/alloy image
LOKI_POD_LABELS = {"app.kubernetes.io/name": "loki"}
ALLOY_POD_LABELS = {"app.kubernetes.io/name": "alloy"}
GRAFANA_POD_LABELS = {"app.kubernetes.io/name": "grafana"}


def loki_url(namespace: str) -> str:
    # The chart names the single-binary Service after the release.
    return f"http://{versions.LOKI_CHART.chart}.{namespace}.svc:{LOKI_PORT}"


@dataclass(frozen=True)
class LogShippingArgs:
    """Inputs of `LogShipping`.

    retention_days: how long Loki keeps logs, 1-365 (default 7).
    storage_gib: Loki's volume, 10-10000 GiB (default 50).
    shipper_replicas: Alloy replicas sharing the log targets (default 2).
    grafana_namespace: where Grafana's datasource sidecar looks (monitoring namespace);
        None (default) = no datasource (monitoring disabled).
    vpc_cidr: the cluster VPC's CIDR, where Alloy reaches the API server (default: the stack
        config's `vpcCidr` default).
    namespace: from components/kubernetes/naming.py.
    """

    retention_days: int = 7
    storage_gib: int = 50
    shipper_replicas: int = 2
    grafana_namespace: str | None = None
    vpc_cidr: str = network_policies.DEFAULT_VPC_CIDR
    namespace: str = naming.LOGGING_NAMESPACE

    def __post_init__(self) -> None:
        network_policies.check_vpc_cidr("LogShippingArgs", self.vpc_cidr)
        check_declared("LogShippingArgs.retention_days", "lokiRetentionDays", self.retention_days)
        if not 10 <= self.storage_gib <= 10_000:
            raise ValueError(f"LogShippingArgs.storage_gib: {self.storage_gib!r} is out of range; allowed: 10 to 10000")
        if not 1 <= self.shipper_replicas <= 10:
            raise ValueError(
                f"LogShippingArgs.shipper_replicas: {self.shipper_replicas!r} is out of range; allowed: 1 to 10"
            )


def loki_values(args: LogShippingArgs) -> dict[str, Any]:
    """The Loki chart's values: one binary on the system nodes, its filesystem store on an encrypted volume."""
    # ref: https://grafana.com/docs/loki/latest/setup/install/helm/install-monolithic/
    # ref: https://grafana.com/docs/loki/latest/operations/storage/retention/
    system = gpu_contract.system_node_labels()
    return {
        "deploymentMode": "SingleBinary",
        "loki": _loki_config(args),
        "singleBinary": {
            "replicas": 1,
            "nodeSelector": system,
            "persistence": {"enabled": True, "size": f"{args.storage_gib}Gi", "storageClass": naming.STORAGE_CLASS},
            # Ingesters hold open chunks in memory until they flush; queries add to
            # it. Memory limit 2x the request, CPU limit for query bursts.
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
        },
        "backend": {"replicas": 0},
        "read": {"replicas": 0},
        "write": {"replicas": 0},
        "chunksCache": {"enabled": False},
        "resultsCache": {"enabled": False},
        "gateway": {"enabled": False},
        "lokiCanary": {"enabled": False},
        "test": {"enabled": False},
        # The rules sidecar loads `loki_rule` ConfigMaps/Secrets through the API with a
        # cluster-wide read of every Secret; the platform ships no Loki rules (alerts are
        # Prometheus rules), so it is off, and Loki itself never calls the API: no token.
        # ref: https://github.com/grafana/loki/blob/main/production/helm/loki/values.yaml (sidecar.rules,
        # serviceAccount)
        "sidecar": {"rules": {"enabled": False}},
        "serviceAccount": {"automountServiceAccountToken": False},
    }


def _loki_config(args: LogShippingArgs) -> dict[str, Any]:
    """Loki's own settings: filesystem storage, retention, its security contexts and liveness probe."""
    return {
        "auth_enabled": False,
        "commonConfig": {"replication_factor": 1},
        "storage": {"type": "filesystem"},
        "schemaConfig": {
            "configs": [
                {
                    "from": "2024-04-01",
                    "store": "tsdb",
                    "object_store": "filesystem",
                    "schema": "v13",
                    "index": {"prefix": "index_", "period": "24h"},
                }
            ]
        },
        "limits_config": {"retention_period": f"{args.retention_days * 24}h"},
        "compactor": {"retention_enabled": True, "delete_request_store": "filesystem"},
        # The chart's contexts (uid 10001, read-only root, no capabilities) plus seccomp.
        "podSecurityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containerSecurityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        # /metrics answers while the ingester is still joining its ring or replaying its
        # WAL (when /ready does not), so a long start-up is not killed.
        "livenessProbe": {
            "httpGet": {"path": "/metrics", "port": "http-metrics"},
            "initialDelaySeconds": 30,
            "periodSeconds": 30,
            "timeoutSeconds": 5,
            "failureThreshold": 5,
        },
    }


def alloy_config(loki_namespace: str) -> str:
    """Alloy's pipeline: every pod's containers, labelled namespace/pod/container/app."""
    return f"""discovery.kubernetes "pods" {{
  role = "pod"
}}

discovery.relabel "pods" {{
  targets = discovery.kubernetes.pods.targets
  rule {{
    source_labels = ["__meta_kubernetes_namespace"]
    target_label  = "namespace"
  }}
  rule {{
    source_labels = ["__meta_kubernetes_pod_name"]
    target_label  = "pod"
  }}
  rule {{
    source_labels = ["__meta_kubernetes_pod_container_name"]
    target_label  = "container"
  }}
  rule {{
    source_labels = ["__meta_kubernetes_pod_label_app_kubernetes_io_name"]
    target_label  = "app"
  }}
}}

loki.source.kubernetes "pods" {{
  targets    = discovery.relabel.pods.output
  forward_to = [loki.write.default.receiver]
  clustering {{
    enabled = true
  }}
}}

loki.write "default" {{
  endpoint {{
    url = "{loki_url(loki_namespace)}/loki/api/v1/push"
  }}
}}
"""


def alloy_values(args: LogShippingArgs) -> dict[str, Any]:
    # ref: https://github.com/grafana/alloy/blob/main/operations/helm/charts/alloy/values.yaml
    # Alloy tails logs through the API (no host mounts), so it runs as the image's `alloy`
    # user (the chart's ci/nonroot-values.yaml) on a read-only root; its storage path
    # (/tmp/alloy, the chart default) is on an emptyDir. It needs its token (discovery and
    # log tailing are API calls).
    non_root = {"runAsNonRoot": True, "runAsUser": ALLOY_UID, "runAsGroup": ALLOY_UID}
    restricted = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    return {
        "global": {
            "podSecurityContext": {**non_root, "fsGroup": ALLOY_UID, "seccompProfile": {"type": "RuntimeDefault"}}
        },
        "controller": {
            "type": "deployment",
            "replicas": args.shipper_replicas,
            "nodeSelector": gpu_contract.system_node_labels(),
            "volumes": {"extra": [{"name": "tmp", "emptyDir": {}}]},
        },
        "alloy": {
            "clustering": {"enabled": True},
            "configMap": {"create": True, "content": alloy_config(args.namespace)},
            "securityContext": {**non_root, **restricted, "seccompProfile": {"type": "RuntimeDefault"}},
            "mounts": {"extra": [{"name": "tmp", "mountPath": "/tmp"}]},  # noqa: S108 (the container's own emptyDir)
            "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            # The chart's own liveness example (ci/livinessprobe-values.yaml); /-/ready is
            # already the readiness probe.
            "livenessProbe": {
                "httpGet": {"path": "/metrics", "port": "http-metrics", "scheme": "HTTP"},
                "initialDelaySeconds": 30,
                "timeoutSeconds": 2,
                "periodSeconds": 30,
                "failureThreshold": 3,
            },
        },
        # The config-reloader sidecar: requests are the chart's, limits added.
        "configReloader": {
            "resources": {"requests": {"cpu": "10m", "memory": "50Mi"}, "limits": {"cpu": "200m", "memory": "100Mi"}},
            "securityContext": {**non_root, **restricted, "seccompProfile": {"type": "RuntimeDefault"}},
        },
    }


def grafana_datasource(namespace: str) -> str:
    # ref: https://grafana.com/docs/grafana/latest/administration/provisioning/#data-sources
    return yaml.safe_dump(
        {
            "apiVersion": 1,
            "datasources": [
                {
                    "name": "Loki",
                    "type": "loki",
                    "uid": "loki",
                    "access": "proxy",
                    "url": loki_url(namespace),
                    "jsonData": {"maxLines": 1000},
                }
            ],
        },
        sort_keys=False,
    )


def network_policy_specs(args: LogShippingArgs) -> dict[str, dict[str, Any]]:
    """The logging namespace's allow policies (role -> spec), on top of its default deny."""
    ns = args.namespace
    grafana = [pods_in(args.grafana_namespace, GRAFANA_POD_LABELS)] if args.grafana_namespace else []
    return {
        # Loki takes pushes from Alloy and queries from Grafana; its ring talks to itself.
        "loki": network_policies.policy(
            LOKI_POD_LABELS,
            ingress=[
                rule([pods_in(ns, ALLOY_POD_LABELS), *grafana], *tcp(LOKI_PORT)),
                rule([pods_in(ns, LOKI_POD_LABELS)], *tcp(LOKI_MEMBERLIST_PORT)),
            ],
            egress=[rule([pods_in(ns, LOKI_POD_LABELS)], *tcp(LOKI_MEMBERLIST_PORT))],
        ),
        # Alloy discovers and tails pods through the API server, pushes to Loki and shares its
        # targets with its peers (clustering).
        "alloy": network_policies.policy(
            ALLOY_POD_LABELS,
            ingress=[
                rule([pods_in(ns, ALLOY_POD_LABELS)], *tcp(ALLOY_PORT)),
            ],
            egress=[
                rule([pods_in(ns, LOKI_POD_LABELS)], *tcp(LOKI_PORT)),
                rule([pods_in(ns, ALLOY_POD_LABELS)], *tcp(ALLOY_PORT)),
                network_policies.api_server_rule(args.vpc_cidr),
            ],
        ),
    }


class LogShipping(pulumi.ComponentResource):
    """Loki + Alloy (+ the Grafana datasource when Grafana exists)."""

    loki_url: pulumi.Output[str]

    def __init__(self, name: str, args: LogShippingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:serving:LogShipping", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # restricted: Loki and Alloy run non-root, seccomp RuntimeDefault, every capability
        # dropped, no privilege escalation, no host mounts (loki_values, alloy_values; the rendered
        # pods are checked against the level in tests/manifests/test_pod_security.py).
        ns = ServingNamespace(
            f"{name}-namespace", ServingNamespaceArgs(args.namespace, allow=network_policy_specs(args)), opts=child
        )
        self.loki = _release(
            f"{name}-loki",
            versions.LOKI_CHART,
            args.namespace,
            loki_values(args),
            pulumi.ResourceOptions(parent=self, depends_on=[ns]),
        )
        self.alloy = _release(
            f"{name}-alloy",
            versions.ALLOY_CHART,
            args.namespace,
            alloy_values(args),
            pulumi.ResourceOptions(parent=self, depends_on=[self.loki]),
        )
        self.datasource: k8s.core.v1.ConfigMap | None = None
        if args.grafana_namespace is not None:
            meta: Any = {
                "name": "loki-datasource",
                "namespace": args.grafana_namespace,
                "labels": {**naming.PART_OF_LABELS, "grafana_datasource": "1"},
            }
            self.datasource = k8s.core.v1.ConfigMap(
                f"{name}-grafana-datasource",
                metadata=meta,
                data={"loki.yaml": grafana_datasource(args.namespace)},
                opts=child,
            )
        self.loki_url = pulumi.Output.from_input(loki_url(args.namespace))
        self.register_outputs({"lokiUrl": self.loki_url})
