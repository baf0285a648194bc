"""Every config key the stack takes, declared once as data: its type, description, default and bounds.

`KEYS` is the single source of the project's config keys. Pulumi.yaml's `config:` section is
generated from it (`make pulumi-yaml`: `pulumi_yaml_config()`) and a test fails when the two
drift. A key's bounds (`minimum`/`maximum`, `choices`) are what the parser checks and what its
description says: `{bounds}` in a description is rendered from them, so the two cannot drift.
Pulumi's project-config schema has no object type (string, integer, boolean, array), so the
two `object` keys, `nodeGroups` and `tritonDeployments`, are not declared there; their entries' fields
are declared here too (`NODE_GROUP_FIELDS`, `TRITON_FIELDS`), with their defaults, bounds and docs.
docs/stack-config.md, every key and field, is generated from all of them (`make stack-config-doc`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.gpu.gpu_sharing import MODES as SHARING_MODES
from components.gpu.gpu_sharing import REPLICA_BOUNDS as SHARING_REPLICAS
from components.gpu.gpu_sharing import SHARING_AMI_TYPE
from components.stack_config.errors import ConfigError
from components.stack_config.readers import read_bool, read_choice, read_int
from components.stack_config.vocabulary import (
    CAPACITY_TYPES,
    CLOUDWATCH_RETENTION_DAYS,
    CONTROL_PLANE_LOG_TYPES,
    DEFAULT_VPC_CIDR,
    ENVIRONMENTS,
    GPU_AMI_TYPES,
    INGRESS_AUTHENTICATION,
    KUBERNETES_VERSIONS,
    NAT_MODES,
    NODE_GROUP_KINDS,
    PROJECT,
    PROVIDER_NAMESPACES,
    RESERVED_LABEL_PREFIXES,
    SYSTEM_AMI_TYPES,
    TLS_ISSUERS,
    config_key,
)
from components.upstream import versions
from model_sync.contract.canary_policy import KEYS as CANARY_KEYS

REQUIRED: Any = object()  # the default of a key the stack file must set


def bounds_text(choices: tuple[Any, ...], minimum: int | None, maximum: int | None, joiner: str = " | ") -> str:
    """What a key or field allows, as the docs write it: its choices joined, or its integer range."""
    if choices:
        return joiner.join(map(str, choices))
    return f"{minimum}-{maximum}" if minimum is not None else ""


@dataclass(frozen=True)
class Key:
    """One top-level config key.

    type: string | integer | boolean | array | object (structured; not declared in Pulumi.yaml).
    doc: the description, with `{bounds}` where the bounds are written.
    default: REQUIRED when the stack file must set it.
    items: the item type of an array.
    minimum / maximum: an integer's range; choices: the values allowed (an array's items).
    """

    name: str
    type: str
    doc: str
    default: Any = REQUIRED
    secret: bool = False
    items: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[Any, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def bounds(self) -> str:
        """What is allowed, as the description writes it: `1-1440`, `dev | staging | prod`, `1, 3, 5`."""
        return bounds_text(self.choices, self.minimum, self.maximum, " | " if self.type == "string" else ", ")

    @property
    def description(self) -> str:
        return self.doc.replace("{bounds}", self.bounds)

    @property
    def attribute(self) -> str:
        """The StackConfig field the key fills: `ingressRequestBodyLimitMiB` -> `ingress_request_body_limit_mib`."""
        return re.sub(r"(?<!^)(?=[A-Z][a-z])", "_", self.name).lower()

    def read(self, value: Any) -> Any:
        """`value` checked against the declared type and bounds: a boolean; an integer in its range; a
        string among its choices. Any other key has a reader of its own, in the module of its area."""
        if self.type == "boolean":
            return read_bool(config_key(self.name), value)
        return self.check(config_key(self.name), value)

    def check(self, where: str, value: Any) -> Any:
        """`value` held to the declared bounds (an integer's range, a string's choices), a ConfigError
        naming `where`: the stack key, or the field of a component's Args that the key fills
        (`IngressArgs.rate_limit_rps`), so an Args accepts exactly what the stack file may say."""
        if self.type == "integer" and self.minimum is not None and self.maximum is not None:
            return read_int(where, value, self.minimum, self.maximum)
        if self.type == "string" and self.choices:
            return read_choice(where, value, self.choices)
        raise TypeError(f"{self.name}: its declaration alone does not say how to read it")


@dataclass(frozen=True)
class Field:
    """One field of a `nodeGroups` / `tritonDeployments` entry: required or its default, its bounds (an
    integer's `minimum`/`maximum`, a string's `choices`) and what it does (`doc`, for docs/stack-config.md)."""

    name: str
    required: bool = False
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""

    @property
    def bounds(self) -> str:
        """What is allowed: `ON_DEMAND | SPOT`, `1-1000`, or nothing."""
        return bounds_text(self.choices, self.minimum, self.maximum)

    def read(self, base: str, entry: Mapping[str, Any]) -> Any:
        """The field of `entry` (the entry at key `base`), or its default, checked against its bounds."""
        value = entry.get(self.name, self.default)
        if self.minimum is not None and self.maximum is not None:
            return read_int(f"{base}.{self.name}", value, self.minimum, self.maximum)
        if self.choices:
            return read_choice(f"{base}.{self.name}", value, self.choices)
        return value


def fields_required(fields: tuple[Field, ...]) -> dict[str, bool]:
    """name -> required, in declaration order (what `readers.read_mapping` checks an entry against)."""
    return {f.name: f.required for f in fields}


def _listed(fields: tuple[Field, ...]) -> str:
    """The fields' names as the descriptions write them; a required field's choices shown (`kind: system|gpu`)."""
    return ", ".join(f"{f.name}: {'|'.join(f.choices)}" if f.required and f.choices else f.name for f in fields)


def _node_group_fields(kind: str) -> tuple[Field, ...]:
    """A node group's fields: a GPU group may scale to zero and gets a larger default disk."""
    gpu = kind == "gpu"
    amis = GPU_AMI_TYPES if gpu else SYSTEM_AMI_TYPES
    return (
        Field("kind", required=True, choices=NODE_GROUP_KINDS,
              doc="`system` runs the platform's own pods (exactly one such group); `gpu` runs Triton replicas"),
        Field("instanceTypes", required=True,
              doc="EC2 instance types of the managed node group: GPU sizes with a known GPU count in a gpu group "
                  "(one Triton replica must fit each), none in the system group"),
        Field("capacityType", default="ON_DEMAND", choices=CAPACITY_TYPES,
              doc="on-demand or Spot capacity; prod's `minReplicas` are counted on on-demand groups only"),
        Field("amiType", default=amis[0], choices=amis,
              doc="the nodes' AMI; GPU sharing needs Bottlerocket's (docs/serving-plane.md#gpu-sharing)"),
        Field("minSize", required=True, minimum=0 if gpu else 1, maximum=1000,
              doc="fewest nodes; a gpu group may scale to zero"),
        Field("desiredSize", required=True, minimum=0 if gpu else 1, maximum=1000,
              doc="nodes at creation, between minSize and maxSize (the autoscaler moves it afterwards)"),
        Field("maxSize", required=True, minimum=1, maximum=1000,
              doc="most nodes; their GPUs must hold the group's deployments' `maxReplicas x gpusPerReplica`"),
        Field("diskSizeGiB", default=100 if gpu else 50, minimum=20, maximum=16384,
              doc="each node's disk, GiB (container images and the models' volumes use it)"),
        Field("labels", default={},
              doc="extra node labels, string values; keys under "
                  f"{' or '.join(RESERVED_LABEL_PREFIXES)} are the platform's and refused"),
        Field("gpuSharing",  # GPU groups only: components/stack_config/gpu_sharing.py reads it
              doc="gpu groups only, absent for whole GPUs: `{mode, replicas, migProfile}` "
                  "(docs/serving-plane.md#gpu-sharing)"),
    )  # fmt: skip


