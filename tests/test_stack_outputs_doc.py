"""docs/stack-outputs.md lists exactly the outputs each stack exports (recorded runs)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import STACKS
from tests.pulumi_kit import Run

DOC = Path(__file__).resolve().parents[1] / "docs" / "stack-outputs.md"
_ROW = re.compile(r"^\| `(?P<name>[A-Za-z0-9]+)` \| (?P<stacks>[^|]+) \|")


def documented() -> dict[str, set[str]]:
    """Output name -> stacks it exists in, from the table's first two columns."""
    rows: dict[str, set[str]] = {}
    for line in DOC.read_text().splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        name, where = m.group("name"), m.group("stacks").strip()
        assert name not in rows, f"{name} documented twice"
        stacks = set(STACKS) if where.startswith("all") else {s.strip() for s in where.split(",")}
        assert stacks <= set(STACKS), f"{name}: unknown stacks column {where!r}"
        rows[name] = stacks
    assert len(rows) >= 10, f"only {len(rows)} rows parsed from {DOC}"
    return rows


def test_doc_table_matches_the_recorded_exports(any_stack: Run) -> None:
    expected = {name for name, stacks in documented().items() if any_stack.stack in stacks}
    assert set(any_stack.exports) == expected


def test_stack_specific_rows() -> None:
    rows = documented()
    assert rows["publisherRoleArn"] == {"staging"}
    assert rows["promoterRoleArn"] == {"prod"}
    assert rows["tritonImage"] == set(STACKS)
