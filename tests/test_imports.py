"""Imports of the project's own modules run one way: no cycle among model_sync's and components'
modules (counting imports under TYPE_CHECKING and inside functions), and a module imports another
inside a function only where a reason below says why."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("model_sync",)  # components/ joins once its config parser no longer imports network
# (importer, imported) pairs allowed inside a function, each with its reason.
LAZY = {
    # The CLI builds every command's parser; each command imports its library module when it runs,
    # so `model-sync --help` and a usage error import no botocore, jsonschema or torch (0.02 s
    # against 0.25-0.56 s for a library module, measured).
    **{
        (f"model_sync.commands.{c}", m): "parser"
        for c, m in (
            ("agent", "model_sync.agent.loop"),
            ("agent", "model_sync.s3.clients"),
            ("agent", "model_sync.s3.bucket"),
            ("canary", "model_sync.canary.launch"),
            ("export", "model_sync.export.torchscript"),
            ("promote", "model_sync.lifecycle.promote"),
            ("prune", "model_sync.lifecycle.prune"),
            ("push", "model_sync.push.publish"),
            ("push", "model_sync.push.push_options"),
            ("rollback", "model_sync.lifecycle.rollback"),
            ("status", "model_sync.serving.status"),
            ("verify", "model_sync.serving.verify"),
            ("_common", "model_sync.serving.replicas"),
        )
    },
    # The agent's names are loaded on first use: the agent's CLI reads the settings' defaults
    # without importing the S3 layer or the records.
    ("model_sync.agent", "model_sync.records.codec"): "parser",
    # export copies this file into the model; importing it is locating it (it runs inside Triton).
    ("model_sync.export.torchscript", "model_sync.export.torchscript_python_backend"): "copied file",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def graph() -> tuple[dict[str, set[str]], list[tuple[str, str, int]]]:
    """module -> the project modules it imports; and every (importer, imported, line) inside a function."""
    modules = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in modules}
    inner: list[tuple[str, str, int]] = []
    for m, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        in_function = {
            id(node)
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(f)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for target in filter(None, map(resolve, names)):
                if target != m and not m.startswith(target + "."):  # a package's own __init__ is not an edge
                    edges[m].add(target)
                    if id(node) in in_function:
                        inner.append((m, target, node.lineno))
    return edges, inner


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    edges, _ = graph()
    assert len(edges) > 90  # the packages were read
    assert cycles(edges) == []


def test_imports_inside_functions_are_only_the_reasoned_ones() -> None:
    _, inner = graph()
    assert sorted({(a, b) for a, b, _ in inner} - set(LAZY)) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
