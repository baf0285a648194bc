"""model_sync.records.schemas: every record's schema is a valid JSON Schema (2020-12), names itself,
and closes every object it describes (no record accepts a field nobody defined)."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from model_sync.records import schemas


def _objects(schema: Any) -> list[dict[str, Any]]:
    """Every object schema inside `schema` that lists properties."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if "properties" in schema:
            found.append(schema)
        for value in schema.values():
            found += _objects(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _objects(value)
    return found


@pytest.mark.parametrize("schema_id", sorted(schemas.SCHEMAS))
def test_each_schema_is_valid_and_names_its_record(schema_id: str) -> None:
    schema = schemas.SCHEMAS[schema_id]
    Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"] == {"const": schema_id}
    assert "schema" in schema["required"]


@pytest.mark.parametrize("schema_id", sorted(schemas.SCHEMAS))
def test_every_object_of_a_record_is_closed(schema_id: str) -> None:
    objects = _objects(schemas.SCHEMAS[schema_id])
    assert objects
    assert [o for o in objects if o.get("additionalProperties") is not False] == []


def test_replica_states_are_the_schemas_enum() -> None:
    state = schemas.REPLICA_STATUS_SCHEMA["properties"]["models"]["additionalProperties"]["properties"]["state"]
    assert state == {"enum": ["READY", "LOADING", "FAILED", "PLACED", "PENDING"]}
    assert [s.value for s in schemas.ReplicaState] == state["enum"]
