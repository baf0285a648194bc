"""The JSON Schemas (2020-12) of every record model_sync writes to the bucket; model_sync.records.codec
validates with them (jsonschema) in its strict readers and writers.

Every record is UTF-8 JSON with a `schema` field naming its format and version. Readers
reject unknown fields, wrong types and inconsistent values with one-line `RecordError`s
(`<record> <field>: <bad value>; <allowed>`); writers produce sorted, indented JSON.

manifest (manifests/<model>/<N>.json, "model-sync.manifest/v3"), written once per version
after every version file is uploaded and before the pin flips:
    {"schema": "model-sync.manifest/v3", "model": "resnet", "version": 3,
     "files": {"model.pt": {"sha256": "<64 hex>", "size": 123}, ...},   # relative to <N>/
     "config_pbtxt": "<the config.pbtxt text pinned to N, as written to the pin>",
     "backend": "python" | "pytorch" | ..., "platform": "pytorch_libtorch" | "",
     "source": {"path": "/abs/local/dir", "host": "...", "git_commit": "..." | null,
                "promoted_from": null | {"env": "staging", "bucket_uri": "s3://...", "version": 3}},
     "exporter": {"tool": "model-sync 0.1.0", "method": "trace" | "script" | null,
                  "torch_version": "2.13.0+cpu" | null, "torchscript_format_version": 3 | null,
                  "target": "cloud" | "local" | null,
                  "operators": ["aten::linear", ...] | null},     # torch.jit.export_opnames
     "compatibility": {"triton_image": "nvcr.io/nvidia/tritonserver:25.10-py3" | null,
                       "libtorch_version": "2.9.0a0" | null,
                       "result": "compatible" | "exempt" | "skew-allowed",
                       "detail": "why (the skew / exemption message)" | null},   # model_sync/records/compatibility.py
     "created_by": "arn:aws:sts::...:assumed-role/... | unix user", "created_at": "RFC 3339 UTC"}
  v1 ("model-sync.manifest/v1": no `exporter.operators`, no `compatibility`) and v2
  ("model-sync.manifest/v2": no `gpu_memory`, no `instance_groups`) are still read. v3 (what
  model-sync writes) adds GPU memory planning (model_sync/admission/gpu_plan.py), both fields required:
     "gpu_memory": null | {"bytes_per_instance": 123, "method": "measured" | "estimated" | "cpu",
                           "batch": 8, "device": "NVIDIA H100 80GB HBM3" | null,
                           "basis": "one line: what the figure counts"},   # export.json's, model_sync/export/gpu_memory.py
     "instance_groups": [{"kind": "KIND_GPU" | "KIND_CPU" | "KIND_AUTO" | "KIND_MODEL", "count": 2,
                          "gpus": [] | [0, 1]}]   # config.pbtxt's, as Triton places them (gpu_plan.instance_groups)
  null gpu_memory (a directory export did not write) and v1/v2 manifests mean "unknown": the
  planner counts nothing for them and says so. v4 (what model-sync writes now) adds the export
  format and what its alignment compares (model_sync/admission/alignment.py), to `exporter`, each
  required and nullable:
     "exporter": {..., "method": "trace" | "script" | "export" | null,
                  "format": "torchscript" | "pt2" | "onnx" | null,
                  "device": "cpu" | "cuda" | null, "gpu_architectures": ["sm_90"] | null,   # a .pt2's
                  "onnx_opset": 20 | null, "onnx_ir_version": 10 | null}                  # an ONNX model's
  Readers dispatch on `schema` (MANIFEST_SCHEMA_IDS).

verification (audit/verifications/<model>/<N>/<stamp>-<hex>.json, "model-sync.verification/v2"),
one record per `model-sync verify` attempt in the environment it verified, never overwritten;
`promote` reads the latest attempt with "pinned": true and requires "passed": true:
    {"schema": "model-sync.verification/v2", "model": "resnet", "version": 3, "passed": true,
     "pinned": true,                 # version 3 was the pinned version when verify ran
     "checks": {"replicas": "passed", "http": "passed" | "failed" | "not-run", "grpc": ...},
     "replicas": {"<deployment>/<replica>": "READY" | "<state/error>"}, "smoke_inference": true,
     "manifest_sha256": "<sha256 of the manifest JSON bytes verified>",
     "verified_by": "...", "verified_at": "RFC 3339 UTC", "detail": "free text",
     "evidence": "replica-smoke" | "replica-smoke+direct-http" | "replica-smoke+direct-grpc" |
                  "replica-smoke+direct-http-grpc"}
  A check that could not run (no endpoint given) is "not-run", never "failed". v1 (the single
  record at audit/verifications/<model>/<N>.json of older releases: no pinned, no checks) is
  still read by the gate when a version has no attempt.

promotion (audit/promotions/<model>/<N>.json in the TARGET env, "model-sync.promotion/v2"):
    {"schema": "model-sync.promotion/v2", "model": "resnet", "version": 7,
     "source": {"env": "staging", "bucket_uri": "s3://...", "version": 3},
     "target": {"env": "prod", "bucket_uri": "s3://..."},
     "verification": {"skipped": false, "record_key": "audit/verifications/resnet/3.json"},
     "files": {"model.pt": {"sha256": "...", "size": 123}}, "checksums_verified": "s3-checksum" | "rehash",
     "compatibility": {... as in the manifest, against the TARGET's Triton image},
     "promoted_by": "...", "promoted_at": "RFC 3339 UTC"}
  v1 (no `compatibility`) is still read. v3 adds `"canary": {"skipped": false, "id": "<canary id>" | null}`:
  whether the promotion went through a gray release (`--no-canary` skips it, recorded here) and which.

canary (manifests/_canary/<model>.json, "model-sync.canary/v1"), the model's gray release, created
with If-None-Match: * (or If-Match over an ended one) and rewritten If-Match at every change; the
agents of the replicas it lists serve `canary_version`, every other replica the stable pin. Its
final form is also written once to audit/canaries/<model>/<id>.json:
    {"schema": "model-sync.canary/v1", "model": "resnet", "id": "<stamp>-<8 hex>",
     "state": "running" | "promoted" | "aborted", "deployment": "default",
     "stable_version": 3, "canary_version": 4,
     "replicas": ["<replica>", ...],            # serving the canary now; [] once ended
     "share_percent": 25,                        # the current step's configured share
     # window_from: when every listed replica served the canary, the start of the figures' window;
     # fleet: the live replicas reporting the model; listed_at: when the list last changed (a
     # replica stopped reporting, the fleet scaled): the window restarts then (restarts counts it)
     "steps": [{"share_percent": 10, "replicas": 1, "fleet": 4, "effective_percent": 25.0,
                "started_at": "RFC 3339 UTC", "listed_at": "...", "restarts": 0,
                "window_from": null | "...", "ended_at": null | "...",
                "verdict": null | "pass" | "fail" | "inconclusive", "reason": null | "one line",
                "figures": null | {"canary": FIGURES, "stable": FIGURES},
                "observed_percent": null | 24.6}],          # canary requests / both tracks', over the window
     "policy": {model_sync.contract.canary_policy's camelCase mapping},
     "started_by": "...", "started_at": "...", "deadline_at": "...", "updated_at": "...",
     "decision": null | {"outcome": "promoted" | "aborted", "reason": "one line", "by": "...", "at": "..."}}
  FIGURES = {"requests": 210, "errors": 0, "error_ratio": 0.0, "p99_ms": 12.5 | null, "p95_ms": 9.8 | null,
             "mean_ms": 6.1 | null, "queue_us": 85.0 | null}   # over the step's window, one version's
  (listed_at, restarts, observed_percent and p95_ms are absent from records written before them)
  A step's "strikes" counts its windows that failed on latency (the first is judged again on a
  fresh window before the run aborts); FIGURES' "replicas_p99_ms" lists each replica's p99 (the
  track's p99 is the canary's worst replica, the stable replicas' median): both absent before them.

pin (audit/pins/<model>/<stamp>-<N>.json, "model-sync.pin/v1"), one per flip:
    {"schema": "model-sync.pin/v1", "model": "resnet", "version": 4, "previous": 3 | null,
     "action": "push" | "promote" | "rollback", "stack": [1, 3],   # earlier pins, newest last
     "by": "...", "at": "RFC 3339 UTC"}
  `stack` makes default rollback deterministic: rollback pins stack[-1] and pops it, a push or
  an explicit `rollback --model-version` pushes the previous pin (capped at 32 entries).

pin index (manifests/_pins/<model>.json, "model-sync.pin-index/v1"), rewritten after every flip:
    {"schema": "model-sync.pin-index/v1", "model": "resnet", "version": 4, "at": "RFC 3339 UTC"}
  A change signal only (agents list manifests/_pins/ and re-read a pin whose index entry
  changed); the pin itself stays the one source of truth.

allocation (audit/allocations/<model>/<N>.json, "model-sync.allocation/v1"), conditional write:
    {"schema": "model-sync.allocation/v1", "model": "resnet", "version": 4, "purpose": "push" | "promote",
     "nonce": "<uuid4 hex>", "by": "...", "at": "RFC 3339 UTC"}

replica status (status/<deployment>/<replica>.json, "model-sync.replica-status/v1"), rewritten by
each replica's agent when something changes and every heartbeat, deleted when the agent stops;
`verify` and `status` read it:
    {"schema": "model-sync.replica-status/v1", "env": "prod", "deployment": "default",
     "replica": "<pod name>", "bucket_uri": "s3://...", "triton_url": "http://127.0.0.1:8000" | null,
     "heartbeat_seconds": 30, "s3_reachable": true | false | null, "last_s3_ok_at": "RFC 3339 UTC" | null,
     "last_error": "one line" | null, "agent_started_at": "RFC 3339 UTC", "reported_at": "RFC 3339 UTC",
     "models": {"resnet": {"pinned": [4], "serving": [3], "state": "READY" | "LOADING" | "FAILED" | "PLACED" |
                                                  "PENDING",
                           "error": "one line" | null, "failed": {"4": "Triton's reason"}, "local_versions": [3, 4],
                           "smoke": null | {"ok": true, "version": 3, "at": "RFC 3339 UTC", "detail": "ok"}}}}
  States are ReplicaState. Timestamps everywhere are format_time()'s.
"""

