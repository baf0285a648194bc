"""Every policy of the pack, called the way the Pulumi engine calls it: `policy.validate(args,
report)` with props wrapped in pulumi_policy's unknown-checking proxy (Mapping/Sequence, not
dict/list). Each policy has a passing case built like the resources the components create and
a failing case asserting the exact one-line violation."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

from components.gpu.gpu_contract import GPU_RESOURCE, GPU_TAINT, gpu_tolerations
from policy import policies
from policy.policies import POLICIES, POLICY_BY_NAME

PROJECT = "triton-platform"
DIGEST = "sha256:" + "ab" * 32
TRITON_IMAGE = f"nvcr.io/nvidia/tritonserver:25.10-py3@{DIGEST}"
AGENT_IMAGE = f"111122223333.dkr.ecr.us-east-1.amazonaws.com/triton-platform/model-sync-agent:0.1.0@{DIGEST}"


def urn(type_: str, name: str, stack: str = "prod") -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{type_}::{name}"


def _opts() -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=False,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
    )


def resource_args(type_: str, props: Mapping[str, Any], name: str = "r", stack: str = "prod") -> ResourceValidationArgs:
    return ResourceValidationArgs(
        type_, unknown_checking_proxy(dict(props)), urn(type_, name, stack), name, _opts(), None
    )


def violations(policy_name: str, args: ResourceValidationArgs | StackValidationArgs) -> list[str]:
    found: list[str] = []
    POLICY_BY_NAME[policy_name].validate(args, lambda message, _urn=None: found.append(message))  # type: ignore[arg-type]
    return found


def all_resource_violations(args: ResourceValidationArgs) -> dict[str, list[str]]:
    out = {}
    for p in policies.RESOURCE_POLICIES:
        found = violations(p.name, args)
        if found:
            out[p.name] = found
    return out


# --------------------------------------------------------------------------------------
# The pack itself.
# --------------------------------------------------------------------------------------


def test_pack_has_every_guardrail_mandatory() -> None:
    assert sorted(POLICY_BY_NAME) == sorted(
        [
            "s3-encryption-uses-kms",
            "s3-public-access-block-complete",
            "s3-no-public-acl",
            "s3-no-public-bucket-policy",
            "eks-endpoint-not-world-open",
            "kms-key-rotation-enabled",
            "iam-no-wildcard-s3-actions",
            "no-static-aws-keys",
            "gpu-pods-tolerate-gpu-taint",
            "gpu-requested-in-limits",
            "images-pinned",
            "helm-chart-version-pinned",
            "s3-buckets-encrypted-and-private",
        ]
    )
    assert len(POLICIES) == len(POLICY_BY_NAME)
    assert {p.enforcement_level for p in POLICIES} == {EnforcementLevel.MANDATORY}
    assert isinstance(POLICY_BY_NAME["s3-buckets-encrypted-and-private"], StackValidationPolicy)
    assert all(isinstance(p, ResourceValidationPolicy) for p in policies.RESOURCE_POLICIES)


@pytest.mark.parametrize(
    ("urn_", "stack"),
    [
        ("urn:pulumi:prod::triton-platform::aws:s3/bucket:Bucket::b", "prod"),
        ("urn:pulumi:dev::triton-platform::kubernetes:apps/v1:Deployment::d", "dev"),
        ("not-a-urn", ""),
    ],
)
def test_stack_of_reads_the_stack_from_the_urn(urn_: str, stack: str) -> None:
    assert policies.stack_of(urn_) == stack


# --------------------------------------------------------------------------------------
# S3.
# --------------------------------------------------------------------------------------

SSE = policies.S3_SSE_TYPES[0]
KMS_RULES = [
    {
        "applyServerSideEncryptionByDefault": {
            "sseAlgorithm": "aws:kms",
            "kmsMasterKeyId": "arn:aws:kms:us-east-1:444455556666:key/k",
        },
        "bucketKeyEnabled": True,
    }
]
PAB_ALL = {
    "bucket": "triton-models-prod",
    "blockPublicAcls": True,
    "blockPublicPolicy": True,
    "ignorePublicAcls": True,
    "restrictPublicBuckets": True,
}


def test_sse_kms_passes_and_aes256_fails() -> None:
    assert (
        violations("s3-encryption-uses-kms", resource_args(SSE, {"bucket": "b", "rules": KMS_RULES}, "models-sse"))
        == []
    )
    aes = [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]
    assert violations("s3-encryption-uses-kms", resource_args(SSE, {"bucket": "b", "rules": aes}, "models-sse")) == [
        "BucketServerSideEncryptionConfiguration 'models-sse': server-side encryption AES256 is not SSE-KMS; "
        "allowed: sseAlgorithm aws:kms or aws:kms:dsse with the environment's KMS key"
    ]


def test_sse_without_rules_fails() -> None:
    assert violations("s3-encryption-uses-kms", resource_args(SSE, {"bucket": "b", "rules": []}, "models-sse")) == [
        "BucketServerSideEncryptionConfiguration 'models-sse': server-side encryption <no rule> is not SSE-KMS; "
        "allowed: sseAlgorithm aws:kms or aws:kms:dsse with the environment's KMS key"
    ]


def test_public_access_block_all_true_passes_and_partial_fails() -> None:
    assert (
        violations(
            "s3-public-access-block-complete", resource_args(policies.S3_PUBLIC_ACCESS_BLOCK, PAB_ALL, "models-pab")
        )
        == []
    )
    partial = {**PAB_ALL, "blockPublicPolicy": False}
    del partial["restrictPublicBuckets"]
    assert violations(
        "s3-public-access-block-complete", resource_args(policies.S3_PUBLIC_ACCESS_BLOCK, partial, "models-pab")
    ) == [
        "BucketPublicAccessBlock 'models-pab': blockPublicPolicy, restrictPublicBuckets not true; "
        "allowed: all of blockPublicAcls, blockPublicPolicy, ignorePublicAcls, restrictPublicBuckets true"
    ]


def test_private_acl_passes_public_acl_and_allusers_grant_fail() -> None:
    acl = policies.S3_ACL_TYPES[0]
    assert violations("s3-no-public-acl", resource_args(acl, {"bucket": "b", "acl": "private"}, "models-acl")) == []
    assert violations("s3-no-public-acl", resource_args(acl, {"bucket": "b", "acl": "public-read"}, "models-acl")) == [
        (
            "BucketAcl 'models-acl': acl public-read makes the bucket public; allowed: private (or no ACL with "
            "BucketOwnerEnforced)"
        )
    ]
    grants = {
        "bucket": "b",
        "accessControlPolicy": {
            "owner": {"id": "o"},
            "grants": [
                {
                    "grantee": {"type": "Group", "uri": "http://acs.amazonaws.com/groups/global/AllUsers"},
                    "permission": "READ",
                }
            ],
        },
    }
    assert violations("s3-no-public-acl", resource_args(acl, grants, "models-acl")) == [
        "BucketAcl 'models-acl': grant to http://acs.amazonaws.com/groups/global/AllUsers makes the bucket public; "
        "allowed: grants to specific canonical users only"
    ]


TLS_ONLY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": ["arn:aws:s3:::triton-models-prod", "arn:aws:s3:::triton-models-prod/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    ],
}


def test_tls_only_deny_policy_passes_public_allow_fails() -> None:
    bp = policies.S3_BUCKET_POLICY
    assert (
        violations(
            "s3-no-public-bucket-policy",
            resource_args(bp, {"bucket": "b", "policy": json.dumps(TLS_ONLY)}, "models-policy"),
        )
        == []
    )
    public = {
        "Statement": [
            *TLS_ONLY["Statement"],
            {
                "Sid": "PublicRead",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": "s3:GetObject",
                "Resource": "arn:aws:s3:::triton-models-prod/*",
            },
        ]
    }
    assert violations(
        "s3-no-public-bucket-policy", resource_args(bp, {"bucket": "b", "policy": json.dumps(public)}, "models-policy")
    ) == [
        (
            "BucketPolicy 'models-policy': statement PublicRead allows Principal * (public bucket); allowed: Allow "
            "to named AWS principals, Deny to *"
        )
    ]


def _resource(
    type_: str, name: str, props: Mapping[str, Any], deps: dict[str, list[PolicyResource]] | None = None
) -> PolicyResource:
    return PolicyResource(type_, props, urn(type_, name), name, _opts(), None, None, [], deps or {})


def _bucket(name: str = "models-bucket", bucket: str = "triton-models-prod") -> PolicyResource:
    return _resource(
        policies.S3_BUCKET_TYPES[0], name, {"bucket": bucket, "id": bucket, "versioning": {"enabled": True}}
    )


def test_bucket_with_kms_and_block_passes_linked_by_dependency_or_name() -> None:
    by_dependency = _bucket()
    resources = [
        by_dependency,
        _resource(SSE, "models-sse", {"bucket": "triton-models-prod", "rules": KMS_RULES}, {"bucket": [by_dependency]}),
        _resource(policies.S3_PUBLIC_ACCESS_BLOCK, "models-pab", PAB_ALL, {"bucket": [by_dependency]}),
    ]
    assert violations("s3-buckets-encrypted-and-private", StackValidationArgs(resources)) == []
    by_name = _bucket("logs-bucket", "triton-logs-prod")
    resources += [
        by_name,
        _resource(SSE, "logs-sse", {"bucket": "triton-logs-prod", "rules": KMS_RULES}),
        _resource(policies.S3_PUBLIC_ACCESS_BLOCK, "logs-pab", {**PAB_ALL, "bucket": "triton-logs-prod"}),
    ]
    assert violations("s3-buckets-encrypted-and-private", StackValidationArgs(resources)) == []


def test_bucket_without_companions_fails_twice() -> None:
    bucket = _bucket()
    # An AES256 configuration and a partial block do not count for the bucket.
    resources = [
        bucket,
        _resource(
            SSE,
            "models-sse",
            {
                "bucket": "triton-models-prod",
                "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}],
            },
            {"bucket": [bucket]},
        ),
        _resource(
            policies.S3_PUBLIC_ACCESS_BLOCK, "models-pab", {**PAB_ALL, "ignorePublicAcls": False}, {"bucket": [bucket]}
        ),
    ]
    assert violations("s3-buckets-encrypted-and-private", StackValidationArgs(resources)) == [
        "Bucket 'models-bucket': no SSE-KMS encryption configuration applies to it; "
        "allowed: a BucketServerSideEncryptionConfiguration with sseAlgorithm aws:kms for the bucket",
        "Bucket 'models-bucket': no public access block with all four settings true applies to it; "
        "allowed: a BucketPublicAccessBlock with blockPublicAcls, blockPublicPolicy, ignorePublicAcls, "
        "restrictPublicBuckets true",
    ]


# --------------------------------------------------------------------------------------
# EKS, KMS, IAM, static keys.
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "vpc",
    [
        {"endpointPrivateAccess": True, "endpointPublicAccess": False, "subnetIds": ["subnet-1", "subnet-2"]},
        {"endpointPrivateAccess": True, "endpointPublicAccess": True, "publicAccessCidrs": ["198.51.100.0/24"]},
    ],
)
def test_private_or_allowlisted_endpoint_passes(vpc: dict[str, Any]) -> None:
    assert (
        violations(
            "eks-endpoint-not-world-open", resource_args(policies.EKS_CLUSTER, {"vpcConfig": vpc}, "eks-cluster")
        )
        == []
    )


@pytest.mark.parametrize(
    ("vpc", "shown"),
    [
        (
            {"endpointPublicAccess": True, "publicAccessCidrs": ["198.51.100.0/24", "0.0.0.0/0"]},
            "198.51.100.0/24, 0.0.0.0/0 (their union 0.0.0.0/0: 100% of IPv4)",
        ),
        (
            {"endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/1", "128.0.0.0/1"]},
            "0.0.0.0/1, 128.0.0.0/1 (their union 0.0.0.0/0: 100% of IPv4)",
        ),
        ({"subnetIds": ["subnet-1"]}, "0.0.0.0/0 (AWS default when publicAccessCidrs is empty)"),
    ],
)
def test_world_open_endpoint_fails(vpc: dict[str, Any], shown: str) -> None:
    assert violations(
        "eks-endpoint-not-world-open", resource_args(policies.EKS_CLUSTER, {"vpcConfig": vpc}, "eks-cluster")
    ) == [
        (
            f"Cluster 'eks-cluster': public API endpoint open to {shown}; allowed: endpointPublicAccess false, or "
            "publicAccessCidrs listing specific CIDRs whose union is at most a /8"
        )
    ]


def test_kms_rotation() -> None:
    assert (
        violations(
            "kms-key-rotation-enabled",
            resource_args(policies.KMS_KEY, {"enableKeyRotation": True, "deletionWindowInDays": 30}, "models-key"),
        )
        == []
    )
    assert (
        violations(
            "kms-key-rotation-enabled",
            resource_args(
                policies.KMS_KEY, {"customerMasterKeySpec": "RSA_2048", "keyUsage": "SIGN_VERIFY"}, "signing-key"
            ),
        )
        == []
    )
    assert violations(
        "kms-key-rotation-enabled", resource_args(policies.KMS_KEY, {"deletionWindowInDays": 30}, "models-key")
    ) == ["Key 'models-key': enableKeyRotation is not true; allowed: enableKeyRotation true for symmetric keys"]


SERVING_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "ReadRepository",
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": ["arn:aws:s3:::triton-models-prod/repository/*", "arn:aws:s3:::triton-models-prod/manifests/*"],
        },
        {"Sid": "List", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::triton-models-prod"},
        {
            "Sid": "Decrypt",
            "Effect": "Allow",
            "Action": ["kms:Decrypt"],
            "Resource": "arn:aws:kms:us-east-1:444455556666:key/k",
        },
    ],
}


def test_iam_enumerated_actions_pass_wildcards_fail() -> None:
    rp = "aws:iam/rolePolicy:RolePolicy"
    assert (
        violations(
            "iam-no-wildcard-s3-actions",
            resource_args(rp, {"role": "serving", "policy": json.dumps(SERVING_POLICY)}, "serving-policy"),
        )
        == []
    )
    wild = {
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:*", "s3:Get*"], "Resource": "*"},
            {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"},
        ]
    }
    assert violations(
        "iam-no-wildcard-s3-actions",
        resource_args(rp, {"role": "serving", "policy": json.dumps(wild)}, "serving-policy"),
    ) == [
        "RolePolicy 'serving-policy': policy allows wildcard actions NotAction, s3:*, s3:Get*; "
        "allowed: enumerated actions (s3:GetObject, s3:PutObject, ...) on the layout prefixes"
    ]
    role = {
        "assumeRolePolicy": "{}",
        "inlinePolicies": [
            {"name": "admin", "policy": json.dumps({"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*"}})}
        ],
    }
    assert violations("iam-no-wildcard-s3-actions", resource_args(policies.IAM_ROLE, role, "ci-role")) == [
        (
            "Role 'ci-role': inline policy admin allows wildcard actions *; allowed: enumerated actions "
            "(s3:GetObject, s3:PutObject, ...) on the layout prefixes"
        )
    ]


def test_iam_policy_unknown_at_preview_is_not_silently_passed() -> None:
    # The engine turns UnknownValueError into an advisory "can't run during preview"; it must not pass quietly.
    args = resource_args("aws:iam/policy:Policy", {"policy": UNKNOWN_STRING_VALUE}, "publisher-policy")
    with pytest.raises(UnknownValueError) as raised:
        violations("iam-no-wildcard-s3-actions", args)
    assert raised.value.message == "string value at .policy can't be known during preview"


def _deployment(
    containers: list[dict[str, Any]], tolerations: list[dict[str, Any]] | None = None, kind: str = "Deployment"
) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"serviceAccountName": "triton-default", "containers": containers}
    if tolerations is not None:
        pod_spec["tolerations"] = tolerations
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "triton-default", "namespace": "triton"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "triton"}},
            "template": {"metadata": {"labels": {"app": "triton"}}, "spec": pod_spec},
        },
    }


DEPLOYMENT = "kubernetes:apps/v1:Deployment"
TRITON = {
    "name": "triton",
    "image": TRITON_IMAGE,
    "resources": {"limits": {GPU_RESOURCE: 1.0, "memory": "24Gi"}, "requests": {"cpu": "6", "memory": "24Gi"}},
}
AGENT = {"name": "agent", "image": AGENT_IMAGE, "env": [{"name": "AWS_REGION", "value": "us-east-1"}]}


def test_static_keys() -> None:
    ok = resource_args(DEPLOYMENT, _deployment([TRITON, AGENT], gpu_tolerations()), "triton-default")
    assert violations("no-static-aws-keys", ok) == []
    leaked = {**AGENT, "env": [{"name": "AWS_SECRET_ACCESS_KEY", "value": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}]}
    assert violations(
        "no-static-aws-keys",
        resource_args(DEPLOYMENT, _deployment([TRITON, leaked], gpu_tolerations()), "triton-default"),
    ) == [
        (
            "Deployment 'triton-default': container 'agent' sets AWS_SECRET_ACCESS_KEY as a literal env value; "
            "allowed: EKS Pod Identity (no AWS key env vars)"
        )
    ]
    assert violations("no-static-aws-keys", resource_args(policies.IAM_ACCESS_KEY, {"user": "ci"}, "ci-key")) == [
        (
            "AccessKey 'ci-key': static IAM access keys are forbidden; allowed: GitHub OIDC roles for CI, EKS Pod "
            "Identity for pods"
        )
    ]
    assert violations(
        "no-static-aws-keys",
        resource_args(
            policies.AWS_PROVIDER, {"region": "us-east-1", "accessKey": "AKIAEXAMPLE", "secretKey": "x"}, "aws"
        ),
    ) == [
        (
            "aws 'aws': provider sets accessKey, secretKey; allowed: ambient credentials from an assumed role "
            "(assumeRoles / OIDC)"
        )
    ]
    assert violations("no-static-aws-keys", resource_args(policies.AWS_PROVIDER, {"region": "us-east-1"}, "aws")) == []
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s3"},
        "stringData": {"aws_secret_access_key": "x", "endpoint": "y"},
    }
    assert violations("no-static-aws-keys", resource_args(policies.K8S_SECRET, secret, "s3-creds")) == [
        (
            "Secret 's3-creds': holds AWS secret access key entries aws_secret_access_key; allowed: EKS Pod "
            "Identity, no stored keys"
        )
    ]


# --------------------------------------------------------------------------------------
# GPU scheduling contract, images, charts.
# --------------------------------------------------------------------------------------


def test_gpu_pod_with_contract_toleration_passes_every_policy() -> None:
    args = resource_args(DEPLOYMENT, _deployment([TRITON, AGENT], gpu_tolerations()), "triton-default")
    assert all_resource_violations(args) == {}


def test_gpu_pod_without_toleration_fails_with_the_contract_taint() -> None:
    other = [
        {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"},
        {"key": GPU_TAINT.key, "operator": "Equal", "value": GPU_TAINT.value, "effect": "NoExecute"},
    ]  # wrong effect
    args = resource_args(DEPLOYMENT, _deployment([TRITON], other), "triton-default")
    assert violations("gpu-pods-tolerate-gpu-taint", args) == [
        f"Deployment 'triton-default': requests {GPU_RESOURCE} but does not tolerate the GPU taint "
        f"{GPU_TAINT.key}={GPU_TAINT.value}:{GPU_TAINT.effect}; allowed: the tolerations from "
        "components.gpu.gpu_contract.gpu_tolerations()"
    ]
    assert (
        "nvidia.com/gpu=true:NoSchedule" in violations("gpu-pods-tolerate-gpu-taint", args)[0]
    )  # the contract, as documented


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": GPU_TAINT.key, "operator": "Exists"},
        {"key": GPU_TAINT.key, "operator": "Exists", "effect": GPU_TAINT.effect},
    ],
)
def test_exists_toleration_is_accepted(toleration: dict[str, str]) -> None:
    assert (
        violations(
            "gpu-pods-tolerate-gpu-taint",
            resource_args(DEPLOYMENT, _deployment([TRITON], [toleration]), "triton-default"),
        )
        == []
    )


def test_cpu_pod_needs_no_gpu_toleration() -> None:
    assert violations("gpu-pods-tolerate-gpu-taint", resource_args(DEPLOYMENT, _deployment([AGENT]), "ingress")) == []


def test_gpu_in_requests_only_or_unequal_fails() -> None:
    requests_only = {**TRITON, "resources": {"requests": {GPU_RESOURCE: "1"}}}
    assert violations(
        "gpu-requested-in-limits",
        resource_args(DEPLOYMENT, _deployment([requests_only], gpu_tolerations()), "triton-default"),
    ) == [
        (
            f"Deployment 'triton-default': container 'triton' requests {GPU_RESOURCE} without a limit; allowed: "
            f"{GPU_RESOURCE} in resources.limits (ref: Kubernetes extended resources)"
        )
    ]
    unequal = {**TRITON, "resources": {"requests": {GPU_RESOURCE: 1}, "limits": {GPU_RESOURCE: 2}}}
    assert violations(
        "gpu-requested-in-limits",
        resource_args(DEPLOYMENT, _deployment([unequal], gpu_tolerations()), "triton-default"),
    ) == [
        (
            f"Deployment 'triton-default': container 'triton' {GPU_RESOURCE} request 1 differs from limit 2; "
            "allowed: request equal to limit, or limit only"
        )
    ]


def test_gpu_rules_apply_to_pods_and_jobs_too() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "smoke"}, "spec": {"containers": [TRITON]}}
    assert violations("gpu-pods-tolerate-gpu-taint", resource_args("kubernetes:core/v1:Pod", pod, "smoke")) != []
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "bench"},
        "spec": {
            "schedule": "0 * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [TRITON], "tolerations": gpu_tolerations()}}}},
        },
    }
    assert violations("gpu-pods-tolerate-gpu-taint", resource_args("kubernetes:batch/v1:CronJob", cron, "bench")) == []


def test_images_pinned_by_digest_outside_dev() -> None:
    tagged = {**AGENT, "image": "111122223333.dkr.ecr.us-east-1.amazonaws.com/triton-platform/model-sync-agent:0.1.0"}
    args_prod = resource_args(
        DEPLOYMENT, _deployment([TRITON, tagged], gpu_tolerations()), "triton-default", stack="prod"
    )
    assert violations("images-pinned", args_prod) == [
        "Deployment 'triton-default': container 'agent' image "
        "111122223333.dkr.ecr.us-east-1.amazonaws.com/triton-platform/model-sync-agent:0.1.0 "
        "is not pinned by digest (stack prod); allowed: registry/repo:tag@sha256:<digest>"
    ]
    assert (
        violations(
            "images-pinned",
            resource_args(DEPLOYMENT, _deployment([TRITON, tagged], gpu_tolerations()), "triton-default", stack="dev"),
        )
        == []
    )


@pytest.mark.parametrize(
    ("image", "problem"),
    [
        ("nvcr.io/nvidia/tritonserver:latest", "uses the mutable latest tag"),
        ("nvcr.io/nvidia/tritonserver", "has no tag"),
        ("localhost:5000/triton", "has no tag"),
    ],
)
def test_latest_or_untagged_images_fail_even_in_dev(image: str, problem: str) -> None:
    bad = {**TRITON, "image": image}
    assert violations(
        "images-pinned", resource_args(DEPLOYMENT, _deployment([bad], gpu_tolerations()), "triton-default", stack="dev")
    ) == [
        (
            f"Deployment 'triton-default': container 'triton' image {image} {problem} (stack dev); allowed: "
            "registry/repo:tag (digest recommended), never latest"
        )
    ]


def test_init_containers_are_checked() -> None:
    spec = _deployment([TRITON], gpu_tolerations())
    spec["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "agent-init", "image": "public.ecr.aws/x/agent:latest"}
    ]
    assert violations("images-pinned", resource_args(DEPLOYMENT, spec, "triton-default")) == [
        "Deployment 'triton-default': container 'agent-init' image public.ecr.aws/x/agent:latest uses the mutable "
        "latest tag (stack prod); "
        "allowed: registry/repo:tag@sha256:<digest>"
    ]


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("0.17.4", True),
        ("v4.3.0", True),
        ("1.2.3-rc.1", True),
        ("", False),
        ("^0.17", False),
        ("0.17.x", False),
        (">=1.0.0", False),
    ],
)
def test_helm_chart_version_pinned(version: str, ok: bool) -> None:
    props = {
        "chart": "nvidia-device-plugin",
        "repositoryOpts": {"repo": "https://nvidia.github.io/k8s-device-plugin"},
        "namespace": "gpu-operators",
    }
    if version:
        props["version"] = version
    found = violations(
        "helm-chart-version-pinned", resource_args(policies.HELM_CHART_TYPES[0], props, "nvidia-device-plugin")
    )
    assert found == (
        []
        if ok
        else [
            (
                f"Release 'nvidia-device-plugin': chart version {version or '<unset>'} is not an exact version; "
                "allowed: an exact semver pinned in components/upstream/versions.py"
            )
        ]
    )
