"""What the workflows promise, checked on their parsed YAML: SHA-pinned actions, least
privilege, OIDC only where AWS is used, the policy pack on every Pulumi run, prod behind the
protected environment, inputs never interpolated into shell, cluster-facing jobs on the
environment's self-hosted runner (pull-request code never on a deploy runner), and every
`model-sync` call resolving its environment through the real model_sync.environments from the
config the workflow writes. Which job can assume which AWS role: test_trust_matrix.py."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.identities import github_environment
from tools import yamlio

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_DIR = ROOT / ".github" / "workflows"
STACKS = sorted(p.name.split(".")[1] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
PINNED = re.compile(r"^\s*(?:-\s+)?uses:\s+([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # v\d+\.\d+\.\d+$")
AWS_ACTION = "aws-actions/configure-aws-credentials"
PULUMI_ACTION = "pulumi/actions"
BUILD_ACTION = "docker/build-push-action"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
ACTIONLINT_CONFIG = ROOT / "tools" / "actionlint" / "actionlint.yaml"


def load(name: str) -> dict[str, Any]:
    doc = yamlio.load((WORKFLOW_DIR / name).read_text())
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
    assert set(shas) == {
        "actions/checkout",
        "actions/setup-python",
        "actions/upload-artifact",
        "actions/download-artifact",
        AWS_ACTION,
        PULUMI_ACTION,
        "aws-actions/amazon-ecr-login",
        "docker/setup-buildx-action",
        BUILD_ACTION,
    }
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
            # Only the comment job: no checkout, no cloud credentials, no secret, GitHub-hosted.
            assert (name, job_id) == ("pull-request.yml", "comment")
            assert perms == {"pull-requests": "write"}
            assert not steps(job, "actions/checkout")
            assert not uses_aws
            assert "secrets." not in yaml.safe_dump(job)
        for s in steps(job, "actions/checkout"):
            assert s["with"]["persist-credentials"] is False


@pytest.mark.parametrize("name", ALL)
def test_no_expression_is_interpolated_into_a_shell_script(name: str) -> None:
    for job in load(name)["jobs"].values():
        for s in job.get("steps", []):
            assert "${{" not in s.get("run", ""), s.get("name")


PULUMI_CALL = re.compile(r"(?:^\s*|\$\()pulumi\s+(\S+)", flags=re.M)  # a command line or a $(...) of one


def pulumi_commands(job: dict[str, Any]) -> list[tuple[int, str]]:
    """(step index, subcommand) of every `pulumi <subcommand>` line of the job's run scripts."""
    return [(i, m.group(1)) for i, s in enumerate(job.get("steps", [])) for m in PULUMI_CALL.finditer(s.get("run", ""))]


