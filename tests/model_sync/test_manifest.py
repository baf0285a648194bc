"""The manifest/record schemas and their strict reader (model_sync/manifest.py)."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from model_sync import manifest


def _manifest() -> dict:
    return {
        "schema": "model-sync.manifest/v2",
        "model": "resnet",
        "version": 3,
        "files": {"model.pt": {"sha256": "a" * 64, "size": 10}},
        "config_pbtxt": 'name: "resnet"\n',
        "backend": "",
        "platform": "pytorch_libtorch",
        "source": {"path": "/x", "host": "h", "git_commit": None, "promoted_from": None},
        "exporter": {
            "tool": "model-sync 0.1.0",
            "method": "trace",
            "torch_version": "2.13.0",
            "torchscript_format_version": 3,
            "target": "cloud",
            "operators": ["aten::linear", "aten::relu"],
        },
        "compatibility": {
            "triton_image": "nvcr.io/nvidia/tritonserver:25.10-py3",
            "libtorch_version": "2.9.0a0",
            "result": "skew-allowed",
            "detail": "version skew: ...",
        },
        "created_by": "alice",
        "created_at": "2026-01-01T00:00:00.000000Z",
    }


MUTATIONS = [
    (lambda d: d.update(extra=1), r"extra: unknown field"),
    (lambda d: d.pop("files"), r"files: missing"),
    (lambda d: d["files"]["model.pt"].update(sha256="xyz"), r"files\.model\.pt\.sha256: 'xyz'"),
    (lambda d: d["files"]["model.pt"].update(size=-1), r"size: -1; allowed: >= 0"),
    (lambda d: d.update(version="3"), r"version: '3'; allowed: integer"),
    (lambda d: d.update(version=True), r"version: True; allowed: integer"),
    (lambda d: d.update(files={}), r"files: empty"),
    (lambda d: d["exporter"].update(method="jit"), r"exporter\.method: 'jit'; allowed: one of"),
    (lambda d: d.update(created_at="yesterday"), r"created_at: 'yesterday'"),
    (
        lambda d: d.update(schema="model-sync.manifest/v3"),
        r"schema: 'model-sync.manifest/v3'; allowed: one of \['model-sync.manifest/v1', 'model-sync.manifest/v2'\]",
    ),
    (lambda d: d.pop("compatibility"), r"compatibility: missing"),
    (lambda d: d["compatibility"].update(result="maybe"), r"compatibility\.result: 'maybe'; allowed: one of"),
    (
        lambda d: d["exporter"].update(operators="aten::linear"),
        r"exporter\.operators: 'aten::linear'; allowed: array or null",
    ),
    (lambda d: d["exporter"].pop("operators"), r"exporter\.operators: missing"),
]


@pytest.mark.parametrize(("mutate", "match"), MUTATIONS)
def test_manifest_reader_is_strict_and_agrees_with_jsonschema(mutate, match) -> None:
    doc = _manifest()
    jsonschema.validate(doc, manifest.MANIFEST_SCHEMA)
    assert manifest.read_manifest(json.dumps(doc), "resnet", 3)["version"] == 3
    mutate(doc)
    with pytest.raises(manifest.RecordError, match=match):
        manifest.read_manifest(json.dumps(doc))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, manifest.MANIFEST_SCHEMA)


def test_v1_manifests_still_read_and_v1_fields_stay_strict() -> None:
    """Manifests written before version alignment (no operators, no compatibility) stay readable;
    a v1 document carrying v2-only fields is rejected (the schema field decides)."""
    doc = _manifest()
    doc["schema"] = "model-sync.manifest/v1"
    doc.pop("compatibility")
    doc["exporter"].pop("operators")
    jsonschema.validate(doc, manifest.MANIFEST_SCHEMA_V1)
    assert manifest.read_manifest(json.dumps(doc), "resnet", 3)["schema"] == "model-sync.manifest/v1"
    upgraded = manifest.upgrade_manifest(
        doc, {"triton_image": None, "libtorch_version": None, "result": "exempt", "detail": None}
    )
    jsonschema.validate(upgraded, manifest.MANIFEST_SCHEMA)
    assert (upgraded["schema"], upgraded["exporter"]["operators"]) == ("model-sync.manifest/v2", None)
    doc["compatibility"] = upgraded["compatibility"]
    with pytest.raises(manifest.RecordError, match=r"^model-sync.manifest/v1 compatibility: unknown field"):
        manifest.read_manifest(json.dumps(doc))


def test_manifest_reader_checks_key_identity_and_paths() -> None:
    with pytest.raises(manifest.RecordError, match=r"model: 'resnet'; allowed: 'other'"):
        manifest.read_manifest(json.dumps(_manifest()), "other", 3)
    with pytest.raises(manifest.RecordError, match=r"version: 3; allowed: 4"):
        manifest.read_manifest(json.dumps(_manifest()), "resnet", 4)
    doc = _manifest()
    doc["files"] = {"../x": {"sha256": "a" * 64, "size": 1}}
    with pytest.raises(manifest.RecordError, match=r"file path: '\.\./x'"):
        manifest.read_manifest(json.dumps(doc))
    with pytest.raises(manifest.RecordError, match=r"not valid JSON"):
        manifest.read_manifest(b"{nope")


def test_every_schema_is_valid_json_schema() -> None:
    for schema in manifest.SCHEMAS.values():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_verification_record_round_trip() -> None:
    rec = {
        "schema": "model-sync.verification/v1",
        "model": "resnet",
        "version": 3,
        "passed": True,
        "replicas": {"triton/pod-1": "READY"},
        "smoke_inference": True,
        "manifest_sha256": "b" * 64,
        "verified_by": "ci",
        "verified_at": manifest.now(),
    }
    assert manifest.read_verification(manifest.dumps(rec), "resnet", 3)["passed"] is True
    rec["passed"] = "yes"
    with pytest.raises(manifest.RecordError, match=r"passed: 'yes'; allowed: boolean"):
        manifest.dumps(rec)


def _replica_status(**model: object) -> dict:
    entry = {
        "pinned": [2],
        "serving": [1],
        "state": manifest.ReplicaState.READY,
        "error": None,
        "failed": {"2": "boom"},
        "local_versions": [1, 2],
        "smoke": {"ok": True, "version": 1, "at": manifest.format_time(1.5), "detail": "ok"},
    }
    return {
        "schema": manifest.REPLICA_STATUS,
        "env": "prod",
        "deployment": "default",
        "replica": "pod-0",
        "bucket_uri": "s3://bkt",
        "triton_url": None,
        "heartbeat_seconds": 30,
        "s3_reachable": True,
        "last_s3_ok_at": manifest.format_time(2.0),
        "last_error": None,
        "agent_started_at": manifest.format_time(1.0),
        "reported_at": manifest.format_time(3.25),
        "models": {"add": {**entry, **model}},
    }


def test_replica_status_record_round_trips_and_agrees_with_jsonschema() -> None:
    doc = _replica_status()
    jsonschema.validate(json.loads(manifest.dumps(doc)), manifest.REPLICA_STATUS_SCHEMA)
    assert manifest.read_replica_status(manifest.dumps(doc))["models"]["add"]["state"] == "READY"
    assert manifest.read_replica_status(manifest.dumps(_replica_status(smoke=None)))["models"]["add"]["smoke"] is None


@pytest.mark.parametrize(
    ("model", "match"),
    [
        ({"state": "SERVING"}, r"models\.add\.state: 'SERVING'; allowed: one of \['READY'"),
        (
            {"smoke": {"ok": "yes", "version": 1, "at": "1970-01-01T00:00:01.500000Z", "detail": "ok"}},
            r"models\.add\.smoke\.ok: 'yes'; allowed: boolean",
        ),
        ({"extra": 1}, r"models\.add\.extra: unknown field"),
    ],
)
def test_replica_status_reader_is_strict(model: dict, match: str) -> None:
    doc = _replica_status(**model)
    with pytest.raises(manifest.RecordError, match=match):
        manifest.read_replica_status(json.dumps(doc))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, manifest.REPLICA_STATUS_SCHEMA)


def test_one_timestamp_format_round_trips() -> None:
    assert manifest.format_time(1.5) == "1970-01-01T00:00:01.500000Z"
    assert manifest.parse_time(manifest.format_time(1.5)).timestamp() == 1.5
    assert manifest.parse_time("1970-01-01T00:00:02Z").timestamp() == 2.0
    assert re.match(manifest.TIME_RE, manifest.now())
