"""model_sync.agent.bucket against real S3 servers (moto_server, rclone serve s3): which pins
changed (the pin index, a full listing of repository/ when due), conditional pin GETs, strict
manifests checked against the pin, verified downloads, and S3 failures sorted the way the agent
treats them. The bucket is written by `push` (model_sync.push.publish.push) and model_sync.contract.layout keys."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from model_sync import environments
from model_sync.agent.bucket import CHANGED, AgentBucket
from model_sync.agent.exceptions import S3AccessDenied, S3Unavailable, VersionRejected
from model_sync.agent.settings import AgentSettings
from model_sync.contract import layout
from model_sync.push import publish
from model_sync.records import codec
from model_sync.s3 import clients
from model_sync.s3.bucket import Bucket
from model_sync.triton_model import model_directory
from model_sync.ui import Console
from tests.model_sync.helpers import python_model
from tests.support.s3_servers import KEY, SECRET, S3Server
from tests.support.triton import pinned_config, upload_version

BIG = 16 * 1024 * 1024 + 1  # at the agent's ranged-download threshold (bucket.AGENT_TRANSFER)


def _env(server: S3Server, bucket: str) -> environments.Environment:
    return environments.Environment("test", layout.Root(bucket), server.endpoint, "us-east-1")


def _bucket(tmp_path: Path, server: S3Server, name: str, repo: Bucket | None = None, **overrides: Any) -> AgentBucket:
    settings = AgentSettings(
        root=layout.Root(name),
        repository=tmp_path / "models",
        staging=tmp_path / ".staging",
        deployment="default",
        replica="replica-0",
        **overrides,
    )
    return AgentBucket(repo or Bucket(_env(server, name), clients.AGENT), settings, threading.Event())


def _push(tmp_path: Path, server: S3Server, bucket: str, name: str, files: dict[str, bytes]) -> int:
    """`push` (the CLI's code path) of a python model: files, manifest, pin and pin-index entry."""
    src = python_model(tmp_path / "src" / f"{name}-{len(list(tmp_path.glob('src/*')))}", name, files)
    results = publish.push(
        Bucket(_env(server, bucket)),
        model_directory.discover(str(src), name),
        Console(quiet=True),
        publish.PushOptions(use_cache=False),
        "tests",
    )
    assert [(r.action, r.error) for r in results] == [("pushed", None)], results
    assert results[0].version is not None
    return results[0].version


def _requests(server: S3Server, since: int) -> list[str]:
    return [" ".join(r.split()[:2]) for r in server.requests()[since:]]


def _pin(server: S3Server, bucket: str, name: str) -> tuple[str, str]:
    obj = server.client().get_object(Bucket=bucket, Key=layout.config_key(name))
    return obj["ETag"].strip('"'), obj["Body"].read().decode()


def test_a_steady_bucket_costs_one_listing_of_the_pin_index_and_a_push_shows_as_changed(
    tmp_path: Path, moto_s3: S3Server, s3_bucket: str, aws_env: dict[str, str]
) -> None:
    for name in ("a", "b"):
        _push(tmp_path, moto_s3, s3_bucket, name, {"model.py": f"# {name}\n".encode()})
    bucket = _bucket(tmp_path, moto_s3, s3_bucket, resync=3600.0)
    etags = {"a": _pin(moto_s3, s3_bucket, "a")[0], "b": _pin(moto_s3, s3_bucket, "b")[0]}
    before = len(moto_s3.requests())
    assert bucket.changed_pins() == etags  # the first pass: a full listing of repository/
    assert any("prefix=repository" in r for r in _requests(moto_s3, before))
    before = len(moto_s3.requests())
    assert bucket.changed_pins() == {}
    steady = _requests(moto_s3, before)
    assert len(steady) == 1, steady
    assert steady[0].startswith(f"GET /{s3_bucket}?")
    assert "prefix=manifests/_&" in steady[0]  # the pin index and the gray releases, one listing
    _push(tmp_path, moto_s3, s3_bucket, "b", {"model.py": b"# b 2\n"})
    assert bucket.changed_pins() == {"b": CHANGED}
    assert bucket.changed_pins() == {}
    bucket.listed_at = -1e9  # --full-resync seconds have passed
    etags["b"] = _pin(moto_s3, s3_bucket, "b")[0]
    before = len(moto_s3.requests())
    assert bucket.changed_pins() == etags
    assert any("prefix=repository" in r for r in _requests(moto_s3, before))


def test_a_bucket_without_a_pin_index_is_listed_in_full_every_pass(
    tmp_path: Path, moto_s3: S3Server, s3_bucket: str, aws_env: dict[str, str]
) -> None:
    client = moto_s3.client()
    for name in ("a", "b"):  # pins written by a publisher older than the index
        client.put_object(Bucket=s3_bucket, Key=layout.config_key(name), Body=pinned_config(name, 1).encode())
    client.put_object(Bucket=s3_bucket, Key=layout.version_file_key("a", 1, "model.py"), Body=b"# a\n")
    bucket = _bucket(tmp_path, moto_s3, s3_bucket, resync=3600.0)
    expected = {"a": _pin(moto_s3, s3_bucket, "a")[0], "b": _pin(moto_s3, s3_bucket, "b")[0]}
    for _ in range(2):
        before = len(moto_s3.requests())
        assert bucket.changed_pins() == expected
        assert any("prefix=repository" in r for r in _requests(moto_s3, before))


def test_the_model_filter_lists_only_that_models_prefix(
    tmp_path: Path, moto_s3: S3Server, s3_bucket: str, aws_env: dict[str, str]
) -> None:
    for name in ("a", "b"):
        _push(tmp_path, moto_s3, s3_bucket, name, {"model.py": f"# {name}\n".encode()})
    bucket = _bucket(tmp_path, moto_s3, s3_bucket, models=("a",))
    etag = _pin(moto_s3, s3_bucket, "a")[0]
    before = len(moto_s3.requests())
    assert bucket.changed_pins() == {"a": etag}
    listed = _requests(moto_s3, before)
    assert len(listed) == 1, listed
    assert "prefix=repository/a/" in listed[0]


def test_fetch_pin_is_conditional_on_the_etag_held(
    tmp_path: Path, moto_s3: S3Server, s3_bucket: str, aws_env: dict[str, str]
) -> None:
    _push(tmp_path, moto_s3, s3_bucket, "a", {"model.py": b"# a\n"})
    etag, text = _pin(moto_s3, s3_bucket, "a")
    bucket = _bucket(tmp_path, moto_s3, s3_bucket)
    assert bucket.fetch_pin("a", etag, None) == (etag, text)
    assert "versions: 1" in text
    before = len(moto_s3.requests())
    assert bucket.fetch_pin("a", etag, etag) is None  # the listing shows the ETag held: no request
    assert bucket.fetch_pin("a", None, etag) is None  # absent from the listing: unchanged, never removed
    assert _requests(moto_s3, before) == []
    assert bucket.fetch_pin("a", CHANGED, etag) is None  # the index entry changed, the pin did not: 304
    assert _requests(moto_s3, before) == [f"GET /{s3_bucket}/repository/a/config.pbtxt"]
    _push(tmp_path, moto_s3, s3_bucket, "a", {"model.py": b"# a 2\n"})
    new_etag, new_text = _pin(moto_s3, s3_bucket, "a")
    assert bucket.fetch_pin("a", CHANGED, etag) == (new_etag, new_text)
    assert "versions: 2" in new_text
    assert bucket.fetch_pin("ghost", "e", None) is None  # a model directory without its pin yet


def test_read_manifest_is_strict_and_none_when_missing(
    tmp_path: Path, moto_s3: S3Server, s3_bucket: str, aws_env: dict[str, str]
) -> None:
    version = _push(tmp_path, moto_s3, s3_bucket, "a", {"model.py": b"# a\n"})
    bucket = _bucket(tmp_path, moto_s3, s3_bucket)
    doc = bucket.read_manifest("a", version)
    assert doc is not None
    assert (doc["files"]["model.py"]["sha256"], doc["files"]["model.py"]["size"]) == (
        codec.sha256_bytes(b"# a\n"),
        4,
    )
    assert bucket.read_manifest("a", version + 1) is None
    moto_s3.client().put_object(
        Bucket=s3_bucket, Key=layout.manifest_key("a", 9), Body=b'{"schema": "model-sync.manifest/v2"}'
    )
    with pytest.raises(codec.RecordError):
        bucket.read_manifest("a", 9)


def test_manifest_for_pin_refuses_a_version_before_any_download(
    tmp_path: Path, moto_s3: S3Server, s3_bucket: str, aws_env: dict[str, str]
) -> None:
    version = _push(tmp_path, moto_s3, s3_bucket, "a", {"model.py": b"# a\n"})
    _, pin_text = _pin(moto_s3, s3_bucket, "a")
    bucket = _bucket(tmp_path, moto_s3, s3_bucket)
    assert bucket.manifest_for_pin("a", version, pin_text)["config_pbtxt"] == pin_text
    with pytest.raises(
        VersionRejected, match=r"manifest manifests/a/7\.json: missing; allowed: a version published with its manifest"
    ):
        bucket.manifest_for_pin("a", 7, pinned_config("a", 7))
    with pytest.raises(VersionRejected, match="differs from manifest config_pbtxt"):
        bucket.manifest_for_pin("a", version, pinned_config("a", version))  # another config pinning the same version
    # A manifest written past push, listing only model.pt for a python-backend config.
    upload_version(moto_s3.client(), s3_bucket, "py", 1, {"model.pt": b"weights"}, pinned_config("py", 1))
    with pytest.raises(
        VersionRejected, match=r"lists no model\.py; allowed: a version with every file its backend needs"
    ):
        bucket.manifest_for_pin("py", 1, pinned_config("py", 1))
    moto_s3.client().put_object(Bucket=s3_bucket, Key=layout.manifest_key("a", 9), Body=b"not json")
    with pytest.raises(VersionRejected):
        bucket.manifest_for_pin("a", 9, pinned_config("a", 9))


def test_download_verified_writes_the_file_and_refuses_a_tampered_or_missing_one(
    tmp_path: Path, moto_s3: S3Server, s3_bucket: str, aws_env: dict[str, str]
) -> None:
    data = b"X = 1\n" * 100
    version = _push(tmp_path, moto_s3, s3_bucket, "a", {"model.py": data})
    bucket = _bucket(tmp_path, moto_s3, s3_bucket)
    expect = bucket.read_manifest("a", version)["files"]["model.py"]  # type: ignore[index]
    dest = tmp_path / "dl" / "model.py"
    assert bucket.download_verified("a", version, "model.py", expect, dest) == len(data)
    assert dest.read_bytes() == data
    key = layout.version_file_key("a", version, "model.py")
    moto_s3.client().put_object(Bucket=s3_bucket, Key=key, Body=data.replace(b"1", b"2"))  # same size, other bytes
    with pytest.raises(
        VersionRejected, match=rf"file {key}: sha256 .* size {len(data)}; allowed: sha256 {expect['sha256'][:16]}"
    ):
        bucket.download_verified("a", version, "model.py", expect, tmp_path / "dl2" / "model.py")
    moto_s3.client().put_object(Bucket=s3_bucket, Key=key, Body=data + b"#")
    with pytest.raises(VersionRejected, match=rf"size {len(data) + 1}; allowed"):
        bucket.download_verified("a", version, "model.py", expect, tmp_path / "dl3" / "model.py")
    moto_s3.client().delete_object(Bucket=s3_bucket, Key=key)
    with pytest.raises(VersionRejected, match=rf"file {key}: missing in the bucket"):
        bucket.download_verified("a", version, "model.py", expect, tmp_path / "dl4" / "model.py")


def test_a_big_file_comes_down_in_ranged_gets_and_is_verified(
    tmp_path: Path, moto_s3: S3Server, s3_bucket: str, aws_env: dict[str, str]
) -> None:
    import os

    data = os.urandom(BIG)
    version = _push(tmp_path, moto_s3, s3_bucket, "a", {"model.py": b"# a\n", "weights.bin": data})
    bucket = _bucket(tmp_path, moto_s3, s3_bucket)
    try:
        expect = bucket.read_manifest("a", version)["files"]["weights.bin"]  # type: ignore[index]
        key = layout.version_file_key("a", version, "weights.bin")
        before = len(moto_s3.requests())
        assert bucket.download_verified("a", version, "weights.bin", expect, tmp_path / "dl" / "weights.bin") == BIG
        assert (tmp_path / "dl" / "weights.bin").read_bytes() == data
        gets = [r for r in _requests(moto_s3, before) if r == f"GET /{s3_bucket}/{key}"]
        assert len(gets) >= 2, _requests(moto_s3, before)  # ranges, no HeadObject
        assert not any(r.startswith("HEAD") for r in _requests(moto_s3, before))
        tampered = bytearray(data)
        tampered[BIG - 1] ^= 0xFF  # the last range differs
        moto_s3.client().put_object(Bucket=s3_bucket, Key=key, Body=bytes(tampered))
        with pytest.raises(VersionRejected, match=rf"file {key}: sha256"):
            bucket.download_verified("a", version, "weights.bin", expect, tmp_path / "dl2" / "weights.bin")
    finally:
        bucket.close()


def _repo_as(server: S3Server, bucket: str, key: str, secret: str) -> Bucket:
    import botocore.session

    session = clients.share_data_loader(botocore.session.get_session())
    session.set_credentials(key, secret)
    return Bucket(_env(server, bucket), clients.AGENT, session=session)


def test_denied_and_unreachable_buckets_keep_serving_errors_apart(tmp_path: Path, rclone_s3: S3Server) -> None:
    name = rclone_s3.make_bucket("models-agent-bucket")
    denied = _bucket(tmp_path, rclone_s3, name, _repo_as(rclone_s3, name, KEY, "wrong-secret"))
    with pytest.raises(S3AccessDenied, match="list pin index"):
        denied.changed_pins()
    absent = _bucket(tmp_path, rclone_s3, "models-absent", _repo_as(rclone_s3, "models-absent", KEY, SECRET))
    with pytest.raises(S3AccessDenied, match="NoSuchBucket"):
        absent.fetch_pin("a", "e", None)
    working = _bucket(tmp_path, rclone_s3, name, _repo_as(rclone_s3, name, KEY, SECRET))
    assert working.changed_pins() == {}
    rclone_s3.stop()
    with pytest.raises(S3Unavailable) as raised:
        working.changed_pins()
    assert not isinstance(raised.value, S3AccessDenied)
