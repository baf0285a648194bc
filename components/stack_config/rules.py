"""The cross-key and environment rules: what one key requires of another, and what prod (or only dev) allows.

Each rule takes values already read and raises a ConfigError naming the key to change; the
area modules apply them as they read their keys, so a stack is judged in one pass. Prod needs
>= 3 AZs, a NAT per AZ, audit logs, >= 2 Triton replicas per deployment on on-demand GPUs, a
trusted ACME issuer, its ingress allowlist written in its stack file and a promotion source;
only dev may force-destroy its bucket, only staging grant other accounts read.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from components.gpu import node_fit
from components.gpu.gpu_sharing import shares_per_node
from components.iam.arns import policy_account
from components.stack_config import cidr_rules
from components.stack_config.declarations import KEYS
from components.stack_config.errors import ConfigError
from components.stack_config.model import NodeGroupConfig, TritonDeploymentConfig
from components.stack_config.vocabulary import ENVIRONMENTS, config_key


def stack_environments(stack: str) -> set[str]:
    """The environments a stack's name mentions as a word: `acme/triton-platform/prod-eu` -> {prod}."""
    return {word for word in re.split(r"[^a-z0-9]+", stack.rsplit("/", 1)[-1].lower()) if word in ENVIRONMENTS}


def check_stack_name(environment: str, stack: str) -> None:
    """A stack named after one environment runs that environment's config (`dev` with prod's is refused)."""
    named = stack_environments(stack)
    if named and environment not in named:
        raise ConfigError(
            config_key("environment"),
            environment,
            f"differs from the stack name {stack!r}",
            f"the environment the stack is named after ({' | '.join(sorted(named))}), or a stack name that names no "
            "other environment",
        )


def check_zone_count(az_count: int, environment: str, region: str, zones: Sequence[str] | None) -> None:
    """Prod spans >= 3 AZs; no stack more than the EKS-capable zones AWS offers the account (when asked)."""
    key = config_key("availabilityZoneCount")
    if environment == "prod" and az_count < 3:
        raise ConfigError(key, az_count, "is below the prod minimum", "3 to 6 in prod")
    if zones is not None and az_count > len(zones):
        raise ConfigError(
            key,
            az_count,
            f"exceeds the {len(zones)} EKS-capable zones {region} offers this account ({', '.join(sorted(zones))})",
            f"at most {len(zones)} in {region}",
        )


def check_nat_mode(nat_mode: str, environment: str) -> None:
    """Prod has a NAT per AZ (one NAT is a single point of failure)."""
    if environment == "prod" and nat_mode != "perAz":
        raise ConfigError(
            config_key("natGatewayMode"),
            nat_mode,
            "is not allowed in prod (one NAT is a single point of failure)",
            "perAz in prod",
        )


def check_endpoint_exposure(endpoint_cidrs: Sequence[str]) -> None:
    """The EKS API is never open to the internet (the union of the CIDRs, not their spelling): the policy
    pack refuses it too, at every preview and up."""
    if cidr_rules.world_open(endpoint_cidrs):
        raise ConfigError(
            config_key("clusterEndpointPublicAccessCidrs"),
            cidr_rules.describe(endpoint_cidrs),
            "opens the cluster API to the internet",
            "specific CIDRs whose union is at most a /8, or none (a private endpoint, reached from inside the VPC)",
        )


def check_audit_logs(log_types: Sequence[str], environment: str) -> None:
    """Prod sends the audit log to CloudWatch."""
    if environment == "prod" and "audit" not in log_types:
        raise ConfigError(
            config_key("clusterLogTypes"), log_types, "omits audit logs in prod", "a list including audit in prod"
        )


