"""The repository agent's import closure: every model_sync file that `python -m model_sync agent` (the
image's ENTRYPOINT, model_sync.contract.layout.AGENT_COMMAND) can import, and the COPY instructions of
docker/agent.Dockerfile that copy exactly those (tests/model_sync/agent/test_image.py compares them).

Followed statically with `ast` from model_sync/__main__.py: every `model_sync.*` import at any depth
(inside functions too; those under `if TYPE_CHECKING:` never run and are left out), each module's
parent packages, and the two imports by name: model_sync.cli imports only the command named on the
command line (`agent`), and model_sync/agent/__init__.py loads its re-exported names on first use
(`_EXPORTS`).

`python -m tools.agent_closure` prints the COPY lines to paste into docker/agent.Dockerfile."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "model_sync"


def _path(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _resolve(name: str) -> str | None:
    """`model_sync.records.codec.ReplicaState` -> `model_sync.records.codec`: the longest module prefix."""
    parts = name.split(".")
    while parts:
        if _path(".".join(parts)) is not None:
            return ".".join(parts)
        parts.pop()
    return None


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under `if TYPE_CHECKING:` (never run)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return found


def _imported(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def _by_name() -> set[str]:
    """The modules imported by name, not by an import statement: the agent command (cli's
    importlib.import_module of `model_sync.commands.<the command line's first word>`) and the agent
    package's lazily loaded modules (its `_EXPORTS`, read from its source)."""
    from model_sync.contract.layout import AGENT_COMMAND

    init = ast.parse((ROOT / PACKAGE / "agent" / "__init__.py").read_text())
    exports = next(
        n.value
        for n in ast.walk(init)
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == "_EXPORTS"
    )
    assert exports is not None
    lazily = {
        node.elts[0].value
        for node in ast.walk(exports)
        if isinstance(node, ast.Tuple)
        and node.elts
        and isinstance(node.elts[0], ast.Constant)
        and isinstance(node.elts[0].value, str)
    }
    assert lazily, "model_sync/agent/__init__.py: no _EXPORTS found"
    return {f"{PACKAGE}.commands.{AGENT_COMMAND[-1]}"} | {f"{PACKAGE}.agent.{m}" for m in lazily}


def closure() -> list[str]:
    """The model_sync modules the agent's entry point can import, sorted."""
    seen: set[str] = set()
    todo = [f"{PACKAGE}.__main__", *_by_name()]
    while todo:
        module = _resolve(todo.pop())
        if module is None or module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # its parent packages run first
        path = _path(module)
        assert path is not None
        todo += [name for name in _imported(path) if name.split(".")[0] == PACKAGE]
    return sorted(seen)


def files() -> dict[str, list[str]]:
    """Directory (relative to the repository) -> the closure's files in it, both sorted."""
    out: dict[str, list[str]] = {}
    for module in closure():
        path = _path(module)
        assert path is not None
        rel = path.relative_to(ROOT)
        out.setdefault(str(rel.parent), []).append(str(rel))
    return {d: sorted(fs) for d, fs in sorted(out.items())}


def copy_lines() -> str:
    """One COPY per directory of the closure, its files then `./<directory>/`."""
    lines = []
    for directory, paths in files().items():
        words = [*paths, f"./{directory}/"]
        rows, row = [], "COPY"
        for word in words:
            if len(row) + 1 + len(word) > 110:
                rows.append(row + " \\")
                row = "    "
            row += f" {word}" if row.strip() else word
        lines.append("\n".join([*rows, row]))
    return "\n".join(lines)


if __name__ == "__main__":
    print(copy_lines())
