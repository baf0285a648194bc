"""model_sync/s3http.py, the standard-library S3 client, against real S3-protocol server processes
(moto_server and `rclone serve s3`, tests/support/s3_servers.py) and, for the signer, AWS's published
Signature Version 4 examples. Also the errors it raises as model_sync.s3.Repo translates them into
exit codes and one-line messages.

Server facts these tests rely on (moto 5.2.5, rclone 1.75): moto enforces If-None-Match / If-Match
but not signatures; rclone verifies signatures and access keys but ignores conditional headers; rclone
keeps connections alive, moto closes each one. Neither checks x-amz-checksum-sha256 against the body
(AWS S3 does), so that check is not tested here.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import email.utils
import hashlib
import http.client
import os
import socket
import subprocess
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from model_sync import errors, layout, s3, s3http
from model_sync.environments import Environment
from tests.support.s3_servers import BIN, KEY, REGION, SECRET, S3Server, aws_environ, free_port

GOOD = s3http.Credentials(KEY, SECRET)

# Keys that break naive encoders: space, '+' (a space in form encoding), '=', '&' (query and XML
# syntax), '%' (double decoding), non-ASCII, '~' (unreserved in SigV4, reserved in old quoters),
# XML markup characters, sub-delimiters, '?' and '#' (URL syntax) and nested slashes.
AWKWARD_KEYS = [
    "space dir/a b.txt",
    "p+q=r&s.bin",
    "pct%20literal%2F",
    "ü/ünïcødé.txt",
    "tilde~x",
    "deep/a/b/c/d/e.bin",
    "xml<lt>&amp;\"quote'.json",
    "subdelims;,!*'()$@:",
    "q?mark#hash",
]


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client reads *_proxy from the environment when it is created; a developer's proxy must not
    route these 127.0.0.1 requests (the proxy test sets its own)."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)


@pytest.fixture(params=["moto", "rclone"])
def server(request: pytest.FixtureRequest) -> S3Server:
    srv: S3Server = request.getfixturevalue("moto_s3" if request.param == "moto" else "rclone_s3")
    return srv


def client_for(server: S3Server, creds: s3http.Credentials = GOOD, **kwargs: Any) -> s3http.Client:
    return s3http.Client(REGION, lambda: creds, server.endpoint, **kwargs)


def repo_for(endpoint: str, bucket: str) -> s3.Repo:
    return s3.Repo(Environment("dev", layout.Root(bucket), endpoint_url=endpoint, region=REGION))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def error_field(err: s3http.S3Error, name: str) -> str:
    """Error.Code / Error.Message of the botocore-shaped `.response`."""
    fields: dict[str, str] = err.response["Error"]  # type: ignore[assignment]
    return fields[name]


# ---- Signature Version 4 -------------------------------------------------------------------------

# ref: https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html ("Examples: Signature Calculations")
EXAMPLE_CREDS = s3http.Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
EXAMPLE_HOST = "examplebucket.s3.amazonaws.com"
EXAMPLE_NOW = datetime.datetime(2013, 5, 24, tzinfo=datetime.UTC)
EXAMPLE_SCOPE = "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"


@pytest.mark.parametrize(
    ("method", "path", "query", "headers", "payload", "signed_headers", "signature"),
    [
        pytest.param("GET", "/test.txt", {}, {"Range": "bytes=0-9"}, s3http.EMPTY_SHA256, "host;range;x-amz-content-sha256;x-amz-date",
                     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41", id="GET Object"),
        pytest.param("PUT", "/test%24file.text", {}, {"Date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class": "REDUCED_REDUNDANCY"},
                     sha256(b"Welcome to Amazon S3."), "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
                     "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd", id="PUT Object"),
        pytest.param("GET", "/", {"lifecycle": ""}, {}, s3http.EMPTY_SHA256, "host;x-amz-content-sha256;x-amz-date",
                     "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543", id="GET Bucket Lifecycle"),
        pytest.param("GET", "/", {"max-keys": "2", "prefix": "J"}, {}, s3http.EMPTY_SHA256, "host;x-amz-content-sha256;x-amz-date",
                     "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7", id="Get Bucket (List Objects)"),
    ],
)  # fmt: skip
def test_signer_reproduces_the_aws_documented_examples(
    method: str, path: str, query: dict[str, str], headers: dict[str, str], payload: str, signed_headers: str, signature: str
) -> None:
    out = s3http.Signer("us-east-1").sign(method, EXAMPLE_HOST, path, query, headers, payload, EXAMPLE_CREDS, now=EXAMPLE_NOW)
    assert out["authorization"] == f"AWS4-HMAC-SHA256 {EXAMPLE_SCOPE}, SignedHeaders={signed_headers}, Signature={signature}"
    assert out["x-amz-date"] == "20130524T000000Z"
    assert out["x-amz-content-sha256"] == payload
    assert out["host"] == EXAMPLE_HOST


def test_signer_path_encoding_matches_the_put_example() -> None:
    """The client's path quoting turns the example's key `test$file.text` into the documented `/test%24file.text`."""
    assert s3http._quote("/test$file.text") == "/test%24file.text"
    assert s3http._quote("/a b/ü+~x") == "/a%20b/%C3%BC%2B~x"


def test_signer_sends_and_signs_the_session_token() -> None:
    creds = EXAMPLE_CREDS._replace(token="FQoGZXIvYXdzE+token/with=chars")
    out = s3http.Signer("us-east-1").sign("GET", EXAMPLE_HOST, "/test.txt", {}, {"Range": "bytes=0-9"}, s3http.EMPTY_SHA256, creds, now=EXAMPLE_NOW)
    assert out["x-amz-security-token"] == creds.token
    assert "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date;x-amz-security-token," in out["authorization"]
    assert "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41" not in out["authorization"]  # the token is part of the signature


def test_signer_agrees_with_botocore_on_an_encoded_path_query_and_token() -> None:
    """botocore's S3SigV4Auth as a second reference: a path with encoded octets, a query whose values
    need encoding (space, '/', '='), a header and a session token."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    path = "/bucket/a%20b/%C3%BC%2Bx"
    query = {"list-type": "2", "prefix": "sp ace/ü", "continuation-token": "cGcvMQ=="}
    url = "http://127.0.0.1:9000" + path + "?" + "&".join(f"{k}={urllib.parse.quote(v, safe='~')}" for k, v in sorted(query.items()))
    request = AWSRequest(method="GET", url=url, headers={"Range": "bytes=0-9"})
    S3SigV4Auth(BotoCredentials("AK", "SK", "tok/en+="), "s3", "us-east-1").add_auth(request)
    now = datetime.datetime.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    ours = s3http.Signer("us-east-1").sign(
        "GET", "127.0.0.1:9000", path, query, {"Range": "bytes=0-9"}, s3http.EMPTY_SHA256, s3http.Credentials("AK", "SK", "tok/en+="), now=now
    )
    assert ours["authorization"] == request.headers["Authorization"]


