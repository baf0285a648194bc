"""model_sync.s3.conditional (the conditional writes of s3.Bucket) against real S3-protocol server
processes: moto_server enforces If-None-Match / If-Match, `rclone serve s3` ignores both."""

from __future__ import annotations

import hashlib
import threading

import pytest

from model_sync.contract import layout
from model_sync.environments import Environment
from model_sync.s3 import conditional
from model_sync.s3.bucket import Bucket
from tests.support.relays import LostResponseRelay
from tests.support.s3_servers import REGION, S3Server


@pytest.fixture(autouse=True)
def _credentials(aws_env: dict[str, str]) -> None:
    """Every Bucket here resolves the test key through botocore's default chain (aws_env)."""


def repo_for(endpoint: str, bucket: str) -> Bucket:
    return Bucket(Environment("dev", layout.Root(bucket), endpoint_url=endpoint, region=REGION))


def test_conditional_writes_are_enforced_by_moto_and_ignored_by_rclone(
    moto_s3: S3Server, s3_bucket: str, rclone_s3: S3Server
) -> None:
    moto = repo_for(moto_s3.endpoint, s3_bucket)
    assert moto.put_new("audit/a.json", b"1") is True
    assert moto.put_new("audit/a.json", b"2") is False
    etag = moto.head("audit/a.json")[0]  # type: ignore[index]
    assert moto.put_if("audit/a.json", b"3", "0" * 32) == (False, None)
    ok, new = moto.put_if("audit/a.json", b"3", etag)
    assert ok
    assert new == hashlib.md5(b"3").hexdigest()  # noqa: S324
    assert moto.put_if("audit/gone.json", b"x", "0" * 32) == (False, None)  # If-Match on a missing key: 404
    assert (moto.conditional_writes_enforced(), moto.if_match_enforced(), moto.ignored_conditions()) == (
        True,
        True,
        None,
    )
    rclone = repo_for(rclone_s3.endpoint, rclone_s3.make_bucket())
    assert rclone.ignored_conditions() == "If-None-Match and If-Match"


@pytest.mark.parametrize("write", ["put_new", "put_if"])
def test_a_conditional_write_whose_response_was_lost_is_ours(moto_s3: S3Server, s3_bucket: str, write: str) -> None:
    """The first try is applied but its answer lost; botocore retries and the retry is refused
    (412) by our own write, which Bucket recognises by the bytes: no false "taken" allocation, no
    false "pin moved". The same refusal on a FIRST try is a conflict."""
    repo = repo_for(moto_s3.endpoint, s3_bucket)
    old = repo.put("audit/pin.txt", b"old") if write == "put_if" else None
    relay = LostResponseRelay(moto_s3.port)
    try:
        flaky = repo_for(f"http://127.0.0.1:{relay.port}", s3_bucket)
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
    assert repo.put_new(key, body) is False
    assert repo.put_if(key, body, "0" * 32) == (False, None)


def test_the_probe_runs_once_per_bucket_whatever_the_threads(moto_s3: S3Server) -> None:
    """Threads asking at once share one probe (three writes to layout.PROBE_KEY) and its answer."""
    bucket = moto_s3.make_bucket()
    before = len(moto_s3.requests())
    answers: list[tuple[bool, bool, str | None]] = []

    def ask(repo: Bucket) -> None:
        answers.append((repo.conditional_writes_enforced(), repo.if_match_enforced(), repo.ignored_conditions()))

    threads = [threading.Thread(target=ask, args=(repo_for(moto_s3.endpoint, bucket),)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [(True, True, None)] * 8
    probes = [r for r in moto_s3.requests()[before:] if r.startswith(f"PUT /{bucket}/{layout.PROBE_KEY}")]
    assert len(probes) == 3, probes


def test_etag_of_is_the_etag_if_match_names(moto_s3: S3Server, s3_bucket: str) -> None:
    """PutObject answers the ETag quoted; etag_of strips it to what put_if sends back in If-Match."""
    repo = repo_for(moto_s3.endpoint, s3_bucket)
    resp = repo.client.put_object(Bucket=s3_bucket, Key="audit/e.json", Body=b"e")
    assert resp["ETag"].startswith('"')
    etag = conditional.etag_of(resp)
    assert etag == hashlib.md5(b"e").hexdigest()  # noqa: S324
    assert repo.put_if("audit/e.json", b"f", etag)[0] is True
