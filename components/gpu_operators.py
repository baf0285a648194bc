"""NVIDIA device plugin and DCGM exporter on the GPU node groups (DESIGN.md item 4).

Both are the pinned upstream Helm charts (components/versions.py) installed as
`helm.v3.Release`s in `naming.GPU_OPERATORS_NAMESPACE`. Their scheduling is derived
from components/gpu_contract.py: tolerations are exactly `gpu_tolerations()` (the
charts' own defaults, `operator: Exists` on `nvidia.com/gpu` and `CriticalAddonsOnly`,
are replaced, not merged) and a required node affinity on the GPU node-group label
restricts the DaemonSets to the given GPU groups, so they never land on system nodes.

The DCGM exporter's ServiceMonitor is rendered only when `service_monitor` is true; its
CRD comes from kube-prometheus-stack, so `__main__` passes that release through
`opts.depends_on`. The Kubernetes provider comes through `opts.provider`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import gpu_contract, naming, versions

# Both DaemonSets mount host paths (device-plugin socket, DCGM needs SYS_ADMIN): the
# namespace is privileged under Pod Security Admission, and nothing else runs in it.
# ref: https://kubernetes.io/docs/concepts/security/pod-security-admission/
_PSA_LABELS = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/warn": "privileged",
}


@dataclass(frozen=True)
class GpuOperatorsArgs:
    """Inputs of `GpuOperators`.

    gpu_node_groups: names of the GPU node groups the DaemonSets run on (required, >= 1, distinct).
    service_monitor: render the DCGM exporter's ServiceMonitor (needs the prometheus-operator
        CRDs: pass kube-prometheus-stack through opts.depends_on). Default False.
    service_monitor_labels: labels on that ServiceMonitor, for Prometheus's selector (default none).
    namespace: namespace of both releases (default naming.GPU_OPERATORS_NAMESPACE).
    """

    gpu_node_groups: Sequence[str]
    service_monitor: bool = False
    service_monitor_labels: Mapping[str, str] = field(default_factory=dict)
    namespace: str = naming.GPU_OPERATORS_NAMESPACE

    def __post_init__(self) -> None:
        if not self.gpu_node_groups or len(set(self.gpu_node_groups)) != len(self.gpu_node_groups):
            raise ValueError(f"GpuOperatorsArgs.gpu_node_groups: {list(self.gpu_node_groups)!r} is empty or repeats a group; allowed: one or more distinct GPU node-group names")
        if self.service_monitor_labels and not self.service_monitor:
            raise ValueError(f"GpuOperatorsArgs.service_monitor_labels: {dict(self.service_monitor_labels)!r} is set without service_monitor; allowed: labels only with service_monitor=True")
        if not self.namespace:
            raise ValueError("GpuOperatorsArgs.namespace: '' is empty; allowed: a namespace name")


def _build_device_plugin_values(args: GpuOperatorsArgs) -> dict[str, Any]:
    # ref: https://github.com/NVIDIA/k8s-device-plugin/blob/main/deployments/helm/nvidia-device-plugin/values.yaml
    return {
        "tolerations": gpu_contract.gpu_tolerations(),
        "affinity": gpu_contract.gpu_node_affinity(list(args.gpu_node_groups)),
        "priorityClassName": "system-node-critical",
        # GPU feature discovery / NFD would add a second set of node labels and a cluster-wide
        # NFD master; the node groups already carry the labels the platform schedules on.
        "gfd": {"enabled": False},
        "nfd": {"enabled": False},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }


def _build_dcgm_exporter_values(args: GpuOperatorsArgs) -> dict[str, Any]:
    # ref: https://github.com/NVIDIA/dcgm-exporter/blob/main/deployment/values.yaml
    return {
        "tolerations": gpu_contract.gpu_tolerations(),
        "affinity": gpu_contract.gpu_node_affinity(list(args.gpu_node_groups)),
        "serviceMonitor": {
            "enabled": args.service_monitor,
            "interval": "15s",
            "honorLabels": False,
            "additionalLabels": dict(args.service_monitor_labels),
        },
        # Metrics stay in-cluster: Prometheus scrapes the ClusterIP service.
        "service": {"enable": True, "type": "ClusterIP"},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
    }


class GpuOperators(pulumi.ComponentResource):
    """The GPU operators namespace plus the device plugin and DCGM exporter releases."""

    namespace: pulumi.Output[str]
    device_plugin_release: pulumi.Output[str | None]
    dcgm_exporter_release: pulumi.Output[str | None]

    def __init__(self, name: str, args: GpuOperatorsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:gpu:GpuOperators", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        ns = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.namespace, labels={**_PSA_LABELS, "app.kubernetes.io/part-of": "triton-platform"}),
            opts=child,
        )
        device_plugin = k8s.helm.v3.Release(
            f"{name}-device-plugin", name="nvidia-device-plugin", namespace=ns.metadata.name,
            chart=versions.NVIDIA_DEVICE_PLUGIN_CHART, version=versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.NVIDIA_DEVICE_PLUGIN_REPOSITORY),
            values=_build_device_plugin_values(args), atomic=True, cleanup_on_fail=True, max_history=5,
            opts=child,
        )
        dcgm = k8s.helm.v3.Release(
            f"{name}-dcgm-exporter", name="dcgm-exporter", namespace=ns.metadata.name,
            chart=versions.DCGM_EXPORTER_CHART, version=versions.DCGM_EXPORTER_CHART_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.DCGM_EXPORTER_REPOSITORY),
            values=_build_dcgm_exporter_values(args), atomic=True, cleanup_on_fail=True, max_history=5,
            opts=child,
        )

        self.namespace = ns.metadata.name
        self.device_plugin_release = device_plugin.name
        self.dcgm_exporter_release = dcgm.name
        self.register_outputs({
            "namespace": self.namespace,
            "devicePluginRelease": self.device_plugin_release,
            "dcgmExporterRelease": self.dcgm_exporter_release,
            "serviceMonitor": args.service_monitor,
        })