from __future__ import annotations

import enum
from typing import Any

from model_sync.contract import layout
from model_sync.triton_model.formats import FORMATS

SHA256_RE = r"^[0-9a-f]{64}$"
TIME_RE = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$"
NAME_RE = layout.MODEL_NAME_RE.pattern
STACK_MAX = 32

_VERSION = {"type": "integer", "minimum": 1}
_TIME = {"type": "string", "pattern": TIME_RE}
_FILES = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": {
        "type": "object",
        "required": ["sha256", "size"],
        "additionalProperties": False,
        "properties": {"sha256": {"type": "string", "pattern": SHA256_RE}, "size": {"type": "integer", "minimum": 0}},
    },
}
_NULLABLE_STR = {"type": ["string", "null"]}


def _obj(properties: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """A closed object: every field of `properties` required, those of `optional` allowed."""
    return {
        "type": "object",
        "required": list(properties),
        "additionalProperties": False,
        "properties": {**properties, **(optional or {})},
    }


MANIFEST_SCHEMA: dict[str, Any] = _obj(
    {
        "schema": {"const": "model-sync.manifest/v1"},
        "model": {"type": "string", "pattern": NAME_RE},
        "version": _VERSION,
        "files": _FILES,
        "config_pbtxt": {"type": "string", "minLength": 1},
        "backend": {"type": "string"},
        "platform": {"type": "string"},
        "source": _obj(
            {
                "path": {"type": "string"},
                "host": {"type": "string"},
                "git_commit": _NULLABLE_STR,
                "promoted_from": {
                    "type": ["object", "null"],
                    "required": ["env", "bucket_uri", "version"],
                    "additionalProperties": False,
                    "properties": {"env": {"type": "string"}, "bucket_uri": {"type": "string"}, "version": _VERSION},
                },
            },
        ),
        "exporter": _obj(
            {
                "tool": {"type": "string"},
                "method": {"enum": ["trace", "script", None]},
                "torch_version": _NULLABLE_STR,
                "torchscript_format_version": {"type": ["integer", "null"]},
                "target": {"enum": ["cloud", "local", None]},
            },
        ),
        "created_by": {"type": "string", "minLength": 1},
        "created_at": _TIME,
    },
)


class CompatibilityResult(enum.StrEnum):
    """A compatibility record's verdict (model_sync/records/compatibility.py writes and reads it)."""

    COMPATIBLE = "compatible"  # the target's Triton loads the version, as far as the rules can prove
    EXEMPT = "exempt"  # not the rules' to judge (a python-backend model), or a local target allowed
    SKEW_ALLOWED = "skew-allowed"  # refused or unproven, published anyway (--allow-version-skew): `detail` says why


COMPATIBILITY: dict[str, Any] = _obj(
    {
        "triton_image": _NULLABLE_STR,
        "libtorch_version": _NULLABLE_STR,
        "result": {"enum": [r.value for r in CompatibilityResult]},
        "detail": _NULLABLE_STR,
    },
)


def _manifest_v2(v1: dict[str, Any]) -> dict[str, Any]:
    """v2 = v1 + exporter.operators + compatibility (both required; operators nullable)."""
    props = dict(v1["properties"])
    props["schema"] = {"const": "model-sync.manifest/v2"}
    exporter = props["exporter"]
    props["exporter"] = _obj(
        {
            **exporter["properties"],
            "operators": {"type": ["array", "null"], "items": {"type": "string", "minLength": 1}},
        }
    )
    props["compatibility"] = COMPATIBILITY
    return _obj(props)


GPU_MEMORY_METHODS = ("measured", "estimated", "cpu")
# export.json's `gpu_memory` and the manifest's (v3): one model instance's GPU memory (model_sync/export/gpu_memory.py).
GPU_MEMORY: dict[str, Any] = _obj(
    {
        "bytes_per_instance": {"type": "integer", "minimum": 0},
        "method": {"enum": list(GPU_MEMORY_METHODS)},
        "batch": {"type": "integer", "minimum": 1},  # the batch it was measured or estimated at
        "device": _NULLABLE_STR,  # the GPU it was measured on (measured only)
        "basis": {"type": "string", "minLength": 1},  # one line: what the figure counts
    }
)
INSTANCE_KINDS = ("KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL")  # ModelInstanceGroup.Kind
INSTANCE_GROUPS: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "items": _obj(
        {
            "kind": {"enum": list(INSTANCE_KINDS)},
            "count": {"type": "integer", "minimum": 1},
            "gpus": {"type": "array", "items": {"type": "integer", "minimum": 0}},  # []: every visible GPU
        }
    ),
}


