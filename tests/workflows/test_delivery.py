"""Delivery that works on day one, checked on the workflow files and by running their
scripts: previews that succeed for the read-only identity and always post one comment per stack
(cloud diff + offline render), the prod approval after a preview of the same commit and a
refusal when the stack changed in between, a deploy refusing any commit but the newest on main,
the recovery path, Pulumi tokens only inside environments, rollbacks never queued behind a
promotion, and the agent image never overwriting a pushed tag. The scripts run in bash with
stubs for `pulumi` / `aws` and a GitHub API served on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import STACKS, stack_run
from tools import yamlio

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_DIR = ROOT / ".github" / "workflows"
SHA = "0123456789abcdef0123456789abcdef01234567"
OTHER_SHA = "fedcba9876543210fedcba9876543210fedcba98"


def load(name: str) -> dict[str, Any]:
    doc = yamlio.load((WORKFLOW_DIR / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the `on` key as True
    return doc


def step(job: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [s for s in job["steps"] if s.get("name") == name]
    return found


def index(job: dict[str, Any], name: str) -> int:
    return job["steps"].index(step(job, name))


def bash(script: str, cwd: Path, env: dict[str, str], path: Path | None = None) -> subprocess.CompletedProcess[str]:
    search = f"{path}:/usr/bin:/bin" if path else "/usr/bin:/bin"
    return subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=cwd,
        env={"PATH": search, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def stub(bin_dir: Path, name: str, script: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    f = bin_dir / name
    f.write_text("#!/bin/bash\n" + script)
    f.chmod(0o755)


# ---- a GitHub REST API on loopback ------------------------------------------------------------


class FakeGitHub(http.server.ThreadingHTTPServer):
    main_head = SHA
    comments: dict[int, str]
    calls: list[tuple[str, str]]


class Handler(http.server.BaseHTTPRequestHandler):
    server: FakeGitHub

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, code: int, body: Any, raw: bool = False) -> None:
        data = body.encode() if raw else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.server.calls.append(("GET", self.path))
        assert self.headers["Authorization"] == "Bearer t0ken"
        if self.path == "/repos/o/r/commits/main" and self.headers["Accept"] == "application/vnd.github.sha":
            return self._send(200, self.server.main_head, raw=True)
        m = re.fullmatch(r"/repos/o/r/issues/7/comments\?per_page=100&page=(\d+)", self.path)
        if m:
            items = [{"id": i, "body": b} for i, b in sorted(self.server.comments.items())]
            page = int(m.group(1))
            return self._send(200, items[(page - 1) * 100 : page * 100])
        return self._send(404, {"message": "Not Found"})

    def _body(self) -> str:
        return str(json.loads(self.rfile.read(int(self.headers["Content-Length"])))["body"])

    def do_POST(self) -> None:
        self.server.calls.append(("POST", self.path))
        assert self.path == "/repos/o/r/issues/7/comments"
        new = max(self.server.comments, default=0) + 1
        self.server.comments[new] = self._body()
        self._send(201, {"id": new})

    def do_PATCH(self) -> None:
        self.server.calls.append(("PATCH", self.path))
        m = re.fullmatch(r"/repos/o/r/issues/comments/(\d+)", self.path)
        assert m
        assert int(m.group(1)) in self.server.comments
        self.server.comments[int(m.group(1))] = self._body()
        self._send(200, {"id": int(m.group(1))})


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    server = FakeGitHub(("127.0.0.1", 0), Handler)
    server.comments, server.calls = {}, []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def api_env(server: FakeGitHub) -> dict[str, str]:
    return {"GITHUB_API_URL": f"http://127.0.0.1:{server.server_address[1]}", "GITHUB_REPOSITORY": "o/r"}


# ---- 2. previews that succeed for the read-only identity and always post -----------------------


def pulumi_glob(pattern: str) -> re.Pattern[str]:
    """The Pulumi engine's URN glob (pkg/resource/deploy: `**` any text, `*` any text without ':')."""
    return re.compile(
        "^" + ".*".join("[^:]*".join(re.escape(p) for p in seg.split("*")) for seg in pattern.split("**")) + "$"
    )


