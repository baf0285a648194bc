"""The environment's S3 model repository.

One bucket per environment, named `triton-platform-<environment>-models-<account id>`
(deterministic, so the prod stack can name the staging bucket in its config):
- versioning on; SSE-KMS by default with a customer-managed key (rotation on) and the
  S3 Bucket Key (one KMS call per bucket-key period instead of one per object);
- all four public-access blocks, BucketOwnerEnforced (ACLs off);
- a bucket policy that denies: any request without TLS or below TLS 1.2; PutObject with
  an explicit encryption header other than `aws:kms`; PutObject naming a KMS key other
  than this bucket's. A PutObject with *no* encryption header is allowed: default
  encryption applies this bucket's key to it (that is how model_sync uploads), so
  requiring the header would only break clients without adding protection;
  ref: https://docs.aws.amazon.com/AmazonS3/latest/userguide/specifying-kms-encryption.html
- lifecycle: noncurrent versions expire after `noncurrent_version_days` (1 day under
  `status/`, which the agents rewrite every few seconds), expired delete markers are
  removed, incomplete multipart uploads are aborted after 7 days;
- `force_destroy` only when asked (the stack config allows it in dev only).

Cross-account promotion: `read_principal_arns` (the prod promoter role, which lives in
another account) get read access to the prefixes promotion needs, both in the bucket
policy and in the KMS key policy (kms:Decrypt through S3 only). The policies name the
reader's account root and narrow it to the role with `aws:PrincipalArn`, so staging can be
deployed before the prod promoter exists (AWS refuses a policy whose principal is a role that
does not exist). Same-account readers
need nothing here: their IAM policy is enough.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from components.iam.kms_keys import key_with_alias
from components.iam.promotion import PROMOTION_SOURCE_READ_PREFIXES
from components.stack_config.declarations import check_declared
from components.stack_config.vocabulary import ENVIRONMENTS
from model_sync.contract import layout

ABORT_INCOMPLETE_MULTIPART_DAYS = 7
STATUS_NONCURRENT_DAYS = 1
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$")


def bucket_name(environment: str, account_id: str) -> str:
    """The model-repository bucket of `environment` in `account_id`."""
    return f"triton-platform-{environment}-models-{account_id}"


def repository_uri(bucket: str) -> str:
    """The `s3://` URI of the Triton model tree inside the bucket."""
    return f"s3://{bucket}/{layout.REPOSITORY_PREFIX.rstrip('/')}"


@dataclass(frozen=True)
class ModelRepositoryArgs:
    """Inputs of `ModelRepository`.

    environment: dev | staging | prod; names the bucket (required).
    region: AWS region (KMS ViaService condition for cross-account readers; required).
    noncurrent_version_days: days before noncurrent object versions expire, 1 to 3650 (default 30).
    force_destroy: let `pulumi destroy` delete a non-empty bucket (default False; dev only).
    read_principal_arns: IAM role ARNs in other accounts allowed to read the promotion
        prefixes (the prod promoter reading staging). Default none.
    tags: extra tags on every resource (default none).
    """

    environment: str
    region: str
    noncurrent_version_days: int = 30
    force_destroy: bool = False
    read_principal_arns: Sequence[str] = ()
    tags: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.environment not in ENVIRONMENTS:
            raise ValueError(
                f"ModelRepositoryArgs.environment: {self.environment!r} is not allowed; allowed: "
                f"{' | '.join(ENVIRONMENTS)}"
            )
        if not re.fullmatch(r"[a-z]{2}(-gov)?-[a-z]+-[0-9]", self.region):
            raise ValueError(
                f"ModelRepositoryArgs.region: {self.region!r} is not an AWS region; allowed: a region name such as "
                "us-east-1"
            )
        check_declared(
            "ModelRepositoryArgs.noncurrent_version_days",
            "modelRepositoryNoncurrentVersionDays",
            self.noncurrent_version_days,
        )
        if self.force_destroy and self.environment != "dev":
            raise ValueError(
                f"ModelRepositoryArgs.force_destroy: True is not allowed in {self.environment}; allowed: True in dev "
                "only"
            )
        for arn in self.read_principal_arns:
            if not _ROLE_ARN.match(arn):
                raise ValueError(
                    f"ModelRepositoryArgs.read_principal_arns: {arn!r} is not an IAM role ARN; allowed: "
                    "arn:aws:iam::<12-digit account>:role/<name>"
                )
        if self.read_principal_arns and self.environment != "staging":
            raise ValueError(
                f"ModelRepositoryArgs.read_principal_arns: {list(self.read_principal_arns)!r} is not allowed in "
                f"{self.environment}; allowed: staging only (the promotion source)"
            )


def _readers(readers: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Principal, Condition) granting `readers`: their accounts' roots as the principal, narrowed
    to the reader roles by `aws:PrincipalArn`. A policy naming a role ARN itself is refused by AWS
    while the role does not exist, and the prod promoter only exists once prod is deployed, after
    staging; an account root always exists, and a condition names the role without resolving it.
    ref:
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn
    """
    accounts = sorted({arn.split(":")[4] for arn in readers})
    partition = readers[0].split(":")[1]
    return (
        {"AWS": [f"arn:{partition}:iam::{a}:root" for a in accounts]},
        {"ArnEquals": {"aws:PrincipalArn": sorted(readers)}},
    )


