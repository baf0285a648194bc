"""Model repository: encryption, public-access block, ownership, TLS-only policy, lifecycle."""

from __future__ import annotations

import pytest

from components.iam.promotion import PROMOTION_SOURCE_READ_PREFIXES
from components.model_repository import (
    ABORT_INCOMPLETE_MULTIPART_DAYS,
    ModelRepositoryArgs,
    _build_bucket_policy,
    bucket_name,
    repository_uri,
)
from tests.components._helpers import as_list, assert_children_prefixed, policy, registered_outputs, statements
from tests.pulumi_kit import ACCOUNT, Run, run_program

REPO = "triton-platform:storage:ModelRepository"
NONCURRENT_DAYS = {"dev": 7, "staging": 30, "prod": 90}
PROMOTER = "arn:aws:iam::444455556666:role/triton-platform-prod-promoter"
PROMOTER_ACCOUNT_ROOT = "arn:aws:iam::444455556666:root"


def _key(run: Run):
    return run.one("aws:kms/key:Key", "model-repository-key")


def _bucket(run: Run):
    return run.one("aws:s3/bucket:Bucket", "model-repository-bucket")


def test_bucket_name_and_outputs(any_stack: Run) -> None:
    name = f"triton-platform-{any_stack.stack}-models-{ACCOUNT}"
    assert _bucket(any_stack).inputs["bucket"] == name
    assert any_stack.exports["modelRepositoryBucket"] == name
    assert any_stack.exports["modelRepositoryUri"] == f"s3://{name}/repository"
    assert any_stack.exports["modelRepositoryKmsKeyArn"] == _key(any_stack).state["arn"]
    outputs = registered_outputs(any_stack, any_stack.one(REPO, "model-repository"))
    assert outputs["bucketArn"] == f"arn:aws:s3:::{name}"


def test_force_destroy_only_in_dev(any_stack: Run) -> None:
    assert _bucket(any_stack).inputs["forceDestroy"] is (any_stack.stack == "dev")


