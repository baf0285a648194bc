"""NVIDIA device plugin and DCGM exporter on the GPU node groups.

Both are the pinned upstream Helm charts (components/upstream/versions.py) installed as
`helm.v3.Release`s in `naming.GPU_OPERATORS_NAMESPACE`. Their scheduling is derived
from components/gpu/gpu_contract.py: tolerations are exactly `gpu_tolerations()` (the
charts' own defaults, `operator: Exists` on `nvidia.com/gpu` and `CriticalAddonsOnly`,
are replaced, not merged) and a required node affinity on the GPU node-group label
restricts the DaemonSets to the given GPU groups, so they never land on system nodes.

Bottlerocket NVIDIA AMIs run NVIDIA's device plugin on the host (the kubelet already sees
`nvidia.com/gpu`); a second plugin from the chart would fight it for the kubelet socket.
Groups listed in `host_device_plugin_node_groups` are therefore left out of the device
plugin's node affinity (and with no other GPU group, the release is not installed); the
DCGM exporter still runs on every GPU group.
ref: https://github.com/bottlerocket-os/bottlerocket/blob/develop/QUICKSTART-EKS.md#aws-k8s--nvidia-variants

Both releases go through components/kubernetes/helm.py's `pinned_release` (atomic, explicit timeout).

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

from components.gpu import gpu_contract
from components.kubernetes import naming, network_policies
from components.kubernetes.helm import pinned_release
from components.kubernetes.serving_namespace import ServingNamespaceArgs, create_network_policies
from components.upstream import versions

# privileged: the device plugin mounts host paths (/var/lib/kubelet/device-plugins) and
# dcgm-exporter adds SYS_ADMIN (and the kubelet's pod-resources host path), neither of which
# `baseline` admits; nothing else runs in the namespace.
# ref: https://kubernetes.io/docs/concepts/security/pod-security-standards/
_PSA_LABELS = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/warn": "privileged",
}


@dataclass(frozen=True)
class GpuOperatorsArgs:
    """Inputs of `GpuOperators`.

    gpu_node_groups: names of the GPU node groups the DaemonSets run on (required, >= 1, distinct).
    host_device_plugin_node_groups: the subset of gpu_node_groups whose AMI runs its own device
        plugin (Bottlerocket NVIDIA); the chart's device plugin skips them (default none).
    service_monitor: render the DCGM exporter's ServiceMonitor (needs the prometheus-operator
        CRDs: pass kube-prometheus-stack through opts.depends_on). Default False.
    service_monitor_labels: labels on that ServiceMonitor, for Prometheus's selector (default none).
    namespace: namespace of both releases (default naming.GPU_OPERATORS_NAMESPACE).
    monitoring_namespace: where Prometheus runs (default naming.MONITORING_NAMESPACE).
    """

    gpu_node_groups: Sequence[str]
    host_device_plugin_node_groups: Sequence[str] = ()
    service_monitor: bool = False
    service_monitor_labels: Mapping[str, str] = field(default_factory=dict)
    namespace: str = naming.GPU_OPERATORS_NAMESPACE
    monitoring_namespace: str = naming.MONITORING_NAMESPACE

    def __post_init__(self) -> None:
        if not self.gpu_node_groups or len(set(self.gpu_node_groups)) != len(self.gpu_node_groups):
            raise ValueError(
                f"GpuOperatorsArgs.gpu_node_groups: {list(self.gpu_node_groups)!r} is empty or repeats a group; "
                "allowed: one or more distinct GPU node-group names"
            )
        extra = sorted(set(self.host_device_plugin_node_groups) - set(self.gpu_node_groups))
        if extra:
            raise ValueError(
                f"GpuOperatorsArgs.host_device_plugin_node_groups: {extra!r} are not in gpu_node_groups; allowed: a "
                f"subset of {sorted(self.gpu_node_groups)}"
            )
        if self.service_monitor_labels and not self.service_monitor:
            raise ValueError(
                f"GpuOperatorsArgs.service_monitor_labels: {dict(self.service_monitor_labels)!r} is set without "
                "service_monitor; allowed: labels only with service_monitor=True"
            )
        if not self.namespace:
            raise ValueError("GpuOperatorsArgs.namespace: '' is empty; allowed: a namespace name")


DEVICE_PLUGIN_TIMEOUT_SECONDS = 600
DCGM_EXPORTER_TIMEOUT_SECONDS = 600
DCGM_EXPORTER_PORT = 9400
DCGM_EXPORTER_POD_LABELS = {"app.kubernetes.io/name": "dcgm-exporter"}


def network_policy_specs(args: GpuOperatorsArgs) -> dict[str, dict[str, Any]]:
    """The namespace's allow policies on top of its default deny: Prometheus scrapes the
    DCGM exporter. Neither daemon calls anything over the network (the device plugin talks to
    the kubelet over its socket, the exporter reads the pod-resources socket)."""
    return {
        "metrics": network_policies.policy(
            DCGM_EXPORTER_POD_LABELS,
            ingress=[
                network_policies.from_prometheus_rule(
                    args.monitoring_namespace, *network_policies.tcp(DCGM_EXPORTER_PORT)
                )
            ],
        )
    }


def device_plugin_node_groups(args: GpuOperatorsArgs) -> list[str]:
    """GPU groups that need the chart's device plugin (not those whose AMI ships one)."""
    return sorted(set(args.gpu_node_groups) - set(args.host_device_plugin_node_groups))


