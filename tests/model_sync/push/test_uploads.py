"""model_sync.push.uploads against real S3 servers (moto_server and rclone serve s3): the local hashes,
the single-request and multipart uploads, the server-side copies of unchanged files, and the
mapping of S3's digest rejection to "file changed during push"."""

from __future__ import annotations

import hashlib

import pytest

from tests.model_sync.helpers import python_model
from tests.support.s3_servers import S3Server


def _repo(server: S3Server, bucket: str):
    from model_sync import environments
    from model_sync.contract import layout
    from model_sync.s3.bucket import Bucket

    return Bucket(environments.Environment("staging", layout.Root(bucket), server.endpoint, "us-east-1"))


@pytest.mark.parametrize("server", ["moto", "rclone"])
def test_files_are_uploaded_then_unchanged_ones_copied(tmp_path, request, aws_env, server) -> None:
    """Version 1: every file uploaded (the big one in parts on moto); version 2: the unchanged files
    copied server-side from version 1, the changed one uploaded; the bytes are the local ones."""
    from model_sync.push import publish, uploads
    from model_sync.push.push_options import MIN_PART
    from model_sync.push.result import PushResult
    from model_sync.triton_model import model_directory
    from model_sync.ui import Console

    s3: S3Server = request.getfixturevalue(f"{server}_s3")
    bucket = s3.make_bucket()
    big = bytes(range(256)) * (6 * 1024 * 4)  # 6 MiB: above the 5 MiB threshold, two parts
    m = model_directory.load(str(python_model(tmp_path / "a", "simple", {"model.py": b"# a\n", "model.pt": big})))
    uploads.hash_files([m])
    assert m.hashes == {"model.py": hashlib.sha256(b"# a\n").hexdigest(), "model.pt": hashlib.sha256(big).hexdigest()}
    # moto: the big file in parts (UploadPartCopy for its copy); rclone answers UploadPartCopy
    # without an ETag, so there every file stays below the (default) threshold: single requests.
    parts = MIN_PART if server == "moto" else publish.PushOptions.multipart_threshold
    options = publish.PushOptions(multipart_threshold=parts, multipart_chunksize=parts)
    uploader = uploads.Uploader(_repo(s3, bucket), Console(quiet=True), options)
    try:
        first = PushResult("simple", "pushed", 1)
        uploader.transfer(m, 1, set(), None, first)
        assert (sorted(first.uploaded), first.copied) == (["model.pt", "model.py"], [])
        changed = model_directory.load(
            str(python_model(tmp_path / "b", "simple", {"model.py": b"# b\n", "model.pt": big}))
        )
        uploads.hash_files([changed])
        second = PushResult("simple", "pushed", 2)
        uploader.transfer(changed, 2, {"model.pt"}, 1, second)
        assert (second.uploaded, second.copied) == (["model.py"], ["model.pt"])
    finally:
        uploader.close()
    assert s3.get(bucket, "repository/simple/1/model.pt") == s3.get(bucket, "repository/simple/2/model.pt") == big
    assert s3.get(bucket, "repository/simple/2/model.py") == b"# b\n"


def test_a_vanished_file_is_refused_before_anything_is_sent(tmp_path, moto_s3, s3_bucket, aws_env) -> None:
    from model_sync import errors
    from model_sync.push import uploads
    from model_sync.triton_model import model_directory

    model = python_model(tmp_path, "simple")
    m = model_directory.load(str(model))
    (model / "1" / "model.pt").unlink()
    with pytest.raises(errors.SyncError, match=r"^file vanished during push: .*model\.pt; nothing was pinned") as e:
        uploads.hash_files([m])
    assert e.value.code == 4
    assert moto_s3.keys(s3_bucket) == []


@pytest.mark.parametrize("code", ["BadDigest", "XAmzContentChecksumMismatch", "XAmzContentSHA256Mismatch"])
def test_s3_digest_rejection_maps_to_file_changed(tmp_path, code) -> None:
    """AWS S3 answers 400 BadDigest / XAmzContentSHA256Mismatch when the body differs from the
    hashed digest (moto and rclone do not check it, so the mapping is tested on botocore's error
    type, which both single-request uploads and s3transfer's multipart ones raise)."""
    from botocore.exceptions import ClientError

    from model_sync import environments
    from model_sync.contract import layout
    from model_sync.push import publish, uploads
    from model_sync.s3.bucket import Bucket
    from model_sync.triton_model import model_directory
    from model_sync.ui import Console

    m = model_directory.load(str(python_model(tmp_path, "simple")))
    repo = Bucket(environments.Environment("staging", layout.Root("bkt"), "http://127.0.0.1:1", "us-east-1"))
    publisher = uploads.Uploader(repo, Console(quiet=True), publish.PushOptions())
    error = ClientError(
        {"Error": {"Code": code, "Message": "The SHA256 you specified did not match the calculated checksum."}},
        "PutObject",
    )
    mapped = publisher._transfer_error(error, m, "model.pt")
    assert mapped.code == 4
    assert str(mapped) == (
        f"file changed during push: {m.files['model.pt'].path} (S3 rejected it: its SHA256 differs from the one "
        "hashed); nothing was pinned, re-run push"
    )
    other = publisher._transfer_error(
        ClientError({"Error": {"Code": "InternalError", "Message": "x"}}, "PutObject"), m, "model.pt"
    )
    assert other.code == 5
    assert "InternalError" in str(other)