def real_urn(stack: str, resource: Any, by_urn: dict[str, Any]) -> str:
    """The URN the engine gives: the types of every ancestor but the stack, joined by `$`."""
    types, parent = [resource.type], resource.parent
    while parent and by_urn.get(parent) is not None and by_urn[parent].type != "pulumi:pulumi:Stack":
        types.insert(0, by_urn[parent].type)
        parent = by_urn[parent].parent
    return f"urn:pulumi:{stack}::triton-platform::{'$'.join(types)}::{resource.name}"


def preview_excludes() -> list[str]:
    script = step(
        load("pull-request.yml")["jobs"]["preview"],
        "pulumi preview (cloud resources; the cluster side comes from the offline render)",
    )["run"]
    [line] = [ln for ln in script.replace("\\\n", " ").splitlines() if re.match(r"\s*pulumi preview ", ln)]
    assert " --exclude-dependents" in line
    return re.findall(r"--exclude '([^']+)'", line)


def test_the_pull_request_preview_excludes_exactly_the_cluster_resources_of_every_stack() -> None:
    """Every resource of the kubernetes provider, and nothing of AWS: matched with the engine's own
    glob rules against the URNs of every resource each stack records."""
    patterns = [pulumi_glob(p) for p in preview_excludes()]
    assert patterns
    for stack in STACKS:
        run = stack_run(stack)
        by_urn = {r.urn: r for r in run.resources}
        for r in run.resources:
            for urn in (r.urn, real_urn(stack, r, by_urn)):
                excluded = any(p.match(urn) for p in patterns)
                assert excluded == r.type.startswith("kubernetes:"), f"{stack}: {urn}"
        assert run.of_type("kubernetes:helm.sh/v3:Release")
        assert run.of_type("aws:eks/cluster:Cluster")