def _manifest_v3(v2: dict[str, Any]) -> dict[str, Any]:
    """v3 = v2 + gpu_memory (nullable: unknown) + instance_groups (both required)."""
    return _obj(
        {
            **v2["properties"],
            "schema": {"const": "model-sync.manifest/v3"},
            "gpu_memory": {"anyOf": [{"type": "null"}, GPU_MEMORY]},
            "instance_groups": INSTANCE_GROUPS,
        }
    )


def _manifest_v4(v3: dict[str, Any]) -> dict[str, Any]:
    """v4 = v3 + the export format and what its alignment compares (all required, nullable): the
    format, a .pt2's device and GPU architectures, an ONNX model's opset and IR version; method may
    be "export" (torch.export)."""
    exporter = v3["properties"]["exporter"]["properties"]
    return _obj(
        {
            **v3["properties"],
            "schema": {"const": "model-sync.manifest/v4"},
            "exporter": _obj(
                {
                    **exporter,
                    "method": {"enum": ["trace", "script", "export", None]},
                    "format": {"enum": [*FORMATS, None]},
                    "device": {"enum": ["cpu", "cuda", None]},
                    "gpu_architectures": {"type": ["array", "null"], "items": {"type": "string", "pattern": "^sm_"}},
                    "onnx_opset": {"type": ["integer", "null"], "minimum": 1},
                    "onnx_ir_version": {"type": ["integer", "null"], "minimum": 1},
                }
            ),
        }
    )


