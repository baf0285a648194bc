"""model_sync/triton_model/formats.py: a new export format is its module plus one row of FORMAT_TABLE.
Every row has its module (model_sync/export/<name>.py: `export` and `facts`), its `--target local`
wrapper and its alignment rule; the exporter, the export command and export.json's reader name no
format of their own."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

from model_sync.admission import alignment
from model_sync.triton_model import formats
from model_sync.triton_model.formats import FORMAT_OF_PLATFORM, FORMAT_TABLE, FORMATS

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", FORMATS)
def test_every_row_has_its_module_wrapper_and_alignment_rule(name: str) -> None:
    row = FORMAT_TABLE[name]
    module = importlib.import_module(f"model_sync.export.{row.name}")
    assert callable(module.export)
    assert callable(module.facts)
    assert importlib.util.find_spec(f"model_sync.export.{row.wrapper}") is not None
    assert FORMAT_OF_PLATFORM[row.platform] == name
    assert name in alignment.RULES or name == "torchscript"  # torchscript: alignment.assess_libtorch
    rtol, atol = row.tolerances
    assert 0 < atol <= rtol < 1


def test_the_rows_are_distinct_and_named_as_errors_say() -> None:
    assert len({f.model_file for f in FORMAT_TABLE.values()}) == len({f.platform for f in FORMAT_TABLE.values()}) == 3
    assert formats.allowed() == "'torchscript', 'pt2' or 'onnx'"
    assert set(alignment.RULES) < set(FORMATS)


@pytest.mark.parametrize(
    "path",
    ["model_sync/export/exporter.py", "model_sync/commands/export.py", "model_sync/triton_model/model_directory.py"],
)
def test_export_and_its_readers_take_every_format_from_the_table(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text())
    named = sorted(
        {
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in FORMATS
        }
    )
    assert named == []
