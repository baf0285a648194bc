"""layout key builders, the manifest/record schemas and strict reader, config.pbtxt pin handling."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from model_sync import layout, manifest, model_config


def test_key_builders_follow_the_documented_layout() -> None:
    assert layout.config_key("resnet") == "repository/resnet/config.pbtxt"
    assert layout.version_file_key("resnet", 3, "model.pt") == "repository/resnet/3/model.pt"
    assert layout.manifest_key("resnet", 3) == "manifests/resnet/3.json"
    assert layout.allocation_key("resnet", 3) == "audit/allocations/resnet/3.json"
    assert layout.verification_key("resnet", 3) == "audit/verifications/resnet/3.json"
    assert layout.promotion_key("resnet", 3) == "audit/promotions/resnet/3.json"
    assert layout.pin_record_key("resnet", "20260101T000000000001Z", 3) == "audit/pins/resnet/20260101T000000000001Z-3.json"
    assert layout.status_key("triton-a", "pod-1") == "status/triton-a/pod-1.json"
    root = layout.Root.parse("s3://bkt/some/prefix/")
    assert (root.bucket, root.prefix, root.key("x")) == ("bkt", "some/prefix", "some/prefix/x")
    assert root.relative("some/prefix/x") == "x"
    assert layout.version_from_dir("12/") == 12
    assert layout.version_from_dir("012") is None
    assert layout.version_from_json_key("manifests/m/7.json") == 7


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: layout.check_model_name("bad/name"), r"model name: 'bad/name'; allowed"),
        (lambda: layout.check_model_name("..x"), r"model name: '\.\.x'"),
        # one rule with the stacks' tritonDeployments.<d>.models and the ingress (lower case, 63)
        (lambda: layout.check_model_name("ResNet"), r"model name: 'ResNet'; allowed: 1-63 characters of a-z 0-9 _ -"),
        (lambda: layout.check_model_name("m" * 64), r"model name: 'm{64}'"),
        (lambda: layout.check_version(0), r"version: 0; allowed: an integer 1\.\."),
        (lambda: layout.check_version(True), r"version: True"),
        (lambda: layout.check_file_path("../etc/passwd"), r"file path: '\.\./etc/passwd'"),
        (lambda: layout.check_file_path("a//b"), r"file path: 'a//b'"),
        (lambda: layout.Root.parse("bkt/x"), r"bucket URI: 'bkt/x'; allowed: s3://bucket\[/prefix\]"),
        (lambda: layout.Root.parse("s3://B_K"), r"bucket: 'B_K'"),
        (lambda: layout.pin_record_key("m", "yesterday", 1), r"pin stamp: 'yesterday'"),
        (lambda: layout.status_key("Bad_Dep", "r"), r"deployment: 'Bad_Dep'"),
    ],
)
def test_layout_rejects_bad_values(call, match) -> None:
    with pytest.raises(layout.LayoutError, match=match):
        call()


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
        "exporter": {"tool": "model-sync 0.1.0", "method": "trace", "torch_version": "2.13.0", "torchscript_format_version": 3, "target": "cloud",
                     "operators": ["aten::linear", "aten::relu"]},
        "compatibility": {"triton_image": "nvcr.io/nvidia/tritonserver:25.10-py3", "libtorch_version": "2.9.0a0", "result": "skew-allowed", "detail": "version skew: ..."},
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
    (lambda d: d.update(schema="model-sync.manifest/v3"), r"schema: 'model-sync.manifest/v3'; allowed: one of \['model-sync.manifest/v1', 'model-sync.manifest/v2'\]"),
    (lambda d: d.pop("compatibility"), r"compatibility: missing"),
    (lambda d: d["compatibility"].update(result="maybe"), r"compatibility\.result: 'maybe'; allowed: one of"),
    (lambda d: d["exporter"].update(operators="aten::linear"), r"exporter\.operators: 'aten::linear'; allowed: array or null"),
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
    upgraded = manifest.upgrade_manifest(doc, {"triton_image": None, "libtorch_version": None, "result": "exempt", "detail": None})
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


def test_pin_round_trip_through_the_protobuf() -> None:
    cfg = model_config.parse('name: "m"\nbackend: "python"\nmax_batch_size: 4\nversion_policy { latest { num_versions: 2 } }\n')
    assert model_config.pinned_version(cfg) is None
    text = model_config.pinned_text(cfg, 7, "m")
    again = model_config.parse(text)
    assert model_config.pinned_version(again) == 7
    assert again.max_batch_size == 4
    assert again.version_policy.WhichOneof("policy_choice") == "specific"
    assert model_config.required_files(again) == ("model.py",)
    assert model_config.required_files(model_config.parse('platform: "pytorch_libtorch"')) == ("model.pt",)
    assert model_config.required_files(model_config.parse('platform: "onnxruntime_onnx"\ndefault_model_filename: "x.onnx"')) == ("x.onnx",)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('nmae: "x"', r"config.pbtxt: does not parse .*no field named \"nmae\""),
        ("max_batch_size: -1\nbackend: \"python\"", r"max_batch_size: -1; allowed: >= 0"),
        ('name: "a b"\nbackend: "python"', r"model name: 'a b'"),
        ('name: "m"', r"neither backend nor platform set"),
    ],
)
def test_config_rules(text, match) -> None:
    with pytest.raises(model_config.ConfigPbtxtError, match=match):
        model_config.check(model_config.parse(text), "config.pbtxt")


def test_config_name_must_match_the_model() -> None:
    with pytest.raises(model_config.ConfigPbtxtError, match=r"name: 'a'; allowed: 'b'"):
        model_config.check(model_config.parse('name: "a"\nbackend: "python"'), "config.pbtxt", "b")


def test_write_file_is_atomic_and_parses(tmp_path) -> None:
    path = tmp_path / "config.pbtxt"
    model_config.write_file(str(path), model_config.pin(model_config.parse('backend: "python"'), 2))
    assert model_config.pinned_version(model_config.read_file(str(path))) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["config.pbtxt"]


def _replica_status(**model: object) -> dict:
    entry = {"pinned": [2], "serving": [1], "state": manifest.ReplicaState.READY, "error": None, "failed": {"2": "boom"},
             "local_versions": [1, 2], "smoke": {"ok": True, "version": 1, "at": manifest.format_time(1.5), "detail": "ok"}}
    return {"schema": manifest.REPLICA_STATUS, "env": "prod", "deployment": "default", "replica": "pod-0",
            "bucket_uri": "s3://bkt", "triton_url": None, "heartbeat_seconds": 30, "s3_reachable": True,
            "last_s3_ok_at": manifest.format_time(2.0), "last_error": None, "agent_started_at": manifest.format_time(1.0),
            "reported_at": manifest.format_time(3.25), "models": {"add": {**entry, **model}}}


def test_replica_status_record_round_trips_and_agrees_with_jsonschema() -> None:
    doc = _replica_status()
    jsonschema.validate(json.loads(manifest.dumps(doc)), manifest.REPLICA_STATUS_SCHEMA)
    assert manifest.read_replica_status(manifest.dumps(doc))["models"]["add"]["state"] == "READY"
    assert manifest.read_replica_status(manifest.dumps(_replica_status(smoke=None)))["models"]["add"]["smoke"] is None


@pytest.mark.parametrize(("model", "match"), [
    ({"state": "SERVING"}, r"models\.add\.state: 'SERVING'; allowed: one of \['READY'"),
    ({"smoke": {"ok": "yes", "version": 1, "at": "1970-01-01T00:00:01.500000Z", "detail": "ok"}}, r"models\.add\.smoke\.ok: 'yes'; allowed: boolean"),
    ({"extra": 1}, r"models\.add\.extra: unknown field"),
])
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