def test_the_preview_job_records_its_outcome_instead_of_stopping_before_the_comment() -> None:
    preview = load("pull-request.yml")["jobs"]["preview"]
    assert "pull-requests" not in preview["permissions"]  # the PR's code never holds the comment token
    run_step = "pulumi preview (cloud resources; the cluster side comes from the offline render)"
    upload = [s for s in preview["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert [u["if"] for u in upload] == ["always() && steps.preview.outcome != 'skipped'"]
    assert upload[0]["with"]["name"] == "preview-${{ matrix.stack }}"
    fail = step(preview, "Fail when the preview failed (the comment lists why)")
    assert index(preview, run_step) < preview["steps"].index(upload[0]) < preview["steps"].index(fail)
    assert fail["if"] == "always() && steps.preview.outcome != 'skipped'"


@pytest.mark.parametrize("rc", [0, 255])
def test_the_preview_step_saves_output_and_exit_code_and_never_stops_the_job(tmp_path: Path, rc: int) -> None:
    preview = load("pull-request.yml")["jobs"]["preview"]
    script = step(preview, "pulumi preview (cloud resources; the cluster side comes from the offline render)")["run"]
    stub(
        tmp_path / "bin",
        "pulumi",
        'printf "%s\\n" "$*" > "$ARGV_LOG"\necho "Policy Violations:"\necho "    [mandatory]  s3-encrypted"\nexit '
        f"{rc}\n",
    )
    out = tmp_path / "out"
    env = {"STACK": "prod", "GITHUB_OUTPUT": str(out), "ARGV_LOG": str(tmp_path / "argv")}
    proc = bash(script, tmp_path, env, tmp_path / "bin")
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == f"rc={rc}\n"
    assert (tmp_path / "build/preview/prod/rc").read_text() == f"{rc}\n"
    assert "s3-encrypted" in (tmp_path / "build/preview/prod/preview.txt").read_text()
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:5] == ["preview", "--stack", "prod", "--policy-pack", "policy"]
    assert "**$kubernetes:**" in argv
    assert "--exclude-dependents" in argv


def test_the_comment_job_runs_after_every_preview_whatever_its_result() -> None:
    jobs = load("pull-request.yml")["jobs"]
    comment = jobs["comment"]
    assert comment["needs"] == ["render", "preview"]
    assert comment["if"].startswith("always() && ")
    assert comment["if"].endswith("github.event.pull_request.head.repo.full_name == github.repository")
    assert comment["runs-on"] == "ubuntu-24.04"
    downloads = [s["with"] for s in comment["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    assert downloads[0]["pattern"] == "preview-*"
    assert downloads[1]["name"] == "render-summary"


def _comment_env(server: FakeGitHub, artifacts: Path, result: str = "failure") -> dict[str, str]:
    return {
        **api_env(server),
        "GH_TOKEN": "t0ken",
        "PR_NUMBER": "7",
        "PREVIEW_RESULT": result,
        "STACKS": "dev staging prod",
        "ARTIFACTS": str(artifacts),
    }


def test_the_comment_carries_the_cloud_diff_and_the_render_and_is_edited_in_place(
    tmp_path: Path, github: FakeGitHub
) -> None:
    script = step(
        load("pull-request.yml")["jobs"]["comment"],
        "Post or update one comment per stack (cloud diff + offline render)",
    )["run"]
    art = tmp_path / "artifacts"
    for stack, rc, text in (
        ("dev", "0", "+ aws:s3/bucket:Bucket create"),
        ("staging", "255", "Policy Violations:\n  [mandatory] eks-endpoint-not-public"),
    ):
        (art / "preview" / stack).mkdir(parents=True)
        (art / "preview" / stack / "rc").write_text(rc + "\n")
        (art / "preview" / stack / "preview.txt").write_text(text + "\n")
    (art / "render-summary").mkdir(parents=True)
    for stack in STACKS:
        (art / "render-summary" / f"{stack}.md").write_text(f"#### Cluster side\n\nrender of {stack}: 1 added\n")
    github.comments[1] = "an unrelated comment"
    proc = bash(script, tmp_path, _comment_env(github, art))
    assert proc.returncode == 0, proc.stderr
    bodies = {b.split("\n", 1)[0]: b for i, b in github.comments.items() if i != 1}
    assert set(bodies) == {f"<!-- triton-platform-preview:{s} -->" for s in STACKS}
    dev, staging, prod = (bodies[f"<!-- triton-platform-preview:{s} -->"] for s in STACKS)
    assert "succeeded" in dev
    assert "+ aws:s3/bucket:Bucket create" in dev
    assert "render of dev: 1 added" in dev
    assert "**failed** (exit 255" in staging
    assert "eks-endpoint-not-public" in staging
    assert "render of staging" in staging
    assert "did not run (preview job: failure" in prod
    assert "render of prod" in prod
    # A second run edits the same three comments instead of adding three more.
    (art / "preview" / "dev" / "preview.txt").write_text("~ aws:iam/role:Role update\n")
    proc = bash(script, tmp_path, _comment_env(github, art, "success"))
    assert proc.returncode == 0, proc.stderr
    assert len(github.comments) == 4
    assert [c for c in github.calls if c[0] == "PATCH"]
    assert "~ aws:iam/role:Role update" in github.comments[2]


def test_a_huge_preview_is_cut_to_fit_a_comment_keeping_both_ends(tmp_path: Path, github: FakeGitHub) -> None:
    script = step(
        load("pull-request.yml")["jobs"]["comment"],
        "Post or update one comment per stack (cloud diff + offline render)",
    )["run"]
    art = tmp_path / "artifacts"
    (art / "preview" / "dev").mkdir(parents=True)
    (art / "preview" / "dev" / "rc").write_text("255\n")
    (art / "preview" / "dev" / "preview.txt").write_text("FIRST-LINE\n" + "x" * 200_000 + "\nPolicy Violations: LAST\n")
    env = {**_comment_env(github, art), "STACKS": "dev"}
    proc = bash(script, tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    [body] = github.comments.values()
    assert len(body) <= 65536
    assert "FIRST-LINE" in body
    assert "Policy Violations: LAST" in body
    assert "No render summary" in body


def test_the_render_summary_lists_what_the_pull_request_changes_on_the_cluster(tmp_path: Path) -> None:
    script = step(
        load("pull-request.yml")["jobs"]["render"], "Summarise the cluster side of each stack against the base branch"
    )["run"]
    head, base = tmp_path / "build" / "dev", tmp_path / ".base" / "build" / "dev"
    for root, replicas, extra in ((base, 1, "old"), (head, 2, "new")):
        (root / "manifests").mkdir(parents=True)
        (root / "charts").mkdir()
        (root / "helm").mkdir()
        (root / "manifests" / "001-deployment-triton-a.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": "a", "namespace": "triton"},
                    "spec": {"replicas": replicas},
                }
            )
        )
        (root / "manifests" / f"002-configmap-triton-{extra}.yaml").write_text(
            yaml.safe_dump(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": extra, "namespace": "triton"}}
            )
        )
        (root / "charts" / "traefik.yaml").write_text(
            "---\napiVersion: v1\nkind: Service\nmetadata: {name: traefik, namespace: ingress}\n"
        )
        (root / "helm" / "traefik.yaml").write_text(
            yaml.safe_dump({"chart": "traefik", "version": "37.1.0" if root == base else "37.2.0"})
        )
    # The step runs `.venv/bin/python` of the checkout: the repository's own venv here.
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    proc = bash(script.replace(" dev staging prod <<'PY'", " dev <<'PY'"), tmp_path, {})
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "build" / "render-summary" / "dev.md").read_text()
    assert (
        "3 Kubernetes objects: 2 created by the program, 1 rendered by 1 Helm releases (traefik: traefik 37.2.0)"
        in text
    )
    assert "1 added, 1 removed, 1 changed" in text
    assert "- chart traefik: traefik 37.1.0 -> traefik 37.2.0" in text
    assert "- added `ConfigMap triton/new (program)`" in text
    assert "- removed `ConfigMap triton/old (program)`" in text
    assert "- changed `Deployment triton/a (program)`" in text
    assert "+  replicas: 2" in text