# kind -> the fields of a node group of that kind (the same names, required or not, for both kinds).
NODE_GROUP_FIELDS: dict[str, tuple[Field, ...]] = {kind: _node_group_fields(kind) for kind in NODE_GROUP_KINDS}

TRITON_FIELDS: tuple[Field, ...] = (
    Field("nodeGroup", required=True, doc="the gpu group its replicas run on"),
    Field("models", required=True, doc="the models it serves; a model is served by one deployment"),
    # The HPA needs minReplicas >= 1; idle dev capacity is released by scaling the
    # Deployment to 0 (the HPA then stands still), see docs/node-autoscaling.md.
    Field("minReplicas", required=True, minimum=1, maximum=1000,
          doc="the autoscaler's floor; in prod at least 2, on on-demand capacity"),
    Field("maxReplicas", required=True, minimum=1, maximum=1000, doc="the autoscaler's ceiling"),
    Field("gpusPerReplica", default=1, minimum=1, maximum=16,
          doc="`nvidia.com/gpu` each replica asks for (a whole GPU or one share); 1 on a shared group"),
    Field("cpu", default="4", doc="the Triton container's CPU, request and limit"),
    Field("memory", default="16Gi", doc="the Triton container's memory, request and limit"),
    Field("modelVolumeGiB", default=50, minimum=1, maximum=16384,
          doc="size limit of the volume the agent downloads models into, GiB"),
    Field("shmSizeGiB", default=2, minimum=1, maximum=512,
          doc="`/dev/shm` (memory-backed), GiB; below `memory`"),
    Field("queueTimeTargetMicroseconds", default=50_000, minimum=100, maximum=60_000_000,
          doc="the autoscaler's target: each replica's queue time per request over 2 minutes, µs"),
    Field("scaleUpStabilizationSeconds", default=30, minimum=0, maximum=3600,
          doc="how long the autoscaler looks back before scaling up"),
    Field("scaleDownStabilizationSeconds", default=600, minimum=0, maximum=3600,
          doc="how long the autoscaler looks back before scaling down"),
    Field("startupTimeoutSeconds", default=900, minimum=30, maximum=7200,
          doc="the startup probe's budget: how long a replica may take to load its models"),
    Field("terminationGracePeriodSeconds", default=120, minimum=10, maximum=3600,
          doc="a stopping replica's drain; Triton's own exit timeout is derived from it"),
    Field("agentIntervalSeconds", default=10, minimum=1, maximum=3600,
          doc="seconds between the repository agent's passes (how soon a replica sees a new pin)"),
    Field("canary", doc="the gray release's policy; a key left out takes its default (docs/model-sync.md#canary)"),
)  # fmt: skip
TRITON_FIELDS_BY_NAME = {f.name: f for f in TRITON_FIELDS}


