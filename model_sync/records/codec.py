"""Every record model_sync writes to the bucket, defined once: the strict reader and writer of each
(manifest, verification, promotion, pin, pin index, allocation, replica status), and the one
timestamp format. The formats and their JSON Schemas are model_sync.records.schemas; validation is
jsonschema's, its first error rewritten as the one-line `RecordError` every command prints
(`<record> <field>: <bad value>; allowed: <what is>`)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators

from model_sync.contract import layout
from model_sync.records.schemas import (
    CHECK_RESULTS,
    GPU_MEMORY,
    MANIFEST_SCHEMA,
    MANIFEST_SCHEMA_IDS,
    MANIFEST_SCHEMA_V1,
    MANIFEST_SCHEMA_V2,
    MANIFEST_SCHEMA_V3,
    MANIFEST_V1,
    MANIFEST_V2,
    MANIFEST_V3,
    MANIFEST_V4,
    PIN_INDEX,
    PROMOTION_V2,
    PROMOTION_V3,
    REPLICA_STATUS,
    REPLICA_STATUS_SCHEMA,
    SCHEMAS,
    STACK_MAX,
    TIME_RE,
    VERIFICATION_SCHEMA_IDS,
    VERIFICATION_V1,
    VERIFICATION_V2,
    ReplicaState,
)

__all__ = [
    "CHECK_RESULTS",
    "GPU_MEMORY",
    "MANIFEST_SCHEMA",
    "MANIFEST_SCHEMA_IDS",
    "MANIFEST_SCHEMA_V1",
    "MANIFEST_SCHEMA_V2",
    "MANIFEST_SCHEMA_V3",
    "MANIFEST_V1",
    "MANIFEST_V2",
    "MANIFEST_V3",
    "MANIFEST_V4",
    "PIN_INDEX",
    "PROMOTION_V2",
    "PROMOTION_V3",
    "REPLICA_STATUS",
    "REPLICA_STATUS_SCHEMA",
    "SCHEMAS",
    "STACK_MAX",
    "TIME_FORMAT",
    "TIME_RE",
    "VERIFICATION_SCHEMA_IDS",
    "VERIFICATION_V1",
    "VERIFICATION_V2",
    "RecordError",
    "ReplicaState",
    "dumps",
    "format_time",
    "now",
    "parse_time",
    "pin_index",
    "read",
    "read_manifest",
    "read_pin_index",
    "read_replica_status",
    "read_verification",
    "sha256_bytes",
    "sha256_file",
    "stamp",
    "upgrade_manifest",
    "validate",
    "validate_part",
]


class RecordError(ValueError):
    """A record that is not valid JSON or does not match its schema (one line)."""


# JSON's integers: jsonschema also counts 1.0 as an integer; a record never writes one.
_Validator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)


@cache
def _validator(schema_id: str) -> Any:
    return _Validator(SCHEMAS[schema_id])


def _where(error: ValidationError) -> str:
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _describe_failure(error: ValidationError) -> str:
    """A jsonschema error as `<field>: <bad value>; allowed: <what is>`."""
    path, value, rule, want = _where(error), error.instance, error.validator, error.validator_value
    where = path or "(document)"
    if rule == "anyOf":
        by_option: dict[Any, ValidationError] = {}
        for sub in sorted(error.context or (), key=lambda e: e.relative_schema_path):
            by_option.setdefault(sub.relative_schema_path[0], sub)
        return "; or ".join(_describe_failure(sub) for sub in by_option.values())
    if rule == "required":
        missing = next(name for name in want if name not in value)
        return f"{path + '.' if path else ''}{missing}: missing; allowed: a required field"
    if rule == "additionalProperties":
        known = error.schema.get("properties", {})
        unknown = next(k for k in value if k not in known)
        return f"{path + '.' if path else ''}{unknown}: unknown field; allowed: {sorted(known)}"
    allowed = {
        "const": lambda: repr(want),
        "enum": lambda: f"one of {want!r}",
        "type": lambda: " or ".join(want if isinstance(want, list) else [want]),
        "pattern": lambda: f"matching {want}",
        "minLength": lambda: f"at least {want} characters",
        "minimum": lambda: f">= {want}",
        "maxItems": lambda: f"at most {want}",
        "minItems": lambda: f"at least {want} items",
        "minProperties": lambda: f"at least {want} entries",
    }[str(rule)]()
    if rule in ("maxItems", "minItems"):
        shown = f"{len(value)} items"
    else:
        shown = "empty" if rule == "minProperties" else repr(value)
    return f"{where}: {shown}; allowed: {allowed}"


def validate(doc: Any, schema_id: str) -> dict[str, Any]:
    if schema_id not in SCHEMAS:
        raise RecordError(f"schema: {schema_id!r}; allowed: {sorted(SCHEMAS)}")
    first = next(iter(_validator(schema_id).iter_errors(doc)), None)
    if first is not None:
        raise RecordError(f"{schema_id} {_describe_failure(first)}")
    assert isinstance(doc, dict)
    return doc


def validate_part(value: Any, schema: dict[str, Any], name: str) -> Any:
    """`value` against one part of a record's schema (e.g. GPU_MEMORY, as export.json carries it),
    with the same one-line `RecordError` (`<name>.<field>: <bad value>; allowed: ...`)."""
    first = next(iter(_Validator(schema).iter_errors(value)), None)
    if first is not None:
        line = _describe_failure(first)
        raise RecordError(f"{name}{'' if line.startswith('(document)') else '.'}{line.removeprefix('(document)')}")
    return value


def read(
    data: bytes | str, schema_id: str | tuple[str, ...], *, model: str | None = None, version: int | None = None
) -> dict[str, Any]:
    """Parse and strictly validate a record; optionally check it is the one for (model, version).
    `schema_id` may name several accepted versions of one record; the document's own `schema`
    field picks which one validates it."""
    accepted = (schema_id,) if isinstance(schema_id, str) else schema_id
    name = accepted[-1]
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise RecordError(f"{name}: not valid JSON ({str(e).splitlines()[0]}); allowed: a JSON object") from None
    found = doc.get("schema") if isinstance(doc, dict) else None
    if len(accepted) > 1 and found not in accepted:
        raise RecordError(f"{name} schema: {found!r}; allowed: one of {list(accepted)!r}")
    schema = found if found in accepted else name
    validate(doc, str(schema))
    if model is not None and doc["model"] != model:
        raise RecordError(f"{schema} model: {doc['model']!r}; allowed: {model!r} (the key it was read from)")
    if version is not None and doc["version"] != version:
        raise RecordError(f"{schema} version: {doc['version']!r}; allowed: {version!r} (the key it was read from)")
    if schema in MANIFEST_SCHEMA_IDS:
        for path in doc["files"]:
            try:
                layout.check_file_path(path)
            except layout.LayoutError as e:
                raise RecordError(f"{schema} files: {e}") from None
    return doc


def dumps(doc: Mapping[str, Any]) -> bytes:
    """Validate (by its `schema` field) and serialise a record."""
    validate(dict(doc), str(doc.get("schema")))
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def read_manifest(data: bytes | str, model: str | None = None, version: int | None = None) -> dict[str, Any]:
    return read(data, MANIFEST_SCHEMA_IDS, model=model, version=version)


def upgrade_manifest(
    doc: dict[str, Any], compatibility: dict[str, Any], instance_groups: list[dict[str, Any]]
) -> dict[str, Any]:
    """A copy of a v1..v4 manifest as v4 with the given compatibility record and instance groups
    (promote: both for the target). A v1/v2 source has no GPU memory: null (unknown); a source
    before v4 has no export format: null, and its alignment facts null."""
    exporter = {"operators": None, "format": None, "device": None, "gpu_architectures": None, "onnx_opset": None,
                "onnx_ir_version": None, **doc["exporter"]}  # fmt: skip
    out = {
        **doc,
        "schema": MANIFEST_V4,
        "exporter": exporter,
        "compatibility": dict(compatibility),
        "gpu_memory": doc.get("gpu_memory"),
        "instance_groups": [dict(g) for g in instance_groups],
    }
    validate(out, MANIFEST_V4)
    return out


def read_verification(data: bytes | str, model: str | None = None, version: int | None = None) -> dict[str, Any]:
    return read(data, VERIFICATION_SCHEMA_IDS, model=model, version=version)


def pin_index(model: str, version: int) -> bytes:
    """The pin-index entry written after a flip of `model` to `version` (a fresh `at` every time)."""
    return dumps({"schema": PIN_INDEX, "model": model, "version": version, "at": now()})


def read_pin_index(data: bytes | str, model: str | None = None) -> dict[str, Any]:
    return read(data, PIN_INDEX, model=model)


def read_replica_status(data: bytes | str) -> dict[str, Any]:
    """A replica status record (status/<deployment>/<replica>.json), strictly."""
    return read(data, REPLICA_STATUS)


TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # the one timestamp format of every record (RFC 3339, UTC, microseconds)


def format_time(ts: float) -> str:
    """A POSIX time as records write it."""
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime(TIME_FORMAT)


def parse_time(value: str) -> _dt.datetime:
    """A record's timestamp (format_time's, or without the fraction) as an aware UTC datetime."""
    fmt = TIME_FORMAT if "." in value else TIME_FORMAT.replace(".%f", "")
    return _dt.datetime.strptime(value, fmt).replace(tzinfo=_dt.UTC)


def now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime(TIME_FORMAT)


def stamp() -> str:
    """Sortable UTC stamp for pin-history keys (layout.pin_record_key)."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str, bufsize: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(bufsize):
            h.update(chunk)
    return h.hexdigest()
