"""The manifest/record schemas and their strict reader (model_sync/records/codec.py)."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from model_sync.records import codec


def _manifest() -> dict:
    return {
        "schema": "model-sync.manifest/v4",
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
            "format": "torchscript",
            "device": None,
            "gpu_architectures": None,
            "onnx_opset": None,
            "onnx_ir_version": None,
        },
        "compatibility": {
            "triton_image": "nvcr.io/nvidia/tritonserver:25.10-py3",
            "libtorch_version": "2.9.0a0",
            "result": "skew-allowed",
            "detail": "version skew: ...",
        },
        "gpu_memory": {
            "bytes_per_instance": 123_456_789,
            "method": "measured",
            "batch": 8,
            "device": "NVIDIA H200",
            "basis": "torch.cuda.max_memory_reserved() over one inference at batch 8 on NVIDIA H200",
        },
        "instance_groups": [{"kind": "KIND_GPU", "count": 2, "gpus": []}, {"kind": "KIND_CPU", "count": 1, "gpus": []}],
        "created_by": "alice",
        "created_at": "2026-01-01T00:00:00.000000Z",
    }


V4_EXPORTER = ("format", "device", "gpu_architectures", "onnx_opset", "onnx_ir_version")


def _as_v3(doc: dict) -> dict:
    """The same version as model-sync wrote it before export formats (manifest v3)."""
    exporter = {k: v for k, v in doc["exporter"].items() if k not in V4_EXPORTER}
    return {**doc, "schema": "model-sync.manifest/v3", "exporter": exporter}


def _as_v2(doc: dict) -> dict:
    """The same version as model-sync wrote it before GPU memory planning (manifest v2)."""
    out = {k: v for k, v in _as_v3(doc).items() if k not in ("gpu_memory", "instance_groups")}
    return {**out, "schema": "model-sync.manifest/v2"}


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
        lambda d: d.update(schema="model-sync.manifest/v5"),
        r"schema: 'model-sync.manifest/v5'; allowed: one of \['model-sync.manifest/v1', 'model-sync.manifest/v2', "
        r"'model-sync.manifest/v3', 'model-sync.manifest/v4'\]",
    ),
    (lambda d: d.pop("compatibility"), r"compatibility: missing"),
    (lambda d: d["compatibility"].update(result="maybe"), r"compatibility\.result: 'maybe'; allowed: one of"),
    (
        lambda d: d["exporter"].update(operators="aten::linear"),
        r"exporter\.operators: 'aten::linear'; allowed: array or null",
    ),
    (lambda d: d["exporter"].pop("operators"), r"exporter\.operators: missing"),
    (lambda d: d.pop("gpu_memory"), r"^model-sync.manifest/v4 gpu_memory: missing"),
    (lambda d: d["exporter"].pop("format"), r"exporter\.format: missing"),
    (lambda d: d["exporter"].update(format="tflite"), r"exporter\.format: 'tflite'; allowed: one of"),
    (lambda d: d["exporter"].update(onnx_opset=0), r"exporter\.onnx_opset: 0; allowed: >= 1"),
    (lambda d: d["exporter"].update(gpu_architectures=["90"]), r"exporter\.gpu_architectures\[0\]: '90'"),
    (lambda d: d.pop("instance_groups"), r"instance_groups: missing"),
    (lambda d: d.update(instance_groups=[]), r"instance_groups: 0 items; allowed: at least 1 items"),
    (
        lambda d: d["instance_groups"][0].update(kind="KIND_TPU"),
        r"instance_groups\[0\]\.kind: 'KIND_TPU'; allowed: one of \['KIND_AUTO', 'KIND_GPU', 'KIND_CPU', 'KIND_MODEL'\]",
    ),
    (lambda d: d["instance_groups"][1].update(count=0), r"instance_groups\[1\]\.count: 0; allowed: >= 1"),
    (lambda d: d["instance_groups"][0].update(gpus=[-1]), r"instance_groups\[0\]\.gpus\[0\]: -1; allowed: >= 0"),
    (lambda d: d["gpu_memory"].update(method="guessed"), r"gpu_memory\.method: 'guessed'; allowed: one of"),
    (
        lambda d: d["gpu_memory"].update(bytes_per_instance=1.5),
        r"gpu_memory\.bytes_per_instance: 1\.5; allowed: integer",
    ),
    (lambda d: d["gpu_memory"].update(extra=1), r"gpu_memory\.extra: unknown field"),
]


@pytest.mark.parametrize(("mutate", "match"), MUTATIONS)
def test_manifest_reader_is_strict_and_agrees_with_jsonschema(mutate, match) -> None:
    doc = _manifest()
    jsonschema.validate(doc, codec.MANIFEST_SCHEMA)
    assert codec.read_manifest(json.dumps(doc), "resnet", 3)["version"] == 3
    mutate(doc)
    with pytest.raises(codec.RecordError, match=match):
        codec.read_manifest(json.dumps(doc))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, codec.MANIFEST_SCHEMA)


EXEMPT = {"triton_image": None, "libtorch_version": None, "result": "exempt", "detail": None}
GROUPS = [{"kind": "KIND_GPU", "count": 1, "gpus": [0]}]


def test_v4_manifest_round_trips_with_gpu_memory_instance_groups_and_its_format() -> None:
    doc = _manifest()
    back = codec.read_manifest(codec.dumps(doc), "resnet", 3)
    assert back == doc
    assert (back["gpu_memory"]["bytes_per_instance"], back["instance_groups"][0]["count"]) == (123_456_789, 2)
    doc["gpu_memory"] = None  # a directory `export` did not write: unknown, still a valid v4
    assert codec.read_manifest(codec.dumps(doc))["gpu_memory"] is None


def test_v3_manifests_still_read_and_upgrade_with_an_unknown_format() -> None:
    """Manifests written before export formats stay readable; a v3 document carrying v4-only fields
    is rejected; promote upgrades them to v4 with the format facts null (alignment then goes by
    their platform: model_sync/admission/alignment.py)."""
    doc = _as_v3(_manifest())
    jsonschema.validate(doc, codec.MANIFEST_SCHEMA_V3)
    assert codec.read_manifest(json.dumps(doc), "resnet", 3)["schema"] == "model-sync.manifest/v3"
    upgraded = codec.upgrade_manifest(doc, EXEMPT, GROUPS)
    assert upgraded["schema"] == "model-sync.manifest/v4"
    assert {k: upgraded["exporter"][k] for k in V4_EXPORTER} == dict.fromkeys(V4_EXPORTER)
    doc["exporter"]["format"] = "onnx"
    with pytest.raises(codec.RecordError, match=r"^model-sync.manifest/v3 exporter\.format: unknown field"):
        codec.read_manifest(json.dumps(doc))


def test_v1_manifests_still_read_and_v1_fields_stay_strict() -> None:
    """Manifests written before version alignment (no operators, no compatibility) stay readable;
    a v1 document carrying v2-only fields is rejected (the schema field decides)."""
    doc = _as_v2(_manifest())
    doc["schema"] = "model-sync.manifest/v1"
    doc.pop("compatibility")
    doc["exporter"].pop("operators")
    jsonschema.validate(doc, codec.MANIFEST_SCHEMA_V1)
    assert codec.read_manifest(json.dumps(doc), "resnet", 3)["schema"] == "model-sync.manifest/v1"
    upgraded = codec.upgrade_manifest(doc, EXEMPT, GROUPS)
    jsonschema.validate(upgraded, codec.MANIFEST_SCHEMA)
    assert (upgraded["schema"], upgraded["exporter"]["operators"], upgraded["gpu_memory"]) == (
        "model-sync.manifest/v4",
        None,
        None,
    )
    assert upgraded["instance_groups"] == GROUPS
    doc["compatibility"] = upgraded["compatibility"]
    with pytest.raises(codec.RecordError, match=r"^model-sync.manifest/v1 compatibility: unknown field"):
        codec.read_manifest(json.dumps(doc))


def test_v2_manifests_still_read_upgrade_as_unknown_and_stay_strict() -> None:
    """Manifests written before GPU memory planning stay readable (their GPU memory is unknown); a
    v2 document carrying v3-only fields is rejected; promote upgrades them to v3 with a null
    gpu_memory, and a v3 source keeps its own."""
    doc = _as_v2(_manifest())
    jsonschema.validate(doc, codec.MANIFEST_SCHEMA_V2)
    assert codec.read_manifest(json.dumps(doc), "resnet", 3)["schema"] == "model-sync.manifest/v2"
    upgraded = codec.upgrade_manifest(doc, EXEMPT, GROUPS)
    assert (upgraded["schema"], upgraded["gpu_memory"], upgraded["instance_groups"]) == (
        "model-sync.manifest/v4",
        None,
        GROUPS,
    )
    assert upgraded["exporter"]["operators"] == ["aten::linear", "aten::relu"]
    assert codec.upgrade_manifest(_manifest(), EXEMPT, GROUPS)["gpu_memory"] == _manifest()["gpu_memory"]
    doc["gpu_memory"] = None
    with pytest.raises(codec.RecordError, match=r"^model-sync.manifest/v2 gpu_memory: unknown field"):
        codec.read_manifest(json.dumps(doc))


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("lots", r"^gpu_memory: 'lots'; allowed: object$"),
        ({"method": "cpu"}, r"^gpu_memory\.bytes_per_instance: missing; allowed: a required field$"),
        (
            {"bytes_per_instance": -1, "method": "cpu", "batch": 1, "device": None, "basis": "x"},
            r"^gpu_memory\.bytes_per_instance: -1; allowed: >= 0$",
        ),
    ],
)
def test_a_part_of_a_record_is_validated_with_the_same_one_line_errors(value, match) -> None:
    with pytest.raises(codec.RecordError, match=match):
        codec.validate_part(value, codec.GPU_MEMORY, "gpu_memory")


def test_manifest_reader_checks_key_identity_and_paths() -> None:
    with pytest.raises(codec.RecordError, match=r"model: 'resnet'; allowed: 'other'"):
        codec.read_manifest(json.dumps(_manifest()), "other", 3)
    with pytest.raises(codec.RecordError, match=r"version: 3; allowed: 4"):
        codec.read_manifest(json.dumps(_manifest()), "resnet", 4)
    doc = _manifest()
    doc["files"] = {"../x": {"sha256": "a" * 64, "size": 1}}
    with pytest.raises(codec.RecordError, match=r"file path: '\.\./x'"):
        codec.read_manifest(json.dumps(doc))
    with pytest.raises(codec.RecordError, match=r"not valid JSON"):
        codec.read_manifest(b"{nope")


def test_every_schema_is_valid_json_schema() -> None:
    for schema in codec.SCHEMAS.values():
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
        "verified_at": codec.now(),
    }
    assert codec.read_verification(codec.dumps(rec), "resnet", 3)["passed"] is True
    rec["passed"] = "yes"
    with pytest.raises(codec.RecordError, match=r"passed: 'yes'; allowed: boolean"):
        codec.dumps(rec)


def _replica_status(**model: object) -> dict:
    entry = {
        "pinned": [2],
        "serving": [1],
        "state": codec.ReplicaState.READY,
        "error": None,
        "failed": {"2": "boom"},
        "local_versions": [1, 2],
        "smoke": {"ok": True, "version": 1, "at": codec.format_time(1.5), "detail": "ok"},
    }
    return {
        "schema": codec.REPLICA_STATUS,
        "env": "prod",
        "deployment": "default",
        "replica": "pod-0",
        "bucket_uri": "s3://bkt",
        "triton_url": None,
        "heartbeat_seconds": 30,
        "s3_reachable": True,
        "last_s3_ok_at": codec.format_time(2.0),
        "last_error": None,
        "agent_started_at": codec.format_time(1.0),
        "reported_at": codec.format_time(3.25),
        "models": {"add": {**entry, **model}},
    }


def test_replica_status_record_round_trips_and_agrees_with_jsonschema() -> None:
    doc = _replica_status()
    jsonschema.validate(json.loads(codec.dumps(doc)), codec.REPLICA_STATUS_SCHEMA)
    assert codec.read_replica_status(codec.dumps(doc))["models"]["add"]["state"] == "READY"
    assert codec.read_replica_status(codec.dumps(_replica_status(smoke=None)))["models"]["add"]["smoke"] is None


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
    with pytest.raises(codec.RecordError, match=match):
        codec.read_replica_status(json.dumps(doc))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, codec.REPLICA_STATUS_SCHEMA)


def test_one_timestamp_format_round_trips() -> None:
    assert codec.format_time(1.5) == "1970-01-01T00:00:01.500000Z"
    assert codec.parse_time(codec.format_time(1.5)).timestamp() == 1.5
    assert codec.parse_time("1970-01-01T00:00:02Z").timestamp() == 2.0
    assert re.match(codec.TIME_RE, codec.now())
