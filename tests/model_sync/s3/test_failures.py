"""model_sync/s3/failures.py: the one classification of S3 failures, fed with real botocore errors:
answers of real S3 server processes (moto_server, `rclone serve s3`), of an HTTP server that is
not S3, of a closed port, and a client with no credentials. Each is sorted into its Kind and
translated into the documented exit code and one-line message."""

from __future__ import annotations

import base64
import functools
import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import botocore.exceptions
import pytest

from model_sync import errors
from model_sync.contract import layout
from model_sync.environments import Environment
from model_sync.s3 import clients, failures
from model_sync.s3.failures import Kind
from tests.support.relays import DroppingListener, LostResponseRelay, NotFoundEverywhere
from tests.support.s3_servers import KEY, REGION, SECRET, S3Server

KEY_REL = layout.config_key("m")


@pytest.fixture(autouse=True)
def _credentials(aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The test key through botocore's default chain; one try per request (unreachable cases stay fast)."""
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")


@functools.cache
def _session(key: str | None, secret: str | None) -> Any:
    """One botocore session per credential pair for the whole module (a fresh one costs ~0.3 s here)."""
    session = clients.new_session(REGION)
    if key is not None or secret is not None:
        session.set_credentials(key or KEY, secret or SECRET)
    return session


def client_for(endpoint: str, key: str | None = None, secret: str | None = None) -> Any:
    """model_sync's own client (model_sync.s3.clients) for a custom endpoint; `key`/`secret` override the chain's."""
    return clients.create_client(_session(key, secret), REGION, endpoint, clients.CLI)


def new_bucket(server: S3Server) -> str:
    bucket = f"b-{uuid.uuid4().hex[:12]}"
    client_for(server.endpoint).create_bucket(Bucket=bucket)
    return bucket


def failure(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except Exception as e:
        return e
    pytest.fail("the request succeeded; a failure was expected")


def env_for(endpoint: str, bucket: str) -> Environment:
    return Environment("dev", layout.Root(bucket), endpoint_url=endpoint, region=REGION)


@dataclass(frozen=True)
class Case:
    server: str  # "moto" or "rclone"
    call: Callable[[Any, str], Any]  # (model_sync client, bucket) -> the failing request
    code: str  # model_sync.s3.failures.code()
    kind: Kind
    exit: int
    run_wide: bool
    message: str  # the translated message's start ({bucket} filled in)
    key: str | None = None  # client_for(key=...)
    secret: str | None = None


def _etag(c: Any, b: str) -> str:
    return str(c.put_object(Bucket=b, Key=KEY_REL, Body=b"pin")["ETag"])


def _put_twice(c: Any, b: str) -> None:
    c.put_object(Bucket=b, Key=KEY_REL, Body=b"1", IfNoneMatch="*")
    c.put_object(Bucket=b, Key=KEY_REL, Body=b"2", IfNoneMatch="*")


CASES = {
    "missing key": Case("moto", lambda c, b: c.get_object(Bucket=b, Key=KEY_REL), "NoSuchKey", Kind.NOT_FOUND,
                        errors.NOT_FOUND, False,
                        "object: s3://{bucket}/repository/m/config.pbtxt does not exist (removed while "
                        "model-sync ran?); allowed: a complete version"),
    "missing key, HEAD": Case("moto", lambda c, b: c.head_object(Bucket=b, Key=KEY_REL), "404", Kind.NOT_FOUND,
                              errors.NOT_FOUND, False, "object: "),
    "missing key, rclone": Case("rclone", lambda c, b: c.get_object(Bucket=b, Key=KEY_REL), "NoSuchKey",
                                Kind.NOT_FOUND, errors.NOT_FOUND, False, "object: "),
    "missing bucket": Case("moto", lambda c, b: c.get_object(Bucket=b + "-gone", Key=KEY_REL), "NoSuchBucket",
                           Kind.NO_BUCKET, errors.NOT_FOUND, True,
                           "bucket: '{bucket}' does not exist (NoSuchBucket, environment dev); allowed: an "
                           "existing model repository bucket"),
    "missing bucket, rclone": Case("rclone", lambda c, b: c.list_objects_v2(Bucket=b + "-gone"), "NoSuchBucket",
                                   Kind.NO_BUCKET, errors.NOT_FOUND, True, "bucket: "),
    "create-only write refused": Case("moto", _put_twice, "PreconditionFailed", Kind.PRECONDITION, errors.S3, False,
                                      "S3 request on s3://{bucket}/repository/m/config.pbtxt: PreconditionFailed ("),
    "If-Match refused": Case("moto", lambda c, b: (_etag(c, b), c.put_object(Bucket=b, Key=KEY_REL, Body=b"x",
                                                                             IfMatch='"' + "0" * 32 + '"')),
                             "PreconditionFailed", Kind.PRECONDITION, errors.S3, False, "S3 request on "),
    "unchanged": Case("moto", lambda c, b: c.get_object(Bucket=b, Key=KEY_REL, IfNoneMatch=_etag(c, b)), "304",
                      Kind.NOT_MODIFIED, errors.S3, False, "S3 request on "),
    "unchanged, rclone": Case("rclone", lambda c, b: c.get_object(Bucket=b, Key=KEY_REL, IfNoneMatch=_etag(c, b)),
                              "304", Kind.NOT_MODIFIED, errors.S3, False, "S3 request on "),
    "bad secret": Case("rclone", lambda c, b: c.get_object(Bucket=b, Key=KEY_REL), "SignatureDoesNotMatch",
                       Kind.DENIED, errors.S3, True,
                       "S3 credentials/access: SignatureDoesNotMatch on s3://{bucket}/repository/m/config.pbtxt; "
                       "allowed: valid credentials from the AWS chain",
                       secret="wrong-secret"),
    "unknown key id": Case("rclone", lambda c, b: c.list_objects_v2(Bucket=b), "InvalidAccessKeyId", Kind.DENIED,
                           errors.S3, True,
                           "S3 credentials/access: InvalidAccessKeyId on ", key="AKIDNOSUCHKEY"),
    "body differs from Content-MD5": Case("rclone",
                                          lambda c, b: c.put_object(
                                              Bucket=b, Key=KEY_REL, Body=b"data",
                                              ContentMD5=base64.b64encode(
                                                  hashlib.md5(b"other").digest()  # noqa: S324
                                              ).decode()),
                                          "BadDigest", Kind.DIGEST, errors.S3, False,
                                          "S3 request on s3://{bucket}/repository/m/config.pbtxt: BadDigest ("),
    "unsatisfiable range": Case("moto", lambda c, b: (_etag(c, b),
                                                      c.get_object(Bucket=b, Key=KEY_REL, Range="bytes=100-200")),
                                "InvalidRange", Kind.OTHER, errors.S3, False,
                                "S3 request on s3://{bucket}/repository/m/config.pbtxt: InvalidRange ("),
}  # fmt: skip


def check(case: Case, server: S3Server) -> None:
    bucket = new_bucket(server)
    e = failure(lambda: case.call(client_for(server.endpoint, case.key, case.secret), bucket))
    assert isinstance(e, botocore.exceptions.ClientError)
    assert (failures.code(e), failures.classify(e)) == (case.code, case.kind)
    err = failures.translate(e, env_for(server.endpoint, bucket), KEY_REL)
    assert (err.code, err.s3_kind, err.run_wide) == (case.exit, case.kind, case.run_wide)
    assert str(err).startswith(case.message.format(bucket=bucket)), str(err)
    assert "\n" not in str(err)


@pytest.mark.parametrize("name", [name for name, case in CASES.items() if case.server == "moto"])
def test_moto_answers_are_classified_and_translated(moto_s3: S3Server, name: str) -> None:
    check(CASES[name], moto_s3)


def test_rclone_answers_are_classified_and_translated(rclone_s3: S3Server) -> None:
    """All on one rclone process (the fixture is per test): each case on a bucket of its own."""
    for name, case in CASES.items():
        if case.server == "rclone":
            try:
                check(case, rclone_s3)
            except AssertionError as e:
                raise AssertionError(f"{name}: {e}") from None


def test_a_rejected_key_on_head_is_still_denied(rclone_s3: S3Server) -> None:
    """HEAD answers carry no error document: the bare 403 alone says denied."""
    bucket = new_bucket(rclone_s3)
    e = failure(lambda: client_for(rclone_s3.endpoint, key="AKIDNOSUCHKEY").head_object(Bucket=bucket, Key=KEY_REL))
    assert (failures.code(e), failures.status(e), failures.classify(e)) == ("403", 403, Kind.DENIED)
    assert failures.translate(e, env_for(rclone_s3.endpoint, bucket)).code == errors.S3


def test_the_status_and_retry_count_of_an_answer(
    moto_s3: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """retried(): a refusal on the first try is a conflict; after botocore retried (the first
    answer lost on the way: LostResponseRelay) the refusal may be our own applied write."""
    client = client_for(moto_s3.endpoint)
    missing = failure(lambda: client.get_object(Bucket=s3_bucket, Key=KEY_REL))
    assert (failures.status(missing), failures.retried(missing), failures.bucket_region(missing)) == (404, False, None)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "3")
    relay = LostResponseRelay(moto_s3.port)
    try:
        flaky = client_for(f"http://127.0.0.1:{relay.port}")
        refused = failure(lambda: flaky.put_object(Bucket=s3_bucket, Key=KEY_REL, Body=b"mine", IfNoneMatch="*"))
    finally:
        relay.close()
    assert relay.lost.startswith(b"HTTP/1.1 200")  # the first try was applied
    assert (failures.classify(refused), failures.status(refused), failures.retried(refused)) == (
        Kind.PRECONDITION,
        412,
        True,
    )
    assert moto_s3.get(s3_bucket, KEY_REL) == b"mine"


def test_an_http_server_that_is_not_s3() -> None:
    """Its bare 404 to a GET means a wrong endpoint (unavailable, run-wide, exit 5); to a HEAD
    it cannot be told from a missing object."""
    web = NotFoundEverywhere()
    endpoint = f"http://127.0.0.1:{web.port}"
    try:
        got = failure(lambda: client_for(endpoint).get_object(Bucket="models", Key=KEY_REL))
        head = failure(lambda: client_for(endpoint).head_object(Bucket="models", Key=KEY_REL))
    finally:
        web.close()
    assert (failures.code(got), failures.not_s3(got), failures.classify(got)) == ("404", True, Kind.UNAVAILABLE)
    err = failures.translate(got, env_for(endpoint, "models"), KEY_REL)
    assert (err.code, err.message_kind, err.run_wide) == (errors.S3, "unreachable", True)
    assert str(err) == (f"S3 endpoint: {endpoint} answered HTTP 404 without an S3 error to GetObject on "
                        "s3://models/repository/m/config.pbtxt; "
                        "allowed: an S3 API endpoint (endpointUrl / --endpoint-url)")  # fmt: skip
    assert (failures.not_s3(head), failures.classify(head)) == (False, Kind.NOT_FOUND)


def test_a_closed_port_and_a_dropped_connection_are_unavailable() -> None:
    dropping = DroppingListener()
    dropped_at = f"http://127.0.0.1:{dropping.port}"
    try:
        dropped = failure(lambda: client_for(dropped_at).get_object(Bucket="models", Key=KEY_REL))
    finally:
        dropping.close()
    refused = failure(lambda: client_for(dropped_at).get_object(Bucket="models", Key=KEY_REL))  # nobody listens now
    for e in (dropped, refused):
        assert isinstance(e, botocore.exceptions.BotoCoreError)
        assert (failures.code(e), failures.status(e), failures.classify(e)) == ("", 0, Kind.UNAVAILABLE)
        err = failures.translate(e, env_for(dropped_at, "models"))
        assert (err.code, err.message_kind, err.run_wide) == (errors.S3, "unreachable", True)
    assert failures.root_cause(refused) == "ConnectionRefusedError"
    assert (
        str(failures.translate(refused, env_for(dropped_at, "models")))
        == f"S3 endpoint: {dropped_at} unreachable (ConnectionRefusedError); allowed: a reachable S3 endpoint"
    )
    assert errors.describe(refused).startswith("EndpointConnectionError: Could not connect to the endpoint URL: ")


@pytest.mark.parametrize("partial", [False, True])
def test_no_credentials_in_the_chain_is_denied_and_run_wide(
    moto_s3: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, partial: bool
) -> None:
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    if not partial:
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    # a fresh session resolves the (emptied) chain anew: when the client is made (partial) or signs (none)
    e = failure(
        lambda: clients.create_client(clients.new_session(REGION), REGION, moto_s3.endpoint).get_object(
            Bucket=s3_bucket, Key=KEY_REL
        )
    )
    expected = botocore.exceptions.PartialCredentialsError if partial else botocore.exceptions.NoCredentialsError
    assert isinstance(e, expected)
    assert failures.classify(e) is Kind.DENIED
    err = failures.translate(e, env_for(moto_s3.endpoint, s3_bucket), KEY_REL)
    assert isinstance(err, failures.S3Error)
    assert (err.code, err.message_kind, err.run_wide, err.s3_kind) == (errors.S3, "credentials", True, Kind.DENIED)
    assert str(err) == (f"AWS credentials: none found for s3://{s3_bucket}/repository/m/config.pbtxt; "
                        "allowed: the standard AWS chain (env vars, profile, SSO, instance/IRSA role)")  # fmt: skip


def test_a_sync_error_passes_through_with_its_kind() -> None:
    err = errors.s3("x: y; allowed: z")
    assert failures.translate(err, env_for("http://127.0.0.1:9", "models")) is err
    assert failures.classify(err) is Kind.OTHER
    denied = failures.S3Error(errors.S3, "x: y; allowed: z", Kind.DENIED)
    assert failures.classify(denied) is Kind.DENIED


def test_the_repository_prefix_is_part_of_where(moto_s3: S3Server, s3_bucket: str) -> None:
    env = Environment("dev", layout.Root(s3_bucket, "team/a"), endpoint_url=moto_s3.endpoint, region=REGION)
    e = failure(lambda: client_for(moto_s3.endpoint).get_object(Bucket=s3_bucket, Key=env.root.key(KEY_REL)))
    assert str(failures.translate(e, env, KEY_REL)).startswith(
        f"object: s3://{s3_bucket}/team/a/repository/m/config.pbtxt does not exist"
    )
    assert str(failures.translate(e, env)).startswith(
        f"object: s3://{s3_bucket} does not exist"
    )  # nothing named: the bucket


@pytest.mark.parametrize(
    ("code", "kind"),
    [("RequestTimeTooSkewed", Kind.CLOCK), ("NoSuchBucket", Kind.NO_BUCKET), ("AccessDenied", Kind.DENIED),
     ("KMS.DisabledException", Kind.DENIED),
     ("ExpiredToken", Kind.DENIED), ("NoSuchVersion", Kind.NOT_FOUND), ("NotFound", Kind.NOT_FOUND),
     ("412", Kind.PRECONDITION),
     ("ConditionalRequestConflict", Kind.PRECONDITION), ("NotModified", Kind.NOT_MODIFIED),
     ("XAmzContentSHA256Mismatch", Kind.DIGEST),
     ("InvalidDigest", Kind.DIGEST), ("SlowDown", Kind.OTHER), ("", Kind.OTHER)],
)  # fmt: skip
def test_kind_of_code(code: str, kind: Kind) -> None:
    """What an error code names by itself (also DeleteObjects' per-key errors, which carry only a code)."""
    assert failures.kind_of_code(code) is kind
