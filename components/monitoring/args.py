"""The Monitoring component's Args (`MonitoringArgs`) and what it monitors of each Triton deployment
(`MonitoredDeployment`): typed, validated and frozen; the package's builders read them."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

import pulumi

from components.kubernetes import naming, network_policies
from components.stack_config.declarations import check_declared

# An absolute https URL of a page: alerts append `#<section>` to it.
RUNBOOKS_URL = re.compile(r"https://[^\s/?#]+/[^\s?#]*")


@dataclass(frozen=True)
class MonitoredDeployment:
    """A Triton deployment the alerts cover: its name, HPA queue-time target (µs), the deadline of
    its gray releases (`tritonDeployments.<d>.canary.deadlineSeconds`, bounded by
    model_sync/contract/canary_policy.py), past which two versions taking requests is an alert, and
    its load timeout (`canary.loadTimeoutSeconds`), past which a replica pinning a version it does
    not serve is one (TritonPinNotServed; default CanaryPolicy's)."""

    name: str
    queue_time_target_microseconds: int
    canary_deadline_seconds: int
    load_timeout_seconds: int = 300

    def __post_init__(self) -> None:
        for fname, key in (
            ("canary_deadline_seconds", "deadlineSeconds"),
            ("load_timeout_seconds", "loadTimeoutSeconds"),
        ):
            d = getattr(self, fname)
            if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
                raise ValueError(
                    f"MonitoredDeployment.{fname}: {d!r} is not allowed; allowed: a positive number of seconds (the "
                    f"deployment's canary.{key})"
                )


@dataclass(frozen=True)
class MonitoringArgs:
    """Inputs of `Monitoring`.

    deployments: the Triton deployments (required, >= 1): per-deployment queue and canary alerts.
    control_plane_cidrs: the CIDRs of the subnets the EKS control plane's network interfaces
        live in (the cluster's subnets: Network.private_subnet_cidrs), inside vpc_cidr (required,
        >= 1): the API server's service proxy reaches Prometheus (9090) from there.
    runbooks_url: the https:// URL of the runbook page, docs/runbooks.md as operators open it, without
        a query or fragment (required: alerts.runbooks_url builds it from the stack's githubRepository and
        first githubDeployRefs entry); every alert's `runbook_url` is `<runbooks_url>#<alert, lower case>`.
    query_group: the Kubernetes group granted `get` on Prometheus' service proxy (default
        naming.PROMETHEUS_QUERY_GROUP, what the CI roles' access entries carry).
    prometheus_retention_days: 1-365 (default 15). prometheus_storage_gib: 10-10000 (default 50).
    slack_webhook_url: Alertmanager's Slack webhook (secret); "" (default) keeps alerts in Alertmanager.
    replicas: Prometheus/Alertmanager/adapter replicas (default 1; 2 in prod).
    vpc_cidr: the cluster VPC's CIDR: the API server, the kubelets and node-exporter
        (host network) are reached there (default: the stack config's `vpcCidr` default).
    namespace / triton_namespace / logging_namespace / ingress_namespace (the Envoy proxies, whose
        access log the dashboard's per-client panels read): from components/kubernetes/naming.py.
    """

    deployments: tuple[MonitoredDeployment, ...]
    control_plane_cidrs: tuple[str, ...]
    runbooks_url: str
    query_group: str = naming.PROMETHEUS_QUERY_GROUP
    prometheus_retention_days: int = 15
    prometheus_storage_gib: int = 50
    slack_webhook_url: pulumi.Input[str] = ""
    replicas: int = 1
    vpc_cidr: str = network_policies.DEFAULT_VPC_CIDR
    namespace: str = naming.MONITORING_NAMESPACE
    triton_namespace: str = naming.TRITON_NAMESPACE
    logging_namespace: str = naming.LOGGING_NAMESPACE
    ingress_namespace: str = naming.INGRESS_NAMESPACE

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
        if not RUNBOOKS_URL.fullmatch(self.runbooks_url):
            raise ValueError(
                f"MonitoringArgs.runbooks_url: {self.runbooks_url!r} is not allowed; allowed: the https:// URL of "
                "the runbook page, without a query or fragment (alerts.runbooks_url)"
            )
        if not naming.KUBERNETES_GROUP.fullmatch(self.query_group):
            raise ValueError(
                f"MonitoringArgs.query_group: {self.query_group!r} is not allowed; allowed: "
                f"{naming.KUBERNETES_GROUP_RULE}"
            )
        check_declared(
            "MonitoringArgs.prometheus_retention_days", "prometheusRetentionDays", self.prometheus_retention_days
        )
        check_declared("MonitoringArgs.prometheus_storage_gib", "prometheusStorageGiB", self.prometheus_storage_gib)
        check_declared("MonitoringArgs.replicas", "platformReplicas", self.replicas)
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
