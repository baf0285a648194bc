"""Every function of components/ (constructors and value builders included) reads on one screen:
at most 60 lines from its `def` to its last line, docstring included."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOST_LINES = 60


def long_functions(root: Path) -> list[str]:
    """`path:line name (lines)` of every function or method under `root` longer than MOST_LINES."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MOST_LINES:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines})")
    return found


def test_every_function_of_components_fits_on_one_screen() -> None:
    assert len(list((ROOT / "components").rglob("*.py"))) > 60  # the tree was read
    assert long_functions(ROOT / "components") == []


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    package = tmp_path / "components"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MOST_LINES))
    (package / "long.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(package) == [f"components/long.py:5 long ({MOST_LINES + 1})"]
