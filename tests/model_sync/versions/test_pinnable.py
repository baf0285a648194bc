"""model_sync.versions.pinnable against a real moto_server: the check every command that pins runs
before it writes returns the manifest of a version every replica serves, and refuses (exit 4, one
line naming the model, version and what is wrong) a manifest whose config pins another version or
whose listed files are not all in the bucket; a version without a manifest is exit 3."""

from __future__ import annotations

import pytest

from model_sync import environments, errors
from model_sync.records import codec
from model_sync.s3.bucket import Bucket
from model_sync.versions import pinnable
from tests.model_sync.helpers import python_model, run_cli, write_config


def test_the_check_returns_the_manifest_or_refuses_in_one_line(tmp_path, capsys, moto_s3, aws_env) -> None:
    bucket = moto_s3.make_bucket()
    cfg = write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{bucket}"})
    for tag in ("1", "2"):
        src = python_model(tmp_path / tag, "m", {"model.py": tag.encode(), "model.pt": tag.encode() * 10})
        assert run_cli(capsys, "push", str(src), "--env", "staging", "--config", cfg).code == 0
    repo = Bucket(environments.resolve("staging", cfg))
    assert pinnable.check(repo, "m", 1, "rollback")["version"] == 1

    doc = codec.read_manifest(moto_s3.get(bucket, "manifests/m/1.json"), "m", 1)
    doc["config_pbtxt"] = codec.read_manifest(moto_s3.get(bucket, "manifests/m/2.json"), "m", 2)["config_pbtxt"]
    moto_s3.client().put_object(Bucket=bucket, Key="manifests/m/1.json", Body=codec.dumps(doc))
    with pytest.raises(errors.SyncError) as e:
        pinnable.check(repo, "m", 1, "rollback")
    assert e.value.code == errors.REFUSED
    assert str(e.value).startswith(
        f"rollback: m version 1 in staging: pin config_pbtxt of s3://{bucket}/manifests/m/1.json: differs from "
        "manifest config_pbtxt (pins version(s) [2], manifest version 1); allowed: the config text recorded in "
    ), e.value

    moto_s3.client().delete_object(Bucket=bucket, Key="repository/m/2/model.pt")
    with pytest.raises(errors.SyncError) as e:
        pinnable.check(repo, "m", 2, "promote")
    assert (e.value.code, str(e.value)) == (
        errors.REFUSED,
        f"promote: m version 2 in staging: s3://{bucket}/repository/m/2/ is incomplete (model.pt missing); allowed: "
        "a version with every file its manifest lists, at its size, which every replica serves (`model-sync "
        "status` lists the versions)",
    )
    with pytest.raises(errors.SyncError) as e:
        pinnable.check(repo, "m", 3, "rollback")
    assert e.value.code == errors.NOT_FOUND
