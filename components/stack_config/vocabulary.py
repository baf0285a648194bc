"""The stack config's vocabulary: the names, choices and value shapes components share with the parser.

Plain data. The components check their Args against these (the environments, NAT modes,
capacity and AMI types, log types and retentions; GitHub's repository and ref shapes are
components/iam/github_oidc.py's), and the parser above them
checks the stack against the same ones, so a value the stack accepts is never refused halfway
through a `pulumi up`.
"""

from __future__ import annotations

import re

from components.upstream import versions

PROJECT = "triton-platform"
# The other config namespaces a stack may set: the providers the program uses (requirements.txt's
# pulumi-* packages) and Pulumi's own (e.g. pulumi:disable-default-providers). A key in any other
# namespace, a misspelled project name most likely, is refused rather than ignored.
PROVIDER_NAMESPACES = ("aws", "kubernetes", "random", "pulumi")
ENVIRONMENTS = ("dev", "staging", "prod")
# Only minor versions with every pinned EKS add-on and an autoscaler image (components/upstream/versions.py).
KUBERNETES_VERSIONS = versions.KUBERNETES_VERSIONS
NAT_MODES = ("single", "perAz")
# Node label keys a stack's `nodeGroups.<g>.labels` may not set: the platform's own and Kubernetes'.
RESERVED_LABEL_PREFIXES = ("triton-platform.io/", "kubernetes.io/")
CAPACITY_TYPES = ("ON_DEMAND", "SPOT")
GPU_AMI_TYPES = ("AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA")
SYSTEM_AMI_TYPES = ("AL2023_x86_64_STANDARD", "BOTTLEROCKET_x86_64")
NODE_GROUP_KINDS = ("system", "gpu")
TLS_ISSUERS = ("letsencrypt", "letsencrypt-staging")
# How ingress clients authenticate (components/gateway/args.py: API_KEYS, JWT, BOTH).
INGRESS_AUTHENTICATION = ("api-keys", "jwt", "both")
HTTPS_URL = re.compile(r"^https://[a-z0-9.-]+(:[0-9]{1,5})?(/[-A-Za-z0-9._~/%]*)?$")
JWT_CLAIM = re.compile(r"^[A-Za-z_][A-Za-z0-9_:-]{0,62}(\.[A-Za-z_][A-Za-z0-9_:-]{0,62}){0,3}$")
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
# The VPC a stack gets when its file names none (`vpcCidr`'s default), and the one the
# NetworkPolicy builders assume when a caller names none (__main__ always passes the stack's).
DEFAULT_VPC_CIDR = "10.0.0.0/16"

# ---- value shapes ------------------------------------------------------------------------

DNS_NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
INSTANCE_TYPE = re.compile(r"^([a-z][a-z0-9-]*?)\.([0-9a-z]+)$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti)?$")
IMAGE_PINNED = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+(:[\w][\w.-]{0,127})?@sha256:[0-9a-f]{64}$")
IMAGE_TAGGED = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+:[\w][\w.-]{0,127}$")
# An NGC tritonserver image or a registry mirror of it:
# <registry>[/<path>]/tritonserver:<YY.MM>-py3[-<variant>][@sha256:<64 hex>].
TRITON_IMAGE = re.compile(
    r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*/tritonserver:(?P<release>[0-9]{2}\.[0-9]{2})-py3(-[a-z0-9-]+)?"
    r"(?P<digest>@sha256:[0-9a-f]{64})?$"
)
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$")
AWS_REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$")
GITHUB_OIDC_ARN = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:oidc-provider/token\.actions\.githubusercontent\.com$")
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[0-9a-f-]{36}$")


def config_key(name: str) -> str:
    """The full key of project key `name`: `triton-platform:<name>`."""
    return f"{PROJECT}:{name}"