# ---- round trips ---------------------------------------------------------------------------------


def test_awkward_keys_round_trip(server: S3Server) -> None:
    """put -> get/head/list/copy/delete with every awkward key; rclone verifies each request's signature,
    so the canonical path and query encoding are checked by a second implementation too."""
    bucket = server.make_bucket()
    c = client_for(server)
    for key in AWKWARD_KEYS:
        c.put_object(bucket, key, key.encode(), content_type="text/plain")
    for key in AWKWARD_KEYS:
        assert c.get_object(bucket, key).body == key.encode()
        head = c.head_object(bucket, key)
        assert head.headers["etag"].strip('"') == hashlib.md5(key.encode()).hexdigest()  # noqa: S324 - S3's single-part ETag
        assert email.utils.parsedate_to_datetime(head.headers["last-modified"]).year >= 2024
        assert head.headers["content-length"] == str(len(key.encode()))
    objects, prefixes = c.list_all(bucket, "")
    assert sorted(o["Key"] for o in objects) == sorted(AWKWARD_KEYS)
    assert prefixes == []
    assert {o["Key"]: o["Size"] for o in objects} == {k: len(k.encode()) for k in AWKWARD_KEYS}
    assert [o["Key"] for o in c.list_all(bucket, "ü/ünï")[0]] == ["ü/ünïcødé.txt"]  # a non-ASCII prefix in the signed query
    assert [o["Key"] for o in c.list_all(bucket, "p+q=r&")[0]] == ["p+q=r&s.bin"]
    assert sorted(c.list_all(bucket, "", delimiter="/")[1]) == ["deep/", "space dir/", "ü/"]

    copies = {f"copy/{k}": k for k in AWKWARD_KEYS[:4]}
    for dest, source in copies.items():
        c.copy_object(bucket, dest, bucket, source)
        assert c.get_object(bucket, dest).body == source.encode()

    everything = AWKWARD_KEYS + list(copies)
    assert c.delete_objects(bucket, [*everything, "never/existed"]) == []
    assert c.list_all(bucket, "") == ([], [])
    assert server.keys(bucket) == []


def test_streamed_file_body_from_its_current_offset(server: S3Server, tmp_path: Path) -> None:
    """A file body is sent from its current position to the end, with the caller's digest."""
    bucket = server.make_bucket()
    data = os.urandom(3 * s3http.SEND_BLOCK + 123)
    path = tmp_path / "blob"
    path.write_bytes(data)
    c = client_for(server)
    with path.open("rb") as f:
        f.seek(1000)
        c.put_object(bucket, "streamed/blob", f, sha256_hex=sha256(data[1000:]))
    assert server.get(bucket, "streamed/blob") == data[1000:]


def test_streamed_body_without_a_digest_is_refused(moto_s3: S3Server, tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"x")
    c = client_for(moto_s3)
    with path.open("rb") as f:
        with pytest.raises(ValueError, match=r"^sha256_hex: None for a streamed body; allowed: the body's sha256 \(hex\)$"):
            c.put_object("any-bucket", "k", f)
        with pytest.raises(ValueError, match=r"^payload_sha256: None for a streamed body; allowed: the body's sha256 \(hex\)$"):
            c.request("PutObject", "PUT", "any-bucket", "k", body=f)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"attempts": 0}, r"^attempts: 0; allowed: 1 or more$"),
        ({"endpoint_url": "ftp://127.0.0.1:21"}, r"^endpoint_url: 'ftp://127.0.0.1:21'; allowed: http\(s\)://host\[:port\]\[/path\], no query or credentials$"),
        ({"endpoint_url": "http://"}, r"^endpoint_url: 'http://'; allowed: http\(s\)://host\[:port\]\[/path\], no query or credentials$"),
        ({"endpoint_url": "http://key:secret@127.0.0.1:9"}, r"^endpoint_url: 'http://key:secret@127.0.0.1:9'; allowed: .*no query or credentials$"),
        ({"endpoint_url": "http://127.0.0.1:9/?x=1"}, r"^endpoint_url: 'http://127.0.0.1:9/\?x=1'; allowed: .*no query or credentials$"),
        ({"endpoint_url": "http://127.0.0.1:99999"}, r"^endpoint_url: 'http://127.0.0.1:99999'; allowed: "),
    ],
)
def test_client_arguments_are_validated(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"endpoint_url": "http://127.0.0.1:9", **kwargs}
    with pytest.raises(ValueError, match=match):
        s3http.Client(REGION, lambda: GOOD, **args)  # type: ignore[arg-type]


# ---- listing -------------------------------------------------------------------------------------


def test_list_objects_v2_pages_with_max_keys(server: S3Server) -> None:
    bucket = server.make_bucket()
    c = client_for(server)
    for i in range(5):
        c.put_object(bucket, f"pg/{i}", b"x")
    c.put_object(bucket, "other", b"x")
    pages: list[list[str]] = []
    token: str | None = None
    while True:
        page = c.list_objects_v2(bucket, "pg/", max_keys=2, token=token)
        pages.append([o["Key"] for o in page.contents])
        if page.next_token is None:
            break
        token = page.next_token
        assert len(pages) < 10, "the continuation token does not advance"
    assert pages == [["pg/0", "pg/1"], ["pg/2", "pg/3"], ["pg/4"]]
    assert c.list_objects_v2(bucket, "pg/", max_keys=1).next_token is not None
    assert c.list_objects_v2(bucket, "pg/", max_keys=5).next_token is None


def test_list_all_follows_continuation_tokens_past_1000_keys(moto_s3: S3Server, s3_bucket: str) -> None:
    """list_all has no page size: moto's default page of 1000 keys needs 1001 objects to make two pages
    (written from 8 threads through ONE client: its connections are per thread)."""
    c = client_for(moto_s3)
    keys = [f"many/{i:04d}" for i in range(1001)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: c.put_object(s3_bucket, k, b""), keys))
    objects, _ = c.list_all(s3_bucket, "many/")
    assert [o["Key"] for o in objects] == keys
    lists = [line for line in moto_s3.requests() if line.startswith(f"GET /{s3_bucket}?") and "list-type=2" in line]
    assert len(lists) == 2
    assert "continuation-token=" not in lists[0]
    assert "continuation-token=" in lists[1]


def test_parse_list_decodes_url_encoded_keys_and_prefixes() -> None:
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated><NextContinuationToken>tok==</NextContinuationToken>"
        b"<Contents><Key>a+b%2Bc%C3%BC%25</Key><ETag>&quot;e&quot;</ETag><Size>7</Size><LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>"
        b"<CommonPrefixes><Prefix>sp+ace%2F</Prefix></CommonPrefixes></ListBucketResult>"
    )
    page = s3http.parse_list(body)
    assert page.contents == [{"Key": "a b+cü%", "ETag": '"e"', "Size": 7, "LastModified": "2026-01-01T00:00:00.000Z"}]
    assert page.prefixes == ["sp ace/"]
    assert page.next_token == "tok=="
    assert s3http.parse_list(body.replace(b"<IsTruncated>true", b"<IsTruncated>false")).next_token is None


# ---- conditional writes --------------------------------------------------------------------------


def test_conditional_writes_are_enforced_by_moto(moto_s3: S3Server, s3_bucket: str) -> None:
    c = client_for(moto_s3)
    c.put_object(s3_bucket, "pin", b"1", if_none_match=True)
    with pytest.raises(s3http.S3Error) as second:
        c.put_object(s3_bucket, "pin", b"2", if_none_match=True)
    assert (second.value.status, second.value.code, s3.error_code(second.value)) == (412, "PreconditionFailed", "PreconditionFailed")
    etag = c.head_object(s3_bucket, "pin").headers["etag"].strip('"')
    c.put_object(s3_bucket, "pin", b"3", if_match=etag)
    with pytest.raises(s3http.S3Error) as stale:
        c.put_object(s3_bucket, "pin", b"4", if_match=etag)  # the ETag of "1", no longer current
    assert (stale.value.status, stale.value.code) == (412, "PreconditionFailed")
    with pytest.raises(s3http.S3Error) as missing:
        c.put_object(s3_bucket, "never-written", b"5", if_match=etag)
    assert (missing.value.status, missing.value.code) == (404, "NoSuchKey")
    assert c.get_object(s3_bucket, "pin").body == b"3"


def test_conditional_writes_are_ignored_by_rclone(rclone_s3: S3Server) -> None:
    """Documented rclone behaviour (model_sync/s3.py warns about it): the conditions are ignored and
    every write lands. Fails if rclone starts enforcing them, so the warning can be revisited."""
    bucket = rclone_s3.make_bucket()
    c = client_for(rclone_s3)
    c.put_object(bucket, "pin", b"1", if_none_match=True)
    c.put_object(bucket, "pin", b"2", if_none_match=True)
    c.put_object(bucket, "pin", b"3", if_match="0" * 32)
    c.put_object(bucket, "never-written", b"4", if_match="0" * 32)
    assert c.get_object(bucket, "pin").body == b"3"
    assert c.get_object(bucket, "never-written").body == b"4"


# ---- S3 errors -----------------------------------------------------------------------------------


def test_missing_bucket_key_and_head(server: S3Server) -> None:
    bucket = server.make_bucket()
    c = client_for(server)
    with pytest.raises(s3http.S3Error) as no_bucket:
        c.list_all("no-such-bucket-s3http", "")
    assert (no_bucket.value.status, no_bucket.value.code) == (404, "NoSuchBucket")
    assert str(no_bucket.value).startswith("An error occurred (NoSuchBucket) when calling the ListObjectsV2 operation: ")
    with pytest.raises(s3http.S3Error) as no_key:
        c.get_object(bucket, "missing")
    assert (no_key.value.status, no_key.value.code) == (404, "NoSuchKey")
    assert no_key.value.response["ResponseMetadata"] == {"HTTPStatusCode": 404}
    assert error_field(no_key.value, "Code") == "NoSuchKey"
    assert error_field(no_key.value, "Message")
    with pytest.raises(s3http.S3Error) as no_head:
        c.head_object(bucket, "missing")
    assert (no_head.value.status, no_head.value.code) == (404, "404")
    assert str(no_head.value) == "An error occurred (404) when calling the HeadObject operation: Not Found"


@pytest.mark.parametrize(
    ("creds", "code"),
    [(s3http.Credentials(KEY, "wrong-secret"), "SignatureDoesNotMatch"), (s3http.Credentials("unknown-key", SECRET), "InvalidAccessKeyId")],
)
def test_rejected_credentials_on_rclone(rclone_s3: S3Server, creds: s3http.Credentials, code: str) -> None:
    """rclone verifies signatures (moto_server does not, unless IAM is switched on)."""
    bucket = rclone_s3.make_bucket()
    c = client_for(rclone_s3, creds)
    with pytest.raises(s3http.S3Error) as rejected:
        c.put_object(bucket, "k", b"v")
    assert (rejected.value.status, rejected.value.code) == (403, code)
    with pytest.raises(s3http.S3Error) as head:
        c.head_object(bucket, "k")
    assert (head.value.status, head.value.code) == (403, "403")
    assert rclone_s3.keys(bucket) == []


def test_repo_translates_a_missing_bucket(moto_s3: S3Server, aws_env: dict[str, str]) -> None:
    repo = repo_for(moto_s3.endpoint, "no-such-bucket-s3http")
    for call in (lambda: repo.get("models/a.json"), lambda: repo.list("models/"), lambda: repo.put("models/a.json", b"{}")):
        with pytest.raises(errors.SyncError) as e:
            call()
        assert e.value.code == errors.NOT_FOUND == 3
        assert str(e.value) == "bucket: 'no-such-bucket-s3http' does not exist (environment dev); allowed: an existing model repository bucket"


def test_repo_reads_a_missing_key_as_none(server: S3Server, aws_env: dict[str, str]) -> None:
    repo = repo_for(server.endpoint, server.make_bucket())
    assert repo.get("models/missing.json") is None
    assert repo.head("models/missing.json") is None
    etag = repo.put("models/a.json", b"{}")
    assert etag == hashlib.md5(b"{}").hexdigest()  # noqa: S324 - S3's single-part ETag
    found = repo.head("models/a.json")
    assert found is not None
    assert found[0] == etag
    assert abs((found[1] or 0) - time.time()) < 120


@pytest.mark.parametrize(
    ("env", "code"),
    [({"AWS_SECRET_ACCESS_KEY": "wrong-secret"}, "SignatureDoesNotMatch"), ({"AWS_ACCESS_KEY_ID": "unknown-key"}, "InvalidAccessKeyId")],
)
def test_repo_translates_rejected_credentials(
    rclone_s3: S3Server, aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, env: dict[str, str], code: str
) -> None:
    bucket = rclone_s3.make_bucket()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    repo = repo_for(rclone_s3.endpoint, bucket)
    with pytest.raises(errors.SyncError) as put:
        repo.put("models/a.json", b"{}")
    assert put.value.code == errors.S3 == 5
    assert str(put.value) == (
        f"S3 credentials/access: {code} on s3://{bucket}/models/a.json; allowed: valid credentials from the AWS chain with access to the repository"
    )
    with pytest.raises(errors.SyncError) as head:  # HEAD has no body: the status is the code
        repo.head("models/a.json")
    assert head.value.code == errors.S3
    assert str(head.value).startswith(f"S3 credentials/access: 403 on s3://{bucket}/models/a.json; ")


# ---- endpoint errors and retries -----------------------------------------------------------------


def test_unreachable_endpoint_raises_endpoint_error_quickly() -> None:
    port = free_port()  # nobody listens: connection refused
    c = s3http.Client(REGION, lambda: GOOD, f"http://127.0.0.1:{port}", attempts=2)
    started = time.monotonic()
    with pytest.raises(s3http.EndpointError) as e:
        c.get_object("bucket", "key")
    assert time.monotonic() - started < 2.0
    assert isinstance(e.value, OSError)
    assert isinstance(e.value.__cause__, ConnectionRefusedError)
    assert str(e.value).startswith(f"http://127.0.0.1:{port}: ConnectionRefusedError: ")


