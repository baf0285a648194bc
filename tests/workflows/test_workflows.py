"""What the workflows promise, checked on their parsed YAML: SHA-pinned actions, least
privilege, OIDC only where AWS is used, the policy pack on every Pulumi run, prod behind the
protected environment, inputs never interpolated into shell."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_DIR = ROOT / ".github" / "workflows"
STACKS = sorted(p.name.split(".")[1] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
PINNED = re.compile(r"^\s*(?:-\s+)?uses:\s+([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # v\d+\.\d+\.\d+$")
AWS_ACTION = "aws-actions/configure-aws-credentials"
PULUMI_ACTION = "pulumi/actions"


def load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((WORKFLOW_DIR / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the `on` key as True
    return doc


ALL = sorted(p.name for p in WORKFLOW_DIR.glob("*.yml"))


def steps(job: dict[str, Any], action: str | None = None) -> list[dict[str, Any]]:
    return [s for s in job.get("steps", []) if action is None or str(s.get("uses", "")).startswith(action + "@")]


@pytest.mark.parametrize("name", ALL)
def test_every_action_is_pinned_by_commit_sha_with_a_version_comment(name: str) -> None:
    lines = [ln for ln in (WORKFLOW_DIR / name).read_text().splitlines() if re.match(r"^\s*(-\s+)?uses:", ln)]
    assert lines
    unpinned = [ln.strip() for ln in lines if not PINNED.match(ln)]
    assert unpinned == []


def test_each_action_uses_one_sha_across_workflows() -> None:
    shas: dict[str, set[str]] = {}
    for name in ALL:
        for m in (PINNED.match(ln) for ln in (WORKFLOW_DIR / name).read_text().splitlines()):
            if m:
                shas.setdefault(m.group(1), set()).add(m.group(2))
    assert set(shas) == {"actions/checkout", "actions/setup-python", "actions/upload-artifact", AWS_ACTION, PULUMI_ACTION}
    assert {a: len(s) for a, s in shas.items()} == dict.fromkeys(shas, 1)


@pytest.mark.parametrize("name", ALL)
def test_least_privilege(name: str) -> None:
    wf = load(name)
    assert wf["permissions"] == {}
    for job_id, job in wf["jobs"].items():
        perms = job.get("permissions")
        assert perms is not None, f"{job_id} has no explicit permissions"
        uses_aws = bool(steps(job, AWS_ACTION))
        assert (perms.get("id-token") == "write") == uses_aws, f"{job_id}: id-token write only with AWS OIDC"
        assert set(perms.values()) <= {"read", "write"}
        writes = {k for k, v in perms.items() if v == "write"}
        assert writes <= {"id-token", "pull-requests"}, f"{job_id} writes {writes}"
        if "pull-requests" in writes:
            assert any(s.get("with", {}).get("comment-on-pr") for s in steps(job, PULUMI_ACTION))
        for s in steps(job, "actions/checkout"):
            assert s["with"]["persist-credentials"] is False


@pytest.mark.parametrize("name", ALL)
def test_no_expression_is_interpolated_into_a_shell_script(name: str) -> None:
    for job in load(name)["jobs"].values():
        for s in job.get("steps", []):
            assert "${{" not in s.get("run", ""), s.get("name")


@pytest.mark.parametrize("name", ALL)
def test_every_pulumi_run_uses_the_policy_pack_and_the_pinned_cli(name: str) -> None:
    for job in load(name)["jobs"].values():
        for s in steps(job, PULUMI_ACTION):
            assert s["with"]["policyPacks"] == "policy"
            assert s["with"]["pulumi-version"] == "${{ env.PULUMI_VERSION }}"
            assert steps(job, AWS_ACTION), "a Pulumi run without AWS credentials"


def test_pull_request_previews_every_stack_and_explains_forks() -> None:
    wf = load("pull-request.yml")
    assert list(wf["on"]) == ["pull_request"]
    jobs = wf["jobs"]
    preview = jobs["preview"]
    assert sorted(i["stack"] for i in preview["strategy"]["matrix"]["include"]) == STACKS
    assert preview["needs"] == ["test", "render"]
    assert preview["if"] == "github.event.pull_request.head.repo.full_name == github.repository"
    (pulumi,) = steps(preview, PULUMI_ACTION)
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["comment-on-pr"] is True
    assert "${{ matrix.stack }}" in preview["concurrency"]["group"]
    assert jobs["preview-skipped"]["if"] == "github.event.pull_request.head.repo.full_name != github.repository"
    assert "::notice title=Pulumi previews skipped::" in jobs["preview-skipped"]["steps"][0]["run"]
    assert jobs["preview-skipped"]["permissions"] == {}
    assert any(s.get("run") == "make test" for s in jobs["test"]["steps"])
    render = jobs["render"]
    assert 'make render STACK="$stack"' in render["steps"][2]["run"]
    (upload,) = steps(render, "actions/upload-artifact")
    assert upload["with"]["path"] == "build/"


def test_deploy_runs_up_dev_then_staging_then_approved_prod() -> None:
    wf = load("deploy.yml")
    assert wf["on"] == {"push": {"branches": ["main"]}}
    jobs = wf["jobs"]
    assert [jobs[j]["needs"] for j in ("up-dev", "up-staging", "up-prod")] == ["test", "up-dev", "up-staging"]
    for stack in STACKS:
        job = jobs[f"up-{stack}"]
        (pulumi,) = steps(job, PULUMI_ACTION)
        assert (pulumi["with"]["command"], pulumi["with"]["stack-name"]) == ("up", stack)
        assert job["concurrency"] == {"group": f"pulumi-up-{stack}", "cancel-in-progress": False}
        (aws,) = steps(job, AWS_ACTION)
        assert aws["with"]["role-to-assume"] == f"${{{{ vars.AWS_DEPLOYER_ROLE_ARN_{stack.upper()} }}}}"
        # The stack's OIDC trust (githubDeployRefs) decides whether the job may use an environment.
        refs = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]["triton-platform:githubDeployRefs"]
        assert job.get("environment") == ("prod" if "environment:prod" in refs else None)
    assert jobs["up-prod"]["environment"] == "prod"


def test_model_promotion_verifies_staging_then_promotes_in_the_prod_environment() -> None:
    wf = load("model-promote.yml")
    assert set(wf["on"]["workflow_dispatch"]["inputs"]) == {"model", "version"}
    assert wf["env"]["MODEL"] == "${{ inputs.model }}"
    assert wf["env"]["VERSION"] == "${{ inputs.version }}"
    verify, promote = wf["jobs"]["verify-staging"], wf["jobs"]["promote"]
    assert 'model-sync verify "$MODEL" --env staging --version "$VERSION"' in verify["steps"][-1]["run"]
    assert promote["needs"] == "verify-staging"
    assert promote["environment"] == "prod"
    runs = "\n".join(s.get("run", "") for s in promote["steps"])
    assert 'model-sync promote "$MODEL" --from staging --to prod --version "$VERSION"' in runs
    assert steps(promote, AWS_ACTION)[0]["with"]["role-to-assume"] == "${{ vars.AWS_PROMOTER_ROLE_ARN }}"
    for job in (verify, promote):
        assert job["steps"][0]["name"] == "Validate inputs"


def test_model_rollback_is_gated_in_prod_only() -> None:
    wf = load("model-rollback.yml")
    inputs = wf["on"]["workflow_dispatch"]["inputs"]
    assert inputs["env"]["options"] == ["staging", "prod"]
    assert inputs["version"]["required"] is False
    staging, prod = wf["jobs"]["rollback-staging"], wf["jobs"]["rollback-prod"]
    assert "environment" not in staging
    assert prod["environment"] == "prod"
    for job in (staging, prod):
        assert job["steps"][0]["name"] == "Validate inputs"
        assert 'args=(rollback "$MODEL" --env "$TARGET_ENV")' in job["steps"][-1]["run"]
    assert wf["concurrency"] == {"group": "model-sync-${{ inputs.env }}", "cancel-in-progress": False}
    assert load("model-promote.yml")["concurrency"]["group"] == "model-sync-prod"


@pytest.mark.parametrize(("model", "version", "ok"), [
    ("resnet18", "7", True), ("text-encoder_v2.onnx", "12", True), ("resnet18", "", False),
    ("$(curl evil)", "1", False), ("resnet18", "1; rm -rf /", False), ("resnet18", "0", False), ("-rf", "1", False),
])
def test_promote_input_validation_script(model: str, version: str, ok: bool) -> None:
    """Run the workflow's own validation step in bash with hostile inputs."""
    script = load("model-promote.yml")["jobs"]["verify-staging"]["steps"][0]["run"]
    env = {"PATH": "/usr/bin:/bin", "GITHUB_REF": "refs/heads/main", "MODEL": model, "VERSION": version}
    proc = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert (proc.returncode == 0) == ok, proc.stdout
    if not ok:
        assert proc.stdout.startswith("::error title=Invalid input::")


