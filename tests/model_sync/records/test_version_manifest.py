"""model_sync.records.version_manifest against a real moto_server: the manifest document of a version (every
file's sha256 and size, the pinned config text, who) passes the strict reader once stored, and is
what `push` itself writes; export.json's `gpu_memory`, read strictly before any request."""

from __future__ import annotations

import hashlib
import json

import pytest

from model_sync import errors
from model_sync.contract import layout
from model_sync.environments import Environment
from model_sync.push import publish
from model_sync.push.push_options import PushOptions
from model_sync.push.uploads import hash_files
from model_sync.records import codec, compatibility
from model_sync.records.version_manifest import build_manifest, file_entries, read_gpu_memory
from model_sync.s3.bucket import Bucket
from model_sync.triton_model import model_directory
from model_sync.ui import Console
from model_sync.versions import catalog
from tests.model_sync.helpers import manifest_doc, python_model, run_cli, write_config
from tests.support.s3_servers import REGION, S3Server


def _repo(server: S3Server, bucket: str) -> Bucket:
    return Bucket(Environment("staging", layout.Root(bucket), server.endpoint, REGION))


def test_the_manifest_round_trips_through_the_strict_reader(
    tmp_path, moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    m = model_directory.load(
        str(python_model(tmp_path / "m", "simple", {"model.py": b"# a\n", "model.pt": b"weights"}))
    )
    hash_files([m])
    entries = file_entries(m)
    assert entries == {
        "model.pt": {"sha256": hashlib.sha256(b"weights").hexdigest(), "size": 7},
        "model.py": {"sha256": hashlib.sha256(b"# a\n").hexdigest(), "size": 4},
    }
    doc = build_manifest(m, 3, "tester", compatibility.record(None, None, compatibility.Result.EXEMPT, None))
    assert (doc["schema"], doc["model"], doc["version"], doc["files"], doc["created_by"]) == (
        codec.MANIFEST_V4,
        "simple",
        3,
        entries,
        "tester",
    )
    # No export.json: GPU memory unknown; no instance_group: Triton's default, one instance per GPU.
    assert (doc["gpu_memory"], doc["instance_groups"]) == (None, [{"kind": "KIND_AUTO", "count": 1, "gpus": []}])
    assert doc["config_pbtxt"] == m.pinned_text(3)
    repo = _repo(moto_s3, s3_bucket)
    assert repo.put_new(layout.manifest_key("simple", 3), codec.dumps(doc)) is True
    assert catalog.read_manifest(repo, "simple", 3) == doc


def test_push_writes_the_manifest_build_manifest_builds(tmp_path, moto_s3: S3Server, s3_bucket: str, aws_env) -> None:
    m = model_directory.load(str(python_model(tmp_path / "m", "simple")))
    [result] = publish.push(_repo(moto_s3, s3_bucket), [m], Console(quiet=True), PushOptions(use_cache=False), "tester")
    assert (result.action, result.version) == ("pushed", 1)
    stored = manifest_doc(moto_s3, s3_bucket, "simple", 1)
    expected = build_manifest(m, 1, "tester", stored["compatibility"])
    assert {k: v for k, v in stored.items() if k != "created_at"} == {
        k: v for k, v in expected.items() if k != "created_at"
    }


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (
            {"bytes_per_instance": "1 GiB", "method": "estimated", "batch": 8, "device": None, "basis": "x"},
            r"gpu_memory\.bytes_per_instance: '1 GiB'; allowed: integer$",
        ),
        ({"method": "estimated"}, r"gpu_memory\.bytes_per_instance: missing; allowed: a required field$"),
        (
            {"bytes_per_instance": 5, "method": "cpu", "batch": 1, "device": None, "basis": "x"},
            r"gpu_memory\.bytes_per_instance: 5 with method 'cpu'; allowed: 0$",
        ),
        (
            {"bytes_per_instance": 5, "method": "measured", "batch": 1, "device": None, "basis": "x"},
            r"gpu_memory\.device: None with method 'measured'; allowed: the GPU's name for 'measured' only",
        ),
        (
            {"bytes_per_instance": 5, "method": "estimated", "batch": 1, "device": "H100", "basis": "x"},
            r"gpu_memory\.device: 'H100' with method 'estimated'",
        ),
    ],
)
def test_push_reads_the_record_strictly_before_any_request(tmp_path, capsys, moto_s3, aws_env, value, match) -> None:
    bucket = moto_s3.make_bucket()
    cfg = write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{bucket}"})
    model = python_model(tmp_path, "m")
    (model / "export.json").write_text(json.dumps({"gpu_memory": value}))
    with pytest.raises(errors.SyncError, match=match):
        read_gpu_memory(value, "export.json")
    before = len(moto_s3.requests())
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == errors.USAGE, r.err
    assert r.err.startswith(f"model-sync: {model / 'export.json'} gpu_memory."), r.err
    assert r.err.count("\n") == 1
    assert moto_s3.requests()[before:] == []
    assert read_gpu_memory(None, "export.json") is None  # absent: unknown, not an error
