"""parse(): raw config (the strings Pulumi passes, or typed YAML values) -> a validated, frozen StackConfig.

The keys are read area by area, each area module applying its rules (rules.py) as it reads, in
one pass: the first value that is not allowed stops it with its one-line ConfigError.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from components.stack_config import (
    cluster,
    delivery,
    edge,
    images,
    node_groups,
    observability,
    rules,
    triton_deployments,
)
from components.stack_config.declarations import KEYS_BY_NAME, declared_values, read_declared
from components.stack_config.model import StackConfig
from components.stack_config.readers import read_str
from components.stack_config.vocabulary import AWS_REGION


def parse(
    raw: Mapping[str, Any],
    stack: str,
    *,
    secret_keys: Collection[str] | None = None,
    zones: Sequence[str] | None = None,
) -> StackConfig:
    """Validate `raw` (Pulumi config as `namespace:key -> value`) into a StackConfig.

    Values may be the strings Pulumi passes to programs or already-typed YAML values.
    `secret_keys`: the keys Pulumi holds encrypted; when given, a secret key (`Key.secret`) set
    in plaintext is refused. `zones`: the region's EKS-capable availability zones; when given,
    `availabilityZoneCount` must not exceed them and the first that many (sorted) become
    `StackConfig.availability_zones`.
    Raises ConfigError (one line naming the key, the bad value and what is allowed).
    """
    region, values, explicit = declared_values(raw)
    region = read_str("aws:region", region, AWS_REGION, "an AWS region such as us-east-1")
    environment = KEYS_BY_NAME["environment"].read(values["environment"])
    rules.check_stack_name(environment, stack)
    network = cluster.read_network(values, environment, region, zones)
    api_access = cluster.read_api_access(values)
    log_types = cluster.read_log_types(values["clusterLogTypes"], environment)
    groups = node_groups.read_node_groups(values["nodeGroups"])
    tritons = triton_deployments.read_triton_deployments(values["tritonDeployments"], groups)
    rules.check_serving(groups, tritons, environment)
    repository = read_declared(values, "modelRepositoryNoncurrentVersionDays", "modelRepositoryForceDestroy")
    rules.check_force_destroy(repository["model_repository_force_destroy"], environment)
    github = delivery.read_github(values, environment)
    agent_image = images.read_agent_image(values["agentImage"], environment)
    ingress = edge.read_ingress(values, environment, explicit)
    authentication = edge.read_ingress_authentication(values, environment, explicit)
    deployer = delivery.read_deployer(values)
    promotion = delivery.read_promotion(values, environment)
    rules.check_secrets_encrypted(values, secret_keys)
    webhook = observability.read_slack_webhook(values["alertmanagerSlackWebhookUrl"])
    return StackConfig(
        stack=stack,
        environment=environment,
        region=region,
        **network,
        **api_access,
        cluster_log_types=log_types,
        node_groups=tuple(groups.values()),
        **repository,
        **github,
        triton_deployments=tritons,
        agent_image=agent_image,
        **ingress,
        alertmanager_slack_webhook_url=webhook,
        **deployer,
        **promotion,
        **authentication,
        **_read_the_rest(values, environment),
    )


def _read_the_rest(values: Mapping[str, Any], environment: str) -> dict[str, Any]:
    """The keys read on their own, with no rule between them and another (read last, in this order)."""
    return {
        "kubernetes_version": cluster.read_kubernetes_version(values["kubernetesVersion"]),
        "cluster_log_retention_days": cluster.read_log_retention(values["clusterLogRetentionDays"]),
        **read_declared(values, "nodeAutoscalingEnabled", "scaleDownUnneededMinutes", "scaleDownDelayAfterAddMinutes"),
        "triton_image": images.read_triton_image(values["tritonImage"], environment),
        **read_declared(
            values,
            "ingressRequestBodyLimitMiB",
            "ingressRateLimitRps",
            "platformReplicas",
            "monitoringEnabled",
            "prometheusRetentionDays",
            "prometheusStorageGiB",
            "loggingEnabled",
            "lokiRetentionDays",
        ),
    }