def pulumi_jobs(wf: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {job_id: job for job_id, job in wf["jobs"].items() if steps(job, PULUMI_ACTION) or pulumi_commands(job)}


@pytest.mark.parametrize("name", ALL)
def test_every_pulumi_run_uses_the_policy_pack_and_the_pinned_cli(name: str) -> None:
    for job_id, job in pulumi_jobs(load(name)).items():
        # pulumi/actions only installs the pinned CLI (no `command`); the steps run it themselves.
        (install,) = steps(job, PULUMI_ACTION)
        assert install["with"] == {"pulumi-version": "${{ env.PULUMI_VERSION }}"}, job_id
        assert steps(job, AWS_ACTION), "a Pulumi run without AWS credentials"
        for i, command in pulumi_commands(job):
            s = job["steps"][i]
            assert i > job["steps"].index(install), f"{job_id}: pulumi before its install"
            if command in ("preview", "up"):
                assert re.search(
                    r"^\s*pulumi (preview|up) --stack \"\$STACK\" --policy-pack policy ", s["run"], flags=re.M
                ), f"{job_id}: {command}"
            # Pulumi Cloud backend (docs/operations.md): the token of the job's environment, never a backend URL.
            assert s["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}", f"{job_id}: {s.get('name')}"
            assert "--cloud-url" not in s["run"]
            assert "pulumi login" not in s["run"]
        assert job.get("environment"), f"{job_id}: a Pulumi token outside an environment"
    assert name not in ("deploy.yml", "pull-request.yml") or pulumi_jobs(load(name))


def _builds_policy_venv(step: dict[str, Any]) -> bool:
    return re.search(r"^\s*make policy-venv\s*$", step.get("run", ""), flags=re.M) is not None


@pytest.mark.parametrize("name", ALL)
def test_every_policy_pack_run_is_preceded_by_a_step_that_builds_the_policy_venv(name: str) -> None:
    """For a local pack the Pulumi CLI installs nothing (policy/PulumiPolicy.yaml): .venv-policy
    must exist before any `--policy-pack`, built in the same job from the repository's own files."""
    checked = 0
    for job_id, job in load(name)["jobs"].items():
        for i, s in enumerate(job.get("steps", [])):
            text = s.get("run", "") + yaml.safe_dump(s.get("with", {}))
            if "--policy-pack" in text or "policyPacks" in text:
                assert any(_builds_policy_venv(prev) for prev in job["steps"][:i]), (
                    f"{name} {job_id}: {s.get('name')} runs the pack before `make policy-venv`"
                )
                checked += 1
    assert checked >= {"deploy.yml": 4, "pull-request.yml": 1}.get(name, 0)


def test_make_policy_venv_builds_the_virtualenv_the_pack_names() -> None:
    pack = yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text())
    assert pack["runtime"]["options"]["virtualenv"] == "../.venv-policy"
    dry = subprocess.run(
        ["make", "-n", "-B", "policy-venv"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "-m venv .venv-policy" in dry
    assert "-r policy/requirements.txt" in dry
    assert (
        "installs requirements.txt" not in (ROOT / "policy" / "PulumiPolicy.yaml").read_text()
    )  # the old, wrong claim


def _runner_labels() -> set[str]:
    doc = yaml.safe_load(ACTIONLINT_CONFIG.read_text())
    return set(doc["self-hosted-runner"]["labels"])


DEPLOY_LABELS = {f"triton-platform-{s}" for s in STACKS}
PREVIEW_LABELS = {f"triton-platform-{s}-preview" for s in STACKS}
MODELS_LABELS = {"triton-platform-prod-models"}  # the prod promotion's gray release (model-promote.yml)
PULL_REQUEST_EVENTS = {
    "pull_request",
    "pull_request_target",
    "pull_request_review",
    "pull_request_review_comment",
    "merge_group",
}


def _runner_labels_of(job: dict[str, Any]) -> list[set[str]]:
    """The labels each matrix leg of the job asks for (`${{ matrix.x }}` expanded)."""
    runs_on = job["runs-on"]
    labels = [runs_on] if isinstance(runs_on, str) else list(runs_on)
    legs = job.get("strategy", {}).get("matrix", {}).get("include", [{}])
    out = []
    for leg in legs:
        expanded = {
            re.sub(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lambda m, leg=leg: str(leg[m.group(1)]), str(label))
            for label in labels
        }
        assert not any("${{" in label for label in expanded), f"model the runner label expression in {labels}"
        out.append(expanded)
    return out


@pytest.mark.parametrize("name", ALL)
def test_cluster_jobs_run_self_hosted_in_the_stack_vpc_and_offline_jobs_on_github(name: str) -> None:
    """The EKS API is private (prod) or allow-listed (dev/staging): Pulumi runs on the stack's
    runner: `up` on its deploy runner, `preview` (the pull request's code) on its preview runner,
    the prod promotion (a gray release: Prometheus through the API server) on prod's models runner."""
    wf = load(name)
    for job_id, job in wf["jobs"].items():
        if job_id not in pulumi_jobs(wf):
            assert job["runs-on"] == "ubuntu-24.04", f"{job_id}: offline/S3-only jobs stay on GitHub-hosted runners"
            continue
        legs = job.get("strategy", {}).get("matrix", {}).get("include", [{}])
        for leg, labels in zip(legs, _runner_labels_of(job), strict=True):
            if name == "model-promote.yml":  # no STACK: the stack of its environment (models-<stack>)
                stack = str(job["environment"]).removeprefix("models-")
            else:
                stack = str(job["env"]["STACK"]).replace("${{ matrix.stack }}", str(leg.get("stack")))
            assert stack in STACKS, job_id
            # main's code / a pull request's code / a model promotion's
            kind = {"deploy.yml": "", "pull-request.yml": "-preview", "model-promote.yml": "-models"}[name]
            assert labels == {"self-hosted", f"triton-platform-{stack}{kind}"}, job_id
            if kind != "-preview":
                assert labels - {"self-hosted"} <= _runner_labels(), (
                    "declare the label in tools/actionlint/actionlint.yaml"
                )


def test_the_declared_runner_labels_are_the_stacks_runners() -> None:
    # The deploy and models labels must be declared (actionlint checks them); the preview labels
    # use a matrix expression, which actionlint does not check, and may be declared too.
    assert DEPLOY_LABELS | MODELS_LABELS <= _runner_labels() <= DEPLOY_LABELS | PREVIEW_LABELS | MODELS_LABELS
    assert not DEPLOY_LABELS & PREVIEW_LABELS
    assert not MODELS_LABELS & (DEPLOY_LABELS | PREVIEW_LABELS)


def test_only_the_prod_promotion_runs_on_the_models_runner() -> None:
    """The models runner (inside the prod VPC: the gray release's Prometheus queries go through
    the private EKS endpoint) runs the promote job of model-promote.yml, nothing else: no pull
    request's code, no deploy, no Pulumi write token (its environment holds a read token)."""
    users = [
        (name, job_id)
        for name in ALL
        for job_id, job in load(name)["jobs"].items()
        for labels in _runner_labels_of(job)
        if labels & MODELS_LABELS
    ]
    assert users == [("model-promote.yml", "promote")]
    promote = load("model-promote.yml")["jobs"]["promote"]
    assert promote["runs-on"] == ["self-hosted", "triton-platform-prod-models"]
    assert promote["environment"] == "models-prod"


@pytest.mark.parametrize("name", ALL)
def test_pull_request_code_never_runs_on_a_deploy_runner(name: str) -> None:
    """A workflow a pull request triggers runs the pull request's code: none of its jobs may ask
    for a deploy runner label, and its self-hosted jobs use the preview runners. Conversely a
    deploy runner label is asked for only by jobs of push-to-main workflows."""
    wf = load(name)
    events = set(wf["on"])
    for job_id, job in wf["jobs"].items():
        for labels in _runner_labels_of(job):
            if events & PULL_REQUEST_EVENTS:
                assert not labels & DEPLOY_LABELS, (
                    f"{name} {job_id}: pull-request code on a deploy runner {labels & DEPLOY_LABELS}"
                )
                assert "self-hosted" not in labels or labels - {"self-hosted"} <= PREVIEW_LABELS, (
                    f"{name} {job_id}: {labels}"
                )
            if labels & DEPLOY_LABELS:
                assert name == "deploy.yml", f"{name} {job_id}: a deploy runner outside deploy.yml"
                assert set(wf["on"]) == {"push", "workflow_dispatch"}, f"{name} {job_id}"
                assert wf["on"]["push"] == {"branches": ["main"]}, f"{name} {job_id}"
                assert not labels & PREVIEW_LABELS


def test_pull_request_previews_run_on_the_preview_runner_of_each_stack() -> None:
    [preview] = pulumi_jobs(load("pull-request.yml")).values()
    assert [labels - {"self-hosted"} for labels in _runner_labels_of(preview)] == [
        {f"triton-platform-{s}-preview"} for s in ("dev", "staging", "prod")
    ]


@pytest.mark.parametrize("name", ALL)
def test_jobs_that_run_make_can_install_the_cpu_torch_pin(name: str) -> None:
    """requirements-dev.txt pins torch==X+cpu, served by PyTorch's CPU index, not PyPI."""
    checked = 0
    for job_id, job in load(name)["jobs"].items():
        # `make policy-venv` installs policy/requirements.txt only (PyPI): no extra index there.
        if any(
            re.search(r"^\s*make\s+(?!policy-venv\s*$)", s.get("run", ""), flags=re.M) for s in job.get("steps", [])
        ):
            assert job.get("env", {}).get("PIP_EXTRA_INDEX_URL") == TORCH_INDEX, job_id
            checked += 1
    assert checked >= (1 if name in ("deploy.yml", "pull-request.yml") else 0)


def test_the_requirements_files_name_no_extra_index() -> None:
    """The CPU index is CI configuration only: an index inside the files would hang pip where it is unreachable."""
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-dev.in"):
        text = (ROOT / name).read_text()
        assert "index-url" not in text, name  # --index-url and --extra-index-url


def test_pull_request_previews_every_stack_and_explains_forks() -> None:
    wf = load("pull-request.yml")
    assert list(wf["on"]) == ["pull_request"]
    jobs = wf["jobs"]
    preview = jobs["preview"]
    assert sorted(i["stack"] for i in preview["strategy"]["matrix"]["include"]) == STACKS
    assert preview["needs"] == ["test", "render"]
    assert preview["if"] == "github.event.pull_request.head.repo.full_name == github.repository"
    assert [c for _, c in pulumi_commands(preview)] == ["preview"]
    assert preview["env"]["STACK"] == "${{ matrix.stack }}"
    assert "${{ matrix.stack }}" in preview["concurrency"]["group"]
    assert preview["runs-on"] == ["self-hosted", "triton-platform-${{ matrix.stack }}-preview"]
    assert preview["environment"] == "preview-${{ matrix.stack }}"
    assert {github_environment("preview", s) for s in STACKS} == {f"preview-{s}" for s in STACKS}
    assert jobs["preview-skipped"]["if"] == "github.event.pull_request.head.repo.full_name != github.repository"
    assert "::notice title=Pulumi previews skipped::" in jobs["preview-skipped"]["steps"][0]["run"]
    assert jobs["preview-skipped"]["permissions"] == {}
    assert any(s.get("run") == "make test" for s in jobs["test"]["steps"])
    render = jobs["render"]
    assert 'make render STACK="$stack"' in render["steps"][2]["run"]
    uploads = steps(render, "actions/upload-artifact")
    assert [u["with"]["path"] for u in uploads] == ["build/", "build/render-summary/"]


def test_deploy_runs_up_dev_then_staging_then_approved_prod() -> None:
    wf = load("deploy.yml")
    assert wf["on"]["push"] == {"branches": ["main"]}
    # Only per-job groups: a run waiting for the prod approval must not block later dev/staging deploys.
    assert "concurrency" not in wf
    jobs = wf["jobs"]
    assert jobs["test"]["concurrency"] == {"group": "deploy-test", "cancel-in-progress": False}
    assert jobs["test"]["if"] == "github.event_name == 'push'"  # a dispatch is a recovery, never a deploy
    assert [jobs[j]["needs"] for j in ("up-dev", "up-staging", "preview-prod", "up-prod")] == [
        "test",
        "up-dev",
        "up-staging",
        "preview-prod",
    ]
    for stack in STACKS:
        job = jobs[f"up-{stack}"]
        assert job["env"]["STACK"] == stack
        assert [c for _, c in pulumi_commands(job)] == (["stack", "up"] if stack == "prod" else ["up"])
        assert job["concurrency"] == {"group": f"pulumi-up-{stack}", "cancel-in-progress": False}
        assert job["runs-on"] == ["self-hosted", f"triton-platform-{stack}"]
        (aws,) = steps(job, AWS_ACTION)
        assert aws["with"]["role-to-assume"] == f"${{{{ vars.AWS_DEPLOYER_ROLE_ARN_{stack.upper()} }}}}"
        # The environment is part of the only subject the stack's deployer trusts (components/identities.py).
        assert job["environment"] == github_environment("deployer", stack) == f"deploy-{stack}"
    assert jobs["up-prod"]["environment"] == "deploy-prod"


def test_model_promotion_verifies_staging_then_promotes_in_the_prod_environment() -> None:
    wf = load("model-promote.yml")
    assert set(wf["on"]["workflow_dispatch"]["inputs"]) == {"model", "version"}
    assert wf["env"]["MODEL"] == "${{ inputs.model }}"
    assert wf["env"]["VERSION"] == "${{ inputs.version }}"
    verify, promote = wf["jobs"]["verify-staging"], wf["jobs"]["promote"]
    assert 'model-sync verify "$MODEL" --env staging --model-version "$VERSION"' in verify["steps"][-1]["run"]
    assert promote["needs"] == "verify-staging"
    assert verify["environment"] == github_environment("publisher", "staging") == "models-staging"
    assert promote["environment"] == github_environment("promoter", "prod") == "models-prod"
    runs = "\n".join(s.get("run", "") for s in promote["steps"])
    assert 'model-sync promote "$MODEL" --from staging --to prod --model-version "$VERSION"' in runs
    assert steps(promote, AWS_ACTION)[0]["with"]["role-to-assume"] == "${{ vars.AWS_PROMOTER_ROLE_ARN }}"
    for job in (verify, promote):
        assert job["steps"][0]["name"] == "Validate inputs"


def test_model_rollback_is_gated_in_prod_only() -> None:
    wf = load("model-rollback.yml")
    inputs = wf["on"]["workflow_dispatch"]["inputs"]
    assert inputs["env"]["options"] == ["staging", "prod"]
    assert inputs["version"]["required"] is False
    staging, prod = wf["jobs"]["rollback-staging"], wf["jobs"]["rollback-prod"]
    assert staging["environment"] == github_environment("publisher", "staging") == "models-staging"
    assert prod["environment"] == github_environment("promoter", "prod") == "models-prod"
    for job in (staging, prod):
        assert job["steps"][0]["name"] == "Validate inputs"
    assert 'args=(rollback "$MODEL" --env "$TARGET_ENV")' in staging["steps"][-1]["run"]
    # prod: model-sync asks on a terminal; the job's approval is the environment's reviewers.
    assert 'args=(rollback "$MODEL" --env "$TARGET_ENV" --yes)' in prod["steps"][-1]["run"]
    # Concurrency (a rollback never waits behind a promotion): tests/workflows/test_delivery.py.


@pytest.mark.parametrize(
    ("model", "version", "ok"),
    [
        ("resnet18", "7", True),
        ("text-encoder_v2.onnx", "12", True),
        ("resnet18", "", False),
        ("$(curl evil)", "1", False),
        ("resnet18", "1; rm -rf /", False),
        ("resnet18", "0", False),
        ("-rf", "1", False),
    ],
)
def test_promote_input_validation_script(model: str, version: str, ok: bool) -> None:
    """Run the workflow's own validation step in bash with hostile inputs."""
    script = load("model-promote.yml")["jobs"]["verify-staging"]["steps"][0]["run"]
    env = {"PATH": "/usr/bin:/bin", "GITHUB_REF": "refs/heads/main", "MODEL": model, "VERSION": version}
    proc = subprocess.run(
        ["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert (proc.returncode == 0) == ok, proc.stdout
    if not ok:
        assert proc.stdout.startswith("::error title=Invalid input::")


def test_promote_refuses_other_branches() -> None:
    script = load("model-promote.yml")["jobs"]["verify-staging"]["steps"][0]["run"]
    env = {"PATH": "/usr/bin:/bin", "GITHUB_REF": "refs/heads/feature", "MODEL": "resnet18", "VERSION": "3"}
    proc = subprocess.run(
        ["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 1
    assert proc.stdout.startswith("::error title=Wrong branch::")


# ---- model-sync in the workflows: the config they write resolves every call ---------------------
CONFIG_STEP = "Write model-sync.yaml (repository variables)"
# Realistic repository variables: stack outputs modelRepositoryBucket / tritonImage, stack region.
REGION = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())["config"]["aws:region"]
VARS = {
    "MODEL_REPOSITORY_BUCKET_STAGING": "triton-platform-staging-models-111122223333",
    "MODEL_REPOSITORY_BUCKET_PROD": "triton-platform-prod-models-444455556666",
    "MODEL_REPOSITORY_REGION_STAGING": REGION,
    "MODEL_REPOSITORY_REGION_PROD": REGION,
    "TRITON_IMAGE_STAGING": "nvcr.io/nvidia/tritonserver:25.10-py3",
    "TRITON_IMAGE_PROD": "nvcr.io/nvidia/tritonserver:25.10-py3",
}


def _step_env(step: dict[str, Any], values: dict[str, str]) -> dict[str, str]:
    """The step's env with `${{ vars.X }}` replaced by values[X] (missing -> empty, as GitHub does)."""
    out = {}
    for key, value in step.get("env", {}).items():
        m = re.fullmatch(r"\$\{\{ vars\.(\w+) \}\}", str(value))
        out[key] = values.get(m.group(1), "") if m else str(value)
    return out


def _run(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _model_sync_calls(cwd: Path, job: dict[str, Any], env: dict[str, str]) -> list[list[str]]:
    """Run the job's model-sync steps with a stub `.venv/bin/model-sync` recording its argv."""
    stub = cwd / ".venv" / "bin" / "model-sync"
    stub.parent.mkdir(parents=True, exist_ok=True)
    log = cwd / "calls"
    stub.write_text(f'#!/bin/bash\nprintf "%s\\0" "$@" >> {log}\nprintf "\\n" >> {log}\n')
    stub.chmod(0o755)
    for s in job["steps"]:
        run = s.get("run", "")
        if ".venv/bin/model-sync" in run:
            proc = _run(run, cwd, env)
            assert proc.returncode == 0, proc.stderr
    return [line.rstrip("\0").split("\0") for line in log.read_text().split("\0\n") if line] if log.exists() else []


def _job_target(job: dict[str, Any]) -> str:
    m = re.fullmatch(r"inputs\.env == '(\w+)'", job.get("if", ""))
    return m.group(1) if m else "prod"


@pytest.mark.parametrize(
    ("name", "version"), [("model-promote.yml", "3"), ("model-rollback.yml", "3"), ("model-rollback.yml", "")]
)
def test_every_model_sync_call_resolves_its_environment_from_the_written_config(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    version: str,
) -> None:
    """Each job: run its config step with realistic repository variables, run its model-sync steps
    with a recording stub, then parse every call with the real CLI parser and resolve every
    environment it names with the real model_sync.environments.resolve from that file. An
    environment the file gives a `pulumiStack` (prod in the promotion: its gray release reads
    `prometheusUrl` and `canaryPolicies`) is resolved through a stub `pulumi` answering with the
    prod program's recorded exports, as `pulumi stack output --json` prints them."""
    from model_sync import environments
    from model_sync.cli import build_parser
    from tests.conftest import stack_run

    parser = build_parser()
    monkeypatch.delenv("MODEL_SYNC_CONFIG", raising=False)
    exports = {
        k: "[secret]" if k in ("kubeconfig", "ingressApiKeys", "grafanaAdminPassword") else v
        for k, v in stack_run("prod").exports.items()
    }
    (tmp_path / "outputs.json").write_text(json.dumps(exports))
    pulumi = tmp_path / "bin" / "pulumi"
    pulumi.parent.mkdir()
    pulumi.write_text(f'#!/bin/bash\necho "$*" >> {tmp_path / "pulumi-calls"}\ncat {tmp_path / "outputs.json"}\n')
    pulumi.chmod(0o755)
    monkeypatch.setenv("PULUMI", str(pulumi))
    resolved: set[str] = set()
    from_stack: set[str] = set()
    for job_id, job in load(name)["jobs"].items():
        cwd = tmp_path / job_id
        cwd.mkdir()
        (config_step,) = [s for s in job["steps"] if s.get("name") == CONFIG_STEP]
        aws = steps(job, AWS_ACTION)[0]
        assert job["steps"].index(config_step) < job["steps"].index(aws), "write the config before any credentials"
        proc = _run(config_step["run"], cwd, _step_env(config_step, VARS))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        calls = _model_sync_calls(cwd, job, {"MODEL": "resnet18", "VERSION": version, "TARGET_ENV": _job_target(job)})
        assert calls, f"{job_id}: no model-sync call"
        monkeypatch.chdir(cwd)
        for argv in calls:
            args = parser.parse_args(argv)
            assert args.command == argv[0]
            names = [args.source, args.target] if args.command == "promote" else [args.env]
            for env_name in names:
                env = environments.resolve(
                    env_name,
                    getattr(args, "config", None),
                    getattr(args, "bucket", None),
                    getattr(args, "endpoint_url", None),
                    getattr(args, "region", None),
                    getattr(args, "triton_url", None),
                    getattr(args, "triton_image", None),
                )
                up = env_name.upper()
                stack = environments.load_config(environments.CONFIG_NAME)[env_name].get("pulumiStack")
                if stack is not None:
                    assert env.source == f"pulumi stack {stack}"
                    from_stack.add(f"{job_id}:{argv[0]}:{env_name}")
                    # The step has the environment's (read-only) Pulumi token for `pulumi stack output`.
                    (step,) = [x for x in job["steps"] if f"model-sync {argv[0]} " in x.get("run", "")]
                    assert step["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}", step["name"]
                else:
                    assert env.source == environments.CONFIG_NAME
                # The file's values win over the stack's (the repository variables, validated).
                assert env.uri == f"s3://{VARS[f'MODEL_REPOSITORY_BUCKET_{up}']}"
                assert (env.region, env.triton_image, env.endpoint_url) == (
                    VARS[f"MODEL_REPOSITORY_REGION_{up}"],
                    VARS[f"TRITON_IMAGE_{up}"],
                    None,
                )
                resolved.add(f"{job_id}:{argv[0]}:{env_name}")
    expected = {
        "model-promote.yml": {
            "verify-staging:verify:staging",
            "promote:promote:staging",
            "promote:promote:prod",
            "promote:status:prod",
        },
        "model-rollback.yml": {
            "rollback-staging:rollback:staging",
            "rollback-staging:status:staging",
            "rollback-prod:rollback:prod",
            "rollback-prod:status:prod",
        },
    }[name]
    assert resolved == expected
    if name == "model-promote.yml":
        # prod's gray release gets its Prometheus and its policy from the prod stack.
        assert from_stack == {"promote:promote:prod", "promote:status:prod"}
        assert set((tmp_path / "pulumi-calls").read_text().splitlines()) == {"stack output --json --stack prod"}
        assert exports["prometheusUrl"].endswith("/services/http:kube-prometheus-stack-prometheus:9090/proxy")
        assert exports["canaryPolicies"]["resnet18"]["deployment"] == "default"
    else:
        assert from_stack == set()


def test_model_rollback_calls(tmp_path: Path) -> None:
    job = load("model-rollback.yml")["jobs"]["rollback-prod"]
    assert _model_sync_calls(tmp_path, job, {"MODEL": "resnet18", "VERSION": "3", "TARGET_ENV": "prod"}) == [
        ["rollback", "resnet18", "--env", "prod", "--yes", "--model-version", "3"],
        ["status", "resnet18", "--env", "prod"],
    ]
    assert _model_sync_calls(tmp_path / "x", job, {"MODEL": "resnet18", "VERSION": "", "TARGET_ENV": "prod"})[0] == [
        "rollback",
        "resnet18",
        "--env",
        "prod",
        "--yes",
    ]


@pytest.mark.parametrize(
    ("override", "bad"),
    [
        ({"MODEL_REPOSITORY_BUCKET_STAGING": ""}, "MODEL_REPOSITORY_BUCKET_STAGING=''"),
        (
            {"MODEL_REPOSITORY_BUCKET_STAGING": "s3://triton-models"},
            "MODEL_REPOSITORY_BUCKET_STAGING=s3://triton-models",
        ),
        ({"MODEL_REPOSITORY_REGION_STAGING": "us-east"}, "MODEL_REPOSITORY_REGION_STAGING=us-east"),
        ({"TRITON_IMAGE_STAGING": "tritonserver latest"}, "TRITON_IMAGE_STAGING=tritonserver\\ latest"),
        (
            {"TRITON_IMAGE_STAGING": "nvcr.io/x:1\n::warning::injected"},
            "TRITON_IMAGE_STAGING=$'nvcr.io/x:1\\n::warning::injected'",
        ),
    ],
)
def test_the_config_step_refuses_missing_or_invalid_variables(
    tmp_path: Path, override: dict[str, str], bad: str
) -> None:
    (config_step,) = [
        s for s in load("model-promote.yml")["jobs"]["verify-staging"]["steps"] if s.get("name") == CONFIG_STEP
    ]
    proc = _run(config_step["run"], tmp_path, _step_env(config_step, {**VARS, **override}))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, lines  # one line: a hostile value cannot start a second workflow command
    assert lines[0].startswith("::error title=Missing or invalid repository variable::" + bad + "; allowed: ")
    assert not (tmp_path / "model-sync.yaml").exists()


def test_the_config_step_reports_every_missing_variable_at_once(tmp_path: Path) -> None:
    (config_step,) = [s for s in load("model-promote.yml")["jobs"]["promote"]["steps"] if s.get("name") == CONFIG_STEP]
    proc = _run(config_step["run"], tmp_path, _step_env(config_step, {}))
    assert proc.returncode == 1
    assert [ln.split("::")[2].split("=")[0] for ln in proc.stdout.splitlines()] == [
        f"{kind}_{env}"
        for env in ("STAGING", "PROD")
        for kind in ("MODEL_REPOSITORY_BUCKET", "MODEL_REPOSITORY_REGION", "TRITON_IMAGE")
    ]


# ---- the agent image ----------------------------------------------------------------------------
def test_agent_image_builds_the_dockerfile_and_pushes_by_oidc() -> None:
    wf = load("agent-image.yml")
    assert wf["on"]["push"]["branches"] == ["main"]
    assert {"docker/**", "model_sync/**"} <= set(wf["on"]["push"]["paths"])
    assert "workflow_dispatch" in wf["on"]
    (job,) = wf["jobs"].values()
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    assert job["environment"] == "agent-image"  # part of the subject the image publisher role trusts
    (aws,) = steps(job, AWS_ACTION)
    assert aws["with"]["role-to-assume"] == "${{ env.PUBLISHER_ROLE_ARN }}"
    assert job["env"]["PUBLISHER_ROLE_ARN"] == "${{ vars.AWS_AGENT_IMAGE_ROLE_ARN }}"
    (build,) = steps(job, BUILD_ACTION)
    assert build["with"]["file"] == "docker/agent.Dockerfile"
    assert (ROOT / build["with"]["file"]).is_file()
    assert build["with"]["context"] == "."
    # Pushed as <repository>:<commit sha> through the image exporter (rewrite-timestamp needs it).
    assert (
        build["with"]["outputs"]
        == "type=image,name=${{ env.IMAGE_REPOSITORY }}:${{ github.sha }},push=true,rewrite-timestamp=true"
    )
    order = [s.get("uses", s.get("name", "")).split("@")[0] for s in job["steps"]]
    assert order.index(AWS_ACTION) < order.index("aws-actions/amazon-ecr-login") < order.index(BUILD_ACTION)


def _agent_step(name: str) -> dict[str, Any]:
    (job,) = load("agent-image.yml")["jobs"].values()
    (step,) = [s for s in job["steps"] if s.get("name") == name]
    return step


def test_agent_image_summary_prints_a_digest_pinned_reference(tmp_path: Path) -> None:
    from components.stack_config.vocabulary import IMAGE_PINNED

    summary = tmp_path / "summary.md"
    digest = "sha256:" + "ab" * 32
    repo = "111122223333.dkr.ecr.us-east-1.amazonaws.com/triton-platform/model-sync-agent"
    sha = "0123456789abcdef0123456789abcdef01234567"
    env = {"DIGEST": digest, "IMAGE_REPOSITORY": repo, "GITHUB_SHA": sha, "GITHUB_STEP_SUMMARY": str(summary)}
    proc = _run(_agent_step("Print the pushed digest")["run"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    ref = f"{repo}:{sha}@{digest}"
    assert f"  triton-platform:agentImage: {ref}" in summary.read_text()
    assert IMAGE_PINNED.match(ref), "staging/prod stack validation must accept the printed reference"
    bad = _run(_agent_step("Print the pushed digest")["run"], tmp_path, {**env, "DIGEST": ""})
    assert bad.returncode == 1
    assert bad.stdout.startswith("::error title=No digest::")


@pytest.mark.parametrize(
    ("repo", "role", "ok"),
    [
        (
            "111122223333.dkr.ecr.us-east-1.amazonaws.com/triton-platform/model-sync-agent",
            "arn:aws:iam::111122223333:role/triton-platform-agent-image",
            True,
        ),
        ("", "arn:aws:iam::111122223333:role/x", False),
        ("docker.io/library/python", "arn:aws:iam::111122223333:role/x", False),
        ("111122223333.dkr.ecr.us-east-1.amazonaws.com/agent", "", False),
    ],
)
def test_agent_image_checks_its_variables(tmp_path: Path, repo: str, role: str, ok: bool) -> None:
    env = {"GITHUB_REF": "refs/heads/main", "IMAGE_REPOSITORY": repo, "PUBLISHER_ROLE_ARN": role}
    proc = _run(_agent_step("Check the repository variables")["run"], tmp_path, env)
    assert (proc.returncode == 0) == ok, proc.stdout
    if not ok:
        assert proc.stdout.startswith("::error title=Missing or invalid repository variable::")