# ---- 3. the prod approval shows the preview of the commit it deploys ----------------------------


DIGEST_STEP = "Refuse when the stack changed since the approved preview"


def test_prod_is_previewed_then_applied_by_the_same_run_in_the_gated_environment() -> None:
    jobs = load("deploy.yml")["jobs"]
    preview, up = jobs["preview-prod"], jobs["up-prod"]
    assert up["needs"] == "preview-prod"
    assert preview["needs"] == "up-staging"
    assert preview["environment"] == up["environment"] == "deploy-prod"
    assert preview["runs-on"] == up["runs-on"] == ["self-hosted", "triton-platform-prod"]
    assert preview["outputs"] == {"state-digest": "${{ steps.state.outputs.digest }}"}
    shown = step(preview, "pulumi preview (prod)")["run"]
    assert '>> "$GITHUB_STEP_SUMMARY"' in shown
    assert 'exit "$rc"' in shown
    assert index(preview, "Record the state this preview is computed against") < index(preview, "pulumi preview (prod)")
    check = step(up, DIGEST_STEP)
    assert check["env"]["PREVIEWED_DIGEST"] == "${{ needs.preview-prod.outputs.state-digest }}"
    assert index(up, DIGEST_STEP) < index(up, "pulumi up (prod)")
    assert "--skip-preview" not in yaml.safe_dump(jobs)