def check_serving(
    groups: Mapping[str, NodeGroupConfig], tritons: tuple[TritonDeploymentConfig, ...], environment: str
) -> None:
    """The Triton deployments against their node groups: in prod >= 2 replicas each, on on-demand groups;
    every group can hold its deployments' GPUs; one replica fits one node of every instance type."""
    prod = environment == "prod"
    for t in tritons:
        if prod and t.min_replicas < 2:
            raise ConfigError(
                f"{config_key('tritonDeployments')}.{t.name}.minReplicas",
                t.min_replicas,
                "is below the prod minimum",
                "2 or more in prod (one replica cannot survive a node drain)",
            )
        group = groups[t.node_group]
        if prod and group.capacity_type == "SPOT":
            raise ConfigError(
                f"{config_key('nodeGroups')}.{group.name}.capacityType",
                "SPOT",
                f"backs prod Triton deployment {t.name!r} with spot capacity only",
                "ON_DEMAND for node groups serving prod deployments",
            )
    check_gpu_capacity(groups, tritons, prod)
    check_replica_fit(groups, tritons)


def check_gpu_capacity(
    groups: Mapping[str, NodeGroupConfig], tritons: tuple[TritonDeploymentConfig, ...], prod: bool
) -> None:
    """Every GPU group can hold what the Triton deployments scheduled on it may need:
    maxSize x GPUs (GPU shares on a shared group) per node >= sum(maxReplicas x gpusPerReplica); a
    replica fits on one node and takes one share of a shared GPU; in prod the on-demand floor
    (minSize) holds every deployment's minReplicas."""
    for group in groups.values():
        if not group.is_gpu:
            continue
        per_node = shares_per_node(group.sharing, group.instance_types)
        unit = "GPU share(s)" if group.sharing.shared else "GPU(s)"
        served = [t for t in tritons if t.node_group == group.name]
        tkey = config_key("tritonDeployments")
        gkey = f"{config_key('nodeGroups')}.{group.name}"
        for t in served:
            most = 1 if group.sharing.shared else per_node
            if t.gpus_per_replica > most:
                where = (
                    f"one {group.sharing.describe()} GPU share per replica"
                    if group.sharing.shared
                    else f"{per_node} GPU(s) per node"
                )
                raise ConfigError(
                    f"{tkey}.{t.name}.gpusPerReplica",
                    t.gpus_per_replica,
                    f"does not fit on one node of {gkey} ({where})",
                    f"at most {most}",
                )
        need_max = sum(t.max_replicas * t.gpus_per_replica for t in served)
        if need_max > group.max_size * per_node:
            names = ", ".join(f"{tkey}.{t.name}.maxReplicas" for t in served)
            raise ConfigError(
                f"{gkey}.maxSize",
                group.max_size,
                f"holds {group.max_size * per_node} {unit} but {names} x gpusPerReplica need {need_max}",
                f"maxSize >= {-(-need_max // per_node)} (or fewer maxReplicas)",
            )
        need_min = sum(t.min_replicas * t.gpus_per_replica for t in served)
        if prod and need_min > group.min_size * per_node:
            names = ", ".join(f"{tkey}.{t.name}.minReplicas" for t in served)
            raise ConfigError(
                f"{gkey}.minSize",
                group.min_size,
                f"keeps {group.min_size * per_node} on-demand {unit} but {names} x gpusPerReplica need {need_min}",
                f"minSize >= {-(-need_min // per_node)} in prod",
            )


def check_replica_fit(groups: Mapping[str, NodeGroupConfig], tritons: tuple[TritonDeploymentConfig, ...]) -> None:
    """The replicas one node takes fit on one node of every instance type its group may launch: one
    replica, or on a shared group one per GPU share of the node (their CPU, memory and model volumes
    against what such a node leaves pods: components/gpu/node_fit.py)."""
    for t in tritons:
        group = groups[t.node_group]
        count = shares_per_node(group.sharing, group.instance_types) if group.sharing.shared else 1
        asked = node_fit.replica_requests(t.cpu, t.memory, t.model_volume_gib).times(count)
        for instance_type in group.instance_types:
            bad = node_fit.misfit(asked, node_fit.allocatable(instance_type, group.disk_size_gib))
            if bad is not None:
                field_name, need, has = bad
                where = (
                    f"{config_key('nodeGroups')}.{group.name}.diskSizeGiB"
                    if field_name == "modelVolumeGiB"
                    else instance_type
                )
                value = {"cpu": t.cpu, "memory": t.memory}.get(field_name, t.model_volume_gib)
                per = (
                    f"for the {count} replicas sharing its GPUs ({group.sharing.describe()})"
                    if count > 1
                    else "per replica"
                )
                raise ConfigError(
                    f"{config_key('tritonDeployments')}.{t.name}.{field_name}",
                    value,
                    f"needs {need} {per} (with the agent sidecar) but a {instance_type} node of group "
                    f"{group.name!r} leaves pods {has}",
                    f"requests that fit {where} (components/gpu/node_fit.py), or a larger instance type or disk",
                )