def _build_key_policy(account_id: str, region: str, bucket: str, readers: Sequence[str]) -> dict[str, Any]:
    statements: list[dict[str, Any]] = [
        {
            # Account-root statement: lets IAM policies in this account grant use of the key
            # (without it the key is unmanageable). ref:
            # https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html
            "Sid": "EnableIamPolicies",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:aws:iam::{account_id}:root"},
            "Action": "kms:*",
            "Resource": "*",
        }
    ]
    if readers:
        principal, who = _readers(readers)
        statements.append(
            {
                "Sid": "CrossAccountPromotionRead",
                "Effect": "Allow",
                "Principal": principal,
                "Action": ["kms:Decrypt", "kms:DescribeKey"],
                "Resource": "*",
                "Condition": {
                    **who,
                    "StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"},
                    # With the S3 Bucket Key the encryption context is the bucket ARN.
                    # ref:
                    # https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-key.html#bucket-key-encryption-context
                    "StringLike": {"kms:EncryptionContext:aws:s3:arn": f"arn:aws:s3:::{bucket}*"},
                },
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def _build_bucket_policy(bucket_arn: str, key_arn: str, readers: Sequence[str]) -> dict[str, Any]:
    statements = _deny_statements(bucket_arn, key_arn)
    if readers:
        statements += _promotion_statements(bucket_arn, readers)
    return {"Version": "2012-10-17", "Statement": statements}


def _deny_statements(bucket_arn: str, key_arn: str) -> list[dict[str, Any]]:
    """No request without TLS 1.2, no object encrypted other than with this bucket's key."""
    objects = f"{bucket_arn}/*"
    return [
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [bucket_arn, objects],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        },
        # ref:
        # https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html#example-object-tls-version
        {
            "Sid": "DenyOutdatedTls",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [bucket_arn, objects],
            "Condition": {"NumericLessThan": {"s3:TlsVersion": "1.2"}},
        },
        # Only an explicit non-KMS header is refused; no header = default encryption (this key).
        {
            "Sid": "DenyNonKmsEncryptionHeader",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:PutObject",
            "Resource": objects,
            "Condition": {
                "StringNotEquals": {"s3:x-amz-server-side-encryption": "aws:kms"},
                "Null": {"s3:x-amz-server-side-encryption": "false"},
            },
        },
        {
            "Sid": "DenyOtherKmsKeys",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:PutObject",
            "Resource": objects,
            "Condition": {
                "StringNotEquals": {"s3:x-amz-server-side-encryption-aws-kms-key-id": key_arn},
                "Null": {"s3:x-amz-server-side-encryption-aws-kms-key-id": "false"},
            },
        },
    ]