def _build_device_plugin_values(args: GpuOperatorsArgs) -> dict[str, Any]:
    # ref: https://github.com/NVIDIA/k8s-device-plugin/blob/main/deployments/helm/nvidia-device-plugin/values.yaml
    return {
        "tolerations": gpu_contract.gpu_tolerations(),
        "affinity": gpu_contract.gpu_node_affinity(device_plugin_node_groups(args)),
        "priorityClassName": "system-node-critical",
        # GPU feature discovery / NFD would add a second set of node labels and a cluster-wide
        # NFD master; the node groups already carry the labels the platform schedules on.
        "gfd": {"enabled": False},
        "nfd": {"enabled": False},
        # Shared by the plugin and the chart's MPS control daemon (which only schedules on
        # nodes labelled nvidia.com/mps.capable=true, i.e. never here). The CPU limit is a
        # ceiling far above the plugin's idle use.
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        # Pod level, so it also covers the MPS daemon (privileged containers run Unconfined
        # whatever the profile says). The plugin container keeps the chart's own context
        # (no privilege escalation, every capability dropped), restated here because a
        # non-empty `securityContext` replaces it; it must stay root to create its socket in
        # the root-owned /var/lib/kubelet/device-plugins host path (.checkov.yaml).
        # ref:
        # https://github.com/NVIDIA/k8s-device-plugin/blob/v0.17.1/deployments/helm/nvidia-device-plugin/templates/_helpers.tpl
        # (nvidia-device-plugin.securityContext)
        "podSecurityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
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
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        # The container keeps the chart's context (root, SYS_ADMIN for the profiling
        # metrics; .checkov.yaml says why each finding stays); seccomp applies on top.
        # ref: https://github.com/NVIDIA/dcgm-exporter/blob/main/deployment/values.yaml (securityContext)
        "podSecurityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }


class GpuOperators(pulumi.ComponentResource):
    """The GPU operators namespace plus the device plugin and DCGM exporter releases."""

    namespace: pulumi.Output[str]
    device_plugin_release: pulumi.Output[str | None] | None
    dcgm_exporter_release: pulumi.Output[str | None]

    def __init__(self, name: str, args: GpuOperatorsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:gpu:GpuOperators", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        ns = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.namespace, labels={**_PSA_LABELS, **naming.PART_OF_LABELS}),
            opts=child,
        )
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[ns])
        # The same default deny, DNS and allow policies every platform namespace gets
        # (components/kubernetes/serving_namespace.py), beside this component's own Namespace.
        self.network_policies = create_network_policies(
            name,
            ServingNamespaceArgs(args.namespace, pod_security="privileged", allow=network_policy_specs(args)),
            in_namespace,
        )
        device_plugin = (
            pinned_release(
                f"{name}-device-plugin",
                versions.NVIDIA_DEVICE_PLUGIN_CHART,
                args.namespace,
                _build_device_plugin_values(args),
                in_namespace,
                timeout=DEVICE_PLUGIN_TIMEOUT_SECONDS,
            )
            if device_plugin_node_groups(args)
            else None
        )
        dcgm = pinned_release(
            f"{name}-dcgm-exporter",
            versions.DCGM_EXPORTER_CHART,
            args.namespace,
            _build_dcgm_exporter_values(args),
            in_namespace,
            timeout=DCGM_EXPORTER_TIMEOUT_SECONDS,
        )

        self.namespace = ns.metadata.name
        self.device_plugin_release = device_plugin.name if device_plugin is not None else None
        self.dcgm_exporter_release = dcgm.name
        outputs: dict[str, Any] = {
            "namespace": self.namespace,
            "dcgmExporterRelease": self.dcgm_exporter_release,
            "devicePluginNodeGroups": device_plugin_node_groups(args),
            "serviceMonitor": args.service_monitor,
        }
        if self.device_plugin_release is not None:
            outputs["devicePluginRelease"] = self.device_plugin_release
        self.register_outputs(outputs)
