"""model_sync.push.push_options: PushOptions' bounds, and `model-sync push`'s flags through cli_options
into a real push (moto_server: the multipart threshold decides single PutObject or parts)."""

from __future__ import annotations

import pytest

from model_sync import errors
from model_sync.contract import layout
from model_sync.environments import Environment
from model_sync.push import publish
from model_sync.push.push_options import MAX_PART, MB, MIN_PART, PushOptions, cli_options
from model_sync.s3.bucket import Bucket
from model_sync.triton_model import model_directory
from model_sync.ui import Console
from tests.model_sync.helpers import python_model
from tests.support.s3_servers import REGION, S3Server


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"concurrency": 0}, r"^PushOptions\.concurrency: 0; allowed: an integer 1\.\.128$"),
        ({"concurrency": 129}, r"^PushOptions\.concurrency: 129; allowed: an integer 1\.\.128$"),
        ({"model_workers": 0}, r"^PushOptions\.model_workers: 0; allowed: an integer 1\.\.64$"),
        (
            {"multipart_threshold": 5 * 1024 * 1024 - 1},
            r"^PushOptions\.multipart_threshold: 5242879; allowed: an integer 5242880\.\.5368709120 bytes \(S3 "
            r"parts are 5 MiB to 5 GiB\)$",
        ),
        (
            {"multipart_chunksize": 1024},
            r"^PushOptions\.multipart_chunksize: 1024; allowed: an integer 5242880\.\.5368709120 bytes",
        ),
        ({"multipart_chunksize": 6 * 1024**3}, r"^PushOptions\.multipart_chunksize: 6442450944; allowed"),
        ({"concurrency": 4.0}, r"^PushOptions\.concurrency: 4\.0; allowed: an integer"),
        ({"concurrency": True}, r"^PushOptions\.concurrency: True; allowed: an integer"),
        ({"dry_run": "yes"}, r"^PushOptions\.dry_run: 'yes'; allowed: True or False$"),
        ({"allow_local_target": 1}, r"^PushOptions\.allow_local_target: 1; allowed: True or False$"),
    ],
)
def test_push_options_are_validated(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        PushOptions(**kwargs)


def test_push_options_bounds_are_accepted() -> None:
    low = PushOptions(concurrency=1, model_workers=1, multipart_threshold=MIN_PART, multipart_chunksize=MIN_PART)
    high = PushOptions(concurrency=128, model_workers=64, multipart_threshold=MAX_PART, multipart_chunksize=MAX_PART)
    assert (low.concurrency, high.multipart_chunksize) == (1, 5 * 1024**3)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"concurrency": 0, "multipart_threshold_mb": 16}, "--concurrency: 0; allowed: 1..128"),
        (
            {"concurrency": 16, "multipart_threshold_mb": 4},
            "--multipart-threshold-mb: 4; allowed: 5..5120 (S3 parts are at least 5 MiB)",
        ),
    ],
)
def test_cli_options_name_the_flag_out_of_bounds(flags, message) -> None:
    with pytest.raises(errors.SyncError) as e:
        cli_options(**flags)
    assert (e.value.code, str(e.value)) == (errors.USAGE, message)


def test_cli_options_threshold_decides_parts(tmp_path, moto_s3: S3Server, s3_bucket: str, aws_env) -> None:
    """--multipart-threshold-mb 5: a 6 MiB file goes up in two parts (a multipart ETag), a small
    one in one PutObject; the booleans pass through."""
    options = cli_options(concurrency=2, multipart_threshold_mb=5, use_cache=False)
    assert (options.multipart_threshold, options.multipart_chunksize, options.concurrency, options.use_cache) == (
        5 * MB,
        5 * MB,
        2,
        False,
    )
    big = bytes(range(256)) * (6 * 1024 * 4)
    m = model_directory.load(str(python_model(tmp_path / "m", "simple", {"model.py": b"# a\n", "model.pt": big})))
    repo = Bucket(Environment("staging", layout.Root(s3_bucket), moto_s3.endpoint, REGION))
    [result] = publish.push(repo, [m], Console(quiet=True), options, "tester")
    assert (result.action, result.version) == ("pushed", 1)
    client = moto_s3.client()
    assert client.head_object(Bucket=s3_bucket, Key="repository/simple/1/model.pt")["ETag"].strip('"').endswith("-2")
    assert "-" not in client.head_object(Bucket=s3_bucket, Key="repository/simple/1/model.py")["ETag"]