KEYS: tuple[Key, ...] = (
    Key(
        "environment",
        "string",
        "Environment this stack serves: {bounds}. Drives the environment rules (prod needs >= 3 AZs and "
        ">= 2 Triton replicas).",
        choices=ENVIRONMENTS,
    ),
    Key(
        "kubernetesVersion",
        "string",
        "EKS Kubernetes minor version ({bounds}); manifests are validated against it.",
        choices=KUBERNETES_VERSIONS,
    ),
    Key(
        "availabilityZoneCount",
        "integer",
        "Availability zones the VPC and node groups span ({bounds}; prod >= 3; at most the EKS-capable zones the "
        "region offers the account, asked of AWS before any resource).",
        3,
        minimum=2,
        maximum=6,
    ),
    Key("vpcCidr", "string", "IPv4 CIDR of the VPC (a /16 to /20 private range).", DEFAULT_VPC_CIDR),
    Key(
        "natGatewayMode",
        "string",
        "NAT gateways: `single` (one shared, cheaper) or `perAz` (one per AZ, no cross-AZ dependency).",
        "perAz",
        choices=NAT_MODES,
    ),
    Key(
        "clusterEndpointPublicAccessCidrs",
        "array",
        "CIDRs allowed to reach the EKS API endpoint publicly. Empty (default) = private endpoint only. CIDRs whose "
        "union is wider than a /8 (0.0.0.0/0 however spelled) are refused.",
        [],
        items="string",
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
        "EKS control-plane log types sent to CloudWatch ({bounds}).",
        list(CONTROL_PLANE_LOG_TYPES),
        items="string",
        choices=CONTROL_PLANE_LOG_TYPES,
    ),
    Key(
        "clusterLogRetentionDays",
        "integer",
        "CloudWatch retention of the control-plane logs, in days: one CloudWatch offers ({bounds}).",
        90,
        minimum=1,
        maximum=3653,
        choices=CLOUDWATCH_RETENTION_DAYS,
    ),
    Key(
        "nodeGroups",
        "object",
        f"Mapping of node group name -> {{{_listed(NODE_GROUP_FIELDS['gpu'])}}}. Exactly one system group; at least "
        f"one gpu group. gpuSharing (gpu groups; absent: whole GPUs): {{mode: {'|'.join(SHARING_MODES)}, replicas "
        f"({', '.join(f'{mode} {lo}-{hi}' for mode, (lo, hi) in SHARING_REPLICAS.items())}), migProfile (mig)}}, on "
        f"amiType {SHARING_AMI_TYPE} (docs/serving-plane.md#gpu-sharing).",
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
        "Minutes a node must be unneeded before the autoscaler removes it ({bounds}).",
        10,
        minimum=1,
        maximum=1440,
    ),
    Key(
        "scaleDownDelayAfterAddMinutes",
        "integer",
        "Minutes after a scale-up before scale-down is considered again ({bounds}).",
        10,
        minimum=0,
        maximum=1440,
    ),
    Key(
        "modelRepositoryNoncurrentVersionDays",
        "integer",
        "Days after which noncurrent S3 object versions in the model repository expire ({bounds}).",
        30,
        minimum=1,
        maximum=3650,
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
        f"Mapping of deployment name -> {{{_listed(TRITON_FIELDS)}}}; canary: the gray release's policy "
        f"{{{', '.join(CANARY_KEYS)}}} (model_sync/contract/canary_policy.py; a key left out takes its default). Each "
        "model in one deployment; one replica (cpu, memory, modelVolumeGiB, with the agent sidecar) must fit one node "
        "of every instance type of its nodeGroup; shmSizeGiB below memory.",
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
    Key(
        "tlsIssuer",
        "string",
        "ACME issuer for the ingress certificates ({bounds}).",
        "letsencrypt",
        choices=TLS_ISSUERS,
    ),
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
        "Largest inference request body the ingress accepts, in MiB ({bounds}).",
        64,
        minimum=1,
        maximum=1024,
    ),
    Key(
        "ingressRateLimitRps",
        "integer",
        "Requests per second allowed per API client by EACH Envoy proxy replica (counters are per replica: a "
        "client spread over all replicas gets up to replicas x this) ({bounds}).",
        200,
        minimum=1,
        maximum=100_000,
    ),
    Key(
        "ingressClients",
        "array",
        "Ingress API clients (DNS labels, unique): each gets a generated API key (secret output `ingressApiKeys`) "
        "and its own rate-limit bucket. Not with ingressAuthentication jwt (no API keys are made).",
        ["default"],
        items="string",
    ),
    Key(
        "ingressAuthentication",
        "string",
        "How ingress clients authenticate ({bounds}): API keys (HTTP basic auth), bearer JWTs from the OIDC "
        "issuer of the ingressJwt* keys, or either. Required in prod's stack file.",
        "api-keys",
        choices=INGRESS_AUTHENTICATION,
    ),
    Key(
        "ingressJwtIssuer",
        "string",
        "The OIDC issuer (https URL) whose tokens the ingress accepts (the tokens' `iss`); required with jwt | both.",
        "",
    ),
    Key(
        "ingressJwtAudiences",
        "array",
        "The `aud` values accepted (a token must name one); required with jwt | both.",
        [],
        items="string",
    ),
    Key(
        "ingressJwtJwksUri",
        "string",
        "Where the issuer publishes its signing keys (https URL); each Envoy proxy fetches and caches it. "
        "Required with jwt | both.",
        "",
    ),
    Key(
        "ingressJwtJwksCacheSeconds",
        "integer",
        "How long a proxy keeps the issuer's key set before fetching it again, in seconds ({bounds}).",
        300,
        minimum=60,
        maximum=86400,
    ),
    Key(
        "ingressJwtModelsClaim",
        "string",
        "The token claim (a string array) listing the models a client may call over HTTP (`*` = every model).",
        "triton_models",
    ),
    Key(
        "ingressJwtDeploymentsClaim",
        "string",
        "The token claim (a string array) listing the Triton deployments a client may call over gRPC (`*` = "
        "every deployment): the gRPC model name is inside the protobuf body, where no proxy can match it.",
        "triton_deployments",
    ),
    Key(
        "ingressJwtClientClaim",
        "string",
        "The token claim that names the client in the access log and the dashboard.",
        "sub",
    ),
    Key(
        "ingressJwtRateLimitRps",
        "integer",
        "Requests per second all token clients together get from EACH Envoy proxy replica ({bounds}); "
        "per-subject limits need Envoy Gateway's global rate limit service.",
        1000,
        minimum=1,
        maximum=100_000,
    ),
    Key(
        "platformReplicas",
        "integer",
        "Replicas of the platform's own services (Prometheus, Alertmanager, Grafana; the ingress controller and log "
        "shipper run one more) ({bounds}).",
        2,
        minimum=1,
        maximum=5,
    ),
    Key(
        "monitoringEnabled",
        "boolean",
        "Deploy kube-prometheus-stack (Prometheus, Alertmanager, Grafana), the Triton/GPU dashboard and alert rules.",
        True,
    ),
    Key(
        "prometheusRetentionDays",
        "integer",
        "Prometheus metrics retention, in days ({bounds}).",
        15,
        minimum=1,
        maximum=365,
    ),
    Key(
        "prometheusStorageGiB",
        "integer",
        "Prometheus persistent volume size, in GiB ({bounds}).",
        50,
        minimum=10,
        maximum=10_000,
    ),
    Key("loggingEnabled", "boolean", "Deploy Loki, its log shipper and the Grafana datasource.", True),
    Key("lokiRetentionDays", "integer", "Loki log retention, in days ({bounds}).", 7, minimum=1, maximum=365),
    Key(
        "alertmanagerSlackWebhookUrl",
        "string",
        "Slack incoming-webhook URL Alertmanager notifies (secret: set with `pulumi config set --secret`; a "
        "plaintext value in the stack file is refused). Empty = alerts stay in Alertmanager.",
        "",
        secret=True,
    ),
)

