"""docs/architecture.md, the design of record, held to the tree at test time (nothing here lists a
module by hand): every module of model_sync/ and components/ (the doc's two halves; tools/ and bench/
are the README's) is listed in exactly one row of the doc's module tables and every listed file
exists; the stack config's layering the doc states is the one tests/test_imports.py holds, as are the
data plane's package layers and the in-function imports it names; the stack outputs model_sync reads are
named once, in model_sync/contract/."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from tests import test_imports

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
HALVES = ("model_sync", "components")
_TOKEN = re.compile(r"`([^`]+)`")


# The doc's module tables, by their header's first cell: the stack configuration's concerns, the shared
# packages and the components of the control plane, the data plane's packages.
MODULE_TABLES = ("concern", "package", "component (file)")


def _package(token: str) -> str:
    """A table's directory token -> its path from the root: `contract/` is model_sync's (the data
    plane's table), `components/gateway/` is given whole."""
    return token if token.startswith(HALVES) else f"model_sync/{token}"


def _rows() -> list[list[str]]:
    """The cells of every body row of the doc's module tables."""
    rows: list[list[str]] = []
    table: list[str] = []
    for line in [*DOC.read_text().splitlines(), ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        if table and table[0].strip("|").split("|")[0].strip() in MODULE_TABLES:
            rows += [row.strip().strip("|").split("|") for row in table[2:]]
        table = []
    return rows


def listings() -> list[str]:
    """Every .py file the module tables list, as a path from the root, once per listing. A row whose
    first cell starts with a directory (`agent/`, `components/gpu/`) is that package's, any other a
    component's (components/); in a cell, a directory (`components/gateway/`) or a file given whole
    (`components/stack_config/errors.py`) says where the bare names after it are."""
    found = []
    for cells in _rows():
        first = _TOKEN.findall(cells[0])
        row = _package(first[0]) if first and first[0].endswith("/") else "components/"
        for n, cell in enumerate(cells):
            here = row
            for i, token in enumerate(_TOKEN.findall(cell)):
                if token.endswith("/") and (n, i) != (0, 0):
                    here = _package(token)
                elif token.endswith(".py") and "/" in token:
                    found.append(token)
                    here = token.rsplit("/", 1)[0] + "/"
                elif token.endswith(".py") and " " not in token:
                    found.append(f"{here}{token}")
    return [p for p in found if p.startswith(HALVES)]


def modules() -> set[str]:
    return {str(p.relative_to(ROOT)) for half in HALVES for p in (ROOT / half).rglob("*.py") if p.name != "__init__.py"}


def test_every_module_is_listed_once_and_every_listing_exists() -> None:
    listed = Counter(listings())
    assert len(listed) > 100  # both halves' tables were read
    assert sorted(modules() - set(listed)) == []  # a module the design of record does not list
    assert sorted(p for p in listed if not (ROOT / p).is_file()) == []  # a listing of nothing
    assert sorted(p for p, n in listed.items() if n > 1) == []  # a module listed twice


def test_the_listing_reader_resolves_each_kind_of_row() -> None:
    found = set(listings())
    assert {
        "model_sync/agent/metrics.py",  # a data-plane package row
        "model_sync/__main__.py",  # the `model_sync/` row
        "components/stack_config/readers.py",  # a bare name after a full path
        "components/gateway/routes.py",  # a bare name after a directory token
        "components/network.py",  # a component's row
        "components/gpu/node_fit.py",  # a shared package's row
    } <= found


def stack_config_layers() -> list[tuple[str, ...]]:
    """The rows of the doc's stack configuration table, top to bottom: each row's modules."""
    text = DOC.read_text()
    table = text[text.index("| concern | files |") :].split("\n\n", 1)[0].splitlines()[2:]
    return [tuple(Path(f).stem for f in _TOKEN.findall(row.strip("|").split("|")[-1])) for row in table]


def test_the_stated_stack_config_layering_is_the_one_the_imports_hold() -> None:
    """'Each module imports only those above it in this table': tests/test_imports.py holds
    STACK_CONFIG_LAYERS, and the doc's rows are those layers, in order."""
    assert stack_config_layers() == [tuple(layer) for layer in test_imports.STACK_CONFIG_LAYERS]


def test_the_stated_package_layers_are_the_ones_the_imports_hold() -> None:
    sentence = re.search(r"from the commands down through (.*?) to `contract`", " ".join(DOC.read_text().split()))
    assert sentence is not None
    stated = re.findall(r"`([a-z0-9_]+)`", sentence.group(1))
    assert (*stated, "contract") == test_imports.MODEL_SYNC_LAYERS


def test_the_in_function_imports_the_doc_names_are_the_ones_allowed() -> None:
    """Each reason tests/test_imports.py allows an in-function import for is one the doc states."""
    text = " ".join(DOC.read_text().split())
    phrases = {
        "parser": "each `commands/<name>.py` imports its library module when it runs",
        "agent": "the agent's names loaded on first use",
        "text_format": "`triton_model.model_config` (protobuf's text_format), imported only where a config is parsed",
    }
    assert set(test_imports.LAZY.values()) == set(phrases)
    assert [reason for reason, phrase in phrases.items() if phrase not in text] == []


def test_the_stack_outputs_model_sync_reads_are_named_once_in_the_contract() -> None:
    """`canaryPolicies` and `tritonGpus` are strings in model_sync/contract/stack_outputs.py only: the
    program exports them and model_sync reads them by those names. The sandbox is left out: it writes
    model-sync.yaml files as their user would."""
    from model_sync.contract import stack_outputs

    names = {stack_outputs.CANARY_POLICIES, stack_outputs.TRITON_GPUS}
    assert names == {"canaryPolicies", "tritonGpus"}
    files = [ROOT / "__main__.py", *(p for half in HALVES for p in (ROOT / half).rglob("*.py"))]
    files = [p for p in files if not p.is_relative_to(ROOT / "model_sync" / "sandbox")]
    spelled = sorted(
        str(path.relative_to(ROOT))
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in names
    )
    assert spelled == ["model_sync/contract/stack_outputs.py"] * 2