MANIFEST_SCHEMA_V1 = MANIFEST_SCHEMA
MANIFEST_SCHEMA_V2 = _manifest_v2(MANIFEST_SCHEMA_V1)
MANIFEST_SCHEMA_V3 = _manifest_v3(MANIFEST_SCHEMA_V2)
MANIFEST_SCHEMA = _manifest_v4(MANIFEST_SCHEMA_V3)
MANIFEST_V1, MANIFEST_V2, MANIFEST_V3 = "model-sync.manifest/v1", "model-sync.manifest/v2", "model-sync.manifest/v3"
MANIFEST_V4 = "model-sync.manifest/v4"
MANIFEST_SCHEMA_IDS = (MANIFEST_V1, MANIFEST_V2, MANIFEST_V3, MANIFEST_V4)

VERIFICATION_SCHEMA: dict[str, Any] = _obj(
    {
        "schema": {"const": "model-sync.verification/v1"},
        "model": {"type": "string", "pattern": NAME_RE},
        "version": _VERSION,
        "passed": {"type": "boolean"},
        "replicas": {"type": "object", "additionalProperties": {"type": "string"}},
        "smoke_inference": {"type": "boolean"},
        "manifest_sha256": {"type": "string", "pattern": SHA256_RE},
        "verified_by": {"type": "string", "minLength": 1},
        "verified_at": _TIME,
    },
    # evidence: what the pass rests on (model_sync.observation.verify EVIDENCE_*); absent in older records.
    {"detail": {"type": "string"}, "evidence": {"enum": ["replica-smoke", "replica-smoke+direct-http-grpc"]}},
)

