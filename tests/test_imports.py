"""Imports of the project's own modules run one way: no cycle among model_sync's and components'
modules (counting imports under TYPE_CHECKING and inside functions), nor among model_sync's
packages (a package imports another only where that one imports nothing of it), and the data plane's
layered packages only downwards (MODEL_SYNC_LAYERS, docs/architecture.md#the-data-plane); a module imports another
inside a function only where a reason below says why; the stack config's parser sits above every
component it validates for, which import only the layers below it (vocabulary, errors, readers,
model), and each module of the stack config imports only the layers before its own. No module of
components/ imports a file directly in components/ (a component: only __main__.py, the bootstrap
program and the tests build components), and no import runs both ways between components'
packages, each file directly in components/ counted as a package of its own."""

from __future__ import annotations

from pathlib import Path

from tests.support.imports import imports

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("model_sync", "components")
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
            ("export", "model_sync.export.exporter"),
            ("promote", "model_sync.lifecycle.promote"),
            ("prune", "model_sync.lifecycle.prune"),
            ("plan", "model_sync.planning.document"),
            ("push", "model_sync.push.publish"),
            ("push", "model_sync.push.push_options"),
            ("rollback", "model_sync.lifecycle.rollback"),
            ("status", "model_sync.observation.status"),
            ("verify", "model_sync.observation.verify"),
            ("_common", "model_sync.observation.replicas"),
        )
    },
    # The agent's names are loaded on first use: the agent's CLI reads the settings' defaults
    # without importing the S3 layer or the records.
    ("model_sync.agent", "model_sync.records.codec"): "agent",
    # protobuf's text_format (config.pbtxt parsing) is loaded only when a config is parsed: a push
    # of unchanged models loads neither it nor s3transfer (tests/model_sync/push/test_publish_skips.py).
    **{
        (m, "model_sync.triton_model.model_config"): "text_format"
        for m in (
            "model_sync.agent.pins",
            "model_sync.agent.loads",
            "model_sync.versions.catalog",
            "model_sync.lifecycle.promote",
            "model_sync.records.servable",
            "model_sync.triton_model.model_directory",
        )
    },
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
        for found in imports(path):
            target = resolve(found.name)
            if target and target != m and not m.startswith(target + "."):  # a package's own __init__: no edge
                edges[m].add(target)
                if found.in_function:
                    inner.append((m, target, found.line))
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
    assert len(edges) > 140  # both packages were read
    assert cycles(edges) == []


def test_imports_inside_functions_are_only_the_reasoned_ones() -> None:
    _, inner = graph()
    assert sorted({(a, b) for a, b, _ in inner} - set(LAZY)) == []


