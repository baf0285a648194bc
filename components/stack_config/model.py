"""The frozen model: the parsed stack, StackConfig, with its node groups and Triton deployments.

What `parser.parse()` returns and the components take: plain, frozen values, every one already
checked, so no component reads config or re-validates a stack value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.gpu.gpu_sharing import GpuSharing
from components.upstream import versions
from model_sync.contract.canary_policy import CanaryPolicy


@dataclass(frozen=True)
class NodeGroupConfig:
    """One `nodeGroups` entry: a managed node group of the system or the GPU kind."""

    name: str
    kind: str  # system | gpu
    instance_types: tuple[str, ...]
    capacity_type: str
    ami_type: str
    min_size: int
    desired_size: int
    max_size: int
    disk_size_gib: int
    labels: tuple[tuple[str, str], ...] = ()
    sharing: GpuSharing = field(default_factory=GpuSharing)  # gpuSharing: how its GPUs are shared (GPU groups)

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"


@dataclass(frozen=True)
class TritonDeploymentConfig:
    """One `tritonDeployments` entry: the models one Triton Deployment serves, its replicas and their sizes."""

    name: str
    node_group: str
    models: tuple[str, ...]
    min_replicas: int
    max_replicas: int
    gpus_per_replica: int
    cpu: str
    memory: str
    model_volume_gib: int
    shm_size_gib: int
    queue_time_target_microseconds: int
    scale_up_stabilization_seconds: int
    scale_down_stabilization_seconds: int
    startup_timeout_seconds: int
    termination_grace_period_seconds: int
    agent_interval_seconds: int
    # The gray release's policy of this deployment's models (`canary`; absent: the defaults),
    # exported per model as `canaryPolicies` for model-sync.
    canary: CanaryPolicy = field(default_factory=CanaryPolicy)


@dataclass(frozen=True)
class StackConfig:
    """The whole stack, validated: one field per config key (`Key.attribute`), plus its name and region."""

    stack: str
    environment: str
    region: str
    kubernetes_version: str
    availability_zone_count: int
    vpc_cidr: str
    nat_gateway_mode: str
    cluster_endpoint_public_access_cidrs: tuple[str, ...]
    cluster_admin_role_arns: tuple[str, ...]
    cluster_log_types: tuple[str, ...]
    cluster_log_retention_days: int
    node_groups: tuple[NodeGroupConfig, ...]
    node_autoscaling_enabled: bool
    scale_down_unneeded_minutes: int
    scale_down_delay_after_add_minutes: int
    model_repository_noncurrent_version_days: int
    model_repository_force_destroy: bool
    github_repository: str
    github_deploy_refs: tuple[str, ...]
    triton_deployments: tuple[TritonDeploymentConfig, ...]
    agent_image: str
    domain: str
    tls_issuer: str
    acme_email: str
    ingress_allowed_cidrs: tuple[str, ...]
    ingress_request_body_limit_mib: int
    ingress_rate_limit_rps: int
    platform_replicas: int
    monitoring_enabled: bool
    prometheus_retention_days: int
    prometheus_storage_gib: int
    logging_enabled: bool
    loki_retention_days: int
    alertmanager_slack_webhook_url: str = field(default="", repr=False)
    github_oidc_provider_arn: str = ""
    deployer_policy_arns: tuple[str, ...] = ()
    promotion_source_bucket: str = ""
    promotion_source_kms_key_arn: str = ""
    model_repository_read_principal_arns: tuple[str, ...] = ()
    triton_image: str = versions.TRITON_IMAGE
    ingress_clients: tuple[str, ...] = ("default",)
    ingress_authentication: str = "api-keys"
    ingress_jwt_issuer: str = ""
    ingress_jwt_audiences: tuple[str, ...] = ()
    ingress_jwt_jwks_uri: str = ""
    ingress_jwt_jwks_cache_seconds: int = 300
    ingress_jwt_models_claim: str = "triton_models"
    ingress_jwt_deployments_claim: str = "triton_deployments"
    ingress_jwt_client_claim: str = "sub"
    ingress_jwt_rate_limit_rps: int = 1000
    # The zones the VPC spans (known once the program asked AWS: loading.load_from_pulumi).
    availability_zones: tuple[str, ...] = ()

    @property
    def ingress_jwt(self) -> dict[str, Any] | None:
        """The JWT settings as the ingress takes them (JwtArgs' fields), None when clients use API keys only."""
        if self.ingress_authentication == "api-keys":
            return None
        return {
            "issuer": self.ingress_jwt_issuer,
            "audiences": self.ingress_jwt_audiences,
            "jwks_uri": self.ingress_jwt_jwks_uri,
            "jwks_cache_seconds": self.ingress_jwt_jwks_cache_seconds,
            "models_claim": self.ingress_jwt_models_claim,
            "deployments_claim": self.ingress_jwt_deployments_claim,
            "client_claim": self.ingress_jwt_client_claim,
            "rate_limit_rps": self.ingress_jwt_rate_limit_rps,
        }

    @property
    def is_prod(self) -> bool:
        return self.environment == "prod"

    @property
    def system_node_group(self) -> NodeGroupConfig:
        return next(g for g in self.node_groups if g.kind == "system")

    @property
    def gpu_node_groups(self) -> tuple[NodeGroupConfig, ...]:
        return tuple(g for g in self.node_groups if g.is_gpu)

    def node_group(self, name: str) -> NodeGroupConfig:
        return next(g for g in self.node_groups if g.name == name)
