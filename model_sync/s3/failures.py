"""The one classification of S3 failures, used by the CLI, the agent and `prune` alike.

botocore raises two families: `ClientError` (S3 answered: its error code and HTTP status are in
`response`) and `BotoCoreError` (no usable answer: endpoint unreachable, timeouts, missing
credentials). Every S3 failure model_sync meets is sorted into one `Kind`; `translate()` turns it
into a SyncError with the documented exit code and a one-line message, and records the kind on it
(`SyncError.s3_kind`) so callers branch on the kind, never on message text.
"""

from __future__ import annotations

import enum

from model_sync import errors
from model_sync.s3.endpoint import Endpoint


class Kind(enum.Enum):
    DENIED = "denied"  # credentials missing or rejected, access or KMS denied: the role is wrong
    UNAVAILABLE = "unavailable"  # unreachable, timed out, throttled, 5xx after botocore's retries
    NO_BUCKET = "no-bucket"  # the bucket itself does not exist
    NOT_FOUND = "not-found"  # the key does not exist
    PRECONDITION = "precondition"  # a conditional write refused (If-None-Match / If-Match)
    NOT_MODIFIED = "not-modified"  # a conditional GET whose object is unchanged (304)
    DIGEST = "digest"  # S3 computed another checksum than the one sent: the body changed
    CLOCK = "clock"  # RequestTimeTooSkewed
    WRONG_REGION = "wrong-region"  # the bucket lives in another region than the requests went to
    OTHER = "other"


CREDENTIAL_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "AuthorizationHeaderMalformed",
    }
)
DENIED_CODES = CREDENTIAL_CODES | {
    "AccessDenied",
    "Forbidden",
    "403",
    "AllAccessDisabled",
    "KMS.AccessDeniedException",
    "KMS.DisabledException",
}
NOT_FOUND_CODES = frozenset({"NoSuchKey", "NoSuchVersion", "404", "NotFound"})
PRECONDITION_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})
DIGEST_CODES = frozenset({"BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch", "XAmzContentChecksumMismatch"})
WRONG_REGION_CODES = frozenset(
    {"PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException"}
)
# Failures every request of the run would hit alike (SyncError.run_wide): the endpoint, the
# credentials, the clock, the bucket itself. AccessDenied is not one: a policy can deny one prefix.
RUN_WIDE_CODES = CREDENTIAL_CODES | {"RequestTimeTooSkewed", "NoSuchBucket"}


