"""model_sync/s3/download.py against a real moto_server: one streamed GET or ranged GETs into a
file hashed as it is written, stopping when asked; HashingFile's in-order hashing on a real file in
tmp_path."""

from __future__ import annotations

import hashlib
import io
import os
import threading
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from model_sync import errors
from model_sync.s3 import download, failures, transfer
from tests.model_sync.s3._helpers import KEY, client_for, observer, seen_since
from tests.support.s3_servers import S3Server


@pytest.fixture(autouse=True)
def _credentials(aws_env: dict[str, str]) -> None:
    """The test key through botocore's default chain."""


def test_a_small_download_into_a_file_is_one_get(moto_s3: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    data = os.urandom(100_000)
    observer(moto_s3).put_object(Bucket=s3_bucket, Key=KEY, Body=data)
    before = len(moto_s3.requests())
    with open(tmp_path / "model.pt", "w+b") as out:
        digest, size = download.download(
            client_for(moto_s3), s3_bucket, KEY, out, len(data), transfer.TransferSettings()
        )
    assert seen_since(moto_s3, before) == [f"GET /{s3_bucket}/{KEY}"]
    assert (digest, size, (tmp_path / "model.pt").read_bytes()) == (hashlib.sha256(data).hexdigest(), len(data), data)


def test_a_shared_manager_serves_several_downloads_and_stays_open(
    moto_s3: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    client = client_for(moto_s3)
    settings = transfer.TransferSettings(threshold=256 * 1024, chunksize=256 * 1024, concurrency=4)
    blobs = {f"repository/m/1/{i}.bin": os.urandom(600 * 1024 + i) for i in range(2)}
    for key, data in blobs.items():
        observer(moto_s3).put_object(Bucket=s3_bucket, Key=key, Body=data)
    mgr = transfer.manager(client, settings)
    try:
        for key, data in blobs.items():
            before = len(moto_s3.requests())
            with open(tmp_path / "out", "w+b") as out:
                assert download.download(client, s3_bucket, key, out, len(data), settings, shared=mgr) == (
                    hashlib.sha256(data).hexdigest(),
                    len(data),
                )
            assert (tmp_path / "out").read_bytes() == data
            assert seen_since(moto_s3, before) == [f"GET /{s3_bucket}/{key}"] * 3  # 3 ranges of 256 KiB, no HeadObject
    finally:
        mgr.shutdown()


def test_a_digest_of_other_bytes_than_the_manifest_is_visible_to_the_caller(
    moto_s3: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    """download() returns what it hashed; the caller compares it with the manifest: a short
    object (the size said more) shows as fewer bytes hashed."""
    observer(moto_s3).put_object(Bucket=s3_bucket, Key=KEY, Body=b"12345")
    with open(tmp_path / "out", "w+b") as out:
        digest, size = download.download(client_for(moto_s3), s3_bucket, KEY, out, 10, transfer.TransferSettings())
    assert (digest, size) == (hashlib.sha256(b"12345").hexdigest(), 5)


@pytest.mark.parametrize("ranged", [False, True])
def test_a_missing_object_raises_botocores_error_for_the_caller_to_classify(
    moto_s3: S3Server, s3_bucket: str, tmp_path: Path, ranged: bool
) -> None:
    settings = transfer.TransferSettings(threshold=1024 if ranged else transfer.MB, chunksize=1024, concurrency=2)
    with open(tmp_path / "out", "w+b") as out, pytest.raises(ClientError) as e:
        download.download(client_for(moto_s3), s3_bucket, KEY, out, 4096, settings)
    assert failures.classify(e.value) is failures.Kind.NOT_FOUND


def test_a_ranged_download_stops_when_asked(moto_s3: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    data = os.urandom(4 * 64 * 1024)
    observer(moto_s3).put_object(Bucket=s3_bucket, Key=KEY, Body=data)
    stop = threading.Event()
    stop.set()
    settings = transfer.TransferSettings(threshold=64 * 1024, chunksize=64 * 1024, concurrency=2)
    with open(tmp_path / "out", "w+b") as out, pytest.raises(errors.Abandoned):
        download.download(client_for(moto_s3), s3_bucket, KEY, out, len(data), settings, stop)


def test_hashing_file_hashes_out_of_order_writes_in_file_order(tmp_path: Path) -> None:
    data = os.urandom(300)
    with open(tmp_path / "f", "w+b") as out:
        writer = download.HashingFile(out)
        assert writer.seekable()
        for offset in (200, 100, 0):  # the last range first, the first last
            writer.seek(offset)
            assert writer.write(data[offset : offset + 100]) == 100
            assert writer.hashed == (300 if offset == 0 else 0)
        assert writer.tell() == 100
    assert writer.sha256.hexdigest() == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "f").read_bytes() == data


def test_hashing_file_with_a_plain_writer_and_writeback(tmp_path: Path) -> None:
    sink = io.BytesIO()
    plain = download.HashingFile(sink)
    assert plain.seekable() is False  # no fileno: the single-stream path
    plain.write(b"ab")
    plain.write(b"cd")
    plain.flush()
    assert (plain.sha256.hexdigest(), plain.hashed, sink.getvalue()) == (
        hashlib.sha256(b"abcd").hexdigest(),
        4,
        b"abcd",
    )
    with open(tmp_path / "f", "w+b") as out:
        synced = download.HashingFile(out, sync_every=1024)
        for _ in range(4):
            synced.write(b"x" * 1024)
        synced.settle()
        assert synced._syncing is not None  # a writeback ran on its helper thread
        assert not synced._syncing.is_alive()
    stop = threading.Event()
    stopped = download.HashingFile(io.BytesIO(), stop)
    stopped.write(b"a")
    stop.set()
    with pytest.raises(errors.Abandoned):
        stopped.write(b"b")
    assert stopped.hashed == 1