VERIFICATION_V1, VERIFICATION_V2 = "model-sync.verification/v1", "model-sync.verification/v2"
CHECK_RESULTS = ("passed", "failed", "not-run")
VERIFICATION_SCHEMA_V1 = VERIFICATION_SCHEMA
VERIFICATION_SCHEMA = _obj(
    {
        **{k: VERIFICATION_SCHEMA_V1["properties"][k] for k in VERIFICATION_SCHEMA_V1["required"]},
        "schema": {"const": VERIFICATION_V2},
        "pinned": {"type": "boolean"},  # N was the pinned version when verify ran (the gate reads only those)
        "checks": _obj({name: {"enum": list(CHECK_RESULTS)} for name in ("replicas", "http", "grpc")}),
        "evidence": {
            "enum": [
                "replica-smoke",
                "replica-smoke+direct-http",
                "replica-smoke+direct-grpc",
                "replica-smoke+direct-http-grpc",
            ]
        },
    },
    {"detail": {"type": "string"}},
)
VERIFICATION_SCHEMA_IDS = (VERIFICATION_V1, VERIFICATION_V2)

PROMOTION_SCHEMA: dict[str, Any] = _obj(
    {
        "schema": {"const": "model-sync.promotion/v1"},
        "model": {"type": "string", "pattern": NAME_RE},
        "version": _VERSION,
        "source": _obj({"env": {"type": "string"}, "bucket_uri": {"type": "string"}, "version": _VERSION}),
        "target": _obj({"env": {"type": "string"}, "bucket_uri": {"type": "string"}}),
        "verification": _obj({"skipped": {"type": "boolean"}, "record_key": _NULLABLE_STR}),
        "files": _FILES,
        "checksums_verified": {"enum": ["s3-checksum", "rehash", "mixed"]},
        "promoted_by": {"type": "string", "minLength": 1},
        "promoted_at": _TIME,
    },
)