def code(e: BaseException) -> str:
    """S3's error code of a ClientError ("NoSuchKey"), else its HTTP status ("404"), else ""."""
    resp = getattr(e, "response", None)
    if isinstance(resp, dict):
        return str(resp.get("Error", {}).get("Code") or resp.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return ""


def status(e: BaseException) -> int:
    resp = getattr(e, "response", None)
    return int((resp or {}).get("ResponseMetadata", {}).get("HTTPStatusCode") or 0) if isinstance(resp, dict) else 0


def retried(e: BaseException) -> bool:
    """botocore retried the request before this answer: an earlier try may have been applied."""
    resp = getattr(e, "response", None)
    return isinstance(resp, dict) and int(resp.get("ResponseMetadata", {}).get("RetryAttempts") or 0) > 0


def bucket_region(e: BaseException) -> str | None:
    resp = getattr(e, "response", None)
    if not isinstance(resp, dict):
        return None
    headers = resp.get("ResponseMetadata", {}).get("HTTPHeaders", {}) or {}
    return headers.get("x-amz-bucket-region") or resp.get("Error", {}).get("Region") or None


def classify(e: BaseException) -> Kind:
    import botocore.exceptions as bx

    if isinstance(e, errors.SyncError):
        return e.s3_kind or Kind.OTHER
    if isinstance(
        e, bx.NoCredentialsError | bx.PartialCredentialsError | bx.CredentialRetrievalError | bx.TokenRetrievalError
    ):
        return Kind.DENIED
    if isinstance(
        e,
        bx.EndpointConnectionError
        | bx.ConnectTimeoutError
        | bx.ReadTimeoutError
        | bx.ConnectionClosedError
        | bx.ProxyConnectionError,
    ):
        return Kind.UNAVAILABLE
    if isinstance(e, ConnectionError | TimeoutError):
        return Kind.UNAVAILABLE
    found = code(e)
    if bucket_region(e) and (found in WRONG_REGION_CODES or status(e) == 301):
        return Kind.WRONG_REGION
    if not_s3(e):
        return Kind.UNAVAILABLE
    by_code = kind_of_code(found)
    if by_code is not Kind.OTHER:
        return by_code
    if isinstance(e, bx.ClientError) and (
        status(e) >= 500 or status(e) == 429 or found in ("SlowDown", "Throttling", "RequestTimeout")
    ):
        return Kind.UNAVAILABLE
    if isinstance(e, bx.HTTPClientError) or type(e).__module__.startswith("urllib3"):
        return Kind.UNAVAILABLE
    return Kind.OTHER


def not_s3(e: BaseException) -> bool:
    """A bare HTTP 404 to a request that S3 answers with an error document (every request but
    HEAD): the endpoint is not an S3 API (a web server, a wrong path), not a missing object."""
    return code(e) == "404" and getattr(e, "operation_name", "") not in ("HeadObject", "HeadBucket")


def kind_of_code(found: str) -> Kind:
    """The kind an S3 error code (or bare HTTP status) names by itself; OTHER when it names none."""
    if found == "RequestTimeTooSkewed":
        return Kind.CLOCK
    if found == "NoSuchBucket":
        return Kind.NO_BUCKET
    if found in DENIED_CODES:
        return Kind.DENIED
    if found in NOT_FOUND_CODES:
        return Kind.NOT_FOUND
    if found in PRECONDITION_CODES:
        return Kind.PRECONDITION
    if found in ("304", "NotModified"):
        return Kind.NOT_MODIFIED
    if found in DIGEST_CODES:
        return Kind.DIGEST
    return Kind.OTHER


class S3Error(errors.SyncError):
    """An S3 failure as every caller sees it: its exit code and one line, its `s3_kind`, and whether
    every request of the run would fail alike (`run_wide`), all given on construction."""

    def __init__(self, code: int, message: str, kind: Kind, *, message_kind: str = "", run_wide: bool = False) -> None:
        super().__init__(code, message)
        self.s3_kind = kind
        self.message_kind = message_kind
        self.run_wide = run_wide


def translate(e: BaseException, env: Endpoint, what: str = "") -> errors.SyncError:
    """An S3 failure -> an S3Error with the documented exit code, its kind and `run_wide`; a
    SyncError raised inside the S3 layer passes through as it is."""
    if isinstance(e, errors.SyncError):
        return e
    kind = classify(e)
    line = _message(e, kind, env, what)
    run_wide = (
        kind in (Kind.UNAVAILABLE, Kind.CLOCK, Kind.NO_BUCKET, Kind.WRONG_REGION)
        or line.message_kind == "credentials"
        or code(e) in RUN_WIDE_CODES
    )
    return S3Error(line.code, str(line), kind, message_kind=line.message_kind, run_wide=run_wide)


def _message(e: BaseException, kind: Kind, env: Endpoint, what: str) -> errors.SyncError:
    import botocore.exceptions as bx

    where = f"s3://{env.bucket}" + (f"/{env.root.key(what)}" if what else "")
    found = code(e)
    if isinstance(e, bx.NoCredentialsError | bx.PartialCredentialsError):
        return errors.s3(
            f"AWS credentials: none found for {where}; allowed: the standard AWS chain (env vars, profile, SSO, "
            "instance/IRSA role)",
            kind="credentials",
        )
    if not_s3(e):
        return errors.s3(f"S3 endpoint: {env.endpoint_url or 'AWS'} answered HTTP 404 without an S3 error to "
                         f"{getattr(e, 'operation_name', 'a request')} on {where}; "
                         "allowed: an S3 API endpoint (endpointUrl / --endpoint-url)", kind="unreachable")  # fmt: skip
    if kind is Kind.UNAVAILABLE and not isinstance(e, bx.ClientError):
        return errors.s3(
            f"S3 endpoint: {env.endpoint_url or 'AWS'} unreachable ({root_cause(e)}); allowed: a reachable S3 endpoint",
            kind="unreachable",
        )
    if kind is Kind.WRONG_REGION:
        return errors.usage(
            f"region: requests for bucket {env.bucket!r} went to the wrong region ({found}); allowed: "
            f"{bucket_region(e)} (the bucket's region: `region` in model-sync.yaml or --region)"
        )
    if kind is Kind.CLOCK:
        return errors.s3(
            "clock: this machine's time differs from S3's by more than 15 minutes (RequestTimeTooSkewed on "
            f"{where}); allowed: a synchronized clock (NTP)"
        )
    if kind is Kind.NO_BUCKET:
        return errors.not_found(
            f"bucket: {env.bucket!r} does not exist (NoSuchBucket, environment {env.name}); allowed: an existing "
            "model repository bucket"
        )
    if kind is Kind.NOT_FOUND:
        return errors.not_found(
            f"object: {where} does not exist (removed while model-sync ran?); allowed: a complete version, "
            "re-run when nothing else prunes it"
        )
    if kind is Kind.DENIED:
        return errors.s3(
            f"S3 credentials/access: {found or type(e).__name__} on {where}; allowed: valid credentials from the "
            "AWS chain with access to the repository"
        )
    if isinstance(e, bx.BotoCoreError | bx.ClientError):
        return errors.s3(
            f"S3 request on {where}: {found or type(e).__name__} ({' '.join(str(e).split())[:160]}); allowed: a "
            "healthy S3 endpoint"
        )
    if isinstance(e, OSError):
        return errors.s3(f"S3 endpoint: {env.endpoint_url or 'AWS'} failed ({e}); allowed: a reachable S3 endpoint")
    return errors.SyncError(errors.UNEXPECTED, f"{where}: {type(e).__name__}: {e}")


def root_cause(e: BaseException) -> str:
    """The innermost error's class ("ConnectionRefusedError"), through botocore's wrapped `error`."""
    seen: set[int] = set()
    while id(e) not in seen:
        seen.add(id(e))
        wrapped = (
            (getattr(e, "kwargs", None) or {}).get("error") if isinstance(getattr(e, "kwargs", None), dict) else None
        )
        inner = wrapped if isinstance(wrapped, BaseException) else (e.__cause__ or e.__context__)
        if inner is None:
            break
        e = inner
    return type(e).__name__
