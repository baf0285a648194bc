"""model_sync/s3/transfer.py against a real moto_server: s3transfer managers tuned by
TransferSettings uploading in parts and copying server-side, checked by moto's request log and by
reading the objects back with a separate client; TransferSettings' bounds."""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

import pytest

from model_sync.contract import layout
from model_sync.s3 import clients, transfer
from tests.model_sync.s3._helpers import KEY, PART, client_for, observer, seen_since, server_get, session
from tests.support.s3_servers import REGION, S3Server


@pytest.fixture(autouse=True)
def _credentials(aws_env: dict[str, str]) -> None:
    """The test key through botocore's default chain."""


def test_the_manager_carries_the_settings() -> None:
    settings = transfer.TransferSettings(threshold=8 * transfer.MB, chunksize=32 * transfer.MB, concurrency=4)
    mgr = transfer.manager(
        clients.create_client(session(), REGION, "http://127.0.0.1:9"), settings
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