PROMOTION_SCHEMA_V1 = PROMOTION_SCHEMA
PROMOTION_SCHEMA = _obj(
    {
        **PROMOTION_SCHEMA_V1["properties"],
        "schema": {"const": "model-sync.promotion/v2"},
        "compatibility": COMPATIBILITY,
    },
)
PROMOTION_V2 = "model-sync.promotion/v2"
PROMOTION_V3 = "model-sync.promotion/v3"
PROMOTION_SCHEMA_V2 = PROMOTION_SCHEMA
PROMOTION_SCHEMA = _obj(
    {
        **PROMOTION_SCHEMA_V2["properties"],
        "schema": {"const": PROMOTION_V3},
        "canary": _obj({"skipped": {"type": "boolean"}, "id": _NULLABLE_STR}),
    },
)
PROMOTION_SCHEMA_IDS = ("model-sync.promotion/v1", PROMOTION_V2, PROMOTION_V3)

PIN_SCHEMA: dict[str, Any] = _obj(
    {
        "schema": {"const": "model-sync.pin/v1"},
        "model": {"type": "string", "pattern": NAME_RE},
        "version": _VERSION,
        "previous": {"type": ["integer", "null"], "minimum": 1},
        "action": {"enum": ["push", "promote", "rollback"]},
        "stack": {"type": "array", "items": _VERSION, "maxItems": STACK_MAX},
        "by": {"type": "string", "minLength": 1},
        "at": _TIME,
    },
)

ALLOCATION_SCHEMA: dict[str, Any] = _obj(
    {
        "schema": {"const": "model-sync.allocation/v1"},
        "model": {"type": "string", "pattern": NAME_RE},
        "version": _VERSION,
        "purpose": {"enum": ["push", "promote"]},
        "nonce": {"type": "string", "pattern": r"^[0-9a-f]{32}$"},
        "by": {"type": "string", "minLength": 1},
        "at": _TIME,
    },
)


class ReplicaState(enum.StrEnum):
    """What a replica reports for one model (the replica status record's `state`)."""

    READY = "READY"  # Triton serves the local pin
    LOADING = "LOADING"  # placed and pinned locally, Triton still loading it
    FAILED = "FAILED"  # the pin's version was refused or failed to load (the previous one keeps serving)
    PLACED = "PLACED"  # on disk and pinned locally, Triton not asked (init container: Triton not started yet)
    PENDING = "PENDING"  # pin seen, version not in place yet (download failed / S3 unreachable)


REPLICA_STATUS = "model-sync.replica-status/v1"
_VERSIONS = {"type": "array", "items": _VERSION}
_NULLABLE_TIME = {"type": ["string", "null"], "pattern": TIME_RE}
REPLICA_STATUS_SCHEMA: dict[str, Any] = _obj(
    {
        "schema": {"const": REPLICA_STATUS},
        "env": {"type": "string", "minLength": 1},
        "deployment": {"type": "string", "minLength": 1},
        "replica": {"type": "string", "minLength": 1},
        "bucket_uri": {"type": "string", "minLength": 1},
        "triton_url": _NULLABLE_STR,
        "heartbeat_seconds": {"type": "number"},
        "s3_reachable": {"type": ["boolean", "null"]},
        "last_s3_ok_at": _NULLABLE_TIME,
        "last_error": _NULLABLE_STR,
        "agent_started_at": _TIME,
        "reported_at": _TIME,
        "models": {
            "type": "object",
            "additionalProperties": _obj(
                {
                    "pinned": _VERSIONS,
                    "serving": _VERSIONS,
                    "state": {"enum": [s.value for s in ReplicaState]},
                    "error": _NULLABLE_STR,
                    "failed": {"type": "object", "additionalProperties": {"type": "string"}},
                    "local_versions": _VERSIONS,
                    "smoke": {
                        "anyOf": [
                            {"type": "null"},
                            _obj(
                                {
                                    "ok": {"type": "boolean"},
                                    "version": _VERSION,
                                    "at": _TIME,
                                    "detail": {"type": "string"},
                                }
                            ),
                        ]
                    },
                },
            ),
        },
    },
)

