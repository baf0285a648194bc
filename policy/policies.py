"""The triton-platform policy pack: every guardrail as a plain function plus its policy object.

`pulumi preview/up --policy-pack policy` runs these against every resource the program
registers; each violation blocks the update (enforcement MANDATORY). The entry file
`policy/__main__.py` only builds the `PolicyPack` from `POLICIES` (constructing a
PolicyPack starts a gRPC server and blocks, so it never happens on import here).

Conventions:
- Inputs arrive as Pulumi sends them: camelCase keys, Kubernetes objects as manifests,
  wrapped in read-only Mapping/Sequence proxies that raise `UnknownValueError` for values
  not known at preview (the engine then reports that policy as advisory for that resource).
  Never `isinstance(x, dict)`: use `Mapping` / `Sequence`.
- Every violation message is one line: `<Type> '<name>': <what is wrong>; <what is allowed>`.
- The stack name (= environment: dev, staging, prod) is read from the resource URN; an
  unknown stack gets the strict (non-dev) rules.
- The GPU taint and resource name come from components/gpu/gpu_contract.py, never retyped.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

_REPO_ROOT = Path(__file__).resolve().parents[1]
if str(_REPO_ROOT) not in sys.path:  # the pack runs with policy/ as its working directory
    sys.path.insert(0, str(_REPO_ROOT))

from pulumi_policy import (  # noqa: E402
    EnforcementLevel,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from components.gpu.gpu_contract import GPU_RESOURCE, GPU_TAINT  # noqa: E402
from components.stack_config import cidr_rules  # noqa: E402

# --------------------------------------------------------------------------------------
# Resource type tokens (pulumi-aws 7, pulumi-kubernetes 4).
# --------------------------------------------------------------------------------------

S3_BUCKET_TYPES = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
S3_SSE_TYPES = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
S3_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
S3_ACL_TYPES = ("aws:s3/bucketAcl:BucketAcl", "aws:s3/bucketAclV2:BucketAclV2")
S3_BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
KMS_KEY = "aws:kms/key:Key"
IAM_ACCESS_KEY = "aws:iam/accessKey:AccessKey"
AWS_PROVIDER = "pulumi:providers:aws"
IAM_POLICY_DOCUMENT_TYPES = {  # type -> property holding a JSON policy document
    "aws:iam/policy:Policy": "policy",
    "aws:iam/rolePolicy:RolePolicy": "policy",
    "aws:iam/userPolicy:UserPolicy": "policy",
    "aws:iam/groupPolicy:GroupPolicy": "policy",
}
IAM_ROLE = "aws:iam/role:Role"
K8S_SECRET = "kubernetes:core/v1:Secret"  # noqa: S105 - a type token, not a password
HELM_CHART_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")

# Workload type -> path of its PodSpec inside the manifest.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}

PUBLIC_CANNED_ACLS = ("public-read", "public-read-write", "authenticated-read")
PUBLIC_GRANTEE_URIS = (
    "http://acs.amazonaws.com/groups/global/AllUsers",
    "http://acs.amazonaws.com/groups/global/AuthenticatedUsers",
)
KMS_SSE_ALGORITHMS = ("aws:kms", "aws:kms:dsse")
PUBLIC_ACCESS_BLOCK_FIELDS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
STATIC_KEY_ENV_NAMES = ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN")
_STATIC_KEY_DATA = re.compile(r"^(aws[_-]?)?secret[_-]?access[_-]?key$", re.IGNORECASE)
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_EXACT_CHART_VERSION = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$")
RELAXED_IMAGE_STACKS = ("dev",)  # stacks where a version tag without a digest is accepted


# --------------------------------------------------------------------------------------
# Small helpers (plain data in, plain data out; unit-tested through the policies).
# --------------------------------------------------------------------------------------


def stack_of(urn: str) -> str:
    """`urn:pulumi:<stack>::<project>::<type>::<name>` -> `<stack>` ('' when not a URN)."""
    head = urn.split("::", 1)[0]
    return head[len("urn:pulumi:") :] if head.startswith("urn:pulumi:") else ""


def _kind(resource_type: str) -> str:
    return resource_type.rsplit(":", 1)[-1]


def _label(resource_type: str, name: str) -> str:
    return f"{_kind(resource_type)} '{name}'"


def _get(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def _seq(value: Any) -> list[Any]:
    """A Sequence (never a string) as a list; anything else as []."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return []


