"""triton-platform: one stack = one environment (dev, staging, prod).

Wiring only: load the validated stack config, build the components in dependency order,
export the documented outputs (README, "Stack outputs"). No resource is created here
directly and nothing here reads `pulumi.Config()`: see components/stack_config/.
"""

import pulumi

from components.block_storage import BlockStorage, BlockStorageArgs
from components.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs, GpuPool
from components.eks.addons import AFTER_COMPUTE_ADDONS, EksAddons, EksAddonsArgs
from components.eks_cluster import EksCluster, EksClusterArgs, cluster_name
from components.gateway.args import IngressArgs, JwtArgs, TritonBackend
from components.gpu.gpu_instances import architectures, guaranteed_gpu
from components.gpu.gpu_sharing import guaranteed_share_gib, shares_per_node
from components.gpu_operators import GpuOperators, GpuOperatorsArgs
from components.identities import Identities, IdentitiesArgs
from components.ingress import Ingress
from components.kubernetes.naming import PROMETHEUS_QUERY_GROUP, TRITON_NAMESPACE, triton_app_name
from components.kubernetes.serving_namespace import ServingNamespace, ServingNamespaceArgs
from components.log_shipping import LogShipping, LogShippingArgs
from components.model_repository import ModelRepository, ModelRepositoryArgs
from components.monitoring.alerts import runbooks_url
from components.monitoring.args import MonitoredDeployment, MonitoringArgs
from components.monitoring.monitoring import Monitoring
from components.network import Network, NetworkArgs
from components.node_group import build_node_groups
from components.stack_config.loading import load_from_pulumi
from components.triton_deployment import build_triton_deployments
from model_sync.contract import stack_outputs

config = load_from_pulumi()

# ---- AWS foundation ------------------------------------------------------------------
# Names other sections rely on: network, cluster (.provider), node_groups (name ->
# NodeGroup), repository (.bucket_name, .bucket_arn, .kms_key_arn), identities
# (.serving_role_arn), gpu_operators. See docs/stack-outputs.md.
aws_tags = {
    "triton-platform.io/environment": config.environment,
    "triton-platform.io/stack": config.stack,
    "managed-by": "pulumi",
}
eks_name = cluster_name(config.environment)

