"""tools/stack_config_doc.py: docs/stack-config.md is what the declarations say, every key and every field
of the two maps is on it with a description, and --check fails on a stale page."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.stack_config.declarations import KEYS, NODE_GROUP_FIELDS, TRITON_FIELDS
from tools import stack_config_doc


def test_the_page_is_generated_from_the_declarations() -> None:
    """The page a newcomer reads is never behind the parser's defaults and bounds."""
    assert stack_config_doc.PAGE.read_text() == stack_config_doc.render()
    assert stack_config_doc.main(["--check"]) == 0


def test_every_key_and_field_is_described_on_the_page() -> None:
    """A field added without a doc is caught here, not by a user reading the stack file."""
    page = stack_config_doc.render()
    fields = [*TRITON_FIELDS, *(f for group in NODE_GROUP_FIELDS.values() for f in group)]
    assert all(f.doc for f in fields), [f.name for f in fields if not f.doc]
    for name in [k.name for k in KEYS] + [f.name for f in fields]:
        assert f"| `{name}` |" in page, name
    assert "| `minReplicas` | required | 1-1000 |" in page
    assert "| `diskSizeGiB` | `50` | 20-16384 |" in page  # the system group's default
    assert "| `diskSizeGiB` | `100` | 20-16384 |" in page  # a gpu group's


def test_a_stale_page_fails_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "stack-config.md"
    page.write_text(stack_config_doc.render().replace("| `50` |", "| `51` |", 1))
    monkeypatch.setattr(stack_config_doc, "PAGE", page)
    monkeypatch.setattr(stack_config_doc, "ROOT", tmp_path)
    assert stack_config_doc.main(["--check"]) == 1
    assert capsys.readouterr().err.strip() == "stack-config.md is stale: run `make stack-config-doc`"
