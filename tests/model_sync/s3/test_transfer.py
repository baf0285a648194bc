"""model_sync/s3/transfer.py against a real moto_server: s3transfer managers tuned by
TransferSettings uploading in parts, copying server-side and downloading (one streamed GET or
ranged GETs into a file hashed as written), checked by moto's request log and by reading the
objects back with a separate client. HashingFile's in-order hashing on a real file in tmp_path."""

from __future__ import annotations

import functools
import hashlib
import io
import os
import threading
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from model_sync import errors
from model_sync.contract import layout
from model_sync.s3 import clients, download, failures, transfer
from tests.support.s3_servers import REGION, S3Server

KEY = layout.version_file_key("m", 1, "model.pt")
PART = 5 * transfer.MB  # S3's (and moto's) smallest part but the last


@pytest.fixture(autouse=True)
def _credentials(aws_env: dict[str, str]) -> None:
    """The test key through botocore's default chain."""


@functools.cache
def _session() -> Any:
    return clients.new_session(REGION)


def client_for(server: S3Server) -> Any:
    """model_sync's own client (model_sync.s3.clients), the one every transfer runs on."""
    return clients.create_client(_session(), REGION, server.endpoint, clients.AGENT)


@functools.cache
def observer(server: S3Server) -> Any:
    """A separate boto3 client that stores and reads back objects (one per server: ~0.3 s each)."""
    return server.client()


def server_get(server: S3Server, bucket: str, key: str) -> bytes:
    return bytes(observer(server).get_object(Bucket=bucket, Key=key)["Body"].read())


def seen_since(server: S3Server, before: int) -> list[str]:
    """moto's request lines after `before`, as 'METHOD /path?query' without the protocol."""
    return [r.rsplit(" ", 1)[0] for r in server.requests()[before:]]


def test_the_manager_carries_the_settings() -> None:
    settings = transfer.TransferSettings(threshold=8 * transfer.MB, chunksize=32 * transfer.MB, concurrency=4)
    mgr = transfer.manager(
        clients.create_client(_session(), REGION, "http://127.0.0.1:9"), settings
    )  # no request is sent
    try:
        c = mgr.config
        assert (c.multipart_threshold, c.multipart_chunksize, c.max_request_concurrency, c.max_submission_concurrency,
                c.io_chunksize) == (
            8 * transfer.MB, 32 * transfer.MB, 4, 4, transfer.IO_CHUNK)  # fmt: skip
    finally:
        mgr.shutdown()
    assert transfer.TransferSettings() == transfer.TransferSettings(
        threshold=16 * transfer.MB, chunksize=16 * transfer.MB, concurrency=16
    )
    assert transfer.IO_CHUNK == transfer.MB


def test_a_file_above_the_threshold_is_uploaded_in_parts(moto_s3: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    data = os.urandom(2 * PART + 1234)
    (tmp_path / "model.pt").write_bytes(data)
    mgr = transfer.manager(
        client_for(moto_s3), transfer.TransferSettings(threshold=PART, chunksize=PART, concurrency=4)
    )
    before = len(moto_s3.requests())
    try:
        mgr.upload(str(tmp_path / "model.pt"), s3_bucket, KEY).result()
    finally:
        mgr.shutdown()
    seen = seen_since(moto_s3, before)
    assert seen[0] == f"POST /{s3_bucket}/{KEY}?uploads"
    parts = [urllib.parse.parse_qs(r.split("?", 1)[1]) for r in seen[1:4]]
    assert [r.split()[0] for r in seen[1:4]] == ["PUT"] * 3
    assert sorted(int(q["partNumber"][0]) for q in parts) == [1, 2, 3]
    assert seen[4].startswith(f"POST /{s3_bucket}/{KEY}?uploadId=")
    assert len(seen) == 5
    head = observer(moto_s3).head_object(Bucket=s3_bucket, Key=KEY)
    assert head["ETag"].strip('"').endswith("-3")
    assert server_get(moto_s3, s3_bucket, KEY) == data


def test_a_file_below_the_threshold_is_one_put(moto_s3: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    (tmp_path / "model.pt").write_bytes(b"small")
    mgr = transfer.manager(client_for(moto_s3), transfer.TransferSettings())
    before = len(moto_s3.requests())
    try:
        mgr.upload(str(tmp_path / "model.pt"), s3_bucket, KEY).result()
    finally:
        mgr.shutdown()
    assert seen_since(moto_s3, before) == [f"PUT /{s3_bucket}/{KEY}"]
    assert server_get(moto_s3, s3_bucket, KEY) == b"small"


def test_a_server_side_copy_moves_no_bytes_through_the_client(moto_s3: S3Server, s3_bucket: str) -> None:
    data = os.urandom(64 * 1024)
    observer(moto_s3).put_object(Bucket=s3_bucket, Key=KEY, Body=data)
    target = layout.version_file_key("m", 2, "model.pt")
    mgr = transfer.manager(client_for(moto_s3), transfer.TransferSettings())
    before = len(moto_s3.requests())
    try:
        mgr.copy(
            {"Bucket": s3_bucket, "Key": KEY}, s3_bucket, target, extra_args={"ChecksumAlgorithm": "SHA256"}
        ).result()
    finally:
        mgr.shutdown()
    seen = seen_since(moto_s3, before)
    assert f"PUT /{s3_bucket}/{target}" in seen
    assert not [r for r in seen if r.startswith("GET ")]  # nothing downloaded
    assert server_get(moto_s3, s3_bucket, target) == data


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


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"concurrency": 0}, r"^TransferSettings\.concurrency: 0; allowed: an integer 1\.\.128$"),
        ({"concurrency": True}, r"^TransferSettings\.concurrency: True; allowed"),
        ({"threshold": 0}, r"^TransferSettings\.threshold: 0; allowed: an integer 1\.\.5368709120$"),
        ({"chunksize": 6 * 1024**3}, r"^TransferSettings\.chunksize: 6442450944; allowed"),
        ({"chunksize": 1.5}, r"^TransferSettings\.chunksize: 1\.5; allowed"),
    ],
)
def test_transfer_settings_refuse_numbers_out_of_their_bounds(kwargs, match) -> None:
    """Every transfer (push, the agent, promote) is built from TransferSettings: a setting s3transfer
    would misuse (no parallelism, a part over S3's 5 GiB) never reaches it."""
    with pytest.raises(transfer.TransferSettingError, match=match):
        transfer.TransferSettings(**kwargs)
