"""Names shared between components that must agree (namespaces, service accounts).

Defined once so the identity bindings (EKS Pod Identity associations) and the
Kubernetes objects they bind can never drift apart.
"""

from __future__ import annotations

import re

from components.stack_config.vocabulary import PROJECT

# The label every Kubernetes object the platform creates itself carries (Helm charts label their own).
# ref: https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/
PART_OF_LABELS = {"app.kubernetes.io/part-of": PROJECT}

TRITON_NAMESPACE = "triton"
MONITORING_NAMESPACE = "monitoring"
LOGGING_NAMESPACE = "logging"
INGRESS_NAMESPACE = "ingress"
# The public Gateway (Gateway API) in the Triton namespace, and the labels Envoy Gateway gives the
# Envoy proxy pods it runs for it in the ingress namespace (its controller's namespace):
# EnvoyAppLabel() plus the owning Gateway's name and namespace, in
# internal/infrastructure/kubernetes/proxy/resource.go at tag v1.9.0. NetworkPolicies on both sides
# (the Triton pods, the ACME solvers, the proxies themselves) select the proxies by these.
GATEWAY_NAME = "triton"
PROXY_POD_LABELS = {
    "app.kubernetes.io/name": "envoy",
    "app.kubernetes.io/component": "proxy",
    "app.kubernetes.io/managed-by": "envoy-gateway",
    "gateway.envoyproxy.io/owning-gateway-name": GATEWAY_NAME,
    "gateway.envoyproxy.io/owning-gateway-namespace": TRITON_NAMESPACE,
}
CERT_MANAGER_NAMESPACE = "cert-manager"
GPU_OPERATORS_NAMESPACE = "gpu-operators"
# The default StorageClass (encrypted gp3, EBS CSI driver): components/block_storage.py.
# PVC-backed charts (Prometheus, Alertmanager, Loki) set storageClassName to it.
STORAGE_CLASS = "gp3-encrypted"
# The Kubernetes group the CI roles that run gray releases (staging publisher, prod promoter) get
# through their EKS access entries (components/identities.py); the monitoring namespace binds it
# to `get` on Prometheus' service proxy and nothing else (components/monitoring/access.py).
PROMETHEUS_QUERY_GROUP = "triton-platform-prometheus-query"
# A Kubernetes group an EKS access entry may carry: no `:`, so never one of the prefixes EKS
# reserves (system:, eks:, aws:, amazon:, iam:, ssm:).
# ref: https://docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html
KUBERNETES_GROUP = re.compile(r"[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?")
KUBERNETES_GROUP_RULE = "a group name of a-z 0-9 . - (no ':': EKS reserves system:, eks:, aws:, amazon:, iam:, ssm:)"


def triton_service_account(deployment: str) -> str:
    """The ServiceAccount a Triton deployment's pods run as (bound to the serving role)."""
    return f"triton-{deployment}"


def triton_app_name(deployment: str) -> str:
    """`app.kubernetes.io/instance` (and object name) of a Triton deployment."""
    return f"triton-{deployment}"