@pytest.mark.parametrize(
    ("previewed", "now", "ok"), [("STATE-A", "STATE-A", True), ("STATE-A", "STATE-B", False), (None, "STATE-A", False)]
)
def test_up_prod_refuses_when_the_stack_changed_since_the_preview(
    tmp_path: Path, previewed: str | None, now: str, ok: bool
) -> None:
    """Run preview-prod's recording step against one state and up-prod's check against another."""
    jobs = load("deploy.yml")["jobs"]
    out = tmp_path / "out"
    digest = ""
    if previewed is not None:
        stub(
            tmp_path / "a",
            "pulumi",
            f'[[ "$*" == "stack export --stack prod" ]] && echo \'{{"deployment": "{previewed}"}}\'\n',
        )
        proc = bash(
            step(jobs["preview-prod"], "Record the state this preview is computed against")["run"],
            tmp_path,
            {"STACK": "prod", "GITHUB_OUTPUT": str(out)},
            tmp_path / "a",
        )
        assert proc.returncode == 0, proc.stderr
        digest = out.read_text().strip().removeprefix("digest=")
        assert re.fullmatch(r"[0-9a-f]{64}", digest)
    stub(tmp_path / "b", "pulumi", f'[[ "$*" == "stack export --stack prod" ]] && echo \'{{"deployment": "{now}"}}\'\n')
    proc = bash(
        step(jobs["up-prod"], DIGEST_STEP)["run"],
        tmp_path,
        {"STACK": "prod", "PREVIEWED_DIGEST": digest},
        tmp_path / "b",
    )
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr
    if not ok:
        assert proc.stdout.startswith(
            "::error title=Stack changed since the approved preview::"
            if previewed
            else "::error title=No approved preview::"
        )


def test_a_failing_stack_export_refuses_rather_than_comparing_nothing(tmp_path: Path) -> None:
    stub(tmp_path / "b", "pulumi", "echo 'error: [403] Forbidden' >&2\nexit 255\n")
    proc = bash(
        step(load("deploy.yml")["jobs"]["up-prod"], DIGEST_STEP)["run"],
        tmp_path,
        {"STACK": "prod", "PREVIEWED_DIGEST": "a" * 64},
        tmp_path / "b",
    )
    assert proc.returncode != 0


# ---- 5. only the newest commit of main is deployed -------------------------------------------------


NEWEST = "Refuse a commit that is not the newest on main"


def test_every_up_is_preceded_by_the_newest_commit_check() -> None:
    jobs = load("deploy.yml")["jobs"]
    ups = {
        job_id: job
        for job_id, job in jobs.items()
        if any(re.search(r"^\s*pulumi up ", s.get("run", ""), flags=re.M) for s in job["steps"])
    }
    assert set(ups) == {"up-dev", "up-staging", "up-prod"}
    scripts = {step(job, NEWEST)["run"] for job in ups.values()}
    assert len(scripts) == 1  # one check, spelled once per job
    for job_id, job in ups.items():
        check = step(job, NEWEST)
        assert check["env"] == {"GITHUB_TOKEN": "${{ github.token }}"}
        assert job["permissions"]["contents"] == "read"
        up = next(i for i, s in enumerate(job["steps"]) if re.search(r"^\s*pulumi up ", s.get("run", ""), flags=re.M))
        assert index(job, NEWEST) < up, job_id


@pytest.mark.parametrize(("head", "ok"), [(SHA, True), (OTHER_SHA, False), ("<html>rate limited</html>", False)])
def test_the_newest_commit_check_refuses_an_older_commit(
    tmp_path: Path, github: FakeGitHub, head: str, ok: bool
) -> None:
    github.main_head = head
    script = step(load("deploy.yml")["jobs"]["up-prod"], NEWEST)["run"]
    proc = bash(script, tmp_path, {**api_env(github), "GITHUB_TOKEN": "t0ken", "GITHUB_SHA": SHA, "STACK": "prod"})
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr
    if head == OTHER_SHA:
        assert proc.stdout.startswith(
            f"::error title=Not the newest commit on main::this run would deploy {SHA} to prod, but main is at "
            f"{OTHER_SHA}."
        )
    elif not ok:
        assert proc.stdout.startswith("::error title=Cannot read the head of main::")


