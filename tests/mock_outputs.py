"""What the recording mocks return for each resource type and invoke the program uses.

Values are shaped like the real provider's (ARNs, IDs, endpoints) so that policies and
manifests built from them look like the real thing. A resource type missing here still
runs, but any output the program reads from it fails the run (see pulumi_kit).
"""

from __future__ import annotations

from typing import Any

# Per-area tables (one file each so they can grow independently).
import tests.mock_outputs_aws
import tests.mock_outputs_kubernetes  # noqa: F401
from tests.pulumi_kit import ACCOUNT, mock_invoke, mock_outputs


@mock_outputs("random:index/randomPassword:RandomPassword")
def _random_password(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"result": f"mock-{name}-" + "x" * int(inputs.get("length", 32)), "bcryptHash": "$2a$10$mock"}


@mock_invoke("aws:index/getCallerIdentity:getCallerIdentity")
def _caller(args: dict[str, Any]) -> dict[str, Any]:
    return {"accountId": ACCOUNT, "arn": f"arn:aws:iam::{ACCOUNT}:user/mock", "userId": "MOCK", "id": ACCOUNT}


@mock_outputs("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
def _bucket(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    bucket = inputs.get("bucket") or f"{name}-mock"
    return {
        "id": bucket,
        "bucket": bucket,
        "arn": f"arn:aws:s3:::{bucket}",
        "bucketDomainName": f"{bucket}.s3.amazonaws.com",
    }