def packages(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """model_sync's packages (and top-level modules) -> those of them their modules import."""

    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    found: dict[str, set[str]] = {}
    for module, targets in edges.items():
        if module.startswith("model_sync."):
            found.setdefault(package(module), set()).update(
                package(t) for t in targets if t.startswith("model_sync.") and package(t) != package(module)
            )
    return found


def test_no_import_runs_both_ways_between_model_syncs_packages() -> None:
    edges, _ = graph()
    found = packages(edges)
    assert {
        "model_sync.versions",
        "model_sync.lifecycle",
        "model_sync.admission",
        "model_sync.observation",
    } <= found.keys()
    assert "model_sync.versions" in found["model_sync.lifecycle"]  # edges were read
    assert cycles(found) == []


# model_sync's layered packages, top to bottom, as docs/architecture.md#the-data-plane states them: each
# imports only those below its own. `admission` (may a version be pushed or promoted) sits below
# `observation` (what the replicas serve): `status` shows each version's alignment and each deployment's
# GPU plan, while deciding admission never reads a replica's report.
MODEL_SYNC_LAYERS = ("lifecycle", "push", "canary", "observation", "planning", "admission", "versions", "records",
                     "triton_model", "s3", "contract")  # fmt: skip


def test_model_syncs_layered_packages_import_only_those_below() -> None:
    edges, _ = graph()
    found = packages(edges)
    upward = [
        f"{layer} -> {target}"
        for i, layer in enumerate(MODEL_SYNC_LAYERS)
        for target in sorted(found[f"model_sync.{layer}"])
        if target.removeprefix("model_sync.") in MODEL_SYNC_LAYERS[: i + 1]
    ]
    assert "model_sync.contract" in found["model_sync.versions"]  # edges were read
    assert upward == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# What a component may import of the stack config package: the layers below the parser.
STACK_CONFIG_BELOW_THE_PARSER = {
    "components.stack_config",  # the package itself (a docstring only)
    "components.stack_config.vocabulary",
    "components.stack_config.errors",
    "components.stack_config.readers",
    "components.stack_config.declarations",  # the keys' bounds, which the Args hold their fields to
    "components.stack_config.model",
    "components.stack_config.cidr_rules",
}
# The stack config package's modules, each importing only those of the layers before its own.
STACK_CONFIG_LAYERS = (
    ("vocabulary",),
    ("errors",),
    ("cidr_rules",),
    ("readers",),
    ("declarations",),
    ("model",),
    ("rules",),
    ("gpu_sharing",),
    ("cluster", "node_groups", "triton_deployments", "images", "edge", "delivery", "observability"),
    ("parser",),
    ("zones",),
    ("loading",),
)


def test_components_import_only_what_lies_below_the_parser() -> None:
    edges, _ = graph()
    above = {
        f"{module} -> {target}"
        for module, targets in edges.items()
        if module.startswith("components.") and not module.startswith("components.stack_config")
        for target in targets
        if target.startswith("components.stack_config") and target not in STACK_CONFIG_BELOW_THE_PARSER
    }
    assert above == set()


def test_the_stack_config_modules_import_only_the_layers_before_theirs() -> None:
    edges, _ = graph()
    package = "components.stack_config"
    layered = {f"{package}.{m}" for layer in STACK_CONFIG_LAYERS for m in layer}
    assert {m for m in edges if m.startswith(package + ".")} == layered  # every module has its layer
    below: set[str] = {package}
    wrong = []
    for layer in STACK_CONFIG_LAYERS:
        for m in layer:
            wrong += [f"{m} -> {t}" for t in edges[f"{package}.{m}"] if t.startswith(package) and t not in below]
        below |= {f"{package}.{m}" for m in layer}
    assert wrong == []


def component_files() -> set[str]:
    """The modules directly in components/: one component each."""
    return {f"components.{p.stem}" for p in (ROOT / "components").glob("*.py") if p.stem != "__init__"}


def imports_of_component_files(edges: dict[str, set[str]], files: set[str]) -> list[str]:
    """`importer -> imported` for every module of components/ that imports one of `files`."""
    return sorted(f"{m} -> {t}" for m, targets in edges.items() if m.startswith("components.") for t in targets & files)


def test_no_module_of_components_imports_a_component_file() -> None:
    edges, _ = graph()
    files = component_files()
    assert {"components.triton_deployment", "components.ingress", "components.identities"} <= files
    assert imports_of_component_files(edges, files) == []


def component_packages(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """components' packages (and the files directly in it) -> those of them their modules import."""

    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    found: dict[str, set[str]] = {}
    for module, targets in edges.items():
        if module.startswith("components."):
            found.setdefault(package(module), set()).update(
                package(t) for t in targets if t.startswith("components.") and package(t) != package(module)
            )
    return found


def test_no_import_runs_both_ways_between_components_packages() -> None:
    edges, _ = graph()
    found = component_packages(edges)
    assert {"components.stack_config", "components.iam", "components.kubernetes", "components.gateway"} <= found.keys()
    assert "components.iam" in found["components.stack_config"]  # edges were read
    assert cycles(found) == []


def test_the_component_checks_see_an_import_of_a_component_file_and_a_cycle() -> None:
    edges = {
        "components.gateway.routes": {"components.triton_deployment", "components.kubernetes.naming"},
        "components.kubernetes.naming": {"components.gateway.args"},
        "components.gateway.args": set(),
        "components.triton_deployment": set(),
    }
    assert imports_of_component_files(edges, {"components.triton_deployment"}) == [
        "components.gateway.routes -> components.triton_deployment"
    ]
    assert cycles(component_packages(edges)) == [["components.gateway", "components.kubernetes"]]