def test_the_newest_commit_check_refuses_when_github_cannot_be_read(tmp_path: Path, github: FakeGitHub) -> None:
    script = step(load("deploy.yml")["jobs"]["up-dev"], NEWEST)["run"]
    env = {
        **api_env(github),
        "GITHUB_REPOSITORY": "o/missing",
        "GITHUB_TOKEN": "t0ken",
        "GITHUB_SHA": SHA,
        "STACK": "dev",
    }
    proc = bash(script.replace("--retry 3", "--retry 0"), tmp_path, env)
    assert proc.returncode == 1
    assert proc.stdout.startswith("::error title=Cannot read the head of main::")


# ---- 5. the recovery path after a cancelled or timed-out up ---------------------------------------


def test_a_dispatch_of_deploy_yml_recovers_one_stack_in_its_deploy_environment() -> None:
    wf = load("deploy.yml")
    inputs = wf["on"]["workflow_dispatch"]["inputs"]
    assert inputs["stack"]["options"] == list(STACKS)
    assert inputs["clear-pending-creates"] == {
        "description": inputs["clear-pending-creates"]["description"],
        "required": False,
        "type": "boolean",
        "default": False,
    }
    for stack in STACKS:
        job = wf["jobs"][f"recover-{stack}"]
        assert job["if"] == f"github.event_name == 'workflow_dispatch' && inputs.stack == '{stack}'"
        assert job["environment"] == f"deploy-{stack}"
        assert job["runs-on"] == ["self-hosted", f"triton-platform-{stack}"]
        # The stack's update group: a recovery never runs beside (or cancels) a CI `up` of the stack.
        assert (
            job["concurrency"]
            == wf["jobs"][f"up-{stack}"]["concurrency"]
            == {"group": f"pulumi-up-{stack}", "cancel-in-progress": False}
        )
        assert job["steps"][0]["name"] == "Check the inputs"


@pytest.mark.parametrize(("clear", "cancel_rc"), [("false", 0), ("true", 255)])
def test_the_recovery_cancels_then_refreshes(tmp_path: Path, clear: str, cancel_rc: int) -> None:
    job = load("deploy.yml")["jobs"]["recover-staging"]
    stub(
        tmp_path / "bin", "pulumi", f'printf "%s\\n" "$*" >> "$LOG"\n[[ "$1" == cancel ]] && exit {cancel_rc}\nexit 0\n'
    )
    env = {
        "STACK": "staging",
        "CLEAR_PENDING_CREATES": clear,
        "GITHUB_REF": "refs/heads/main",
        "LOG": str(tmp_path / "log"),
    }
    for name in (
        "Check the inputs",
        "pulumi cancel (the lock of the interrupted update)",
        "pulumi refresh (state <- what really exists; pending operations)",
    ):
        proc = bash(step(job, name)["run"], tmp_path, env, tmp_path / "bin")
        assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = (tmp_path / "log").read_text().splitlines()
    assert calls[0] == "cancel --stack staging --yes --non-interactive"
    assert calls[1].startswith("refresh --stack staging --yes ")
    assert calls[1].endswith(" --clear-pending-creates") == (clear == "true")


@pytest.mark.parametrize(("ref", "clear"), [("refs/heads/feature", "false"), ("refs/heads/main", "yes; rm -rf /")])
def test_the_recovery_refuses_other_branches_and_bad_inputs(tmp_path: Path, ref: str, clear: str) -> None:
    check = step(load("deploy.yml")["jobs"]["recover-prod"], "Check the inputs")["run"]
    proc = bash(check, tmp_path, {"GITHUB_REF": ref, "CLEAR_PENDING_CREATES": clear})
    assert proc.returncode == 1
    assert proc.stdout.startswith("::error title=")