CANARY = "model-sync.canary/v1"
CANARY_STATES = ("running", "promoted", "aborted")
VERDICTS = ("pass", "fail", "inconclusive")
_COUNT = {"type": "integer", "minimum": 0}
_NULLABLE_NUMBER = {"type": ["number", "null"], "minimum": 0}
_FIGURES = _obj(
    {
        "requests": _COUNT,
        "errors": _COUNT,
        "error_ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "p99_ms": _NULLABLE_NUMBER,
        "mean_ms": _NULLABLE_NUMBER,
        "queue_us": _NULLABLE_NUMBER,
    },
    {
        "p95_ms": _NULLABLE_NUMBER,  # since p95 can be judged: records written before lack it
        "replicas_p99_ms": {"type": "array", "items": {"type": "number", "minimum": 0}},  # each replica's p99
    },
)
_PERCENT = {"type": "number", "minimum": 0, "maximum": 100}
CANARY_SCHEMA: dict[str, Any] = _obj(
    {
        "schema": {"const": CANARY},
        "model": {"type": "string", "pattern": NAME_RE},
        "id": {"type": "string", "pattern": layout.CANARY_ID_RE.pattern},
        "state": {"enum": list(CANARY_STATES)},
        "deployment": {"type": "string", "minLength": 1},
        "stable_version": _VERSION,
        "canary_version": _VERSION,
        "replicas": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True},
        "share_percent": _PERCENT,
        "steps": {
            "type": "array",
            "items": _obj(
                {
                    "share_percent": _PERCENT,
                    "replicas": _COUNT,
                    "fleet": _COUNT,
                    "effective_percent": _PERCENT,
                    "started_at": _TIME,
                    "window_from": _NULLABLE_TIME,
                    "ended_at": _NULLABLE_TIME,
                    "verdict": {"enum": [None, *VERDICTS]},
                    "reason": _NULLABLE_STR,
                    "figures": {"anyOf": [{"type": "null"}, _obj({"canary": _FIGURES, "stable": _FIGURES})]},
                },
                {  # written since the liveness of the canary track: records written before lack them
                    "listed_at": _TIME,  # when the step's replica list last changed (its load timeout runs from it)
                    "restarts": _COUNT,  # how often the window restarted (the replicas or the fleet changed)
                    "observed_percent": {"type": ["number", "null"], "minimum": 0, "maximum": 100},
                    "strikes": _COUNT,  # latency failures of its windows (one is judged again before aborting)
                },
            ),
        },
        "policy": {"type": "object"},
        "started_by": {"type": "string", "minLength": 1},
        "started_at": _TIME,
        "deadline_at": _TIME,
        "updated_at": _TIME,
        "decision": {
            "anyOf": [
                {"type": "null"},
                _obj(
                    {
                        "outcome": {"enum": ["promoted", "aborted"]},
                        "reason": {"type": "string"},
                        "by": {"type": "string", "minLength": 1},
                        "at": _TIME,
                    }
                ),
            ]
        },
    },
)

PIN_INDEX = "model-sync.pin-index/v1"
PIN_INDEX_SCHEMA: dict[str, Any] = _obj(
    {"schema": {"const": PIN_INDEX}, "model": {"type": "string", "pattern": NAME_RE}, "version": _VERSION, "at": _TIME},
)

SCHEMAS: dict[str, dict[str, Any]] = {
    MANIFEST_V1: MANIFEST_SCHEMA_V1,
    MANIFEST_V2: MANIFEST_SCHEMA_V2,
    MANIFEST_V3: MANIFEST_SCHEMA_V3,
    MANIFEST_V4: MANIFEST_SCHEMA,
    VERIFICATION_V1: VERIFICATION_SCHEMA_V1,
    VERIFICATION_V2: VERIFICATION_SCHEMA,
    "model-sync.promotion/v1": PROMOTION_SCHEMA_V1,
    PROMOTION_V2: PROMOTION_SCHEMA_V2,
    PROMOTION_V3: PROMOTION_SCHEMA,
    CANARY: CANARY_SCHEMA,
    "model-sync.pin/v1": PIN_SCHEMA,
    "model-sync.allocation/v1": ALLOCATION_SCHEMA,
    PIN_INDEX: PIN_INDEX_SCHEMA,
    REPLICA_STATUS: REPLICA_STATUS_SCHEMA,
}
