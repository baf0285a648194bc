"""The stack configuration: read once, validated, frozen.

This is the only module in the program that reads Pulumi config. `load_from_pulumi()`
collects every `triton-platform:*` key (plus `aws:region`) and `parse()` turns the raw
strings into a frozen `StackConfig`, raising `ConfigError` before any resource exists.

The two name-keyed collections, `nodeGroups` and `tritonDeployments`, are structured config:
YAML mappings in the stack file, so `pulumi config set --path
triton-platform:tritonDeployments.default.maxReplicas 8` edits one field the way Pulumi users
do. Pulumi hands them to the program as JSON; `parse()` reads them strictly (unknown fields
are errors, never silently ignored). The older spelling, a string holding the YAML mapping,
is still read, with a name given twice refused.

`KEYS` is the single source of the project's config keys; `Pulumi.yaml`'s `config:`
section is generated from it (`make pulumi-yaml`) and a test fails when the two drift.
Pulumi's project-config schema has no object type (string, integer, boolean, array), so the
two `object` keys are documented here and in the README rather than declared there.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import yaml

from components import cidr_rules, node_fit, versions
from components.arns import POLICY_ARN, ROLE_ARN, is_customer_managed_policy, policy_account, role_identity
from components.gpu_instances import GPUS_PER_INSTANCE, gpus_per_node
from model_sync.contract import layout
from model_sync.contract.canary_policy import KEYS as CANARY_KEYS
from model_sync.contract.canary_policy import CanaryPolicy, CanaryPolicyError
from model_sync.contract.compat import TRITON_RELEASES

PROJECT = "triton-platform"
ENVIRONMENTS = ("dev", "staging", "prod")
# Only minor versions with every pinned EKS add-on and an autoscaler image (components/versions.py).
KUBERNETES_VERSIONS = versions.KUBERNETES_VERSIONS
NAT_MODES = ("single", "perAz")
CAPACITY_TYPES = ("ON_DEMAND", "SPOT")
GPU_AMI_TYPES = ("AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA")
SYSTEM_AMI_TYPES = ("AL2023_x86_64_STANDARD", "BOTTLEROCKET_x86_64")
NODE_GROUP_KINDS = ("system", "gpu")
TLS_ISSUERS = ("letsencrypt", "letsencrypt-staging")
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
# The retention periods CloudWatch Logs accepts, in days.
# ref: https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutRetentionPolicy.html
CLOUDWATCH_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
# x86_64 NVIDIA instance families the NVIDIA EKS AMIs support.
# ref: https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html
GPU_INSTANCE_FAMILIES = ("g4dn", "g5", "g6", "g6e", "gr6", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en")

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$")
_DNS_NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_INSTANCE_TYPE = re.compile(r"^([a-z][a-z0-9-]*?)\.([0-9a-z]+)$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti)?$")
# A branch or tag ref the CI roles' workflows may run from (no wildcards, no environments).
GIT_REF = re.compile(r"^refs/(heads|tags)/[\w./-]+$")
GITHUB_REPO = re.compile(r"^[A-Za-z0-9-]{1,39}/[A-Za-z0-9._-]{1,100}$")
_IMAGE_PINNED = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+(:[\w][\w.-]{0,127})?@sha256:[0-9a-f]{64}$")
_IMAGE_TAGGED = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+:[\w][\w.-]{0,127}$")
# An NGC tritonserver image or a registry mirror of it:
# <registry>[/<path>]/tritonserver:<YY.MM>-py3[-<variant>][@sha256:<64 hex>].
_TRITON_IMAGE = re.compile(
    r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*/tritonserver:(?P<release>[0-9]{2}\.[0-9]{2})-py3(-[a-z0-9-]+)?"
    r"(?P<digest>@sha256:[0-9a-f]{64})?$"
)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$")
AWS_REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$")
GITHUB_OIDC_ARN = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:oidc-provider/token\.actions\.githubusercontent\.com$")
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[0-9a-f-]{36}$")


class ConfigError(ValueError, pulumi.RunError):
    """A stack-config value that is not allowed. The message is one line:
    `<key>: <bad value> <what is wrong>; allowed: <what is allowed>`. A `pulumi.RunError`, so
    `pulumi preview` / `up` print that line alone, without a traceback."""

    def __init__(self, key: str, value: Any, problem: str, allowed: str) -> None:
        self.key = key
        self.value = value
        shown = (
            "<unset>" if value is None else repr(value) if isinstance(value, str) else json.dumps(value, default=str)
        )
        super().__init__(f"{key}: {shown} {problem}; allowed: {allowed}".replace("\n", " "))


def _key(name: str) -> str:
    return f"{PROJECT}:{name}"


# --------------------------------------------------------------------------------------
# The declared keys (generated into Pulumi.yaml).
# --------------------------------------------------------------------------------------

_REQUIRED = object()


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # string | integer | boolean | array | object (structured; not declared in Pulumi.yaml)
    description: str
    default: Any = _REQUIRED
    secret: bool = False
    items: str | None = None  # item type for arrays

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


KEYS: tuple[Key, ...] = (
    Key(
        "environment",
        "string",
        "Environment this stack serves: dev | staging | prod. Drives the environment rules (prod needs >= 3 AZs and "
        ">= 2 Triton replicas).",
    ),
    Key(
        "kubernetesVersion",
        "string",
        f"EKS Kubernetes minor version ({' | '.join(KUBERNETES_VERSIONS)}); manifests are validated against it.",
    ),
    Key(
        "availabilityZoneCount",
        "integer",
        "Availability zones the VPC and node groups span (2-6; prod >= 3; at most the EKS-capable zones the region "
        "offers the account, asked of AWS before any resource).",
        3,
    ),
    Key("vpcCidr", "string", "IPv4 CIDR of the VPC (a /16 to /20 private range).", "10.0.0.0/16"),
    Key(
        "natGatewayMode",
        "string",
        "NAT gateways: `single` (one shared, cheaper) or `perAz` (one per AZ, no cross-AZ dependency).",
        "perAz",
    ),
    Key(
        "clusterEndpointPublicAccessCidrs",
        "array",
        "CIDRs allowed to reach the EKS API endpoint publicly. Empty (default) = private endpoint only. CIDRs whose "
        "union is wider than a /8 (0.0.0.0/0 however spelled) are refused unless allowWorldOpenClusterEndpoint is "
        "true.",
        [],
        items="string",
    ),
    Key(
        "allowWorldOpenClusterEndpoint",
        "boolean",
        "Explicit, reviewed opt-in to a public EKS endpoint open to 0.0.0.0/0. Never set in the shipped stacks.",
        False,
    ),
    Key(
        "clusterAdminRoleArns",
        "array",
        "IAM role ARNs granted cluster-admin through EKS access entries (each role once: one account and role name, "
        "whatever the path or case).",
        items="string",
    ),
    Key(
        "clusterLogTypes",
        "array",
        f"EKS control-plane log types sent to CloudWatch ({', '.join(CONTROL_PLANE_LOG_TYPES)}).",
        list(CONTROL_PLANE_LOG_TYPES),
        items="string",
    ),
    Key(
        "clusterLogRetentionDays",
        "integer",
        "CloudWatch retention of the control-plane logs, in days: one CloudWatch offers "
        f"({', '.join(map(str, CLOUDWATCH_RETENTION_DAYS))}).",
        90,
    ),
    Key(
        "nodeGroups",
        "object",
        "Mapping of node group name -> {kind: system|gpu, instanceTypes, capacityType, amiType, minSize, "
        "desiredSize, maxSize, diskSizeGiB, labels}. Exactly one system group; at least one gpu group.",
    ),
    Key(
        "nodeAutoscalingEnabled",
        "boolean",
        "Run the Cluster Autoscaler so GPU node groups follow the Triton replicas (scale from/to zero where minSize "
        "is 0).",
        True,
    ),
    Key(
        "scaleDownUnneededMinutes",
        "integer",
        "Minutes a node must be unneeded before the autoscaler removes it (1-1440).",
        10,
    ),
    Key(
        "scaleDownDelayAfterAddMinutes",
        "integer",
        "Minutes after a scale-up before scale-down is considered again (0-1440).",
        10,
    ),
    Key(
        "modelRepositoryNoncurrentVersionDays",
        "integer",
        "Days after which noncurrent S3 object versions in the model repository expire (1-3650).",
        30,
    ),
    Key(
        "modelRepositoryForceDestroy",
        "boolean",
        "Let `pulumi destroy` delete a non-empty model repository bucket. Allowed in dev only.",
        False,
    ),
    Key("githubRepository", "string", "GitHub `owner/name` whose workflows may assume the CI roles through OIDC."),
    Key(
        "githubDeployRefs",
        "array",
        "Git refs (refs/heads/<branch>, refs/tags/<tag>) the CI roles' workflow files must run from; each role's "
        "GitHub environment is fixed by its purpose (components/identities.py, docs/operations.md trust matrix).",
        ["refs/heads/main"],
        items="string",
    ),
    Key(
        "githubOidcProviderArn",
        "string",
        "The AWS account's GitHub Actions OIDC provider (one per account), created by the account's bootstrap stack "
        "(bootstrap/, docs/bootstrap.md: output githubOidcProviderArn).",
    ),
    Key(
        "deployerPolicyArns",
        "array",
        "IAM managed policy ARNs of the CI deployer role (`pulumi up`). Required, explicit: customer-managed "
        "policies of the stack's account only (AWS managed policies such as PowerUserAccess or AdministratorAccess "
        "are not scoped to a stack and are refused).",
        items="string",
    ),
    Key(
        "promotionSourceBucket",
        "string",
        "prod only (required there): the staging model-repository bucket the promoter reads "
        "(triton-platform-staging-models-<account>).",
        "",
    ),
    Key(
        "promotionSourceKmsKeyArn",
        "string",
        "prod only (required there): ARN of the staging bucket's KMS key (kms:Decrypt for server-side copies).",
        "",
    ),
    Key(
        "modelRepositoryReadPrincipalArns",
        "array",
        "staging only: IAM role ARNs in other accounts (the prod promoter) granted read on the promotion prefixes by "
        "the bucket and key policies.",
        [],
        items="string",
    ),
    Key(
        "tritonDeployments",
        "object",
        "Mapping of deployment name -> {nodeGroup, models, minReplicas, maxReplicas, gpusPerReplica, cpu, memory, "
        "modelVolumeGiB, shmSizeGiB, queueTimeTargetMicroseconds, scaleUpStabilizationSeconds, "
        "scaleDownStabilizationSeconds, startupTimeoutSeconds, terminationGracePeriodSeconds, agentIntervalSeconds, "
        f"canary}}; canary: the gray release's policy {{{', '.join(CANARY_KEYS)}}} (model_sync/contract/canary_policy.py; "
        "a key left out takes its default). Each model in one deployment; one replica (cpu, memory, modelVolumeGiB, "
        "with the agent sidecar) must fit one node of every instance type of its nodeGroup; shmSizeGiB below memory.",
    ),
    Key(
        "tritonImage",
        "string",
        "Triton server image: NGC `nvcr.io/nvidia/tritonserver:<YY.MM>-py3` or a registry mirror of it, release "
        "listed in model_sync/contract/compat.py; prod and staging require `@sha256:<digest>`.",
        versions.TRITON_IMAGE,
    ),
    Key(
        "agentImage",
        "string",
        "Repository-agent image (built from the repo's Dockerfile), pinned by digest (`repo:tag@sha256:...`); prod "
        "and staging refuse a tag without a digest.",
    ),
    Key(
        "domain",
        "string",
        "DNS zone the public Triton hosts live under (hosts: `infer.<domain>` HTTP, `grpc.<domain>` gRPC).",
    ),
    Key("tlsIssuer", "string", f"ACME issuer for the ingress certificates ({' | '.join(TLS_ISSUERS)}).", "letsencrypt"),
    Key("acmeEmail", "string", "Contact e-mail registered with the ACME issuer."),
    Key(
        "ingressAllowedCidrs",
        "array",
        "Client CIDRs allowed through the public ingress (0.0.0.0/0 = any client; clients still need an API key). "
        "Required in prod's stack file; a union wider than a /8 must be written 0.0.0.0/0.",
        ["0.0.0.0/0"],
        items="string",
    ),
    Key(
        "ingressRequestBodyLimitMiB",
        "integer",
        "Largest inference request body the ingress accepts, in MiB (1-1024).",
        64,
    ),
    Key(
        "ingressRateLimitRps",
        "integer",
        "Requests per second (burst 2x) allowed per client API key by EACH Traefik replica (counters are per "
        "replica: a client spread over all replicas gets up to replicas x this) (1-100000).",
        200,
    ),
    Key(
        "ingressClients",
        "array",
        "Ingress API clients (DNS labels, unique): each gets a generated API key (secret output `ingressApiKeys`) "
        "and its own rate-limit bucket.",
        ["default"],
        items="string",
    ),
    Key(
        "platformReplicas",
        "integer",
        "Replicas of the platform's own services (Prometheus, Alertmanager, Grafana; the ingress controller and log "
        "shipper run one more) (1-5).",
        2,
    ),
    Key(
        "monitoringEnabled",
        "boolean",
        "Deploy kube-prometheus-stack (Prometheus, Alertmanager, Grafana), the Triton/GPU dashboard and alert rules.",
        True,
    ),
    Key("prometheusRetentionDays", "integer", "Prometheus metrics retention, in days (1-365).", 15),
    Key("prometheusStorageGiB", "integer", "Prometheus persistent volume size, in GiB (10-10000).", 50),
    Key("loggingEnabled", "boolean", "Deploy Loki, its log shipper and the Grafana datasource.", True),
    Key("lokiRetentionDays", "integer", "Loki log retention, in days (1-365).", 7),
    Key(
        "alertmanagerSlackWebhookUrl",
        "string",
        "Slack incoming-webhook URL Alertmanager notifies (secret: set with `pulumi config set --secret`; a "
        "plaintext value in the stack file is refused). Empty = alerts stay in Alertmanager.",
        "",
        secret=True,
    ),
)

_KEYS_BY_NAME = {k.name: k for k in KEYS}


# --------------------------------------------------------------------------------------
# The model.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeGroupConfig:
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

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"


@dataclass(frozen=True)
class TritonDeploymentConfig:
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
    stack: str
    environment: str
    region: str
    kubernetes_version: str
    availability_zone_count: int
    vpc_cidr: str
    nat_gateway_mode: str
    cluster_endpoint_public_access_cidrs: tuple[str, ...]
    allow_world_open_cluster_endpoint: bool
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
    # The zones the VPC spans (known once the program asked AWS: load_from_pulumi).
    availability_zones: tuple[str, ...] = ()

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


# --------------------------------------------------------------------------------------
# Field readers: each raises ConfigError naming the full key path.
# --------------------------------------------------------------------------------------


def _int(key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str, float)):
        raise ConfigError(key, value, "is not an integer", f"an integer from {lo} to {hi}")
    try:
        number = float(value) if isinstance(value, str) else value
        if number != int(number):
            raise ValueError
        result = int(number)
    except ValueError:
        raise ConfigError(key, value, "is not an integer", f"an integer from {lo} to {hi}") from None
    if not lo <= result <= hi:
        raise ConfigError(key, value, "is out of range", f"an integer from {lo} to {hi}")
    return result


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    raise ConfigError(key, value, "is not a boolean", "true or false")


def _str(key: str, value: Any, pattern: re.Pattern[str] | None = None, allowed: str = "a non-empty string") -> str:
    if not isinstance(value, str) or not value or (pattern is not None and not pattern.match(value)):
        raise ConfigError(key, value, "is not valid", allowed)
    return value


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(key, value, "is not allowed", " | ".join(choices))
    return str(value)


def _list(key: str, value: Any) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError(key, value, "is not a list", "a YAML/JSON list") from None
    if not isinstance(value, list):
        raise ConfigError(key, value, "is not a list", "a YAML/JSON list")
    return value


def _dns_name(key: str, value: Any) -> str:
    return _str(
        key,
        value,
        _DNS_LABEL,
        "a DNS label: lowercase letters, digits and '-', starting with a letter, at most 32 characters",
    )


def _ingress_clients(value: Any) -> tuple[str, ...]:
    """`ingressClients`: unique DNS labels (the basic-auth user names of the API keys)."""
    key = _key("ingressClients")
    clients = [_dns_name(key, c) for c in _list(key, value)]
    if not clients:
        raise ConfigError(key, clients, "is empty", "at least one client name such as default")
    if len(set(clients)) != len(clients):
        raise ConfigError(key, clients, "has duplicate names", "each client name once")
    return tuple(clients)


def _cidr(key: str, value: Any) -> ipaddress.IPv4Network:
    try:
        return ipaddress.IPv4Network(value, strict=True)
    except (ValueError, TypeError):
        raise ConfigError(key, value, "is not an IPv4 CIDR", "a CIDR such as 203.0.113.0/24 (host bits zero)") from None


def _mapping(key: str, value: Any, fields: Mapping[str, bool]) -> dict[str, Any]:
    """Check `value` is a mapping whose keys are all in `fields` (name -> required)."""
    if not isinstance(value, dict):
        raise ConfigError(key, value, "is not a mapping", f"a mapping with keys {', '.join(fields)}")
    for name in value:
        if name not in fields:
            raise ConfigError(f"{key}.{name}", value[name], "is an unknown key", ", ".join(sorted(fields)))
    for name, required in fields.items():
        if required and name not in value:
            raise ConfigError(f"{key}.{name}", None, "is missing", "a value (this key is required)")
    return value


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, name: Any, line: int) -> None:
        super().__init__(f"{name!r} appears twice (the second time on line {line})")
        self.name, self.line = name, line


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping key given twice (plain YAML keeps the last copy:
    a GPU group written twice silently became the second one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            name = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if name in seen:
                raise _DuplicateKey(name, key_node.start_mark.line + 1)
            seen.add(name)
        return super().construct_mapping(node, deep)


def _yaml_mapping(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = yaml.load(value, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
        except _DuplicateKey as exc:
            raise ConfigError(
                key,
                exc.name,
                f"appears twice in the YAML (the second time on line {exc.line}); YAML would keep only the last",
                "each name once",
            ) from None
        except yaml.YAMLError as exc:
            raise ConfigError(
                key, "<yaml>", f"does not parse as YAML ({str(exc).splitlines()[0]})", "a YAML mapping"
            ) from None
    if not isinstance(value, dict) or not value:
        raise ConfigError(key, value, "is not a non-empty mapping", "a YAML mapping of name -> settings")
    return value


def _retention(value: Any) -> int:
    key = _key("clusterLogRetentionDays")
    days = _int(key, value, 1, 3653)
    if days not in CLOUDWATCH_RETENTION_DAYS:
        raise ConfigError(
            key, days, "is not a retention CloudWatch Logs offers", ", ".join(map(str, CLOUDWATCH_RETENTION_DAYS))
        )
    return days


def _kubernetes_version(value: Any) -> str:
    if value not in KUBERNETES_VERSIONS:
        raise ConfigError(
            _key("kubernetesVersion"),
            value,
            "has no pinned EKS add-on versions and Cluster Autoscaler image",
            f"{' | '.join(KUBERNETES_VERSIONS)} (pin a new version in components/versions.py first)",
        )
    return str(value)


def _triton_image(value: Any, environment: str) -> str:
    """`tritonImage`: an NGC-style tritonserver reference whose release model_sync knows,
    pinned by digest outside dev (the policy pack's images-pinned rule)."""
    key = _key("tritonImage")
    m = _TRITON_IMAGE.match(value) if isinstance(value, str) else None
    if m is None:
        raise ConfigError(
            key,
            value,
            "is not a tritonserver image reference",
            "<registry>[/<path>]/tritonserver:<YY.MM>-py3[-<variant>][@sha256:<64 hex>]",
        )
    if m.group("release") not in TRITON_RELEASES:
        raise ConfigError(
            key,
            value,
            f"has release {m.group('release')} with no LibTorch entry in model_sync/contract/compat.py",
            f"releases {', '.join(TRITON_RELEASES)}",
        )
    if environment != "dev" and not m.group("digest"):
        raise ConfigError(
            key,
            value,
            f"is not pinned by digest in {environment}",
            "<registry>/.../tritonserver:<YY.MM>-py3@sha256:<64 hex> outside dev",
        )
    return str(value)


def _gpu_family_ok(instance_type: str) -> bool:
    m = _INSTANCE_TYPE.match(instance_type)
    return bool(m) and m.group(1) in GPU_INSTANCE_FAMILIES  # type: ignore[union-attr]


_NODE_GROUP_FIELDS = {
    "kind": True,
    "instanceTypes": True,
    "capacityType": False,
    "amiType": False,
    "minSize": True,
    "desiredSize": True,
    "maxSize": True,
    "diskSizeGiB": False,
    "labels": False,
}


def _parse_node_group(name: str, raw: Any) -> NodeGroupConfig:
    base = f"{_key('nodeGroups')}.{name}"
    _dns_name(f"{_key('nodeGroups')}.<name>", name)
    m = _mapping(base, raw, _NODE_GROUP_FIELDS)
    kind = _choice(f"{base}.kind", m["kind"], NODE_GROUP_KINDS)
    types = _list(f"{base}.instanceTypes", m["instanceTypes"])
    if not types:
        raise ConfigError(f"{base}.instanceTypes", types, "is empty", "at least one EC2 instance type")
    for t in types:
        if not isinstance(t, str) or not _INSTANCE_TYPE.match(t):
            raise ConfigError(f"{base}.instanceTypes", t, "is not an EC2 instance type", "names such as g5.xlarge")
        if kind == "gpu" and not _gpu_family_ok(t):
            raise ConfigError(
                f"{base}.instanceTypes", t, "is not a GPU instance type", f"families {', '.join(GPU_INSTANCE_FAMILIES)}"
            )
        if kind == "gpu" and t not in GPUS_PER_INSTANCE:
            raise ConfigError(
                f"{base}.instanceTypes",
                t,
                "is not a GPU instance size with a known GPU count",
                "sizes listed in components/gpu_instances.py",
            )
        if kind == "system" and _gpu_family_ok(t):
            raise ConfigError(
                f"{base}.instanceTypes",
                t,
                "is a GPU instance type in the system group",
                "non-GPU families such as m7i, c7i",
            )
    amis = GPU_AMI_TYPES if kind == "gpu" else SYSTEM_AMI_TYPES
    ami = _choice(f"{base}.amiType", m.get("amiType", amis[0]), amis)
    lo, hi = (0 if kind == "gpu" else 1), 1000
    min_size = _int(f"{base}.minSize", m["minSize"], lo, hi)
    desired = _int(f"{base}.desiredSize", m["desiredSize"], lo, hi)
    max_size = _int(f"{base}.maxSize", m["maxSize"], 1, hi)
    if not min_size <= desired <= max_size:
        raise ConfigError(
            f"{base}.desiredSize",
            {"minSize": min_size, "desiredSize": desired, "maxSize": max_size},
            "breaks minSize <= desiredSize <= maxSize",
            "sizes with minSize <= desiredSize <= maxSize",
        )
    labels_raw = m.get("labels", {}) or {}
    if not isinstance(labels_raw, dict):
        raise ConfigError(f"{base}.labels", labels_raw, "is not a mapping", "a mapping of label key -> value")
    for k, v in labels_raw.items():
        if not isinstance(v, str) or k.startswith("triton-platform.io/") or k.startswith("kubernetes.io/"):
            raise ConfigError(
                f"{base}.labels.{k}",
                v,
                "is not allowed",
                "string values; keys outside the reserved triton-platform.io/ and kubernetes.io/ prefixes",
            )
    return NodeGroupConfig(
        name=name,
        kind=kind,
        instance_types=tuple(types),
        capacity_type=_choice(f"{base}.capacityType", m.get("capacityType", "ON_DEMAND"), CAPACITY_TYPES),
        ami_type=ami,
        min_size=min_size,
        desired_size=desired,
        max_size=max_size,
        disk_size_gib=_int(f"{base}.diskSizeGiB", m.get("diskSizeGiB", 100 if kind == "gpu" else 50), 20, 16384),
        labels=tuple(sorted(labels_raw.items())),
    )


_TRITON_FIELDS = {
    "nodeGroup": True,
    "models": True,
    "minReplicas": True,
    "maxReplicas": True,
    "gpusPerReplica": False,
    "cpu": False,
    "memory": False,
    "modelVolumeGiB": False,
    "shmSizeGiB": False,
    "queueTimeTargetMicroseconds": False,
    "scaleUpStabilizationSeconds": False,
    "scaleDownStabilizationSeconds": False,
    "startupTimeoutSeconds": False,
    "terminationGracePeriodSeconds": False,
    "agentIntervalSeconds": False,
    "canary": False,
}


def _quantity(key: str, value: Any) -> str:
    value = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    return _str(key, value, _QUANTITY, "a Kubernetes quantity such as 4, 500m, 16Gi")


def _canary(key: str, value: Any) -> CanaryPolicy:
    """`tritonDeployments.<d>.canary`: a gray release's policy (model_sync/contract/canary_policy.py, the one
    place its keys, defaults and bounds are written); absent or empty takes the defaults. Its
    CanaryPolicyError (`<key path>: <value>; allowed: <what>`) becomes this module's one line."""
    try:
        return CanaryPolicy.from_mapping(value, where=key)
    except CanaryPolicyError as e:
        where, _, rest = str(e).partition(": ")
        shown, _, allowed = rest.partition("; allowed: ")
        name = where[len(key) + 1 :] if where.startswith(key + ".") else ""
        if not name:  # not a mapping at all
            raise ConfigError(key, value, "is not a mapping", allowed) from None
        if shown == "unknown key":
            raise ConfigError(where, value[name], "is an unknown key", allowed) from None
        # The value as written; a key left out (its default broke a cross-check) as the default.
        given = value.get(name, CanaryPolicy().to_mapping().get(name, shown))
        raise ConfigError(where, given, "is not allowed", allowed) from None


def _parse_triton(name: str, raw: Any, groups: Mapping[str, NodeGroupConfig]) -> TritonDeploymentConfig:
    base = f"{_key('tritonDeployments')}.{name}"
    _dns_name(f"{_key('tritonDeployments')}.<name>", name)
    m = _mapping(base, raw, _TRITON_FIELDS)
    gpu_groups = sorted(n for n, g in groups.items() if g.is_gpu)
    node_group = m["nodeGroup"]
    if node_group not in gpu_groups:
        raise ConfigError(
            f"{base}.nodeGroup",
            node_group,
            "is not a GPU node group of this stack",
            ", ".join(gpu_groups) or "(none defined)",
        )
    models = _list(f"{base}.models", m["models"])
    if not models:
        raise ConfigError(f"{base}.models", models, "is empty", "at least one model name")
    for model in models:
        _str(
            f"{base}.models",
            model,
            layout.MODEL_NAME_RE,
            "model names of lowercase letters, digits, '_' and '-', at most 63 characters",
        )
    if len(set(models)) != len(models):
        raise ConfigError(f"{base}.models", models, "lists a model twice", "each model once")
    # The HPA needs minReplicas >= 1; idle dev capacity is released by scaling the
    # Deployment to 0 (the HPA then stands still), see docs/node-autoscaling.md.
    min_r = _int(f"{base}.minReplicas", m["minReplicas"], 1, 1000)
    max_r = _int(f"{base}.maxReplicas", m["maxReplicas"], 1, 1000)
    if min_r > max_r:
        raise ConfigError(
            f"{base}.minReplicas",
            {"minReplicas": min_r, "maxReplicas": max_r},
            "exceeds maxReplicas",
            "minReplicas <= maxReplicas",
        )
    startup = _int(f"{base}.startupTimeoutSeconds", m.get("startupTimeoutSeconds", 900), 30, 7200)
    cpu = _quantity(f"{base}.cpu", m.get("cpu", "4"))
    if node_fit.quantity(cpu) < 0.5:
        raise ConfigError(f"{base}.cpu", cpu, "is too little for tritonserver", "at least 500m")
    memory = _quantity(f"{base}.memory", m.get("memory", "16Gi"))
    if node_fit.quantity(memory) < node_fit.GI:  # `16` would be 16 bytes
        raise ConfigError(
            f"{base}.memory",
            memory,
            "is less than 1Gi (a quantity without a unit counts bytes)",
            "at least 1Gi, such as 16Gi",
        )
    shm = _int(f"{base}.shmSizeGiB", m.get("shmSizeGiB", 2), 1, 512)
    if shm * node_fit.GI >= node_fit.quantity(memory):  # /dev/shm is memory charged to the Triton container
        raise ConfigError(
            f"{base}.shmSizeGiB",
            shm,
            f"is not below the container's memory ({memory}; /dev/shm is charged to it)",
            f"less than {base}.memory",
        )
    return TritonDeploymentConfig(
        name=name,
        node_group=node_group,
        models=tuple(models),
        min_replicas=min_r,
        max_replicas=max_r,
        gpus_per_replica=_int(f"{base}.gpusPerReplica", m.get("gpusPerReplica", 1), 1, 16),
        cpu=cpu,
        memory=memory,
        model_volume_gib=_int(f"{base}.modelVolumeGiB", m.get("modelVolumeGiB", 50), 1, 16384),
        shm_size_gib=shm,
        queue_time_target_microseconds=_int(
            f"{base}.queueTimeTargetMicroseconds", m.get("queueTimeTargetMicroseconds", 50_000), 100, 60_000_000
        ),
        scale_up_stabilization_seconds=_int(
            f"{base}.scaleUpStabilizationSeconds", m.get("scaleUpStabilizationSeconds", 30), 0, 3600
        ),
        scale_down_stabilization_seconds=_int(
            f"{base}.scaleDownStabilizationSeconds", m.get("scaleDownStabilizationSeconds", 600), 0, 3600
        ),
        startup_timeout_seconds=startup,
        termination_grace_period_seconds=_int(
            f"{base}.terminationGracePeriodSeconds", m.get("terminationGracePeriodSeconds", 120), 10, 3600
        ),
        agent_interval_seconds=_int(f"{base}.agentIntervalSeconds", m.get("agentIntervalSeconds", 10), 1, 3600),
        canary=_canary(f"{base}.canary", m.get("canary")),
    )


def _check_gpu_capacity(
    groups: Mapping[str, NodeGroupConfig], tritons: tuple[TritonDeploymentConfig, ...], prod: bool
) -> None:
    """Every GPU group can hold what the Triton deployments scheduled on it may need:
    maxSize x GPUs per node >= sum(maxReplicas x gpusPerReplica); a replica fits on one
    node; in prod the on-demand floor (minSize) holds every deployment's minReplicas."""
    for group in groups.values():
        if not group.is_gpu:
            continue
        per_node = gpus_per_node(group.instance_types)
        served = [t for t in tritons if t.node_group == group.name]
        tkey = _key("tritonDeployments")
        gkey = f"{_key('nodeGroups')}.{group.name}"
        for t in served:
            if t.gpus_per_replica > per_node:
                raise ConfigError(
                    f"{tkey}.{t.name}.gpusPerReplica",
                    t.gpus_per_replica,
                    f"does not fit on one node of {gkey} ({per_node} GPU(s) per node)",
                    f"at most {per_node}",
                )
        need_max = sum(t.max_replicas * t.gpus_per_replica for t in served)
        if need_max > group.max_size * per_node:
            names = ", ".join(f"{tkey}.{t.name}.maxReplicas" for t in served)
            raise ConfigError(
                f"{gkey}.maxSize",
                group.max_size,
                f"holds {group.max_size * per_node} GPU(s) but {names} x gpusPerReplica need {need_max}",
                f"maxSize >= {-(-need_max // per_node)} (or fewer maxReplicas)",
            )
        need_min = sum(t.min_replicas * t.gpus_per_replica for t in served)
        if prod and need_min > group.min_size * per_node:
            names = ", ".join(f"{tkey}.{t.name}.minReplicas" for t in served)
            raise ConfigError(
                f"{gkey}.minSize",
                group.min_size,
                f"keeps {group.min_size * per_node} on-demand GPU(s) but {names} x gpusPerReplica need {need_min}",
                f"minSize >= {-(-need_min // per_node)} in prod",
            )


def _check_replica_fit(groups: Mapping[str, NodeGroupConfig], tritons: tuple[TritonDeploymentConfig, ...]) -> None:
    """One replica fits on one node of every instance type its group may launch (its CPU,
    memory and model volume against what such a node leaves pods: components/node_fit.py)."""
    for t in tritons:
        group = groups[t.node_group]
        asked = node_fit.replica_requests(t.cpu, t.memory, t.model_volume_gib)
        for instance_type in group.instance_types:
            bad = node_fit.misfit(asked, node_fit.allocatable(instance_type, group.disk_size_gib))
            if bad is not None:
                field_name, need, has = bad
                where = (
                    f"{_key('nodeGroups')}.{group.name}.diskSizeGiB"
                    if field_name == "modelVolumeGiB"
                    else instance_type
                )
                value = {"cpu": t.cpu, "memory": t.memory}.get(field_name, t.model_volume_gib)
                raise ConfigError(
                    f"{_key('tritonDeployments')}.{t.name}.{field_name}",
                    value,
                    f"needs {need} per replica (with the agent sidecar) but a {instance_type} node of group "
                    f"{group.name!r} leaves pods {has}",
                    f"requests that fit {where} (components/node_fit.py), or a larger instance type or disk",
                )


# --------------------------------------------------------------------------------------
# parse(): raw config strings -> StackConfig
# --------------------------------------------------------------------------------------


def stack_environments(stack: str) -> set[str]:
    """The environments a stack's name mentions as a word: `acme/triton-platform/prod-eu` -> {prod}."""
    return {word for word in re.split(r"[^a-z0-9]+", stack.rsplit("/", 1)[-1].lower()) if word in ENVIRONMENTS}


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
    values: dict[str, Any] = {}
    region: Any = None
    for full_key, value in raw.items():
        namespace, _, name = full_key.partition(":")
        if full_key == "aws:region":
            region = value
        elif namespace == PROJECT:
            if name not in _KEYS_BY_NAME:
                raise ConfigError(full_key, value, "is an unknown config key", ", ".join(sorted(_KEYS_BY_NAME)))
            values[name] = value
    explicit = set(values)  # what the stack file sets (the rest takes its default)
    for k in KEYS:
        if k.name not in values:
            if k.required:
                raise ConfigError(_key(k.name), None, "is missing", f"a {k.type} value ({k.description})")
            values[k.name] = k.default

    region = _str("aws:region", region, AWS_REGION, "an AWS region such as us-east-1")
    environment = _choice(_key("environment"), values["environment"], ENVIRONMENTS)
    prod = environment == "prod"
    named = stack_environments(stack)
    if named and environment not in named:  # `dev` running prod's config, or prod's running dev's
        raise ConfigError(
            _key("environment"),
            environment,
            f"differs from the stack name {stack!r}",
            f"the environment the stack is named after ({' | '.join(sorted(named))}), or a stack name that names no "
            "other environment",
        )

    az_count = _int(_key("availabilityZoneCount"), values["availabilityZoneCount"], 2, 6)
    if prod and az_count < 3:
        raise ConfigError(_key("availabilityZoneCount"), az_count, "is below the prod minimum", "3 to 6 in prod")
    if zones is not None and az_count > len(zones):
        raise ConfigError(
            _key("availabilityZoneCount"),
            az_count,
            f"exceeds the {len(zones)} EKS-capable zones {region} offers this account ({', '.join(sorted(zones))})",
            f"at most {len(zones)} in {region}",
        )

    vpc = _cidr(_key("vpcCidr"), values["vpcCidr"])
    if not vpc.is_private or not 16 <= vpc.prefixlen <= 20:
        raise ConfigError(
            _key("vpcCidr"),
            str(vpc),
            "is not a private /16-/20 range",
            "a private (RFC 1918) CIDR with prefix length 16 to 20",
        )
    nat_mode = _choice(_key("natGatewayMode"), values["natGatewayMode"], NAT_MODES)
    if prod and nat_mode != "perAz":
        raise ConfigError(
            _key("natGatewayMode"),
            nat_mode,
            "is not allowed in prod (one NAT is a single point of failure)",
            "perAz in prod",
        )

    allow_world = _bool(_key("allowWorldOpenClusterEndpoint"), values["allowWorldOpenClusterEndpoint"])
    endpoint_cidrs = [
        str(_cidr(_key("clusterEndpointPublicAccessCidrs"), c))
        for c in _list(_key("clusterEndpointPublicAccessCidrs"), values["clusterEndpointPublicAccessCidrs"])
    ]
    if cidr_rules.world_open(endpoint_cidrs) and not allow_world:  # the union, not the spelling
        raise ConfigError(
            _key("clusterEndpointPublicAccessCidrs"),
            cidr_rules.describe(endpoint_cidrs),
            "opens the cluster API to the internet",
            f"specific CIDRs whose union is at most a /8, or set {_key('allowWorldOpenClusterEndpoint')}=true after "
            "review",
        )

    admin_arns = _list(_key("clusterAdminRoleArns"), values["clusterAdminRoleArns"])
    if not admin_arns:
        raise ConfigError(
            _key("clusterAdminRoleArns"),
            admin_arns,
            "is empty",
            "at least one IAM role ARN (arn:aws:iam::<account>:role/<name>)",
        )
    roles: dict[tuple[str, str, str], str] = {}
    for arn in admin_arns:
        _str(_key("clusterAdminRoleArns"), arn, ROLE_ARN, "IAM role ARNs: arn:aws:iam::<12-digit account>:role/<name>")
        same = roles.setdefault(role_identity(arn), arn)  # one account's role, whatever the path or case
        if same != arn or admin_arns.count(arn) > 1:
            raise ConfigError(
                _key("clusterAdminRoleArns"),
                arn,
                f"names the same role as {same!r} (one account, one name)",
                "each role once (the same role name in two accounts is two roles)",
            )

    log_types = _list(_key("clusterLogTypes"), values["clusterLogTypes"])
    for t in log_types:
        _choice(_key("clusterLogTypes"), t, CONTROL_PLANE_LOG_TYPES)
    if prod and "audit" not in log_types:
        raise ConfigError(
            _key("clusterLogTypes"), log_types, "omits audit logs in prod", "a list including audit in prod"
        )

    groups_raw = _yaml_mapping(_key("nodeGroups"), values["nodeGroups"])
    groups = {name: _parse_node_group(str(name), raw_g) for name, raw_g in groups_raw.items()}
    systems = [g.name for g in groups.values() if g.kind == "system"]
    if len(systems) != 1:
        raise ConfigError(
            _key("nodeGroups"), systems, "must contain exactly one system group", "one group with kind: system"
        )
    if not any(g.is_gpu for g in groups.values()):
        raise ConfigError(_key("nodeGroups"), sorted(groups), "has no GPU group", "at least one group with kind: gpu")

    tritons_raw = _yaml_mapping(_key("tritonDeployments"), values["tritonDeployments"])
    tritons = tuple(_parse_triton(str(name), raw_t, groups) for name, raw_t in tritons_raw.items())
    served_by: dict[str, str] = {}
    for t in tritons:
        for model in t.models:  # the ingress routes /v2/models/<m> to exactly one deployment
            other = served_by.setdefault(model, t.name)
            if other != t.name:
                raise ConfigError(
                    f"{_key('tritonDeployments')}.{t.name}.models",
                    model,
                    f"is already served by deployment {other!r}",
                    "each model in one deployment (the ingress routes a model to one place)",
                )
    for t in tritons:
        if prod and t.min_replicas < 2:
            raise ConfigError(
                f"{_key('tritonDeployments')}.{t.name}.minReplicas",
                t.min_replicas,
                "is below the prod minimum",
                "2 or more in prod (one replica cannot survive a node drain)",
            )
        group = groups[t.node_group]
        if prod and group.capacity_type == "SPOT":
            raise ConfigError(
                f"{_key('nodeGroups')}.{group.name}.capacityType",
                "SPOT",
                f"backs prod Triton deployment {t.name!r} with spot capacity only",
                "ON_DEMAND for node groups serving prod deployments",
            )

    _check_gpu_capacity(groups, tritons, prod)
    _check_replica_fit(groups, tritons)

    days = _int(_key("modelRepositoryNoncurrentVersionDays"), values["modelRepositoryNoncurrentVersionDays"], 1, 3650)
    force_destroy = _bool(_key("modelRepositoryForceDestroy"), values["modelRepositoryForceDestroy"])
    if force_destroy and environment != "dev":
        raise ConfigError(
            _key("modelRepositoryForceDestroy"), True, f"is not allowed in {environment}", "true in dev only"
        )

    github_repo = _str(_key("githubRepository"), values["githubRepository"], GITHUB_REPO, "a GitHub owner/name")
    refs = _list(_key("githubDeployRefs"), values["githubDeployRefs"])
    if not refs:
        raise ConfigError(_key("githubDeployRefs"), refs, "is empty", "at least one ref such as refs/heads/main")
    for ref in refs:
        _str(
            _key("githubDeployRefs"),
            ref,
            GIT_REF,
            "refs/heads/<branch> or refs/tags/<tag> (no wildcards, no environment: each CI role's environment is "
            f"fixed by its purpose, e.g. deploy-{environment})",
        )

    agent_image = _str(
        _key("agentImage"),
        values["agentImage"],
        _IMAGE_TAGGED if environment == "dev" else _IMAGE_PINNED,
        "registry/repo:tag in dev; registry/repo:tag@sha256:<digest> in staging and prod"
        if environment == "dev"
        else "an image pinned by digest: registry/repo:tag@sha256:<64 hex>",
    )
    if environment == "dev" and not (_IMAGE_TAGGED.match(agent_image) or _IMAGE_PINNED.match(agent_image)):
        raise ConfigError(
            _key("agentImage"), agent_image, "is not an image reference", "registry/repo:tag[@sha256:<digest>]"
        )
    if agent_image.endswith(":latest"):
        raise ConfigError(
            _key("agentImage"),
            agent_image,
            "uses the mutable latest tag",
            "a version tag, pinned by digest outside dev",
        )

    domain = _str(_key("domain"), values["domain"], _DNS_NAME, "a lowercase DNS name such as inference.example.com")
    acme_email = _str(_key("acmeEmail"), values["acmeEmail"], _EMAIL, "an e-mail address")
    tls_issuer = _choice(_key("tlsIssuer"), values["tlsIssuer"], TLS_ISSUERS)
    if prod and tls_issuer != "letsencrypt":
        raise ConfigError(_key("tlsIssuer"), tls_issuer, "issues untrusted certificates in prod", "letsencrypt in prod")
    if prod and "ingressAllowedCidrs" not in explicit:  # a public prod API says so in its stack file
        raise ConfigError(
            _key("ingressAllowedCidrs"),
            None,
            "is not set in prod (the default lets any client through)",
            "the client CIDRs, or [0.0.0.0/0] for a public API, written in the prod stack file",
        )
    ingress_cidrs = tuple(
        str(_cidr(_key("ingressAllowedCidrs"), c))
        for c in _list(_key("ingressAllowedCidrs"), values["ingressAllowedCidrs"])
    )
    if not ingress_cidrs:
        raise ConfigError(_key("ingressAllowedCidrs"), [], "is empty", "at least one client CIDR")
    if cidr_rules.world_open(ingress_cidrs) and ingress_cidrs != (str(cidr_rules.WORLD),):
        raise ConfigError(
            _key("ingressAllowedCidrs"),
            cidr_rules.describe(ingress_cidrs),
            "lets (almost) every client through under another spelling",
            "[0.0.0.0/0] written as such for a public API, or client CIDRs whose union is at most a /8",
        )

    oidc_arn = values["githubOidcProviderArn"]
    if not isinstance(oidc_arn, str) or not GITHUB_OIDC_ARN.match(oidc_arn):
        raise ConfigError(
            _key("githubOidcProviderArn"),
            oidc_arn,
            "is not the GitHub OIDC provider",
            "arn:aws:iam::<account>:oidc-provider/token.actions.githubusercontent.com: the bootstrap stack's output "
            "githubOidcProviderArn (docs/bootstrap.md)",
        )
    deployer_arns = _list(_key("deployerPolicyArns"), values["deployerPolicyArns"])
    if not deployer_arns:
        raise ConfigError(_key("deployerPolicyArns"), deployer_arns, "is empty", "one or more IAM managed policy ARNs")
    for arn in deployer_arns:
        _str(_key("deployerPolicyArns"), arn, POLICY_ARN, "IAM policy ARNs: arn:aws:iam::<account>:policy/<name>")
        if not is_customer_managed_policy(arn):
            # An allow-list, not a deny-list: no AWS managed policy is scoped to this stack
            # (PowerUserAccess, AdministratorAccess, IAMFullAccess... all reach every resource of
            # the account); the deployer's policy is the account's own, kept beside its guard rails.
            raise ConfigError(
                _key("deployerPolicyArns"),
                arn,
                "is an AWS managed policy, not scoped to this stack",
                "customer-managed policies of the stack's account (arn:aws:iam::<12-digit account>:policy/<name>; "
                "docs/stack-outputs.md)",
            )
        if policy_account(arn) != oidc_arn.split(":")[4]:
            raise ConfigError(
                _key("deployerPolicyArns"),
                arn,
                f"belongs to another account than the stack's ({oidc_arn.split(':')[4]}, from githubOidcProviderArn)",
                "customer-managed policies of the stack's own account",
            )
    source_bucket = values["promotionSourceBucket"] or ""
    source_key = values["promotionSourceKmsKeyArn"] or ""
    if prod:
        for missing_key, missing_value in (
            ("promotionSourceBucket", source_bucket),
            ("promotionSourceKmsKeyArn", source_key),
        ):
            if not missing_value:
                raise ConfigError(
                    _key(missing_key),
                    None,
                    "is missing (prod promotes from staging)",
                    "set it in prod to the staging stack's value",
                )
        _str(
            _key("promotionSourceBucket"),
            source_bucket,
            _BUCKET_NAME,
            "the staging model-repository bucket name (required in prod)",
        )
        _str(
            _key("promotionSourceKmsKeyArn"),
            source_key,
            _KMS_KEY_ARN,
            "arn:aws:kms:<region>:<account>:key/<key id> of the staging bucket (required in prod)",
        )
    elif source_bucket or source_key:
        bad = "promotionSourceBucket" if source_bucket else "promotionSourceKmsKeyArn"
        raise ConfigError(
            _key(bad),
            source_bucket or source_key,
            f"is set in {environment}",
            "empty outside prod (only prod promotes)",
        )
    readers = _list(_key("modelRepositoryReadPrincipalArns"), values["modelRepositoryReadPrincipalArns"])
    for arn in readers:
        _str(
            _key("modelRepositoryReadPrincipalArns"),
            arn,
            ROLE_ARN,
            "IAM role ARNs: arn:aws:iam::<12-digit account>:role/<name>",
        )
    if readers and environment != "staging":
        raise ConfigError(
            _key("modelRepositoryReadPrincipalArns"),
            readers,
            f"is set in {environment}",
            "staging only (the promotion source)",
        )

    webhook = values["alertmanagerSlackWebhookUrl"] or ""
    if secret_keys is not None:
        for k in KEYS:  # a secret written in clear in the stack file would land in clear in the state
            if k.secret and values[k.name] and _key(k.name) not in secret_keys:
                raise ConfigError(
                    _key(k.name),
                    "<redacted>",
                    "is stored in plaintext in the stack file",
                    f"an encrypted value: pulumi config set --secret {_key(k.name)} <value>",
                )
    if webhook and not str(webhook).startswith("https://hooks.slack.com/"):
        raise ConfigError(
            _key("alertmanagerSlackWebhookUrl"),
            "<secret>",
            "is not a Slack webhook URL",
            "https://hooks.slack.com/... or empty",
        )

    return StackConfig(
        stack=stack,
        environment=environment,
        region=region,
        kubernetes_version=_kubernetes_version(values["kubernetesVersion"]),
        availability_zone_count=az_count,
        availability_zones=tuple(sorted(zones)[:az_count]) if zones is not None else (),
        vpc_cidr=str(vpc),
        nat_gateway_mode=nat_mode,
        cluster_endpoint_public_access_cidrs=tuple(endpoint_cidrs),
        allow_world_open_cluster_endpoint=allow_world,
        cluster_admin_role_arns=tuple(admin_arns),
        cluster_log_types=tuple(log_types),
        cluster_log_retention_days=_retention(values["clusterLogRetentionDays"]),
        node_groups=tuple(groups.values()),
        node_autoscaling_enabled=_bool(_key("nodeAutoscalingEnabled"), values["nodeAutoscalingEnabled"]),
        scale_down_unneeded_minutes=_int(_key("scaleDownUnneededMinutes"), values["scaleDownUnneededMinutes"], 1, 1440),
        scale_down_delay_after_add_minutes=_int(
            _key("scaleDownDelayAfterAddMinutes"), values["scaleDownDelayAfterAddMinutes"], 0, 1440
        ),
        model_repository_noncurrent_version_days=days,
        model_repository_force_destroy=force_destroy,
        github_repository=github_repo,
        github_deploy_refs=tuple(refs),
        triton_deployments=tritons,
        agent_image=agent_image,
        triton_image=_triton_image(values["tritonImage"], environment),
        domain=domain,
        tls_issuer=tls_issuer,
        acme_email=acme_email,
        ingress_allowed_cidrs=ingress_cidrs,
        ingress_request_body_limit_mib=_int(
            _key("ingressRequestBodyLimitMiB"), values["ingressRequestBodyLimitMiB"], 1, 1024
        ),
        ingress_rate_limit_rps=_int(_key("ingressRateLimitRps"), values["ingressRateLimitRps"], 1, 100_000),
        platform_replicas=_int(_key("platformReplicas"), values["platformReplicas"], 1, 5),
        monitoring_enabled=_bool(_key("monitoringEnabled"), values["monitoringEnabled"]),
        prometheus_retention_days=_int(_key("prometheusRetentionDays"), values["prometheusRetentionDays"], 1, 365),
        prometheus_storage_gib=_int(_key("prometheusStorageGiB"), values["prometheusStorageGiB"], 10, 10_000),
        logging_enabled=_bool(_key("loggingEnabled"), values["loggingEnabled"]),
        loki_retention_days=_int(_key("lokiRetentionDays"), values["lokiRetentionDays"], 1, 365),
        alertmanager_slack_webhook_url=str(webhook),
        github_oidc_provider_arn=oidc_arn,
        deployer_policy_arns=tuple(deployer_arns),
        promotion_source_bucket=source_bucket,
        promotion_source_kms_key_arn=source_key,
        model_repository_read_principal_arns=tuple(readers),
        ingress_clients=_ingress_clients(values["ingressClients"]),
    )


def load_from_pulumi(get_env: Callable[[], Mapping[str, str]] | None = None) -> StackConfig:
    """Read this stack's config from the Pulumi runtime (the program's only config read)."""
    from pulumi.runtime.config import CONFIG, get_config_env, get_config_secret_keys_env, is_config_secret

    from components.network import eks_zone_names

    if get_env is not None:
        raw = dict(get_env())
    else:
        # The language host passes config either in PULUMI_CONFIG or through
        # set_all_config (also what the mocks use); explicit settings win.
        raw = {**get_config_env(), **CONFIG.get()}
    secrets = {k for k in raw if is_config_secret(k)} | set(get_config_secret_keys_env())
    return parse(raw, pulumi.get_stack(), secret_keys=secrets, zones=eks_zone_names())


def pulumi_yaml_config() -> dict[str, Any]:
    """The `config:` section of Pulumi.yaml, generated from KEYS."""
    out: dict[str, Any] = {}
    for k in KEYS:
        if k.type == "object":  # Pulumi's schema has no object type: structured stack config
            continue
        decl: dict[str, Any] = {"type": k.type, "description": k.description}
        if k.items:
            decl["items"] = {"type": k.items}
        if not k.required:
            decl["default"] = k.default
        if k.secret:
            decl["secret"] = True
        out[k.name] = decl
    return out