def _promotion_statements(bucket_arn: str, readers: Sequence[str]) -> list[dict[str, Any]]:
    """The cross-account promoters' list and read of the promotion prefixes."""
    principal, who = _readers(readers)
    return [
        {
            "Sid": "CrossAccountPromotionList",
            "Effect": "Allow",
            "Principal": principal,
            "Action": "s3:ListBucket",
            "Resource": bucket_arn,
            "Condition": {**who, "StringLike": {"s3:prefix": [f"{p}*" for p in PROMOTION_SOURCE_READ_PREFIXES]}},
        },
        {
            "Sid": "CrossAccountPromotionRead",
            "Effect": "Allow",
            "Principal": principal,
            "Action": ["s3:GetObject", "s3:GetObjectVersion", "s3:GetObjectTagging"],
            "Resource": [f"{bucket_arn}/{p}*" for p in PROMOTION_SOURCE_READ_PREFIXES],
            "Condition": who,
        },
    ]


def _build_lifecycle_rules(noncurrent_days: int) -> list[aws.s3.BucketLifecycleConfigurationRuleArgs]:
    return [
        aws.s3.BucketLifecycleConfigurationRuleArgs(
            id="expire-noncurrent-versions",
            status="Enabled",
            filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
            noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                noncurrent_days=noncurrent_days
            ),
            abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                days_after_initiation=ABORT_INCOMPLETE_MULTIPART_DAYS
            ),
        ),
        aws.s3.BucketLifecycleConfigurationRuleArgs(
            id="expire-noncurrent-status",
            status="Enabled",
            filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=layout.STATUS_PREFIX),
            noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                noncurrent_days=STATUS_NONCURRENT_DAYS
            ),
        ),
        aws.s3.BucketLifecycleConfigurationRuleArgs(
            id="remove-expired-delete-markers",
            status="Enabled",
            filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
            expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(expired_object_delete_marker=True),
        ),
    ]


class ModelRepository(pulumi.ComponentResource):
    """The S3 bucket, its KMS key and its guard rails (see module docstring)."""

    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    repository_uri: pulumi.Output[str]
    kms_key_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ModelRepositoryArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("triton-platform:storage:ModelRepository", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        account_id = aws.get_caller_identity(opts=pulumi.InvokeOptions(parent=self)).account_id
        name_of_bucket = bucket_name(args.environment, account_id)

        key = key_with_alias(
            f"{name}-key",
            f"triton-platform-{args.environment}-models",
            f"S3 model repository {name_of_bucket}",
            child,
            policy=json.dumps(_build_key_policy(account_id, args.region, name_of_bucket, args.read_principal_arns)),
            tags=tags,
        )

        bucket = aws.s3.Bucket(
            f"{name}-bucket", bucket=name_of_bucket, force_destroy=args.force_destroy, tags=tags, opts=child
        )
        self._guard_rails(name, args, bucket, key)

        self.bucket_name = bucket.bucket
        self.bucket_arn = bucket.arn
        self.repository_uri = bucket.bucket.apply(repository_uri)
        self.kms_key_arn = key.arn
        self.register_outputs(
            {
                "bucketName": self.bucket_name,
                "bucketArn": self.bucket_arn,
                "repositoryUri": self.repository_uri,
                "kmsKeyArn": self.kms_key_arn,
            }
        )

    def _guard_rails(self, name: str, args: ModelRepositoryArgs, bucket: aws.s3.Bucket, key: aws.kms.Key) -> None:
        """The bucket's public-access block, owner-enforced ownership, versioning, SSE-KMS with `key`, its
        policy and lifecycle rules."""
        child = pulumi.ResourceOptions(parent=self)
        pab = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access-block",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=(
                        aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                            sse_algorithm="aws:kms", kms_master_key_id=key.arn
                        )
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        aws.s3.BucketPolicy(
            f"{name}-policy",
            bucket=bucket.id,
            policy=pulumi.Output.all(bucket.arn, key.arn).apply(
                lambda v: json.dumps(_build_bucket_policy(v[0], v[1], args.read_principal_arns))
            ),
            # The public-access block must exist first or S3 briefly evaluates the policy without it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[pab]),
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=bucket.id,
            rules=_build_lifecycle_rules(args.noncurrent_version_days),
            # Noncurrent-version rules need versioning enabled first.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )
