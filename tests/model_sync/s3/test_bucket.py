"""model_sync's one S3 layer (model_sync.s3: bucket, clients, failures, transfer) against real S3-protocol
server processes: moto_server (enforces If-None-Match / If-Match, not signatures) and `rclone serve
s3` (verifies signatures and keys, ignores conditional headers). Neither checks a client-sent
checksum against the body (AWS S3 does), so that rejection is tested on botocore's error type only
(tests/model_sync/push/test_publish.py)."""

from __future__ import annotations

import hashlib
import io
import os
import threading
import time
from collections.abc import Iterator

import botocore.session
import pytest
from botocore.exceptions import ClientError

from model_sync import errors
from model_sync.contract import layout
from model_sync.environments import Environment
from model_sync.s3 import clients, download, transfer
from model_sync.s3.bucket import NOT_MODIFIED, Bucket
from model_sync.s3.failures import Kind, classify, translate
from tests.support.relays import DroppingListener
from tests.support.s3_servers import KEY, REGION, S3Server

# Keys that break naive encoders: space, '+', '=', '&', '%', non-ASCII, '~', XML markup, '?', '#'.
AWKWARD_KEYS = [
    "space dir/a b.txt",
    "p+q=r&s.bin",
    "pct%20literal%2F",
    "ü/ünïcødé.txt",
    "tilde~x",
    "xml<lt>&amp;\"quote'.json",
    "q?mark#hash",
]


@pytest.fixture(params=["moto", "rclone"])
def server(request: pytest.FixtureRequest) -> S3Server:
    srv: S3Server = request.getfixturevalue("moto_s3" if request.param == "moto" else "rclone_s3")
    return srv


@pytest.fixture(autouse=True)
def _credentials(aws_env: dict[str, str]) -> None:
    """Every Bucket here resolves the test key through botocore's default chain (aws_env)."""


def repo_for(endpoint: str, bucket: str, secret: str | None = None, purpose: clients.Purpose = clients.CLI) -> Bucket:
    session = None
    if secret is not None:
        session = botocore.session.get_session()
        session.set_credentials(KEY, secret)
    return Bucket(
        Environment("dev", layout.Root(bucket), endpoint_url=endpoint, region=REGION), purpose, session=session
    )


def test_awkward_keys_round_trip(server: S3Server) -> None:
    bucket = server.make_bucket()
    repo = repo_for(server.endpoint, bucket)
    for key in AWKWARD_KEYS:
        repo.put(key, key.encode(), "text/plain")
    for key in AWKWARD_KEYS:
        body, etag, modified = repo.get_with_meta(key)  # type: ignore[misc]
        assert body == key.encode()
        assert etag == hashlib.md5(key.encode()).hexdigest()  # noqa: S324 - S3's single-part ETag, unquoted
        assert modified is not None
        assert modified > time.time() - 600
    objects, prefixes = repo.list("")
    assert sorted(o["Key"] for o in objects) == sorted(AWKWARD_KEYS)
    assert prefixes == []
    assert sorted(repo.list("", "/")[1]) == ["space dir/", "ü/"]
    repo.copy("tilde~x", "copy/tilde~x")
    assert repo.get("copy/tilde~x") == b"tilde~x"
    repo.delete([*AWKWARD_KEYS, "copy/tilde~x", "never/existed"])
    assert server.keys(bucket) == []


def test_listing_follows_continuation_past_1000_keys(moto_s3: S3Server, s3_bucket: str) -> None:
    repo = repo_for(moto_s3.endpoint, s3_bucket)
    client = moto_s3.client()
    for i in range(1005):
        client.put_object(Bucket=s3_bucket, Key=f"many/{i:05d}", Body=b"")
    before = len(moto_s3.requests())
    objects, _ = repo.list("many/")
    assert [o["Key"] for o in objects] == [f"many/{i:05d}" for i in range(1005)]
    assert (
        sum(
            1
            for r in moto_s3.requests()[before:]
            if r.startswith(f"GET /{s3_bucket}?list-type=2") or r.startswith(f"GET /{s3_bucket}/?list-type=2")
        )
        == 2
    )


def test_conditional_get_answers_not_modified(server: S3Server) -> None:
    bucket = server.make_bucket()
    repo = repo_for(server.endpoint, bucket)
    etag = repo.put("repository/m/config.pbtxt", b"pin 1")
    assert repo.get_if_changed("repository/m/config.pbtxt", etag) is NOT_MODIFIED
    assert repo.get_if_changed("repository/m/config.pbtxt", "0" * 32) == (b"pin 1", etag)
    assert repo.get_if_changed("repository/m/config.pbtxt", None) == (b"pin 1", etag)
    assert repo.get_if_changed("repository/other/config.pbtxt", etag) is None


def test_missing_key_is_none_and_a_missing_bucket_exit_3(server: S3Server) -> None:
    repo = repo_for(server.endpoint, server.make_bucket())
    assert repo.get("nope.json") is None
    assert repo.head("nope.json") is None
    repo.delete_one("nope.json")  # deleting what is not there succeeds, as on S3
    missing = repo_for(server.endpoint, "no-such-bucket-here")
    with pytest.raises(errors.SyncError) as e:
        missing.get("a.json")
    assert (e.value.code, e.value.s3_kind, e.value.run_wide) == (errors.NOT_FOUND, Kind.NO_BUCKET, True)
    assert str(e.value) == (
        "bucket: 'no-such-bucket-here' does not exist (NoSuchBucket, environment dev); allowed: an existing "
        "model repository bucket"
    )


def test_rejected_credentials_are_denied_and_run_wide(rclone_s3: S3Server) -> None:
    bucket = rclone_s3.make_bucket()
    repo = repo_for(rclone_s3.endpoint, bucket, secret="wrong-secret")
    for operation in (lambda: repo.get("a.json"), lambda: repo.put("a.json", b"x"), lambda: repo.list("")):
        with pytest.raises(errors.SyncError) as e:
            operation()
        assert (e.value.code, e.value.s3_kind, e.value.run_wide) == (errors.S3, Kind.DENIED, True)
        assert str(e.value).startswith(f"S3 credentials/access: SignatureDoesNotMatch on s3://{bucket}")
    with pytest.raises(errors.SyncError) as head:
        repo.head("a.json")  # HEAD has no body: only the status tells
    assert head.value.s3_kind is Kind.DENIED


@pytest.fixture
def dropping() -> Iterator[DroppingListener]:
    listener = DroppingListener()
    try:
        yield listener
    finally:
        listener.close()


@pytest.mark.parametrize(("attempts", "mode"), [("1", "standard"), ("3", "standard"), ("2", "adaptive")])
def test_aws_max_attempts_and_retry_mode_are_botocores_own(
    dropping: DroppingListener, monkeypatch: pytest.MonkeyPatch, attempts: str, mode: str
) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", attempts)
    monkeypatch.setenv("AWS_RETRY_MODE", mode)
    repo = repo_for(f"http://127.0.0.1:{dropping.port}", "bucket")
    assert repo.client.meta.config.retries == {"mode": mode, "total_max_attempts": int(attempts)}
    with pytest.raises(errors.SyncError) as e:
        repo.put("k", b"body")
    assert dropping.accepted == int(attempts)
    assert (e.value.code, e.value.s3_kind, e.value.run_wide) == (errors.S3, Kind.UNAVAILABLE, True)
    assert str(e.value).startswith(f"S3 endpoint: http://127.0.0.1:{dropping.port} unreachable (")


@pytest.mark.parametrize(("name", "value", "message"), [
    ("AWS_RETRY_MODE", "legacy", "AWS_RETRY_MODE: 'legacy'; allowed: one of standard, adaptive"),
    ("AWS_MAX_ATTEMPTS", "0",
     "AWS_MAX_ATTEMPTS: '0'; allowed: an integer 1..20 (tries per request, the first included)"),
    ("AWS_MAX_ATTEMPTS", "many",
     "AWS_MAX_ATTEMPTS: 'many'; allowed: an integer 1..20 (tries per request, the first included)"),
])  # fmt: skip
def test_bad_retry_settings_are_one_line_usage_errors(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(errors.SyncError) as e:
        repo_for("http://127.0.0.1:9", "bucket").client  # noqa: B018 - creating the client reads them
    assert (e.value.code, str(e.value)) == (errors.USAGE, message)


def test_refused_connection_names_the_root_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    listener = DroppingListener()
    port = listener.port
    listener.close()  # nobody listens any more: connection refused
    with pytest.raises(errors.SyncError) as e:
        repo_for(f"http://127.0.0.1:{port}", "bucket").get("k")
    assert str(e.value) == (
        f"S3 endpoint: http://127.0.0.1:{port} unreachable (ConnectionRefusedError); allowed: a reachable S3 endpoint"
    )


def test_a_web_server_answering_404_is_not_s3_not_a_missing_object(
    tmp_path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """an endpoint that is not S3 used to read as "audit/.conditional-write-probe
    does not exist" (exit 3); it is an endpoint error (exit 5) naming the endpoint."""
    from tests.model_sync.helpers import python_model, run_cli
    from tests.support.relays import NotFoundEverywhere

    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    web = NotFoundEverywhere()
    try:
        model = python_model(tmp_path / "m", "simple")
        endpoint = f"http://127.0.0.1:{web.port}"
        r = run_cli(
            capsys,
            "push",
            str(model),
            "--env",
            "x",
            "--bucket",
            "s3://models-x",
            "--endpoint-url",
            endpoint,
            "--region",
            "us-east-1",
        )
        assert r.code == errors.S3, r.err
        assert r.err.strip() == (
            f"model-sync: S3 endpoint: {endpoint} answered HTTP 404 without an S3 error to GetObject on "
            "s3://models-x/repository/simple/config.pbtxt; "
            "allowed: an S3 API endpoint (endpointUrl / --endpoint-url)"
        )
        assert repo_for(endpoint, "models-x").head("k") is None  # HEAD's bare 404 is still "no such object"
    finally:
        web.close()


def _client_error(code: str, status: int, headers: dict[str, str] | None = None) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": "m"},
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers or {}},
        },
        "GetObject",
    )


def test_run_wide_failures_are_the_ones_every_model_would_hit() -> None:
    env = Environment("staging", layout.Root("models"), "http://127.0.0.1:9", REGION)
    run_wide = {name: _client_error(code, status) for name, code, status in [
        ("bad key", "InvalidAccessKeyId", 403), ("bad secret", "SignatureDoesNotMatch", 403),
        ("expired", "ExpiredToken", 400),
        ("clock", "RequestTimeTooSkewed", 403), ("no bucket", "NoSuchBucket", 404), ("throttled", "SlowDown", 503),
    ]}  # fmt: skip
    per_request = {
        "denied prefix": _client_error("AccessDenied", 403),
        "missing object": _client_error("NoSuchKey", 404),
        "refused write": _client_error("PreconditionFailed", 412),
    }
    assert {name: translate(e, env).run_wide for name, e in run_wide.items()} == dict.fromkeys(run_wide, True)
    assert {name: translate(e, env).run_wide for name, e in per_request.items()} == dict.fromkeys(per_request, False)
    assert [classify(e) for e in per_request.values()] == [Kind.DENIED, Kind.NOT_FOUND, Kind.PRECONDITION]


def test_a_wrong_region_is_a_usage_error_naming_the_buckets_region() -> None:
    env = Environment("prod", layout.Root("models"), None, "us-east-1")
    err = translate(
        _client_error("PermanentRedirect", 301, {"x-amz-bucket-region": "eu-west-1"}), env, "repository/m/config.pbtxt"
    )
    assert (err.code, err.s3_kind) == (errors.USAGE, Kind.WRONG_REGION)
    assert str(err) == (
        "region: requests for bucket 'models' went to the wrong region (PermanentRedirect); allowed: eu-west-1 "
        "(the bucket's region: `region` in model-sync.yaml or --region)"
    )


@pytest.mark.parametrize(
    ("endpoint", "hosted"),
    [(None, True), ("https://bucket.vpce-0abc-xyz.s3.eu-west-1.vpce.amazonaws.com", True),
     ("https://s3-fips.us-gov-west-1.amazonaws.com", True),
     ("https://s3.cn-north-1.amazonaws.com.cn", True), ("http://127.0.0.1:9000", False),
     ("https://amazonaws.com.evil.example", False)],
)  # fmt: skip
def test_aws_hosted_endpoints_keep_aws_behaviour(endpoint: str | None, hosted: bool) -> None:
    assert clients.aws_hosted(Environment("e", layout.Root("models"), endpoint, None)) is hosted


def test_aws_clients_keep_virtual_hosting_and_checksums() -> None:
    """Against AWS itself nothing is narrowed: botocore's virtual-hosted addressing (and with it S3
    Express and access points) and its default checksums stay on."""
    repo = Bucket(Environment("prod", layout.Root("models"), None, "eu-west-1"))
    config = repo.client.meta.config
    assert (config.s3, config.request_checksum_calculation, config.response_checksum_validation) == (
        None,
        "when_supported",
        "when_supported",
    )
    assert repo.client.meta.endpoint_url == "https://s3.eu-west-1.amazonaws.com"
    local = repo_for("http://127.0.0.1:9", "bucket").client.meta.config
    assert (local.s3, local.request_checksum_calculation) == ({"addressing_style": "path"}, "when_required")


# ---- transfers ---------------------------------------------------------------------------------


def test_big_download_comes_in_ranges_and_is_hashed_as_written(moto_s3: S3Server, s3_bucket: str, tmp_path) -> None:
    """More ranges than s3transfer keeps in memory (its non-seekable path stalled past 64), so the
    order of arrival varies; the digest is the whole file's either way."""
    data = os.urandom(80 * 64 * 1024 + 12345)
    moto_s3.client().put_object(Bucket=s3_bucket, Key="big.bin", Body=data)
    repo = repo_for(moto_s3.endpoint, s3_bucket, purpose=clients.AGENT)
    settings = transfer.TransferSettings(
        threshold=64 * 1024, chunksize=64 * 1024, concurrency=8
    )  # 81 ranges (s3transfer has no 5 MiB floor for GETs)
    before = len(moto_s3.requests())
    with open(tmp_path / "big.bin", "w+b") as out:
        digest, size = download.download(
            repo.client, s3_bucket, "big.bin", out, len(data), settings, sync_every=1024 * 1024
        )  # writeback on a helper thread too
    assert (digest, size, (tmp_path / "big.bin").read_bytes()) == (hashlib.sha256(data).hexdigest(), len(data), data)
    seen = moto_s3.requests()[before:]
    assert [r.split()[0] for r in seen] == ["GET"] * 81  # no HeadObject: the size came from the manifest
    small = io.BytesIO()  # not a file: one streamed GET, hashed in order
    assert download.download(
        repo.client, s3_bucket, "big.bin", small, len(data), transfer.TransferSettings(threshold=64 * transfer.MB)
    )[1] == len(data)
    assert small.getvalue() == data


def test_a_download_stops_when_asked(moto_s3: S3Server, s3_bucket: str) -> None:
    data = os.urandom(2 * transfer.MB)
    moto_s3.client().put_object(Bucket=s3_bucket, Key="big.bin", Body=data)
    repo = repo_for(moto_s3.endpoint, s3_bucket)
    stop = threading.Event()
    stop.set()
    with pytest.raises(errors.Abandoned):
        download.download(
            repo.client,
            s3_bucket,
            "big.bin",
            io.BytesIO(),
            len(data),
            transfer.TransferSettings(threshold=transfer.MB, chunksize=transfer.MB),
            stop,
        )


def test_put_file_stores_the_manifest_digest_as_the_objects_checksum(
    moto_s3: S3Server, s3_bucket: str, tmp_path
) -> None:
    data = os.urandom(4096)
    path = tmp_path / "model.pt"
    path.write_bytes(data)
    repo = repo_for(moto_s3.endpoint, s3_bucket)
    repo.put_file("repository/m/1/model.pt", str(path), hashlib.sha256(data).hexdigest())
    head = moto_s3.client().head_object(Bucket=s3_bucket, Key="repository/m/1/model.pt", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == s3_b64(data)


def s3_b64(data: bytes) -> str:
    import base64

    return base64.b64encode(hashlib.sha256(data).digest()).decode()


# ---- what botocore does for AWS-only bucket kinds (the first request it would send, captured) ------


class _Captured(Exception):
    pass


def _first_request(repo: Bucket) -> tuple[str, str, str]:
    seen: list[tuple[str, str, str]] = []

    def capture(request: object, event_name: str, **kwargs: object) -> None:
        seen.append((event_name.rsplit(".", 1)[-1], request.method, request.url))  # type: ignore[attr-defined]
        raise _Captured()

    repo.client.meta.events.register("before-send.s3", capture)
    with pytest.raises(errors.SyncError):
        repo.get("repository/m/config.pbtxt")
    return seen[0]


def test_an_access_point_arn_is_a_bucket_and_botocore_addresses_the_access_point() -> None:
    root = layout.Root.parse("s3://arn:aws:s3:eu-west-1:123456789012:accesspoint/models-ap/team-a/")
    assert (root.bucket, root.prefix) == ("arn:aws:s3:eu-west-1:123456789012:accesspoint/models-ap", "team-a")
    assert root.uri("repository/") == "s3://arn:aws:s3:eu-west-1:123456789012:accesspoint/models-ap/team-a/repository/"
    repo = Bucket(Environment("prod", root, None, "eu-west-1"))
    assert _first_request(repo) == (
        "GetObject",
        "GET",
        "https://models-ap-123456789012.s3-accesspoint.eu-west-1.amazonaws.com/team-a/repository/m/config.pbtxt",
    )
    with pytest.raises(
        layout.LayoutError, match=r"allowed: an S3 bucket name \(3-63 of a-z 0-9 \. -\) or an access-point ARN"
    ):
        layout.Root("arn:aws:s3:eu-west-1:123:accesspoint/x")


def test_an_s3_express_directory_bucket_gets_its_session_first() -> None:
    repo = Bucket(Environment("prod", layout.Root("models--usw2-az1--x-s3"), None, "us-west-2"))
    operation, method, url = _first_request(repo)
    assert (operation, method) == ("CreateSession", "GET")
    assert url.startswith("https://models--usw2-az1--x-s3.s3express-usw2-az1.us-west-2.amazonaws.com/?session")