def _pod_spec(resource_type: str, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
    path = POD_SPEC_PATHS.get(resource_type)
    spec = _get(props, *path) if path else None
    return spec if isinstance(spec, Mapping) else None


def _containers(pod_spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in _seq(pod_spec.get(field)):
            if isinstance(c, Mapping):
                yield c


def _quantity(value: Any) -> float:
    """A GPU count as Kubernetes takes it (1, 1.0 or "1")."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def tolerates(toleration: Mapping[str, Any], key: str, value: str, effect: str) -> bool:
    """Kubernetes toleration matching
    (ref: https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/)."""
    tol_effect = toleration.get("effect") or ""
    if tol_effect and tol_effect != effect:
        return False
    operator = toleration.get("operator") or "Equal"
    tol_key = toleration.get("key") or ""
    if operator == "Exists":
        return tol_key in ("", key)
    return operator == "Equal" and tol_key == key and (toleration.get("value") or "") == value


def _policy_statements(document: Any) -> list[Mapping[str, Any]]:
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except json.JSONDecodeError:
            return []
    statements = _get(document, "Statement")
    if isinstance(statements, Mapping):
        return [statements]
    return [s for s in _seq(statements) if isinstance(s, Mapping)]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in _seq(value) if isinstance(v, str)]


# --------------------------------------------------------------------------------------
# S3: KMS encryption, private buckets.
# --------------------------------------------------------------------------------------


def _sse_algorithms(rules: Any) -> list[str]:
    return [str(_get(rule, "applyServerSideEncryptionByDefault", "sseAlgorithm") or "") for rule in _seq(rules)]


def s3_sse_configuration_uses_kms(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """A bucket encryption configuration (or a bucket's inline one) must use SSE-KMS."""
    if args.resource_type in S3_SSE_TYPES:
        rules = args.props.get("rules")
    elif args.resource_type in S3_BUCKET_TYPES:
        rules = _get(args.props, "serverSideEncryptionConfiguration", "rule")
        if rules is None:
            return
        rules = [rules] if isinstance(rules, Mapping) else rules
    else:
        return
    algorithms = _sse_algorithms(rules)
    bad = [a or "<unset>" for a in algorithms if a not in KMS_SSE_ALGORITHMS]
    if not algorithms or bad:
        report(
            f"{_label(args.resource_type, args.name)}: server-side encryption {', '.join(bad) or '<no rule>'} is not "
            "SSE-KMS; "
            f"allowed: sseAlgorithm {' or '.join(KMS_SSE_ALGORITHMS)} with the environment's KMS key",
            None,
        )


def s3_public_access_block_all_true(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """A bucket public access block must set all four settings to true."""
    if args.resource_type != S3_PUBLIC_ACCESS_BLOCK:
        return
    off = [f for f in PUBLIC_ACCESS_BLOCK_FIELDS if args.props.get(f) is not True]
    if off:
        report(
            f"{_label(args.resource_type, args.name)}: {', '.join(off)} not true; allowed: all of "
            f"{', '.join(PUBLIC_ACCESS_BLOCK_FIELDS)} true",
            None,
        )


def s3_no_public_acl(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """No canned public ACL and no grant to AllUsers/AuthenticatedUsers."""
    if args.resource_type not in S3_ACL_TYPES + S3_BUCKET_TYPES:
        return
    acl = args.props.get("acl")
    if acl in PUBLIC_CANNED_ACLS:
        report(
            f"{_label(args.resource_type, args.name)}: acl {acl} makes the bucket public; allowed: private (or no "
            "ACL with BucketOwnerEnforced)",
            None,
        )
    grants = _seq(_get(args.props, "accessControlPolicy", "grants")) + _seq(args.props.get("grants"))
    for grant in grants:
        uri = _get(grant, "grantee", "uri") or (grant.get("uri") if isinstance(grant, Mapping) else None)
        if uri in PUBLIC_GRANTEE_URIS:
            report(
                f"{_label(args.resource_type, args.name)}: grant to {uri} makes the bucket public; allowed: grants "
                "to specific canonical users only",
                None,
            )


def _is_public_principal(principal: Any) -> bool:
    if principal == "*":
        return True
    if isinstance(principal, Mapping):
        return "*" in _strings(principal.get("AWS"))
    return False


def s3_no_public_bucket_policy(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """A bucket policy must not Allow the anonymous principal `*`."""
    if args.resource_type != S3_BUCKET_POLICY:
        return
    for i, statement in enumerate(_policy_statements(args.props.get("policy"))):
        if statement.get("Effect") == "Allow" and _is_public_principal(statement.get("Principal")):
            sid = statement.get("Sid") or f"#{i}"
            report(
                f"{_label(args.resource_type, args.name)}: statement {sid} allows Principal * (public bucket); "
                "allowed: Allow to named AWS principals, Deny to *",
                None,
            )


def _bucket_links(companion: PolicyResource, buckets: Sequence[PolicyResource]) -> list[str]:
    """URNs of the buckets a companion resource (encryption config, public access block) applies to."""
    linked = {r.urn for r in companion.property_dependencies.get("bucket", []) if r.resource_type in S3_BUCKET_TYPES}
    if linked:
        return sorted(linked)
    try:
        name = companion.props.get("bucket")
    except Exception:  # UnknownValueError at preview; no dependency recorded either
        return []
    out = []
    for b in buckets:
        try:
            if name is not None and name in (b.props.get("bucket"), b.props.get("id")):
                out.append(b.urn)
        except Exception:  # noqa: S112 - an unknown bucket name cannot match
            continue
    return out


def s3_buckets_encrypted_and_private(args: StackValidationArgs, report: ReportViolation) -> None:
    """Every bucket has an SSE-KMS encryption configuration and a complete public access block."""
    buckets = [r for r in args.resources if r.resource_type in S3_BUCKET_TYPES]
    encrypted: set[str] = set()
    blocked: set[str] = set()
    for r in args.resources:
        if r.resource_type in S3_SSE_TYPES:
            try:
                ok = all(a in KMS_SSE_ALGORITHMS for a in _sse_algorithms(r.props.get("rules"))) and bool(
                    _seq(r.props.get("rules"))
                )
            except Exception:  # unknown at preview: the resource-level policy reports it at update
                ok = True
            if ok:
                encrypted.update(_bucket_links(r, buckets))
        elif r.resource_type == S3_PUBLIC_ACCESS_BLOCK:
            try:
                ok = all(r.props.get(f) is True for f in PUBLIC_ACCESS_BLOCK_FIELDS)
            except Exception:
                ok = True
            if ok:
                blocked.update(_bucket_links(r, buckets))
    for b in buckets:
        inline = _get(b.props, "serverSideEncryptionConfiguration", "rule")
        if inline is not None and all(
            a in KMS_SSE_ALGORITHMS for a in _sse_algorithms([inline] if isinstance(inline, Mapping) else inline)
        ):
            encrypted.add(b.urn)
        if b.urn not in encrypted:
            report(
                f"{_label(b.resource_type, b.name)}: no SSE-KMS encryption configuration applies to it; "
                "allowed: a BucketServerSideEncryptionConfiguration with sseAlgorithm aws:kms for the bucket",
                b.urn,
            )
        if b.urn not in blocked:
            report(
                f"{_label(b.resource_type, b.name)}: no public access block with all four settings true applies to it; "
                "allowed: a BucketPublicAccessBlock with blockPublicAcls, blockPublicPolicy, ignorePublicAcls, "
                "restrictPublicBuckets true",
                b.urn,
            )


# --------------------------------------------------------------------------------------
# EKS, KMS, IAM.
# --------------------------------------------------------------------------------------


def eks_endpoint_not_world_open(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """A public EKS endpoint must be limited to specific CIDRs (AWS opens it to 0.0.0.0/0 by default)."""
    if args.resource_type != EKS_CLUSTER:
        return
    vpc = args.props.get("vpcConfig") or {}
    # ref: https://docs.aws.amazon.com/eks/latest/APIReference/API_VpcConfigRequest.html (endpointPublicAccess defaults
    # to true)
    if vpc.get("endpointPublicAccess") is False:
        return
    cidrs = _strings(vpc.get("publicAccessCidrs"))
    if not cidrs or cidr_rules.world_open(cidrs):  # the union of the CIDRs, not their spelling
        shown = cidr_rules.describe(cidrs) if cidrs else "0.0.0.0/0 (AWS default when publicAccessCidrs is empty)"
        report(
            f"{_label(args.resource_type, args.name)}: public API endpoint open to {shown}; "
            "allowed: endpointPublicAccess false, or publicAccessCidrs listing specific CIDRs whose union is at most "
            "a /8",
            None,
        )


def kms_key_rotation_enabled(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Symmetric KMS keys rotate automatically."""
    if args.resource_type != KMS_KEY:
        return
    spec = args.props.get("customerMasterKeySpec") or args.props.get("keySpec") or "SYMMETRIC_DEFAULT"
    if spec != "SYMMETRIC_DEFAULT":
        # ref: https://docs.aws.amazon.com/kms/latest/developerguide/rotate-keys.html (asymmetric keys cannot rotate)
        return
    if args.props.get("enableKeyRotation") is not True:
        report(
            f"{_label(args.resource_type, args.name)}: enableKeyRotation is not true; allowed: enableKeyRotation "
            "true for symmetric keys",
            None,
        )


def _wildcard_s3_actions(document: Any) -> list[str]:
    found = []
    for statement in _policy_statements(document):
        if statement.get("Effect") != "Allow":
            continue
        if "NotAction" in statement:
            found.append("NotAction")
        for action in _strings(statement.get("Action")):
            if action == "*" or (action.lower().startswith("s3:") and "*" in action):
                found.append(action)
    return found


def iam_no_wildcard_s3_actions(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """IAM policies Allow enumerated actions: no `*`, `s3:*`, `s3:Get*` or NotAction."""
    documents: list[tuple[str, Any]] = []
    if args.resource_type in IAM_POLICY_DOCUMENT_TYPES:
        documents.append(("policy", args.props.get(IAM_POLICY_DOCUMENT_TYPES[args.resource_type])))
    elif args.resource_type == IAM_ROLE:
        for inline in _seq(args.props.get("inlinePolicies")):
            documents.append((f"inline policy {_get(inline, 'name') or '?'}", _get(inline, "policy")))
    for where, document in documents:
        bad = _wildcard_s3_actions(document)
        if bad:
            report(
                f"{_label(args.resource_type, args.name)}: {where} allows wildcard actions "
                f"{', '.join(sorted(set(bad)))}; "
                "allowed: enumerated actions (s3:GetObject, s3:PutObject, ...) on the layout prefixes",
                None,
            )


def no_static_aws_keys(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """No IAM access keys, no keys in provider config, Secrets or container env: OIDC / Pod Identity only."""
    label = _label(args.resource_type, args.name)
    if args.resource_type == IAM_ACCESS_KEY:
        report(
            f"{label}: static IAM access keys are forbidden; allowed: GitHub OIDC roles for CI, EKS Pod Identity for "
            "pods",
            None,
        )
        return
    if args.resource_type == AWS_PROVIDER:
        keys = [k for k in ("accessKey", "secretKey") if args.props.get(k)]
        if keys:
            report(
                f"{label}: provider sets {', '.join(keys)}; allowed: ambient credentials from an assumed role "
                "(assumeRoles / OIDC)",
                None,
            )
        return
    if args.resource_type == K8S_SECRET:
        names = [
            k
            for field in ("data", "stringData")
            for k in (args.props.get(field) or {})
            if _STATIC_KEY_DATA.match(str(k))
        ]
        if names:
            report(
                f"{label}: holds AWS secret access key entries {', '.join(sorted(names))}; allowed: EKS Pod "
                "Identity, no stored keys",
                None,
            )
        return
    spec = _pod_spec(args.resource_type, args.props)
    if spec is None:
        return
    for c in _containers(spec):
        for env in _seq(c.get("env")):
            if isinstance(env, Mapping) and env.get("name") in STATIC_KEY_ENV_NAMES and "value" in env:
                report(
                    f"{label}: container '{c.get('name')}' sets {env.get('name')} as a literal env value; "
                    "allowed: EKS Pod Identity (no AWS key env vars)",
                    None,
                )


# --------------------------------------------------------------------------------------
# Kubernetes workloads: GPU scheduling contract, pinned images, pinned charts.
# --------------------------------------------------------------------------------------


def _gpu_containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out = []
    for c in _containers(spec):
        resources = c.get("resources") or {}
        if any(_quantity((resources.get(part) or {}).get(GPU_RESOURCE)) > 0 for part in ("limits", "requests")):
            out.append(c)
    return out


def gpu_pods_tolerate_gpu_taint(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Pods requesting GPUs tolerate the GPU node taint from components/gpu/gpu_contract.py."""
    spec = _pod_spec(args.resource_type, args.props)
    if spec is None or not _gpu_containers(spec):
        return
    if not any(
        isinstance(t, Mapping) and tolerates(t, GPU_TAINT.key, GPU_TAINT.value, GPU_TAINT.effect)
        for t in _seq(spec.get("tolerations"))
    ):
        report(
            f"{_label(args.resource_type, args.name)}: requests {GPU_RESOURCE} but does not tolerate the GPU taint "
            f"{GPU_TAINT.key}={GPU_TAINT.value}:{GPU_TAINT.effect}; allowed: the tolerations from "
            "components.gpu.gpu_contract.gpu_tolerations()",
            None,
        )


def gpu_requested_in_limits(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """GPUs are an extended resource: they must be set in limits (requests, if set, must equal limits)."""
    spec = _pod_spec(args.resource_type, args.props)
    if spec is None:
        return
    for c in _gpu_containers(spec):
        resources = c.get("resources") or {}
        limit = (resources.get("limits") or {}).get(GPU_RESOURCE)
        request = (resources.get("requests") or {}).get(GPU_RESOURCE)
        if _quantity(limit) <= 0:
            report(
                f"{_label(args.resource_type, args.name)}: container '{c.get('name')}' requests {GPU_RESOURCE} "
                "without a limit; "
                f"allowed: {GPU_RESOURCE} in resources.limits (ref: Kubernetes extended resources)",
                None,
            )
        elif request is not None and _quantity(request) != _quantity(limit):
            report(
                f"{_label(args.resource_type, args.name)}: container '{c.get('name')}' {GPU_RESOURCE} request "
                f"{request} differs from limit {limit}; "
                "allowed: request equal to limit, or limit only",
                None,
            )


def _image_problem(image: str, strict: bool) -> str | None:
    if _DIGEST.search(image):
        return None
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    if not tag:
        return "has no tag"
    if tag == "latest":
        return "uses the mutable latest tag"
    if strict:
        return "is not pinned by digest"
    return None


def images_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Container images carry a version tag (never latest); outside dev they are pinned by @sha256 digest."""
    spec = _pod_spec(args.resource_type, args.props)
    if spec is None:
        return
    stack = stack_of(args.urn)
    strict = stack not in RELAXED_IMAGE_STACKS
    allowed = "registry/repo:tag@sha256:<digest>" if strict else "registry/repo:tag (digest recommended), never latest"
    for c in _containers(spec):
        image = str(c.get("image") or "")
        problem = _image_problem(image, strict) if image else "is empty"
        if problem:
            report(
                f"{_label(args.resource_type, args.name)}: container '{c.get('name')}' image {image or '<unset>'} "
                f"{problem} "
                f"(stack {stack or '<unknown>'}); allowed: {allowed}",
                None,
            )


def helm_chart_version_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Helm releases name an exact chart version (components/upstream/versions.py), never a range or the latest."""
    if args.resource_type not in HELM_CHART_TYPES:
        return
    version = str(args.props.get("version") or "")
    if not _EXACT_CHART_VERSION.match(version):
        report(
            f"{_label(args.resource_type, args.name)}: chart version {version or '<unset>'} is not an exact version; "
            "allowed: an exact semver pinned in components/upstream/versions.py",
            None,
        )


# --------------------------------------------------------------------------------------
# The policy objects (every one mandatory).
# --------------------------------------------------------------------------------------

_RESOURCE_POLICIES: tuple[tuple[str, str, Callable[[ResourceValidationArgs, ReportViolation], None]], ...] = (
    ("s3-encryption-uses-kms", "S3 bucket encryption uses SSE-KMS.", s3_sse_configuration_uses_kms),
    (
        "s3-public-access-block-complete",
        "S3 public access blocks set all four settings to true.",
        s3_public_access_block_all_true,
    ),
    ("s3-no-public-acl", "S3 buckets have no public canned ACL or public grant.", s3_no_public_acl),
    (
        "s3-no-public-bucket-policy",
        "S3 bucket policies never Allow the anonymous principal.",
        s3_no_public_bucket_policy,
    ),
    (
        "eks-endpoint-not-world-open",
        "The EKS API endpoint is private or limited to specific CIDRs, never 0.0.0.0/0.",
        eks_endpoint_not_world_open,
    ),
    ("kms-key-rotation-enabled", "Symmetric KMS keys have automatic rotation on.", kms_key_rotation_enabled),
    (
        "iam-no-wildcard-s3-actions",
        "IAM policies allow enumerated actions: no *, s3:* or NotAction.",
        iam_no_wildcard_s3_actions,
    ),
    (
        "no-static-aws-keys",
        "No static AWS keys: no IAM access keys, none in provider config, Secrets or container env.",
        no_static_aws_keys,
    ),
    (
        "gpu-pods-tolerate-gpu-taint",
        "Pods requesting nvidia.com/gpu tolerate the GPU node taint of the GPU contract.",
        gpu_pods_tolerate_gpu_taint,
    ),
    ("gpu-requested-in-limits", "GPUs are requested through resources.limits.", gpu_requested_in_limits),
    (
        "images-pinned",
        "Images have a version tag (never latest); outside dev they are pinned by digest.",
        images_pinned,
    ),
    ("helm-chart-version-pinned", "Helm releases pin an exact chart version.", helm_chart_version_pinned),
)

RESOURCE_POLICIES: list[ResourceValidationPolicy] = [
    ResourceValidationPolicy(
        name=name, description=description, validate=fn, enforcement_level=EnforcementLevel.MANDATORY
    )
    for name, description, fn in _RESOURCE_POLICIES
]

STACK_POLICIES: list[StackValidationPolicy] = [
    StackValidationPolicy(
        name="s3-buckets-encrypted-and-private",
        description="Every S3 bucket has an SSE-KMS encryption configuration and a complete public access block.",
        validate=s3_buckets_encrypted_and_private,
        enforcement_level=EnforcementLevel.MANDATORY,
    ),
]

POLICIES: list[ResourceValidationPolicy | StackValidationPolicy] = [*RESOURCE_POLICIES, *STACK_POLICIES]
POLICY_BY_NAME = {p.name: p for p in POLICIES}
