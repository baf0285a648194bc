"""`make render` / `python -m tools.render`: runs without credentials and writes loadable
YAML/JSON; a broken stack file exits 2 naming the key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import stack_run
from tests.pulumi_kit import ROOT, run_program
from tools import yamlio
from tools.render import INSTALL_ORDER, write_render


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_render_writes_loadable_manifests_and_inventory(stack: str, tmp_path: Path) -> None:
    run = stack_run(stack)
    counts = write_render(run, tmp_path / stack)
    out = tmp_path / stack
    inventory = json.loads((out / "inventory.json").read_text())
    assert len(inventory) == counts["resources"] == len(run.resources) > 0
    assert {"type", "name", "parent", "parentType", "provider", "inputs"} <= set(inventory[0])
    assert {r["name"] for r in inventory} == {r.name for r in run.resources}
    manifests = sorted((out / "manifests").glob("*.yaml"))
    assert len(manifests) == counts["manifests"] == len(run.kubernetes_objects())
    for path in manifests:
        doc = yamlio.load(path.read_text())
        for key in ("apiVersion", "kind"):
            assert doc[key], path.name
        assert doc["metadata"]["name"], path.name
    for path in (out / "helm").glob("*.yaml"):
        release = yamlio.load(path.read_text())
        assert release["chart"], path.name
        assert release["version"], path.name
    assert isinstance(json.loads((out / "exports.json").read_text()), dict)


def test_two_renders_of_one_commit_are_the_same_files_in_install_order(tmp_path: Path) -> None:
    # The program registers resources, and the mocks record input keys, in no fixed order: two
    # renders of prod differed in 132 files before the render ordered them (and two runs in one process differ too).
    first, second = run_program("prod"), stack_run("prod")
    write_render(first, tmp_path / "a")
    write_render(second, tmp_path / "b")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    kinds = [yamlio.load(p.read_text())["kind"] for p in sorted((tmp_path / "a" / "manifests").glob("*.yaml"))]
    ranks = [INSTALL_ORDER.index(k) if k in INSTALL_ORDER else len(INSTALL_ORDER) for k in kinds]
    assert ranks == sorted(ranks), kinds
    assert kinds[0] == "Namespace", kinds
    assert "ServiceMonitor" in kinds[ranks.index(len(INSTALL_ORDER)) :], kinds  # custom resources last


def test_render_cli_refuses_a_broken_stack_file_naming_the_key(tmp_path: Path) -> None:
    broken = tmp_path / "Pulumi.dev.yaml"
    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    assert "maxSize: 2\n" in text
    broken.write_text(text.replace("      maxSize: 2\n", "      maxSise: 2\n", 1))
    proc = subprocess.run(
        [sys.executable, "-m", "tools.render", "dev", "--stack-file", str(broken), "--out", str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "render: invalid stack config: triton-platform:nodeGroups.gpu-l4.maxSise: 2 is an unknown key; allowed:"
        )
    )
    assert not (tmp_path / "out").exists()