# ---- 4. Pulumi tokens: read-only in previews, write only where the jobs write ---------------------


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOW_DIR.glob("*.yml")))
def test_every_job_reading_a_secret_runs_in_an_environment_of_its_purpose(name: str) -> None:
    """No repository-wide Pulumi token: the `PULUMI_ACCESS_TOKEN` a job gets is its environment's,
    read-only in preview-<stack> (pull requests) and models-prod (the promotion's
    `pulumi stack output`), write in deploy-<stack> (deploy.yml on main)."""
    for job_id, job in load(name)["jobs"].items():
        text = yaml.safe_dump(job)
        secrets = set(re.findall(r"secrets\.(\w+)", text))
        if not secrets:
            continue
        assert secrets == {"PULUMI_ACCESS_TOKEN"}, f"{name} {job_id}: {secrets}"
        env = str(job["environment"])
        assert (name, re.sub(r"\$\{\{ matrix.stack \}\}|dev|staging|prod", "<stack>", env)) in {
            ("pull-request.yml", "preview-<stack>"),
            ("deploy.yml", "deploy-<stack>"),
            ("model-promote.yml", "models-<stack>"),
        }, f"{name} {job_id}: {env}"


# ---- 5. a rollback never waits behind, or is cancelled by, a promotion ----------------------------


def test_rollbacks_and_promotions_never_share_a_concurrency_group() -> None:
    promote, rollback = load("model-promote.yml"), load("model-rollback.yml")
    envs = rollback["on"]["workflow_dispatch"]["inputs"]["env"]["options"]

    def groups(wf: dict[str, Any], env: str) -> set[str]:
        found = [wf.get("concurrency")] + [j.get("concurrency") for j in wf["jobs"].values()]
        out = set()
        for c in filter(None, found):
            assert c["cancel-in-progress"] is False  # never cancels a running promotion or rollback
            out.add(c["group"].replace("${{ inputs.env }}", env))
        return out

    promotion_groups = groups(promote, "prod")
    assert promotion_groups
    for env in envs:
        rollback_groups = groups(rollback, env)
        assert rollback_groups, env
        assert not rollback_groups & promotion_groups, env
        assert all("${{" not in g for g in rollback_groups | promotion_groups)


# ---- 6. the agent image: never overwrite a pushed tag, never an unpinned base ---------------------


def _agent_job() -> dict[str, Any]:
    (job,) = load("agent-image.yml")["jobs"].values()
    return job


REUSE = "Reuse the image of this commit if it was pushed before"
REPO = "111122223333.dkr.ecr.eu-west-1.amazonaws.com/triton-platform/model-sync-agent"


@pytest.mark.parametrize(
    ("aws_script", "rc", "digest"),
    [
        ('echo "sha256:' + "ab" * 32 + '"', 0, "sha256:" + "ab" * 32),
        (
            "echo 'An error occurred (ImageNotFoundException) when calling the DescribeImages operation' >&2; exit 254",
            0,
            None,
        ),
        ("echo 'An error occurred (AccessDeniedException)' >&2; exit 254", 1, None),
    ],
)
def test_an_existing_tag_is_reused_never_rebuilt(tmp_path: Path, aws_script: str, rc: int, digest: str | None) -> None:
    stub(tmp_path / "bin", "aws", f'printf "%s\\n" "$*" > "$LOG"\n{aws_script}\n')
    out = tmp_path / "out"
    env = {"IMAGE_REPOSITORY": REPO, "GITHUB_SHA": SHA, "GITHUB_OUTPUT": str(out), "LOG": str(tmp_path / "log")}
    proc = bash(step(_agent_job(), REUSE)["run"], tmp_path, env, tmp_path / "bin")
    assert proc.returncode == rc, proc.stdout + proc.stderr
    assert (tmp_path / "log").read_text().split() == [
        "ecr",
        "describe-images",
        "--region",
        "eu-west-1",
        "--repository-name",
        "triton-platform/model-sync-agent",
        "--image-ids",
        f"imageTag={SHA}",
        "--query",
        "imageDetails[0].imageDigest",
        "--output",
        "text",
    ]
    assert (out.read_text() if out.exists() else "") == (f"digest={digest}\n" if digest else "")


