"""The two halves of the project meet in one package: components/ (and the Pulumi program) import
from model_sync only model_sync.contract, and the contract imports nothing from the rest of
model_sync, so the infrastructure never depends on the tool's S3 layer, records or CLI."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = "model_sync.contract"


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in `path`, at any depth (a function's import counts too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def infrastructure_files() -> list[Path]:
    return [*sorted((ROOT / "components").rglob("*.py")), ROOT / "__main__.py"]


@pytest.mark.parametrize("path", infrastructure_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_infrastructure_imports_only_the_contract_from_model_sync(path: Path) -> None:
    outside = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for line, module in imported(path)
        if in_package(module, "model_sync") and not in_package(module, CONTRACT)
    ]
    assert outside == []


def test_the_contract_imports_nothing_else_of_model_sync() -> None:
    files = sorted((ROOT / "model_sync" / "contract").glob("*.py"))
    assert {p.stem for p in files} >= {"__init__", "layout", "compat", "canary_policy"}
    outside = [
        f"{p.relative_to(ROOT)}:{line}: {module}"
        for p in files
        for line, module in imported(p)
        if in_package(module, "model_sync") and not in_package(module, CONTRACT)
    ]
    assert outside == []


def test_the_check_sees_an_import_from_outside_the_contract(tmp_path: Path) -> None:
    """The rule is not vacuous: a component importing the S3 layer, even inside a function, is found."""
    bad = tmp_path / "component.py"
    bad.write_text("from model_sync.contract import layout\n\ndef f():\n    from model_sync.s3 import bucket\n")
    assert [m for _, m in imported(bad) if not in_package(m, CONTRACT)] == ["model_sync.s3.bucket"]