KEYS_BY_NAME = {k.name: k for k in KEYS}


def check_declared(where: str, name: str, value: Any) -> None:
    """A component's Args field `where`, filled from key `name`, held to that key's declared bounds."""
    KEYS_BY_NAME[name].check(where, value)


def declared_values(raw: Mapping[str, Any]) -> tuple[Any, dict[str, Any], set[str]]:
    """Split raw config (`namespace:key -> value`) into `aws:region`, every declared key's value (its
    default where the stack sets none) and the names the stack sets. An unknown project key, a key in a
    namespace neither the project's nor a provider's, or a required one left out, is a ConfigError."""
    values: dict[str, Any] = {}
    region: Any = None
    for full_key, value in raw.items():
        namespace, _, name = full_key.partition(":")
        if full_key == "aws:region":
            region = value
        elif namespace == PROJECT:
            if name not in KEYS_BY_NAME:
                raise ConfigError(full_key, value, "is an unknown config key", ", ".join(sorted(KEYS_BY_NAME)))
            values[name] = value
        elif namespace not in PROVIDER_NAMESPACES:
            raise ConfigError(full_key, value, f"is in namespace {namespace!r}, which nothing reads",
                              f"{PROJECT}:<key>, or the settings of {', '.join(PROVIDER_NAMESPACES)}")  # fmt: skip
    explicit = set(values)  # what the stack file sets (the rest takes its default)
    for k in KEYS:
        if k.name not in values:
            if k.required:
                raise ConfigError(config_key(k.name), None, "is missing", f"a {k.type} value ({k.description})")
            values[k.name] = k.default
    return region, values, explicit


def read_declared(values: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """StackConfig field -> value of each key in `names`, read by its declaration alone (`Key.read`), in order."""
    return {KEYS_BY_NAME[name].attribute: KEYS_BY_NAME[name].read(values[name]) for name in names}


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
