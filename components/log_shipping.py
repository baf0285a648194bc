"""Logs (DESIGN.md item 9, logs half): Loki in single-binary mode, Grafana Alloy as the
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

from components import gpu_contract, naming, versions
from components.helm import pinned_release as _release
from components.serving_namespace import ServingNamespace, ServingNamespaceArgs

LOKI_PORT = 3100


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
    namespace: from components/naming.py.
    """

    retention_days: int = 7
    storage_gib: int = 50
    shipper_replicas: int = 2
    grafana_namespace: str | None = None
    namespace: str = naming.LOGGING_NAMESPACE

    def __post_init__(self) -> None:
        if not 1 <= self.retention_days <= 365:
            raise ValueError(f"LogShippingArgs.retention_days: {self.retention_days!r} is out of range; allowed: 1 to 365")
        if not 10 <= self.storage_gib <= 10_000:
            raise ValueError(f"LogShippingArgs.storage_gib: {self.storage_gib!r} is out of range; allowed: 10 to 10000")
        if not 1 <= self.shipper_replicas <= 10:
            raise ValueError(f"LogShippingArgs.shipper_replicas: {self.shipper_replicas!r} is out of range; allowed: 1 to 10")


def loki_values(args: LogShippingArgs) -> dict[str, Any]:
    # ref: https://grafana.com/docs/loki/latest/setup/install/helm/install-monolithic/
    # ref: https://grafana.com/docs/loki/latest/operations/storage/retention/
    system = gpu_contract.system_node_labels()
    return {
        "deploymentMode": "SingleBinary",
        "loki": {
            "auth_enabled": False,
            "commonConfig": {"replication_factor": 1},
            "storage": {"type": "filesystem"},
            "schemaConfig": {"configs": [{"from": "2024-04-01", "store": "tsdb", "object_store": "filesystem", "schema": "v13",
                                          "index": {"prefix": "index_", "period": "24h"}}]},
            "limits_config": {"retention_period": f"{args.retention_days * 24}h"},
            "compactor": {"retention_enabled": True, "delete_request_store": "filesystem"},
        },
        "singleBinary": {"replicas": 1, "nodeSelector": system,
                         "persistence": {"enabled": True, "size": f"{args.storage_gib}Gi", "storageClass": naming.STORAGE_CLASS}},
        "backend": {"replicas": 0}, "read": {"replicas": 0}, "write": {"replicas": 0},
        "chunksCache": {"enabled": False}, "resultsCache": {"enabled": False},
        "gateway": {"enabled": False}, "lokiCanary": {"enabled": False}, "test": {"enabled": False},
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
    return {
        "controller": {"type": "deployment", "replicas": args.shipper_replicas, "nodeSelector": gpu_contract.system_node_labels()},
        "alloy": {
            "clustering": {"enabled": True},
            "configMap": {"create": True, "content": alloy_config(args.namespace)},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"}},
        },
    }


def grafana_datasource(namespace: str) -> str:
    # ref: https://grafana.com/docs/grafana/latest/administration/provisioning/#data-sources
    return yaml.safe_dump({"apiVersion": 1, "datasources": [{
        "name": "Loki", "type": "loki", "uid": "loki", "access": "proxy", "url": loki_url(namespace),
        "jsonData": {"maxLines": 1000},
    }]}, sort_keys=False)



class LogShipping(pulumi.ComponentResource):
    """Loki + Alloy (+ the Grafana datasource when Grafana exists)."""

    loki_url: pulumi.Output[str]

    def __init__(self, name: str, args: LogShippingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:serving:LogShipping", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Alloy runs as root in its image (no host access); baseline allows that, restricted would not.
        ns = ServingNamespace(f"{name}-namespace", ServingNamespaceArgs(args.namespace, pod_security="baseline", default_deny=False), opts=child)
        self.loki = _release(f"{name}-loki", versions.LOKI_CHART, args.namespace, loki_values(args),
                             pulumi.ResourceOptions(parent=self, depends_on=[ns]))
        self.alloy = _release(f"{name}-alloy", versions.ALLOY_CHART, args.namespace, alloy_values(args),
                              pulumi.ResourceOptions(parent=self, depends_on=[self.loki]))
        self.datasource: k8s.core.v1.ConfigMap | None = None
        if args.grafana_namespace is not None:
            meta: Any = {"name": "loki-datasource", "namespace": args.grafana_namespace,
                         "labels": {"app.kubernetes.io/part-of": "triton-platform", "grafana_datasource": "1"}}
            self.datasource = k8s.core.v1.ConfigMap(f"{name}-grafana-datasource", metadata=meta,
                                                    data={"loki.yaml": grafana_datasource(args.namespace)}, opts=child)
        self.loki_url = pulumi.Output.from_input(loki_url(args.namespace))
        self.register_outputs({"lokiUrl": self.loki_url})
