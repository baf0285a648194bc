"""Static checks of docker/agent.Dockerfile (no Docker engine here): parsed instruction by
instruction, then the invariants asserted. Plus: the agent's import graph needs no torch/grpc."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from model_sync.agent import AGENT_COMMAND

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "docker" / "agent.Dockerfile"
REQUIREMENTS = ROOT / "docker" / "agent-requirements.txt"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        op, _, args = buf.partition(" ")
        out.append((op.upper(), args.strip()))
        buf = ""
    assert not buf, "dangling line continuation"
    return out


def test_parser_reads_continuations_and_skips_comments() -> None:
    parsed = instructions("# c\nFROM a:1\nRUN x \\\n  && y\n\nUSER 1000\n")
    assert parsed == [("FROM", "a:1"), ("RUN", "x  && y"), ("USER", "1000")]


def test_base_image_is_pinned_to_an_exact_slim_tag_and_its_digest() -> None:
    """A tag alone can be rebuilt under the same name: the digest is what is pulled."""
    froms = [a for op, a in instructions(DOCKERFILE.read_text()) if op == "FROM"]
    assert len(froms) == 1
    image = froms[0]
    assert re.match(r"^python:\d+\.\d+\.\d+-slim-[a-z]+@sha256:[0-9a-f]{64}$", image), image
    assert "pin the digest in CI" not in DOCKERFILE.read_text()  # an old claim nothing made true


def test_runs_as_uid_1000_as_the_last_user() -> None:
    users = [a for op, a in instructions(DOCKERFILE.read_text()) if op == "USER"]
    assert users
    assert users[-1].split(":")[0] == "1000"


def test_entrypoint_is_the_command_the_tests_run() -> None:
    entry = [a for op, a in instructions(DOCKERFILE.read_text()) if op == "ENTRYPOINT"]
    assert len(entry) == 1
    assert tuple(json.loads(entry[0])) == AGENT_COMMAND == ("python", "-m", "model_sync", "agent")
    from tests.support.triton import Serving

    # tests/support/triton.py runs sys.executable + AGENT_COMMAND[1:]: the same module and command.
    assert Serving.agent_argv.__code__.co_names.count("AGENT_COMMAND") == 1


def test_requirements_are_exact_pins_without_torch_or_grpc() -> None:
    from tests.test_pins import pins, problems

    text = REQUIREMENTS.read_text()
    assert problems(text) == []  # name==version, each with its sha256 hashes (tests/test_pins.py)
    reqs = pins(text)
    assert reqs
    assert not set(reqs) & {"torch", "grpcio", "torchvision"}
    # Same versions as the locked dev environment the tests run in.
    dev = pins((ROOT / "requirements-dev.txt").read_text())
    for name, pin in reqs.items():
        assert dev[name].version == pin.version, name


def test_image_installs_requirements_without_resolution_and_the_package_without_deps() -> None:
    runs = [a for op, a in instructions(DOCKERFILE.read_text()) if op == "RUN"]
    assert any("pip install --no-deps --require-hashes -r agent-requirements.txt" in r for r in runs)
    assert any("pip install --no-deps" in r and r.rstrip().split("&&")[0].strip().endswith(" .") for r in runs)
    copies = [a for op, a in instructions(DOCKERFILE.read_text()) if op == "COPY"]
    assert "docker/agent-requirements.txt ./agent-requirements.txt" in copies


def test_agent_command_imports_neither_torch_nor_grpc() -> None:
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['grpc'] = None\n"
        "from model_sync.cli import build_parser; import model_sync.agent, model_sync.commands.agent\n"
        "build_parser().parse_args(['agent', '--env', 'x', '--repository', '/tmp/r'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'grpc') and sys.modules[m] is not None))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_every_distribution_the_agent_imports_is_pinned_for_the_image() -> None:
    """The image installs agent-requirements.txt with --no-deps: a package the agent's code imports
    (its metrics' prometheus-client, botocore, jsonschema...) missing there would fail only in the
    pod. The agent's modules are followed from its command (lazy imports too), statically."""
    import importlib.metadata as md

    from tests.support.imports import imports
    from tests.test_pins import pins

    def module_file(name: str) -> tuple[str, Path] | None:
        parts = name.split(".")
        while parts:
            base = ROOT.joinpath(*parts)
            for path in (base.with_suffix(".py"), base / "__init__.py"):
                if path.exists():
                    return ".".join(parts), path
            parts.pop()
        return None

    seen: set[str] = set()
    todo = ["model_sync.commands.agent", "model_sync.agent.loop", "model_sync.agent.metrics"]
    third_party: dict[str, str] = {}  # top-level module -> a project module importing it
    while todo:
        found = module_file(todo.pop())
        if found is None or found[0] in seen:
            continue
        seen.add(found[0])
        for imp in imports(found[1]):
            top = imp.name.split(".")[0]
            if top == "model_sync":
                todo.append(imp.name)
            elif top not in sys.stdlib_module_names and top != "__future__":
                third_party.setdefault(top, found[0])
    dists = md.packages_distributions()
    pinned = set(pins(REQUIREMENTS.read_text()))
    normal = lambda d: re.sub(r"[-_.]+", "-", d).lower()  # noqa: E731
    missing = {top: by for top, by in third_party.items() if not {normal(d) for d in dists.get(top, [])} & pinned}
    assert "prometheus_client" in third_party
    assert len(seen) > 20
    assert missing == {}, missing


def _copied_closure() -> dict[str, list[str]]:
    """The Dockerfile's COPY instructions into ./model_sync/...: destination directory -> its sources."""
    out: dict[str, list[str]] = {}
    for op, args in instructions(DOCKERFILE.read_text()):
        *sources, dest = args.split()
        if op == "COPY" and dest.startswith("./model_sync"):
            assert dest.endswith("/"), f"COPY ... {dest}: a directory destination ends with /"
            assert dest.removeprefix("./").rstrip("/") not in out, f"two COPY instructions into {dest}"
            out[dest.removeprefix("./").rstrip("/")] = sorted(sources)
    return out


def test_the_image_copies_exactly_the_agents_import_closure() -> None:
    """docker/agent.Dockerfile copies the files tools/agent_closure.py follows from the ENTRYPOINT, each
    into its own directory: a new import without its COPY, or a COPY nothing imports, fails here
    (`python -m tools.agent_closure` prints the lines)."""
    from tools import agent_closure

    expected = agent_closure.files()
    assert _copied_closure() == expected
    copied = {f for fs in expected.values() for f in fs}
    # What the walk must find: in-function imports (_common's --wait), the lazily loaded agent modules,
    # the command cli imports by name; and what the agent never imports stays out.
    assert {
        "model_sync/observation/replicas.py",
        "model_sync/agent/metrics.py",
        "model_sync/commands/agent.py",
    } <= copied
    assert not {f for f in copied if f.split("/")[1] in ("export", "push", "sandbox", "lifecycle", "canary")}
    assert "model_sync/commands/export.py" not in copied


def test_the_closure_alone_runs_the_agent_command(tmp_path: Path) -> None:
    """The copied files are enough: in a directory holding only them, every module of the closure imports
    and the agent's command line parses."""
    from tools import agent_closure

    for paths in agent_closure.files().values():
        for rel in paths:
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_bytes((ROOT / rel).read_bytes())
    code = (
        "import os, sys\n"  # the checkout (the editable install's path entry) is left out: only the copies
        f"sys.path[:] = [{str(tmp_path)!r}] + [p for p in sys.path if p and os.path.realpath(p) != {str(ROOT)!r}]\n"
        "import importlib, runpy\n"
        f"for m in {[m for m in agent_closure.closure() if m != 'model_sync.__main__']!r}: importlib.import_module(m)\n"
        "import model_sync\n"
        f"assert model_sync.__file__.startswith({str(tmp_path)!r}), model_sync.__file__\n"
        "import model_sync.agent as a; a.RepositoryAgent, a.AgentSettings\n"
        "sys.argv = ['model-sync', 'agent', '--help']\n"  # the ENTRYPOINT, as `python -m model_sync agent --help`
        "try:\n    runpy.run_module('model_sync', run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
