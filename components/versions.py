"""Every chart, image and add-on version the platform deploys, pinned in one place.

Bumping a version is a one-line change here, reviewed through the stack previews.
Each entry names where the version comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

# NVIDIA Triton Inference Server container (NGC). 25.10 ships Triton 2.62 and
# PyTorch/LibTorch 2.9 (see model_sync/compat.py for the release -> LibTorch table).
# ref: https://docs.nvidia.com/deeplearning/frameworks/support-matrix/index.html
TRITON_IMAGE_REPOSITORY = "nvcr.io/nvidia/tritonserver"
TRITON_IMAGE_TAG = "25.10-py3"
TRITON_IMAGE = f"{TRITON_IMAGE_REPOSITORY}:{TRITON_IMAGE_TAG}"

# ---- AWS foundation: EKS add-ons, NVIDIA device plugin, DCGM exporter ---------------

# EKS managed add-on versions per Kubernetes minor version. A stack whose
# kubernetesVersion has no entry here is refused (EksClusterArgs / EksAddonsArgs), so
# a control-plane upgrade always comes with a reviewed add-on bump.
# Check with: aws eks describe-addon-versions --kubernetes-version 1.33 --addon-name <name>
# ref: https://docs.aws.amazon.com/eks/latest/userguide/managing-vpc-cni.html
# ref: https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html
# ref: https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html
EKS_ADDON_VERSIONS: dict[str, dict[str, str]] = {
    "1.32": {
        "vpc-cni": "v1.19.5-eksbuild.1",
        "kube-proxy": "v1.32.0-eksbuild.2",
        "eks-pod-identity-agent": "v1.3.8-eksbuild.2",
        "coredns": "v1.11.4-eksbuild.2",
    },
    "1.33": {
        "vpc-cni": "v1.19.5-eksbuild.1",
        "kube-proxy": "v1.33.0-eksbuild.2",
        "eks-pod-identity-agent": "v1.3.8-eksbuild.2",
        "coredns": "v1.12.1-eksbuild.2",
    },
    "1.34": {
        "vpc-cni": "v1.20.4-eksbuild.2",
        "kube-proxy": "v1.34.0-eksbuild.2",
        "eks-pod-identity-agent": "v1.3.10-eksbuild.2",
        "coredns": "v1.12.3-eksbuild.1",
    },
}

# NVIDIA device plugin (advertises nvidia.com/gpu to the kubelet).
# ref: https://github.com/NVIDIA/k8s-device-plugin#deployment-via-helm
NVIDIA_DEVICE_PLUGIN_CHART = "nvidia-device-plugin"
NVIDIA_DEVICE_PLUGIN_CHART_VERSION = "0.17.1"
NVIDIA_DEVICE_PLUGIN_REPOSITORY = "https://nvidia.github.io/k8s-device-plugin"

# NVIDIA DCGM exporter (GPU utilisation, memory, XID errors as Prometheus metrics).
# ref: https://github.com/NVIDIA/dcgm-exporter#quickstart-on-kubernetes
DCGM_EXPORTER_CHART = "dcgm-exporter"
DCGM_EXPORTER_CHART_VERSION = "4.1.1"
DCGM_EXPORTER_REPOSITORY = "https://nvidia.github.io/dcgm-exporter/helm-charts"

# ---- Serving plane: ingress, cert-manager, monitoring, logging, prometheus-adapter ---


@dataclass(frozen=True)
class HelmChart:
    """A Helm chart pinned to one version in one repository."""

    chart: str
    version: str
    repository: str


# Traefik Proxy v3.7 (chart 41.5.0): the ingress controller (ingress-nginx is retired
# since March 2026; see docs/serving-plane.md).
# ref: https://github.com/traefik/traefik-helm-chart/releases
TRAEFIK_CHART = HelmChart("traefik", "41.5.0", "https://traefik.github.io/charts")
# cert-manager v1.20 (ACME certificates for the public hosts; v1.19 left support June 2026).
# ref: https://cert-manager.io/docs/releases/
CERT_MANAGER_CHART = HelmChart("cert-manager", "v1.20.2", "https://charts.jetstack.io")
# ref: https://github.com/prometheus-community/helm-charts/releases
KUBE_PROMETHEUS_STACK_CHART = HelmChart("kube-prometheus-stack", "82.6.0", "https://prometheus-community.github.io/helm-charts")
PROMETHEUS_ADAPTER_CHART = HelmChart("prometheus-adapter", "5.2.0", "https://prometheus-community.github.io/helm-charts")
# Loki (single-binary mode) and Grafana Alloy, the log shipper (Promtail reached end of
# life on 2026-03-02). ref: https://github.com/grafana/helm-charts/releases
LOKI_CHART = HelmChart("loki", "6.46.0", "https://grafana.github.io/helm-charts")
ALLOY_CHART = HelmChart("alloy", "1.4.0", "https://grafana.github.io/helm-charts")

# ---- Node autoscaling ---------------------------------------------------------------

# Cluster Autoscaler chart; the image tag must match the cluster's Kubernetes minor version.
# ref: https://github.com/kubernetes/autoscaler/tree/master/charts/cluster-autoscaler
# ref: https://github.com/kubernetes/autoscaler/releases (cluster-autoscaler-1.xx.y tags)
CLUSTER_AUTOSCALER_CHART_VERSION = "9.38.0"
CLUSTER_AUTOSCALER_CHART_REPOSITORY = "https://kubernetes.github.io/autoscaler"
CLUSTER_AUTOSCALER_IMAGE_REPOSITORY = "registry.k8s.io/autoscaling/cluster-autoscaler"
CLUSTER_AUTOSCALER_IMAGE_TAGS: dict[str, str] = {
    "1.31": "v1.31.0",
    "1.32": "v1.32.0",
    "1.33": "v1.33.0",
    "1.34": "v1.34.0",
}