def check_force_destroy(force_destroy: bool, environment: str) -> None:
    """Only dev lets `pulumi destroy` delete a non-empty model repository."""
    if force_destroy and environment != "dev":
        raise ConfigError(
            config_key("modelRepositoryForceDestroy"), True, f"is not allowed in {environment}", "true in dev only"
        )


def check_tls_issuer(tls_issuer: str, environment: str) -> None:
    """Prod's certificates come from the trusted ACME issuer."""
    if environment == "prod" and tls_issuer != "letsencrypt":
        raise ConfigError(
            config_key("tlsIssuer"), tls_issuer, "issues untrusted certificates in prod", "letsencrypt in prod"
        )


def check_ingress_named(explicit: Collection[str], environment: str) -> None:
    """A public prod API says so in its stack file: prod writes its ingress allowlist (the default lets any
    client through)."""
    if environment == "prod" and "ingressAllowedCidrs" not in explicit:
        raise ConfigError(
            config_key("ingressAllowedCidrs"),
            None,
            "is not set in prod (the default lets any client through)",
            "the client CIDRs, or [0.0.0.0/0] for a public API, written in the prod stack file",
        )


def check_authentication_named(explicit: Collection[str], environment: str) -> None:
    """Prod says how its clients authenticate (API keys, JWT or both) in its stack file."""
    if environment == "prod" and "ingressAuthentication" not in explicit:
        raise ConfigError(
            config_key("ingressAuthentication"),
            None,
            "is not set in prod",
            "api-keys | jwt | both, written in the prod stack file",
        )


def check_policy_account(arn: str, oidc_arn: str) -> None:
    """A deployer policy belongs to the stack's own account (the account of its githubOidcProviderArn)."""
    account = oidc_arn.split(":")[4]
    if policy_account(arn) != account:
        raise ConfigError(
            config_key("deployerPolicyArns"),
            arn,
            f"belongs to another account than the stack's ({account}, from githubOidcProviderArn)",
            "customer-managed policies of the stack's own account",
        )


def check_promotion_source(source_bucket: str, source_key: str, environment: str) -> None:
    """Prod names the staging bucket and key it promotes from; no other stack names any."""
    if environment == "prod":
        for missing_key, missing_value in (
            ("promotionSourceBucket", source_bucket),
            ("promotionSourceKmsKeyArn", source_key),
        ):
            if not missing_value:
                raise ConfigError(
                    config_key(missing_key),
                    None,
                    "is missing (prod promotes from staging)",
                    "set it in prod to the staging stack's value",
                )
    elif source_bucket or source_key:
        bad = "promotionSourceBucket" if source_bucket else "promotionSourceKmsKeyArn"
        raise ConfigError(
            config_key(bad),
            source_bucket or source_key,
            f"is set in {environment}",
            "empty outside prod (only prod promotes)",
        )


def check_read_principals(readers: Sequence[str], environment: str) -> None:
    """Only staging, the promotion source, grants other accounts read."""
    if readers and environment != "staging":
        raise ConfigError(
            config_key("modelRepositoryReadPrincipalArns"),
            readers,
            f"is set in {environment}",
            "staging only (the promotion source)",
        )


def check_secrets_encrypted(values: Mapping[str, Any], secret_keys: Collection[str] | None) -> None:
    """A secret key (`Key.secret`) set in the stack file is encrypted there: written in clear, it would land
    in clear in the state. `secret_keys`: the keys Pulumi holds encrypted (None: not known, not checked)."""
    if secret_keys is None:
        return
    for k in KEYS:
        if k.secret and values[k.name] and config_key(k.name) not in secret_keys:
            raise ConfigError(
                config_key(k.name),
                "<redacted>",
                "is stored in plaintext in the stack file",
                f"an encrypted value: pulumi config set --secret {config_key(k.name)} <value>",
            )