network = Network(
    "network",
    NetworkArgs(
        cluster_name=eks_name,
        region=config.region,
        vpc_cidr=config.vpc_cidr,
        availability_zones=config.availability_zones,
        nat_gateway_mode=config.nat_gateway_mode,
        tags=aws_tags,
    ),
)
cluster = EksCluster(
    "cluster",
    EksClusterArgs(
        cluster_name=eks_name,
        region=config.region,
        kubernetes_version=config.kubernetes_version,
        subnet_ids=network.private_subnet_ids,
        cluster_admin_role_arns=config.cluster_admin_role_arns,
        public_access_cidrs=config.cluster_endpoint_public_access_cidrs,
        log_types=config.cluster_log_types,
        log_retention_days=config.cluster_log_retention_days,
        deletion_protection=config.environment != "dev",
        tags=aws_tags,
    ),
)
node_groups = build_node_groups(
    config.node_groups, cluster.cluster_name, config.kubernetes_version, network.private_subnet_ids, aws_tags
)
cluster_addons = EksAddons(
    "post-compute-addons",
    EksAddonsArgs(
        cluster_name=cluster.cluster_name,
        kubernetes_version=config.kubernetes_version,
        addons=AFTER_COMPUTE_ADDONS,
        tags=aws_tags,
    ),
    opts=pulumi.ResourceOptions(depends_on=list(node_groups.values())),
)
# The EBS CSI driver (a Deployment: after the nodes) and the default encrypted gp3
# StorageClass (naming.STORAGE_CLASS) that the PVCs of Prometheus, Alertmanager and Loki bind to.
block_storage = BlockStorage(
    "block-storage",
    BlockStorageArgs(
        cluster_name=cluster.cluster_name,
        cluster_arn=cluster.cluster_arn,
        kubernetes_version=config.kubernetes_version,
        reclaim_policy="Delete" if config.environment == "dev" else "Retain",
        tags=aws_tags,
    ),
    opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=list(node_groups.values())),
)
# Every Kubernetes-provider component below waits for nodes, CoreDNS and the StorageClass.
cluster_ready: list[pulumi.Resource] = [*node_groups.values(), cluster_addons, block_storage]
repository = ModelRepository(
    "model-repository",
    ModelRepositoryArgs(
        environment=config.environment,
        region=config.region,
        noncurrent_version_days=config.model_repository_noncurrent_version_days,
        force_destroy=config.model_repository_force_destroy,
        read_principal_arns=config.model_repository_read_principal_arns,
        tags=aws_tags,
    ),
)
identities = Identities(
    "identities",
    IdentitiesArgs(
        environment=config.environment,
        cluster_name=cluster.cluster_name,
        cluster_arn=cluster.cluster_arn,
        bucket_arn=repository.bucket_arn,
        kms_key_arn=repository.kms_key_arn,
        triton_deployments=[d.name for d in config.triton_deployments],
        github_repository=config.github_repository,
        github_deploy_refs=config.github_deploy_refs,
        deployer_policy_arns=config.deployer_policy_arns,
        github_oidc_provider_arn=config.github_oidc_provider_arn,
        promotion_source_bucket=config.promotion_source_bucket,
        promotion_source_kms_key_arn=config.promotion_source_kms_key_arn,
        # The gray release's Prometheus queries (bound by Monitoring's Role), where monitoring runs.
        prometheus_query_group=PROMETHEUS_QUERY_GROUP if config.monitoring_enabled else "",
        tags=aws_tags,
    ),
    opts=pulumi.ResourceOptions(depends_on=[cluster.addons]),
)  # the pod-identity agent add-on first
# ---- Kubernetes serving plane --------------------------------------------------------
# Every Kubernetes object goes through the cluster's provider (children inherit it).
# Order: namespace -> monitoring (CRDs + adapter) -> Triton -> ingress. docs/serving-plane.md.
on_cluster = pulumi.ResourceOptions(provider=cluster.provider, depends_on=cluster_ready)
replicas = config.platform_replicas
triton_namespace = ServingNamespace("triton-namespace", ServingNamespaceArgs(TRITON_NAMESPACE), opts=on_cluster)
monitoring = (
    Monitoring(
        "monitoring",
        MonitoringArgs(
            deployments=tuple(
                MonitoredDeployment(
                    d.name, d.queue_time_target_microseconds, d.canary.deadline_seconds, d.canary.load_timeout_seconds
                )
                for d in config.triton_deployments
            ),
            # The cluster's subnets (EksClusterArgs.subnet_ids): where the API server's proxy comes from.
            control_plane_cidrs=tuple(network.private_subnet_cidrs),
            # Each alert links its section of docs/runbooks.md, on GitHub at the ref the stack deploys from.
            runbooks_url=runbooks_url(config.github_repository, config.github_deploy_refs[0]),
            prometheus_retention_days=config.prometheus_retention_days,
            prometheus_storage_gib=config.prometheus_storage_gib,
            slack_webhook_url=config.alertmanager_slack_webhook_url,
            replicas=replicas,
            vpc_cidr=config.vpc_cidr,
        ),
        opts=on_cluster,
    )
    if config.monitoring_enabled
    else None
)
log_shipping = (
    LogShipping(
        "log-shipping",
        LogShippingArgs(
            retention_days=config.loki_retention_days,
            shipper_replicas=replicas + 1,
            grafana_namespace=MonitoringArgs.namespace if monitoring is not None else None,
            vpc_cidr=config.vpc_cidr,
        ),
        opts=pulumi.ResourceOptions(
            provider=cluster.provider, depends_on=[*cluster_ready, *([monitoring] if monitoring else [])]
        ),
    )
    if config.logging_enabled
    else None
)
# GPU operators and the node autoscaler come after monitoring: their ServiceMonitors
# need the prometheus-operator CRDs that kube-prometheus-stack installs.
after_monitoring = [monitoring] if monitoring is not None else []
gpu_operators = GpuOperators(
    "gpu-operators",
    GpuOperatorsArgs(
        gpu_node_groups=[g.name for g in config.gpu_node_groups],
        service_monitor=config.monitoring_enabled,
        host_device_plugin_node_groups=[
            g.name for g in config.gpu_node_groups if g.ami_type.startswith("BOTTLEROCKET")
        ],
    ),
    opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=[*cluster_ready, *after_monitoring]),
)

# Node autoscaling (docs/node-autoscaling.md): GPU node groups follow the Triton replicas.
if config.node_autoscaling_enabled:
    cluster_autoscaler = ClusterAutoscaler(
        "cluster-autoscaler",
        ClusterAutoscalerArgs(
            cluster_name=cluster.cluster_name,
            cluster_arn=cluster.cluster_arn,
            region=config.region,
            kubernetes_version=config.kubernetes_version,
            gpu_pools=tuple(
                GpuPool(
                    name=g.name,
                    autoscaling_group_name=node_groups[g.name].autoscaling_group_name,
                    gpus_per_node=shares_per_node(g.sharing, g.instance_types),
                    capacity_type=g.capacity_type,
                )
                for g in config.gpu_node_groups
            ),
            scale_down_unneeded_minutes=config.scale_down_unneeded_minutes,
            scale_down_delay_after_add_minutes=config.scale_down_delay_after_add_minutes,
            service_monitor=config.monitoring_enabled,
        ),
        opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=[*cluster_ready, *after_monitoring]),
    )

