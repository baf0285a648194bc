"""components/ imports run one way: no two of its modules import each other, directly or around a loop,
counting imports inside functions; the stack config's parser sits above every component it
validates for, which import only the layers below it (vocabulary, errors, readers, model), and
each module of the stack config imports only the layers before its own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What a component may import of the stack config package: the layers below the parser.
STACK_CONFIG_BELOW_THE_PARSER = {
    "components.stack_config",  # the package itself (a docstring only)
    "components.stack_config.vocabulary",
    "components.stack_config.errors",
    "components.stack_config.readers",
    "components.stack_config.model",
}


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of components/ it imports, at any depth (importing a.b.c imports a and a.b)."""
    paths = {module_name(p, root): p for p in sorted((root / "components").rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in paths}
    for module, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for name in names:
                parts = name.split(".")
                graph[module] |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & set(paths) - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                found.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_in_components() -> None:
    assert cycles(import_graph(ROOT)) == []


def test_components_import_only_what_lies_below_the_parser() -> None:
    graph = import_graph(ROOT)
    above = {
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not module.startswith("components.stack_config")
        for target in targets
        if target.startswith("components.stack_config") and target not in STACK_CONFIG_BELOW_THE_PARSER
    }
    assert above == set()


# The stack config package's modules, each importing only those of the layers before its own.
STACK_CONFIG_LAYERS = (
    ("vocabulary",),
    ("errors",),
    ("readers",),
    ("declarations",),
    ("model",),
    ("rules",),
    ("cluster", "node_groups", "triton_deployments", "images", "edge", "delivery", "observability"),
    ("parser",),
    ("loading",),
)


def test_the_stack_config_modules_import_only_the_layers_before_theirs() -> None:
    graph = import_graph(ROOT)
    package = "components.stack_config"
    layered = {f"{package}.{m}" for layer in STACK_CONFIG_LAYERS for m in layer}
    assert {m for m in graph if m.startswith(package + ".")} == layered  # every module has its layer
    below: set[str] = {package}
    wrong = []
    for layer in STACK_CONFIG_LAYERS:
        for m in layer:
            wrong += [f"{m} -> {t}" for t in graph[f"{package}.{m}"] if t.startswith(package) and t not in below]
        below |= {f"{package}.{m}" for m in layer}
    assert wrong == []


def test_the_check_sees_a_cycle_through_an_import_inside_a_function(tmp_path: Path) -> None:
    """The rule is not vacuous: a module importing another inside a function, which imports it back, is a cycle."""
    (tmp_path / "components" / "stack_config").mkdir(parents=True)
    (tmp_path / "components" / "__init__.py").write_text("")
    (tmp_path / "components" / "stack_config" / "__init__.py").write_text('"""docstring"""\n')
    (tmp_path / "components" / "network.py").write_text("from components.stack_config.vocabulary import NAT_MODES\n")
    (tmp_path / "components" / "stack_config" / "vocabulary.py").write_text(
        "def zones():\n    from components.network import eks_zone_names\n"
    )
    assert cycles(import_graph(tmp_path)) == [["components.network", "components.stack_config.vocabulary"]]
