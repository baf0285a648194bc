"""docs/operations.md cannot drift: its make targets exist, its workflow files exist, and every
`model-sync` command line in its code blocks parses with model_sync's real CLI parser."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "operations.md").read_text()
CODE = "\n".join(re.findall(r"```bash\n(.*?)```", DOC, flags=re.S))


def _commands(prefix: str) -> list[list[str]]:
    out = []
    for line in CODE.splitlines():
        line = line.split("  #", 1)[0].strip()
        if line.startswith(prefix + " "):
            out.append(shlex.split(line)[1:])
    return out


def test_make_targets_in_the_doc_exist() -> None:
    targets = {argv[0] for argv in _commands("make")}
    assert targets >= {"test", "render", "policy-test", "workflow-lint"}
    for target in targets:
        proc = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr


def test_workflow_files_in_the_doc_exist() -> None:
    named = set(re.findall(r"([\w-]+\.yml)", DOC)) - {"zizmor.yml"}  # the workflow lint's configuration
    assert named == {p.name for p in (ROOT / ".github" / "workflows").glob("*.yml")}


def test_model_sync_commands_in_the_doc_parse() -> None:
    from model_sync.cli import build_parser

    parser = build_parser()
    calls = _commands("model-sync")
    assert {c[0] for c in calls} == {"export", "push", "status", "verify"}
    for argv in calls:
        assert parser.parse_args(argv).command == argv[0]


def test_every_variable_and_secret_the_workflows_read_is_documented() -> None:
    """A workflow reading an undocumented repository variable or secret fails on first use."""
    used: set[str] = set()
    for wf in (ROOT / ".github" / "workflows").glob("*.yml"):
        used |= set(re.findall(r"\$\{\{\s*(?:vars|secrets)\.(\w+)\s*\}\}", wf.read_text()))
    assert {"AWS_REGION", "PULUMI_ACCESS_TOKEN", "MODEL_REPOSITORY_BUCKET_PROD", "AGENT_IMAGE_REPOSITORY"} <= used
    undocumented = sorted(name for name in used - {"GITHUB_TOKEN"} if f"`{name}`" not in DOC)
    assert undocumented == []
    assert "PULUMI_BACKEND_URL" not in DOC  # the workflows use Pulumi Cloud only


def test_ci_requirements_are_documented() -> None:
    assert "PIP_EXTRA_INDEX_URL" in DOC
    assert "https://download.pytorch.org/whl/cpu" in DOC
    for stack in ("dev", "staging", "prod"):
        assert f"triton-platform-{stack}" in DOC
    assert "agentImage" in DOC


def test_the_subject_template_command_applies_the_template_the_roles_expect() -> None:
    """The one-time `gh api` call sets exactly GITHUB_SUB_CLAIM_KEYS (the template every CI role's
    trust is written for) on this repository's OIDC subject customization endpoint."""
    from components.iam.github_oidc import GITHUB_SUB_CLAIM_KEYS

    [line] = [ln.strip() for ln in CODE.splitlines() if "actions/oidc/customization/sub --input -" in ln]
    m = re.fullmatch(
        r"echo '(\{.*\})' \| gh api --method PUT repos/OWNER/REPO/actions/oidc/customization/sub --input -", line
    )
    assert m, line
    assert json.loads(m.group(1)) == {"use_default": False, "include_claim_keys": list(GITHUB_SUB_CLAIM_KEYS)}


def test_the_image_publisher_subject_in_the_doc_is_the_agent_image_job_subject() -> None:
    """The ECR role lives outside the stacks: the doc states its trust, built like the stacks' roles'."""
    from components.iam.github_oidc import github_subject

    expected = github_subject("o/r", "agent-image.yml", "refs/heads/main", "agent-image").replace("o/r", "<owner/name>")
    assert f"`{expected}`" in DOC
    assert "`repo:<owner/name>:ref:refs/heads/main`" not in DOC  # the default-template subject, trusted by nothing now
