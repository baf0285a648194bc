"""The two halves of the project meet in one package: components/ (and the Pulumi program) import
from model_sync only model_sync.contract, and the contract imports nothing from the rest of
model_sync, so the infrastructure never depends on the tool's S3 layer, records or CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.imports import imports

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = "model_sync.contract"


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def outside_the_contract(paths: list[Path]) -> list[str]:
    """`file:line: module` of every import of model_sync outside the contract in `paths`."""
    return [
        f"{path.relative_to(ROOT)}:{i.line}: {i.name}"
        for path in paths
        for i in imports(path)
        if in_package(i.name, "model_sync") and not in_package(i.name, CONTRACT)
    ]


def infrastructure_files() -> list[Path]:
    return [*sorted((ROOT / "components").rglob("*.py")), ROOT / "__main__.py"]


@pytest.mark.parametrize("path", infrastructure_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_infrastructure_imports_only_the_contract_from_model_sync(path: Path) -> None:
    assert outside_the_contract([path]) == []


def test_the_contract_imports_nothing_else_of_model_sync() -> None:
    files = sorted((ROOT / "model_sync" / "contract").glob("*.py"))
    assert {p.stem for p in files} >= {"__init__", "layout", "compat", "canary_policy"}
    assert outside_the_contract(files) == []


def test_the_check_sees_an_import_from_outside_the_contract(tmp_path: Path) -> None:
    """The rule is not vacuous: a component importing the S3 layer, even inside a function, is found."""
    bad = tmp_path / "component.py"
    bad.write_text("from model_sync.contract import layout\n\ndef f():\n    from model_sync.s3 import bucket\n")
    assert [i.name for i in imports(bad) if not in_package(i.name, CONTRACT)] == ["model_sync.s3.bucket"]