def test_promote_refuses_other_branches() -> None:
    script = load("model-promote.yml")["jobs"]["verify-staging"]["steps"][0]["run"]
    env = {"PATH": "/usr/bin:/bin", "GITHUB_REF": "refs/heads/feature", "MODEL": "resnet18", "VERSION": "3"}
    proc = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 1
    assert proc.stdout.startswith("::error title=Wrong branch::")


def _model_sync_invocations(tmp_path: Path, script: str, env: dict[str, str]) -> list[list[str]]:
    """Run a workflow step's script with a stub `.venv/bin/model-sync` recording its argv."""
    stub = tmp_path / ".venv" / "bin" / "model-sync"
    stub.parent.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "calls"
    stub.write_text(f'#!/bin/bash\nprintf "%s\\0" "$@" >> {log}\nprintf "\\n" >> {log}\n')
    stub.chmod(0o755)
    subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", **env}, check=True, timeout=30)
    return [line.rstrip("\0").split("\0") for line in log.read_text().split("\0\n") if line] if log.exists() else []


@pytest.mark.parametrize(("name", "version"), [
    ("model-promote.yml", "3"), ("model-rollback.yml", "3"), ("model-rollback.yml", ""),
])
def test_model_sync_invocations_parse_with_the_real_cli(tmp_path: Path, name: str, version: str) -> None:
    """Every model-sync call the workflow's steps make, run with a stub and parsed by model_sync's own parser."""
    from model_sync.cli import build_parser

    parser = build_parser()
    registered = set(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr,arg-type]
    calls: list[list[str]] = []
    for job in load(name)["jobs"].values():
        for s in job["steps"]:
            if "model-sync" in s.get("run", "") and "pip install" not in s["run"]:
                env = {"MODEL": "resnet18", "VERSION": version, "TARGET_ENV": "prod"}
                calls += _model_sync_invocations(tmp_path, s["run"], env)
    assert calls, "no model-sync call found"
    checked = [c for c in calls if c[0] in registered]
    assert {c[0] for c in calls} - registered <= {"verify"}, "only `verify` may still be landing"
    assert checked
    for argv in checked:
        parsed = parser.parse_args(argv)
        assert parsed.command == argv[0]
    if name == "model-rollback.yml":
        assert calls[0] == ["rollback", "resnet18", "--env", "prod", *(["--to", "3"] if version else [])]
