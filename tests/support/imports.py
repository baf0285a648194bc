"""Every import statement of a Python file, read with ast: what tests/test_imports.py (cycles, lazy
imports, layers) and tests/test_contract.py (components/ to model_sync.contract) check."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Imported:
    line: int
    name: str  # `import a.b` -> "a.b"; `from a.b import c` -> "a.b.c"
    in_function: bool


def imports(path: Path) -> list[Imported]:
    """Every absolute import in `path`, at any depth (under TYPE_CHECKING and inside functions too)."""
    return list(_imports(path, path.read_text()))


@functools.lru_cache(maxsize=1024)
def _imports(path: Path, text: str) -> tuple[Imported, ...]:
    """imports() of one text of `path`: the tests ask for each file's about eight times (their
    parses and walks were 17 s of CPU in one profile)."""
    tree = ast.parse(text, str(path))
    in_function = {
        id(node)
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(f)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found += [Imported(node.lineno, name, id(node) in in_function) for name in names]
    return tuple(found)