class _DroppingListener:
    """A TCP endpoint that accepts each connection and closes it at once (an endpoint that drops the
    connection), counting the connections: one per request attempt."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def dropping_listener() -> Iterator[_DroppingListener]:
    listener = _DroppingListener()
    try:
        yield listener
    finally:
        listener.close()


@pytest.mark.parametrize("attempts", [1, 3])
def test_dropped_connections_are_tried_exactly_attempts_times(dropping_listener: _DroppingListener, attempts: int) -> None:
    c = s3http.Client(REGION, lambda: GOOD, f"http://127.0.0.1:{dropping_listener.port}", attempts=attempts)
    started = time.monotonic()
    with pytest.raises(s3http.EndpointError) as e:
        c.put_object("bucket", "key", b"body")
    assert time.monotonic() - started < 3.0  # backoff: at most 0.2 s + 0.4 s
    assert dropping_listener.accepted == attempts
    assert isinstance(e.value.__cause__, ConnectionError | http.client.HTTPException)


def test_repo_translates_an_unreachable_endpoint(rclone_s3: S3Server, aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL_SYNC_S3_ATTEMPTS", "2")
    bucket = rclone_s3.make_bucket()
    rclone_s3.stop()
    repo = repo_for(rclone_s3.endpoint, bucket)
    started = time.monotonic()
    with pytest.raises(errors.SyncError) as e:
        repo.get("models/a.json")
    assert time.monotonic() - started < 2.0
    assert e.value.code == errors.S3 == 5
    assert str(e.value) == f"S3 endpoint: {rclone_s3.endpoint} unreachable (ConnectionRefusedError); allowed: a reachable S3 endpoint"


def test_stale_keep_alive_connection_is_retried_after_a_restart(rclone_s3: S3Server) -> None:
    """rclone keeps the connection alive; after a restart on the same port the pooled connection is
    dead, and the same client object must still succeed."""
    bucket = rclone_s3.make_bucket()
    c = client_for(rclone_s3, attempts=2)
    c.put_object(bucket, "k", b"before")
    rclone_s3.stop()
    rclone_s3.start()
    assert c.get_object(bucket, "k").body == b"before"
    c.put_object(bucket, "k", b"after")
    assert c.get_object(bucket, "k").body == b"after"


def test_stale_keep_alive_connection_does_not_use_up_an_attempt(rclone_s3: S3Server) -> None:
    """A pooled connection the server already closed is not a failed attempt for a read (GET/HEAD
    is sent once more on a fresh connection, as urllib3 does): with one attempt it still succeeds.
    (Writes are not re-sent uncounted: the first may have been applied.)"""
    bucket = rclone_s3.make_bucket()
    c = client_for(rclone_s3, attempts=1)
    c.put_object(bucket, "k", b"before")
    rclone_s3.stop()
    rclone_s3.start()
    assert c.get_object(bucket, "k").body == b"before"


class _FlakyRelay:
    """A TCP relay in front of a real server whose first connection breaks mid-request: it reads
    `drop_after` bytes of the request, then resets the connection. Later connections are relayed to
    the server untouched. Counts connections (request attempts)."""

    def __init__(self, target_port: int, drop_after: int) -> None:
        self.target_port = target_port
        self.drop_after = drop_after
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.dropped_after = 0
        self._sockets: list[socket.socket] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True)]
        self._threads[0].start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            if self.accepted == 1:
                self._first(conn)
            else:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
                self._sockets += [conn, upstream]
                for a, b in ((conn, upstream), (upstream, conn)):
                    self._spawn(self._pump, a, b)

    def _spawn(self, target: Any, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self._threads.append(t)

    def _first(self, conn: socket.socket) -> None:
        """What happens to the first connection: here, the request is cut off (_break)."""
        self._break(conn)

    def _break(self, conn: socket.socket) -> None:
        with conn:
            while self.dropped_after < self.drop_after:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                self.dropped_after += len(chunk)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # close -> RST

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (src, dst):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        for t in self._threads:
            t.join(timeout=5)
        self.sock.close()
        self.sock.close()


def test_streamed_body_is_rewound_for_the_retry(rclone_s3: S3Server, tmp_path: Path) -> None:
    """The first attempt is cut off after 1 MiB of a 2 MiB streamed body has gone out; the retry must
    send the file again from the caller's start offset, not from where the first attempt stopped
    (without the rewind the retry sends a short body and rclone waits for the rest: read timeout)."""
    bucket = rclone_s3.make_bucket()
    data = os.urandom(2 * s3http.SEND_BLOCK + 7)
    path = tmp_path / "blob"
    path.write_bytes(data)
    relay = _FlakyRelay(rclone_s3.port, drop_after=s3http.SEND_BLOCK)
    try:
        c = s3http.Client(REGION, lambda: GOOD, f"http://127.0.0.1:{relay.port}", attempts=2, read_timeout=3)
        with path.open("rb") as f:
            f.seek(7)
            c.put_object(bucket, "blob", f, sha256_hex=sha256(data[7:]))
        assert relay.accepted == 2
        assert relay.dropped_after >= s3http.SEND_BLOCK  # the first attempt had read and sent part of the file
        c.close()
    finally:
        relay.close()
    assert rclone_s3.get(bucket, "blob") == data[7:]


# ---- XML safety ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "document",
    [
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]><Error><Code>&lol2;</Code></Error>',
        b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><Error><Code>&xxe;</Code></Error>',
        b"<!DOCTYPE Error><Error><Code>X</Code></Error>",
        b'<Error><!ENTITY a "b"><Code>X</Code></Error>',
    ],
    ids=["billion-laughs", "external-entity", "doctype", "entity"],
)
def test_parse_xml_refuses_document_type_declarations(document: bytes) -> None:
    with pytest.raises(s3http.XMLError, match=r"^XML with a DOCTYPE/ENTITY declaration; allowed: plain S3 response XML$"):
        s3http.parse_xml(document)
    err = s3http.parse_error(400, document, "GetObject")  # an error body is never expanded either: its code stays the status
    assert (err.status, err.code) == (400, "400")
    assert "root:" not in error_field(err, "Message")
    with pytest.raises(s3http.XMLError, match="DOCTYPE/ENTITY"):
        s3http.parse_list(document)


def test_parse_xml_reports_malformed_xml_as_xml_error() -> None:
    with pytest.raises(s3http.XMLError, match=r"^malformed XML: "):
        s3http.parse_xml(b"<Error><Code>X</Error>")
    assert issubclass(s3http.XMLError, ValueError)
    assert not issubclass(s3http.XMLError, ET.ParseError)


def test_parse_xml_reads_plain_s3_xml() -> None:
    err = s3http.parse_error(403, b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>no &amp; no</Message></Error>', "PutObject")
    assert (err.status, err.code, error_field(err, "Message")) == (403, "AccessDenied", "no & no")
    assert s3http.parse_error(502, b"<html>Bad Gateway</html>", "GetObject").code == "502"


# ---- proxy ---------------------------------------------------------------------------------------


@pytest.fixture
def moto_proxy(tmp_path: Path) -> Iterator[tuple[int, int, Path]]:
    """moto's forward proxy (moto_proxy), serving S3 requests for http://127.0.0.1:<dead port> from its
    own in-memory backend. Nobody listens on the dead port, so a request that succeeds went through the
    proxy. Yields (proxy port, dead port, proxy log)."""
    proxy_port, dead_port = free_port(), free_port()
    log_path = tmp_path / "moto_proxy.log"
    env = {**aws_environ(), "MOTO_S3_CUSTOM_ENDPOINTS": f"http://127.0.0.1:{dead_port}", "PYTHONUNBUFFERED": "1"}
    with log_path.open("wb") as log:
        proc = subprocess.Popen([str(BIN / "moto_proxy"), "-H", "127.0.0.1", "-p", str(proxy_port)], stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", proxy_port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_proxy did not start: {log_path.read_text()[-2000:]}") from None
                time.sleep(0.05)
        yield proxy_port, dead_port, log_path
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_http_proxy_is_used_for_an_http_endpoint(moto_proxy: tuple[int, int, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    proxy_port, dead_port, log_path = moto_proxy
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
    c = s3http.Client(REGION, lambda: GOOD, f"http://127.0.0.1:{dead_port}")
    c.request("CreateBucket", "PUT", "via-proxy")
    c.put_object("via-proxy", "a b/ü+x", b"hello")
    assert c.get_object("via-proxy", "a b/ü+x").body == b"hello"
    assert [o["Key"] for o in c.list_all("via-proxy", "")[0]] == ["a b/ü+x"]
    assert f"http://127.0.0.1:{dead_port}/via-proxy/a%20b/%C3%BC%2Bx" in log_path.read_text(errors="replace")  # absolute-form request target

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    bypass = s3http.Client(REGION, lambda: GOOD, f"http://127.0.0.1:{dead_port}", attempts=1)
    with pytest.raises(s3http.EndpointError, match="ConnectionRefusedError"):
        bypass.get_object("via-proxy", "a b/ü+x")


# ---- review follow-ups: addressing, wrong region, copy results, lost responses, proxies ------


@pytest.mark.parametrize(
    ("region", "env", "bucket", "expected"),
    [
        ("eu-west-1", {}, "models", ("models.s3.eu-west-1.amazonaws.com", "models.s3.eu-west-1.amazonaws.com", "/a%20b/c.txt")),
        ("us-east-1", {}, "models", ("models.s3.us-east-1.amazonaws.com", "models.s3.us-east-1.amazonaws.com", "/a%20b/c.txt")),
        ("cn-north-1", {}, "models", ("models.s3.cn-north-1.amazonaws.com.cn", "models.s3.cn-north-1.amazonaws.com.cn", "/a%20b/c.txt")),
        ("us-east-1", {"AWS_USE_FIPS_ENDPOINT": "true"}, "models", ("models.s3-fips.us-east-1.amazonaws.com",) * 2 + ("/a%20b/c.txt",)),
        ("us-east-1", {"AWS_USE_DUALSTACK_ENDPOINT": "true"}, "models", ("models.s3.dualstack.us-east-1.amazonaws.com",) * 2 + ("/a%20b/c.txt",)),
        ("us-east-1", {"AWS_USE_FIPS_ENDPOINT": "true", "AWS_USE_DUALSTACK_ENDPOINT": "TRUE"}, "m", ("s3-fips.dualstack.us-east-1.amazonaws.com",) * 2 + ("/m/a%20b/c.txt",)),
        ("eu-west-1", {}, "my.dotted.bucket", ("s3.eu-west-1.amazonaws.com", "s3.eu-west-1.amazonaws.com", "/my.dotted.bucket/a%20b/c.txt")),
    ],
)
def test_aws_addressing_is_virtual_hosted_unless_the_bucket_cannot_be_a_host_label(monkeypatch: pytest.MonkeyPatch, region: str, env: dict[str, str], bucket: str, expected: tuple[str, str, str]) -> None:
    """Production addressing (no request is sent): virtual-hosted on AWS, the partition's suffix,
    FIPS / dual-stack hosts as the AWS SDKs build them; path style for names with dots (the
    wildcard TLS certificate covers one label)."""
    for name in ("AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    client = s3http.Client(region, lambda: GOOD)
    assert client.address(bucket, "a b/c.txt") == expected
    assert client.scheme == "https"


def test_custom_endpoints_keep_path_style_ports_and_ipv6_brackets() -> None:
    c = s3http.Client(REGION, lambda: GOOD, "http://127.0.0.1:9000")
    assert c.address("bkt", "k") == ("127.0.0.1", "127.0.0.1:9000", "/bkt/k")
    assert c.address("", "") == ("127.0.0.1", "127.0.0.1:9000", "/")
    c = s3http.Client(REGION, lambda: GOOD, "https://[::1]:8443/base")
    assert c.address("bkt", "k") == ("::1", "[::1]:8443", "/base/bkt/k")
    assert s3http.Client(REGION, lambda: GOOD, "https://minio.internal").address("bkt") == ("minio.internal", "minio.internal", "/bkt")


def test_an_ipv6_endpoint_round_trips(tmp_path: Path) -> None:
    server = S3Server("rclone", data_dir=str(tmp_path / "data"), host="::1")
    (tmp_path / "data").mkdir()
    server.start()
    try:
        c = s3http.Client(REGION, lambda: GOOD, server.endpoint)
        c.request("CreateBucket", "PUT", "v6-bucket")
        c.put_object("v6-bucket", "k", b"over ipv6")
        assert c.get_object("v6-bucket", "k").body == b"over ipv6"
        assert [o["Key"] for o in c.list_all("v6-bucket", "")[0]] == ["k"]
    finally:
        server.close()


def test_a_wrong_region_is_a_usage_error_naming_the_buckets_region() -> None:
    env = Environment("staging", layout.Root("models"), None, "us-east-1")
    head = s3http.parse_error(301, b"", "HeadObject", {"x-amz-bucket-region": "eu-west-1"})
    body = b"<?xml version='1.0'?><Error><Code>AuthorizationHeaderMalformed</Code><Message>the region 'us-east-1' is wrong; expecting 'eu-west-1'</Message><Region>eu-west-1</Region></Error>"
    for err in (head, s3http.parse_error(400, body, "GetObject", {})):
        assert err.bucket_region == "eu-west-1"
        mapped = s3.translate(err, env, "repository/m/config.pbtxt")
        assert mapped.code == errors.USAGE
        assert str(mapped).endswith("allowed: eu-west-1 (the bucket's region: `region` in model-sync.yaml or --region)")
    # A credentials problem without a region stays a credentials problem.
    denied = s3http.parse_error(403, b"<Error><Code>AccessDenied</Code><Message>no</Message></Error>", "GetObject", {"x-amz-bucket-region": "us-east-1"})
    assert denied.bucket_region is None
    assert s3.translate(denied, env).code == errors.S3


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'<?xml version="1.0" encoding="UTF-8"?>\n<CopyObjectResult><ETag>"x"</ETag></CopyObjectResult>', None),
        (b'<?xml version="1.0" encoding="UTF-8"?>\n' + b" " * 4096 + b"<Error><Code>InternalError</Code><Message>copy failed</Message></Error>", "InternalError"),
        (b"<Error><Code>SlowDown</Code><Message>x</Message></Error>", "SlowDown"),
        (b"<ListBucketResult/>", "InvalidResponse"),
        (b"", "InvalidResponse"),
        (b"not xml", "InvalidResponse"),
    ],
)
def test_a_copy_that_fails_after_its_200_status_is_an_error(body: bytes, code: str | None) -> None:
    """S3 keeps a long copy alive with whitespace after the 200 status line and may end the body
    with <Error>: only a <CopyObjectResult> body is a successful copy (whitespace of any length)."""
    err = s3http.copy_result_error(body)
    assert (err.code if err else None) == code
    if err is not None:
        assert err.status == 200


class _LostResponseRelay(_FlakyRelay):
    """A TCP relay in front of a real server that loses the first response: the first request is
    delivered whole, the server answers (so it HAS applied it), and the client sees the connection
    closed instead of the answer. Later connections are relayed untouched."""

    def __init__(self, target_port: int) -> None:
        self.lost: bytes = b""
        super().__init__(target_port, drop_after=0)

    def _first(self, conn: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        self._sockets += [conn, upstream]
        self._spawn(self._lose, conn, upstream)

    def _lose(self, conn: socket.socket, upstream: socket.socket) -> None:
        self._spawn(self._pump, conn, upstream)
        upstream.settimeout(10)
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in self.lost and (chunk := upstream.recv(65536)):
                self.lost += chunk
        # The client gets the connection closed instead of the answer (shutdown also wakes the forward pump).
        for sock in (conn, upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.mark.parametrize("write", ["put_new", "put_if"])
def test_a_conditional_write_whose_response_was_lost_is_ours(moto_s3: S3Server, s3_bucket: str, aws_env: dict[str, str], write: str) -> None:
    """moto enforces If-None-Match / If-Match. The first try is applied but its answer lost; the
    retry is refused (412) by our own write, which Repo recognises by the bytes: no false "taken"
    allocation, no false "pin moved". The same refusal on a FIRST try is a conflict."""
    repo = s3.Repo(Environment("staging", layout.Root(s3_bucket), moto_s3.endpoint, REGION))
    old = repo.put("audit/pin.txt", b"old") if write == "put_if" else None
    relay = _LostResponseRelay(moto_s3.port)
    try:
        flaky = s3.Repo(Environment("staging", layout.Root(s3_bucket), f"http://127.0.0.1:{relay.port}", REGION))
        body = b'{"nonce": "mine"}'
        if write == "put_new":
            assert flaky.put_new("audit/x.json", body) is True
            key = "audit/x.json"
        else:
            ok, etag = flaky.put_if("audit/pin.txt", body, old)
            assert ok is True
            assert etag == repo.head("audit/pin.txt")[0]  # type: ignore[index]
            key = "audit/pin.txt"
        assert relay.lost.startswith(b"HTTP/1.1 200"), relay.lost[:80]  # the server did answer the first try
        assert relay.accepted >= 2
    finally:
        relay.close()
    assert repo.get(key) == body
    # A refusal on a first try, even with identical bytes (two `rollback --to N`), is a conflict.
    assert repo.put_new(key, body) is False
    assert repo.put_if(key, body, "0" * 32) == (False, None)
    assert repo.conditional_writes_enforced()  # the probe writes distinct bytes each time
    assert repo.if_match_enforced()


def test_a_write_on_a_connection_the_server_closed_does_not_use_up_an_attempt(rclone_s3: S3Server) -> None:
    """A pooled connection the server closed while idle is noticed before it is reused (readable
    while idle), so even a PUT with one attempt goes through on a fresh connection."""
    bucket = rclone_s3.make_bucket()
    c = client_for(rclone_s3, attempts=1)
    c.put_object(bucket, "k", b"before")
    rclone_s3.stop()
    rclone_s3.start()
    c.put_object(bucket, "k", b"after")
    assert c.get_object(bucket, "k").body == b"after"


def test_run_wide_failures_are_the_ones_every_model_would_hit() -> None:
    env = Environment("staging", layout.Root("models"), "http://127.0.0.1:9", REGION)
    run_wide = {
        "unreachable": s3http.EndpointError("x"),
        "no credentials": s3http.NoCredentialsError("none"),
        "bad key": s3http.S3Error(403, "InvalidAccessKeyId", "", "GetObject"),
        "bad secret": s3http.S3Error(403, "SignatureDoesNotMatch", "", "GetObject"),
        "expired": s3http.S3Error(400, "ExpiredToken", "", "GetObject"),
        "clock": s3http.S3Error(403, "RequestTimeTooSkewed", "", "GetObject"),
        "no bucket": s3http.S3Error(404, "NoSuchBucket", "", "GetObject"),
    }
    per_request = {
        "denied prefix": s3http.S3Error(403, "AccessDenied", "", "PutObject"),
        "transient": s3http.S3Error(500, "InternalError", "", "PutObject"),
        "missing object": s3http.S3Error(404, "NoSuchKey", "", "GetObject"),
    }
    assert {name: s3.translate(e, env).run_wide for name, e in run_wide.items()} == dict.fromkeys(run_wide, True)
    assert {name: s3.translate(e, env).run_wide for name, e in per_request.items()} == dict.fromkeys(per_request, False)


@pytest.mark.parametrize(
    ("endpoint", "hosted"),
    [(None, True), ("https://bucket.vpce-0abc-xyz.s3.eu-west-1.vpce.amazonaws.com", True), ("https://s3-fips.us-gov-west-1.amazonaws.com", True),
     ("https://s3.cn-north-1.amazonaws.com.cn", True), ("http://127.0.0.1:9000", False), ("https://minio.corp.example", False),
     ("https://amazonaws.com.evil.example", False)],
)  # fmt: skip
def test_aws_hosted_endpoints_keep_aws_behaviour(endpoint: str | None, hosted: bool) -> None:
    """An AWS endpoint given as a URL (VPC interface endpoint, FIPS) still gets STS identity,
    checksum trust in promote and a required region; S3-compatible servers do not."""
    assert s3.aws_hosted(Environment("e", layout.Root("models"), endpoint, None)) is hosted


def test_proxy_credentials_are_sent_and_an_https_proxy_url_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://ops%40corp:p%3Ass@127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "")
    c = s3http.Client(REGION, lambda: GOOD, "http://minio.internal:9000")
    assert c._proxy_headers == {"Proxy-Authorization": "Basic " + __import__("base64").b64encode(b"ops@corp:p:ss").decode()}
    monkeypatch.setenv("HTTP_PROXY", "https://127.0.0.1:3128")
    with pytest.raises(ValueError, match=r"^http_proxy: 'https://127.0.0.1:3128'; allowed: an http://\[user:password@\]host:port proxy$"):
        s3http.Client(REGION, lambda: GOOD, "http://minio.internal:9000")