tritons = build_triton_deployments(
    config.triton_deployments,
    environment=config.environment,
    bucket_name=repository.bucket_name,
    region=config.region,
    agent_image=config.agent_image,
    triton_image=config.triton_image,
    monitoring=monitoring is not None,
    # The Pod Identity associations exist before the first pod asks for credentials.
    opts=pulumi.ResourceOptions(
        provider=cluster.provider,
        depends_on=[*cluster_ready, triton_namespace, identities, *([monitoring] if monitoring else [])],
    ),
)
ingress = Ingress(
    "ingress",
    IngressArgs(
        domain=config.domain,
        acme_email=config.acme_email,
        tls_issuer=config.tls_issuer,
        backends=tuple(TritonBackend(d.name, triton_app_name(d.name), d.models) for d in config.triton_deployments),
        allowed_cidrs=config.ingress_allowed_cidrs,
        request_body_limit_mib=config.ingress_request_body_limit_mib,
        rate_limit_rps=config.ingress_rate_limit_rps,
        replicas=replicas + 1,
        authentication=config.ingress_authentication,
        clients=config.ingress_clients,
        jwt=JwtArgs(**config.ingress_jwt) if config.ingress_jwt else None,
        vpc_cidr=config.vpc_cidr,
    ),
    opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=[*cluster_ready, triton_namespace]),
)

# ---- Stack outputs -------------------------------------------------------------------
pulumi.export("environment", config.environment)
pulumi.export("region", config.region)  # read by model-sync's pulumiStack environments
# AWS foundation outputs (documented in docs/stack-outputs.md).
pulumi.export("clusterName", cluster.cluster_name)
pulumi.export("kubeconfig", cluster.kubeconfig)  # secret
pulumi.export("modelRepositoryBucket", repository.bucket_name)
pulumi.export("modelRepositoryUri", repository.repository_uri)
pulumi.export("modelRepositoryKmsKeyArn", repository.kms_key_arn)
pulumi.export("storageClassName", block_storage.storage_class_name)
pulumi.export("servingRoleArn", identities.serving_role_arn)
pulumi.export("deployerRoleArn", identities.deployer_role_arn)
pulumi.export("previewRoleArn", identities.preview_role_arn)
if identities.publisher_role_arn is not None:
    pulumi.export("publisherRoleArn", identities.publisher_role_arn)
if identities.promoter_role_arn is not None:
    pulumi.export("promoterRoleArn", identities.promoter_role_arn)
# Serving-plane outputs (docs/serving-plane.md).
pulumi.export("tritonEndpoints", {"http": ingress.http_endpoint, "grpc": ingress.grpc_endpoint})
pulumi.export("tritonDeployments", sorted(tritons))
pulumi.export(
    "tritonImage", config.triton_image
)  # the image the pods run: model-sync version alignment (docs/stack-outputs.md)
pulumi.export("ingressApiKeys", ingress.api_keys)  # secret: {client: API key}
# Gray releases (model-sync canary / promote): each model's policy, from its deployment's `canary`.
pulumi.export(
    stack_outputs.CANARY_POLICIES,
    {m: {"deployment": d.name, **d.canary.to_mapping()} for d in config.triton_deployments for m in d.models},
)
# GPU memory planning (model-sync push / promote refuse a version that would overcommit a card): each
# deployment's GPU, the one its node group guarantees, the memory of one replica's share of it (the whole
# GPU's unless the group shares its GPUs: docs/serving-plane.md#gpu-sharing), and the models sharing it.
pulumi.export(
    stack_outputs.TRITON_GPUS,
    {
        d.name: {
            "gpu": gpu.model,
            "memoryGiB": guaranteed_share_gib(group.sharing, group.instance_types),
            "sharing": group.sharing.describe(),
            "models": list(d.models),
            "architectures": architectures(group.instance_types),
        }
        for d in config.triton_deployments
        for group in [config.node_group(d.node_group)]
        for gpu in [guaranteed_gpu(group.instance_types)]
    },
)
if monitoring is not None:
    pulumi.export("grafanaAdminPassword", monitoring.grafana_admin_password)  # secret
    # The canary analysis' Prometheus, through the API server's service proxy (private endpoint: from the VPC).
    pulumi.export("prometheusUrl", pulumi.Output.concat(cluster.endpoint, monitoring.prometheus_proxy_path))
