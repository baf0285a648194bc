"""Every chart, image and add-on version the platform deploys, pinned in one place.

Bumping a version is a one-line change here, reviewed through the stack previews.
Each entry names where the version comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

# NVIDIA Triton Inference Server container (NGC). 25.10 ships Triton 2.62 and
# PyTorch/LibTorch 2.9 (see model_sync/contract/compat.py for the release -> LibTorch table).
# ref: https://docs.nvidia.com/deeplearning/frameworks/support-matrix/index.html
TRITON_IMAGE_REPOSITORY = "nvcr.io/nvidia/tritonserver"
TRITON_IMAGE_TAG = "25.10-py3"
TRITON_IMAGE = f"{TRITON_IMAGE_REPOSITORY}:{TRITON_IMAGE_TAG}"


@dataclass(frozen=True)
class HelmChart:
    """A Helm chart pinned to one version in one repository: an HTTP chart repository
    (`https://...`, with an index.yaml) or an OCI registry (`oci://registry/path`)."""

    chart: str
    version: str
    repository: str

    @property
    def oci(self) -> bool:
        return self.repository.startswith("oci://")

    @property
    def reference(self) -> str:
        """What `helm pull` / a Helm release names: the chart's name in an HTTP repository (given
        with `--repo`), or its full `oci://registry/path/chart` address (no repository option)."""
        return f"{self.repository}/{self.chart}" if self.oci else self.chart


# ---- AWS foundation: EKS add-ons, NVIDIA device plugin, DCGM exporter ---------------

# EKS managed add-on versions per Kubernetes minor version. A stack whose
# kubernetesVersion has no entry here is refused (EksClusterArgs / EksAddonsArgs), so
# a control-plane upgrade always comes with a reviewed add-on bump.
# Check with: aws eks describe-addon-versions --kubernetes-version 1.33 --addon-name <name>
# ref: https://docs.aws.amazon.com/eks/latest/userguide/managing-vpc-cni.html
# ref: https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html
# ref: https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html
# ref: https://docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html (aws-ebs-csi-driver)
EKS_ADDON_VERSIONS: dict[str, dict[str, str]] = {
    "1.32": {
        "vpc-cni": "v1.19.5-eksbuild.1",
        "kube-proxy": "v1.32.0-eksbuild.2",
        "eks-pod-identity-agent": "v1.3.8-eksbuild.2",
        "coredns": "v1.11.4-eksbuild.2",
        "aws-ebs-csi-driver": "v1.48.0-eksbuild.2",
    },
    "1.33": {
        "vpc-cni": "v1.19.5-eksbuild.1",
        "kube-proxy": "v1.33.0-eksbuild.2",
        "eks-pod-identity-agent": "v1.3.8-eksbuild.2",
        "coredns": "v1.12.1-eksbuild.2",
        "aws-ebs-csi-driver": "v1.48.0-eksbuild.2",
    },
    "1.34": {
        "vpc-cni": "v1.20.4-eksbuild.2",
        "kube-proxy": "v1.34.0-eksbuild.2",
        "eks-pod-identity-agent": "v1.3.10-eksbuild.2",
        "coredns": "v1.12.3-eksbuild.1",
        "aws-ebs-csi-driver": "v1.53.0-eksbuild.1",
    },
}

# NVIDIA device plugin (advertises nvidia.com/gpu to the kubelet).
# ref: https://github.com/NVIDIA/k8s-device-plugin#deployment-via-helm
NVIDIA_DEVICE_PLUGIN_CHART = HelmChart("nvidia-device-plugin", "0.17.1", "https://nvidia.github.io/k8s-device-plugin")

# NVIDIA DCGM exporter (GPU utilisation, memory, XID errors as Prometheus metrics).
# ref: https://github.com/NVIDIA/dcgm-exporter#quickstart-on-kubernetes
DCGM_EXPORTER_CHART = HelmChart("dcgm-exporter", "4.1.1", "https://nvidia.github.io/dcgm-exporter/helm-charts")

# ---- Serving plane: ingress, cert-manager, monitoring, logging, prometheus-adapter ---


# Envoy Gateway 1.9 (chart gateway-helm 1.9.0, published as an OCI chart only): the public
# ingress (Gateway API). JWT is verified inside Envoy (jwt_authn, remote JWKS cached), gRPC is a
# first-class GRPCRoute, and API keys, client CIDRs and claim-based authorization are one
# SecurityPolicy per route; its `crds` subchart installs the Gateway API and Envoy Gateway CRDs.
# ref: https://gateway.envoyproxy.io/news/releases/ ; https://github.com/envoyproxy/gateway/releases/tag/v1.9.0
ENVOY_GATEWAY_CHART = HelmChart("gateway-helm", "1.9.0", "oci://docker.io/envoyproxy")
# The Envoy proxy image Envoy Gateway 1.9.0 runs by default (api/v1alpha1/shared_types.go,
# DefaultEnvoyProxyImage at tag v1.9.0), pinned here so that the EnvoyProxy resource names it and a
# chart bump never moves the data plane unreviewed.
ENVOY_PROXY_IMAGE = "docker.io/envoyproxy/envoy:distroless-v1.39.0"
# cert-manager v1.20 (ACME certificates for the public hosts; v1.19 left support June 2026).
# ref: https://cert-manager.io/docs/releases/
CERT_MANAGER_CHART = HelmChart("cert-manager", "v1.20.2", "https://charts.jetstack.io")
# ref: https://github.com/prometheus-community/helm-charts/releases
KUBE_PROMETHEUS_STACK_CHART = HelmChart(
    "kube-prometheus-stack", "82.6.0", "https://prometheus-community.github.io/helm-charts"
)
PROMETHEUS_ADAPTER_CHART = HelmChart(
    "prometheus-adapter", "5.2.0", "https://prometheus-community.github.io/helm-charts"
)
# Loki (single-binary mode) and Grafana Alloy, the log shipper (Promtail reached end of
# life on 2026-03-02). ref: https://github.com/grafana/helm-charts/releases
LOKI_CHART = HelmChart("loki", "6.46.0", "https://grafana.github.io/helm-charts")
ALLOY_CHART = HelmChart("alloy", "1.4.0", "https://grafana.github.io/helm-charts")

# ---- Node autoscaling ---------------------------------------------------------------

# Cluster Autoscaler. The image tag follows the cluster's Kubernetes minor version; the
# chart renders the RBAC, so it must know the newest autoscaler it runs:
# - autoscaler >= 1.32 watches VolumeAttachments and blocks its scaling loop until that
#   informer syncs; charts before 9.46.3 lack the RBAC, so the autoscaler silently never
#   scales (kubernetes/autoscaler#7663, #8678; RBAC added by PR #7904 in chart 9.46.3).
# - the chart's appVersion minor is >= every image minor below (tests/components/
#   test_cluster_autoscaler.py checks both rules).
# Chart 9.53.0 ships appVersion 1.34.x.
# ref: https://github.com/kubernetes/autoscaler/tree/master/charts/cluster-autoscaler
# ref: https://github.com/kubernetes/autoscaler/issues/7663
# ref: https://github.com/kubernetes/autoscaler/releases (cluster-autoscaler-1.xx.y tags)
CLUSTER_AUTOSCALER_CHART = HelmChart("cluster-autoscaler", "9.53.0", "https://kubernetes.github.io/autoscaler")
CLUSTER_AUTOSCALER_CHART_APP_MINOR = "1.34"  # appVersion of CLUSTER_AUTOSCALER_CHART (major.minor)
CLUSTER_AUTOSCALER_VOLUME_ATTACHMENT_RBAC_CHART = "9.46.3"  # first chart with the VolumeAttachment RBAC
CLUSTER_AUTOSCALER_IMAGE_REPOSITORY = "registry.k8s.io/autoscaling/cluster-autoscaler"
CLUSTER_AUTOSCALER_IMAGE_TAGS: dict[str, str] = {
    "1.32": "v1.32.3",
    "1.33": "v1.33.1",
    "1.34": "v1.34.0",
}

# Kubernetes minor versions the platform supports: those with every pinned EKS add-on
# (including aws-ebs-csi-driver) AND a Cluster Autoscaler image. components/stack_config/cluster.py
# refuses any other kubernetesVersion with a one-line ConfigError.
KUBERNETES_VERSIONS: tuple[str, ...] = tuple(
    sorted(
        set(EKS_ADDON_VERSIONS) & set(CLUSTER_AUTOSCALER_IMAGE_TAGS),
        key=lambda v: tuple(int(p) for p in v.split(".")),
    )
)