def test_the_build_is_skipped_when_the_tag_exists_and_the_summary_uses_its_digest() -> None:
    job = _agent_job()
    build = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("docker/build-push-action@"))
    assert build["if"] == "steps.existing.outputs.digest == ''"
    assert index(job, REUSE) < job["steps"].index(build)
    assert (
        step(job, "Print the pushed digest")["env"]["DIGEST"]
        == "${{ steps.existing.outputs.digest || steps.build.outputs.digest }}"
    )


@pytest.mark.parametrize(
    ("dockerfile", "ok"),
    [
        ("FROM python:3.11.13-slim-bookworm\n", False),
        ("# FROM python:3.11\nFROM python:3.11.13-slim-bookworm@sha256:" + "0" * 64 + "\n", True),
        ("FROM --platform=linux/amd64 python:3.11.13-slim-bookworm@sha256:" + "0" * 64 + " AS base\n", True),
        ("FROM python:3.11.13-slim-bookworm@sha256:abc\n", False),
    ],
)
def test_the_build_refuses_a_base_image_not_pinned_by_digest(tmp_path: Path, dockerfile: str, ok: bool) -> None:
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "agent.Dockerfile").write_text(dockerfile)
    job = _agent_job()
    guard = "Refuse a base image not pinned by digest"
    proc = bash(step(job, guard)["run"], tmp_path, {})
    assert (proc.returncode == 0) == ok, proc.stdout
    if not ok:
        assert proc.stdout.startswith("::error file=docker/agent.Dockerfile,title=Base image not pinned by digest::")
    build = next(
        i for i, s in enumerate(job["steps"]) if str(s.get("uses", "")).startswith("docker/build-push-action@")
    )
    assert index(job, guard) < build


def test_the_agent_image_build_is_reproducible() -> None:
    """The same commit builds the same image: the commit time is the build's only clock, the
    layers' file times are rewritten to it, and no attestation (which carries the build's own
    time) changes the pushed digest; the Dockerfile hands the clock to compileall and useradd."""
    job = load("agent-image.yml")["jobs"]["build-push"]
    epoch = step(job, "The commit time, the build's only clock (reproducible builds)")
    assert "git log -1 --format=%ct" in epoch["run"]
    build = step(job, "Build and push docker/agent.Dockerfile")
    assert build["env"]["SOURCE_DATE_EPOCH"] == "${{ steps.epoch.outputs.epoch }}"
    assert "rewrite-timestamp=true" in build["with"]["outputs"]
    assert "push=true" in build["with"]["outputs"]
    assert build["with"]["provenance"] is False
    assert build["with"]["sbom"] is False
    assert index(job, epoch["name"]) < index(job, build["name"])
    dockerfile = (ROOT / "docker" / "agent.Dockerfile").read_text()
    assert re.search(r"^ARG SOURCE_DATE_EPOCH$", dockerfile, flags=re.M)
    assert "--no-log-init" in dockerfile  # useradd leaves no lastlog/faillog entries behind


def test_every_pip_install_in_ci_checks_hashes() -> None:
    """CI installs only hashed pins (`--require-hashes -r <hashed file>`); the project
    itself goes in with `--no-deps` (pip refuses an editable under hash checking)."""
    seen = 0
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        for job in yamlio.load(path.read_text())["jobs"].values():
            for s in job.get("steps", []):
                for line in str(s.get("run", "")).splitlines():
                    if re.search(r"\bpip install\b", line):
                        seen += 1
                        code = line.split("#", 1)[0]
                        assert "--require-hashes" in code or "--no-deps" in code, f"{path.name}: {line.strip()}"
                        assert " -c " not in code, f"{path.name}: constraints files do not check hashes: {line.strip()}"
    assert seen >= 4