def test_sse_kms_with_bucket_key_and_rotating_cmk(any_stack: Run) -> None:
    key = _key(any_stack)
    assert key.inputs["enableKeyRotation"] is True
    sse = any_stack.one("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    [rule] = sse.inputs["rules"]
    assert rule["bucketKeyEnabled"] is True
    assert rule["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "aws:kms", "kmsMasterKeyId": key.state["arn"]}


def test_versioning_public_access_block_and_ownership(any_stack: Run) -> None:
    v = any_stack.one("aws:s3/bucketVersioning:BucketVersioning")
    assert v.inputs["versioningConfiguration"] == {"status": "Enabled"}
    pab = any_stack.one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert all(
        pab.inputs[k] is True
        for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    own = any_stack.one("aws:s3/bucketOwnershipControls:BucketOwnershipControls")
    assert own.inputs["rule"] == {"objectOwnership": "BucketOwnerEnforced"}
    for r in (v, pab, own):
        assert r.inputs["bucket"] == _bucket(any_stack).state["id"]


def test_bucket_policy_denies_plaintext_and_foreign_encryption(any_stack: Run) -> None:
    arn = f"arn:aws:s3:::triton-platform-{any_stack.stack}-models-{ACCOUNT}"
    doc = policy(any_stack.one("aws:s3/bucketPolicy:BucketPolicy"))
    s = statements(doc)
    tls = s["DenyInsecureTransport"]
    assert (tls["Effect"], tls["Principal"], tls["Action"]) == ("Deny", "*", "s3:*")
    assert tls["Resource"] == [arn, f"{arn}/*"]
    assert tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert s["DenyOutdatedTls"]["Condition"] == {"NumericLessThan": {"s3:TlsVersion": "1.2"}}
    header = s["DenyNonKmsEncryptionHeader"]
    assert (header["Effect"], header["Action"]) == ("Deny", "s3:PutObject")
    # Deny only an explicit non-KMS header: a PutObject without one gets default encryption.
    assert header["Condition"] == {
        "StringNotEquals": {"s3:x-amz-server-side-encryption": "aws:kms"},
        "Null": {"s3:x-amz-server-side-encryption": "false"},
    }
    other_key = s["DenyOtherKmsKeys"]["Condition"]
    assert (
        other_key["StringNotEquals"]["s3:x-amz-server-side-encryption-aws-kms-key-id"] == _key(any_stack).state["arn"]
    )
    assert other_key["Null"] == {"s3:x-amz-server-side-encryption-aws-kms-key-id": "false"}
    allows = [st for st in doc["Statement"] if st["Effect"] == "Allow"]
    if any_stack.stack == "staging":
        assert {st["Sid"] for st in allows} == {"CrossAccountPromotionList", "CrossAccountPromotionRead"}
        for st in allows:
            # The prod account's root, narrowed to the promoter by a condition: AWS refuses a policy
            # naming a role that does not exist yet, and prod (the promoter) is deployed after staging.
            assert st["Principal"] == {"AWS": [PROMOTER_ACCOUNT_ROOT]}
            assert st["Condition"]["ArnEquals"] == {"aws:PrincipalArn": [PROMOTER]}
            assert "s3:PutObject" not in as_list(st["Action"])
            assert "s3:*" not in as_list(st["Action"])
        assert s["CrossAccountPromotionRead"]["Resource"] == [f"{arn}/{p}*" for p in PROMOTION_SOURCE_READ_PREFIXES]
    else:
        assert allows == []


def test_key_policy_cross_account_read_only_in_staging(any_stack: Run) -> None:
    doc = policy(_key(any_stack))
    s = statements(doc)
    assert s["EnableIamPolicies"]["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}
    if any_stack.stack == "staging":
        grant = s["CrossAccountPromotionRead"]
        assert grant["Principal"] == {"AWS": [PROMOTER_ACCOUNT_ROOT]}
        assert grant["Condition"]["ArnEquals"] == {"aws:PrincipalArn": [PROMOTER]}
        assert grant["Action"] == ["kms:Decrypt", "kms:DescribeKey"]
        assert grant["Condition"]["StringEquals"] == {"kms:ViaService": "s3.us-east-1.amazonaws.com"}
    else:
        assert set(s) == {"EnableIamPolicies"}


def test_lifecycle_rules(any_stack: Run) -> None:
    lc = any_stack.one("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
    rules = {r["id"]: r for r in lc.inputs["rules"]}
    assert all(r["status"] == "Enabled" for r in rules.values())
    main = rules["expire-noncurrent-versions"]
    assert main["filter"] == {"prefix": ""}
    assert main["noncurrentVersionExpiration"] == {"noncurrentDays": NONCURRENT_DAYS[any_stack.stack]}
    assert main["abortIncompleteMultipartUpload"] == {"daysAfterInitiation": ABORT_INCOMPLETE_MULTIPART_DAYS}
    assert rules["expire-noncurrent-status"]["filter"] == {"prefix": "status/"}
    assert rules["expire-noncurrent-status"]["noncurrentVersionExpiration"] == {"noncurrentDays": 1}
    assert rules["remove-expired-delete-markers"]["expiration"] == {"expiredObjectDeleteMarker": True}


def test_component_shape(any_stack: Run) -> None:
    comp = any_stack.one(REPO, "model-repository")
    children = assert_children_prefixed(any_stack, comp, min_children=9)
    assert all(c.parent == comp.urn for c in children)


def test_force_destroy_refused_outside_dev_by_config() -> None:
    from components.stack_config.errors import ConfigError

    with pytest.raises(ConfigError, match=r"modelRepositoryForceDestroy: .* is not allowed in prod"):
        run_program("prod", overrides={"triton-platform:modelRepositoryForceDestroy": True})


def test_helpers() -> None:
    assert bucket_name("prod", "444455556666") == "triton-platform-prod-models-444455556666"
    assert repository_uri("b") == "s3://b/repository"
    doc = _build_bucket_policy("arn:aws:s3:::b", "arn:aws:kms:us-east-1:1:key/k", [])
    assert [st["Effect"] for st in doc["Statement"]] == ["Deny"] * 4


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"environment": "qa"}, r"ModelRepositoryArgs.environment: 'qa' is not allowed"),
        ({"region": "us_east_1"}, r"ModelRepositoryArgs.region: 'us_east_1' is not an AWS region"),
        ({"noncurrent_version_days": 0}, r"ModelRepositoryArgs.noncurrent_version_days: 0 is out of range"),
        ({"force_destroy": True}, r"ModelRepositoryArgs.force_destroy: True is not allowed in staging"),
        (
            {"read_principal_arns": ["arn:aws:iam::1:role/x"]},
            r"ModelRepositoryArgs.read_principal_arns: .* is not an IAM role ARN",
        ),
        (
            {"environment": "prod", "read_principal_arns": [PROMOTER]},
            r"ModelRepositoryArgs.read_principal_arns: .* is not allowed in prod",
        ),
    ],
)
def test_args_validation(changes: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ModelRepositoryArgs(**{"environment": "staging", "region": "us-east-1", **changes})
