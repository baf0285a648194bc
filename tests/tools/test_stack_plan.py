"""`python -m tools.stack_plan`: a `model-sync plan` of the twelve profiled models (the real profiles,
measured on one H100) written into a copy of the prod stack file with an H100 group, as the stack's
own parser reads it; only the changed deployments' lines change; a refusal writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.stack_config.loading import read_stack_file
from components.stack_config.parser import parse
from model_sync import errors
from model_sync.planning import document, inputs, placement
from tools import stack_plan

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "bench" / "results" / "model-profiles.json"
H100_GROUP = """    gpu-h100:
      kind: gpu
      instanceTypes: [p5.4xlarge]
      capacityType: ON_DEMAND
      minSize: 2
      desiredSize: 2
      maxSize: 4
      diskSizeGiB: 300
"""


def _plan(tmp_path: Path, min_replicas: int = 2, models: tuple[str, ...] = ()) -> Path:
    profiles = inputs.read_profiles(PROFILES)
    demands = [inputs.Demand(n, 100, 80) for n in models or profiles.models]
    deployments = placement.plan(demands, profiles, 80, min_replicas)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(document.to_json(deployments, profiles, 80, min_replicas, None)))
    return path


def _stack(tmp_path: Path, group: str = H100_GROUP) -> Path:
    text = (ROOT / "stacks" / "Pulumi.prod.yaml").read_text()
    anchor = "  triton-platform:modelRepositoryNoncurrentVersionDays:"
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(text.replace(anchor, group + anchor, 1))
    return path


def test_a_plan_is_written_as_the_stack_parser_reads_it_and_only_its_deployments_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack, plan = _stack(tmp_path), _plan(tmp_path)
    before, mode = stack.read_text(), stack.stat().st_mode
    assert stack_plan.main(["--plan", str(plan), "--stack-file", str(stack), "--node-group", "gpu-h100"]) == errors.OK
    config = parse(read_stack_file(stack), "prod")
    tritons = {t.name: t for t in config.triton_deployments}
    (planned,) = json.loads(plan.read_text())["deployments"]
    written = tritons[planned["name"]]
    assert (written.node_group, written.min_replicas, written.max_replicas) == ("gpu-h100", 2, planned["replicas"])
    assert list(written.models) == [m["model"] for m in planned["models"]]
    assert tritons["default"].models == ("text-encoder",)  # resnet18 moved to the plan's deployment
    original = parse(read_stack_file(ROOT / "stacks" / "Pulumi.prod.yaml"), "prod").triton_deployments
    assert tritons["large"] == next(t for t in original if t.name == "large")
    after = stack.read_text()
    # Outside the block, and the untouched deployment with its comments, byte for byte.
    head, tail = before.split("  triton-platform:tritonDeployments:")
    assert after.startswith(head)
    assert tail[tail.index("  # Triton from the account's private ECR") :] in after
    large = tail[tail.index("    large:") : tail.index("  # Triton from")]
    assert "# The reranker takes few requests" in large
    assert large in after
    assert stack.stat().st_mode == mode  # replaced, not recreated with the temporary file's 0600
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"wrote 1 planned deployment(s) to {stack} (node group gpu-h100)"
    resnet18 = next(m for m in planned["models"] if m["model"] == "resnet18")
    assert f"resnet18: model-sync export ... --instance-count {resnet18['instances']}" in lines


def test_dry_run_prints_the_diff_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack, plan = _stack(tmp_path), _plan(tmp_path, models=("resnet18", "resnet50"))
    before = stack.read_text()
    argv = ["--plan", str(plan), "--stack-file", str(stack), "--node-group", "gpu-h100", "--dry-run"]
    assert stack_plan.main(argv) == errors.OK
    out = capsys.readouterr().out.splitlines()
    assert "-      models: [resnet18, text-encoder]" in out
    assert "+      models: [text-encoder]" in out
    assert "+      models: [resnet50, resnet18]" in out
    assert out[-1] == f"dry-run: would write 1 planned deployment(s) to {stack}"
    assert stack.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Pulumi.prod.yaml", "plan.json"]


SHARED_H100 = H100_GROUP.replace("gpu-h100", "gpu-h100-shared").replace(
    "      diskSizeGiB: 300\n",
    "      diskSizeGiB: 300\n      amiType: BOTTLEROCKET_x86_64_NVIDIA\n      gpuSharing: {mode: time-slicing, replicas: 2}\n",
)


@pytest.mark.parametrize(
    ("group", "min_replicas", "message"),
    [
        ("gpu-l4", 2, "--node-group gpu-l4: its GPU is the L4 24 GB, the plan is for the NVIDIA H100 80GB HBM3 "
                      "(80 GiB); allowed: a group of the plan's GPU, or a plan from profiles measured on the group's"),
        ("system", 2, "--node-group system: not a GPU node group of stack prod; allowed: gpu-a10g, gpu-h100, "
                      "gpu-h100-shared, gpu-l4"),
        ("gpu-h100-shared", 2, "--node-group gpu-h100-shared: shares its GPUs (time-slicing); allowed: a group of "
                               "whole GPUs (the plan gives each replica one)"),
        # The stack's own rule, from its parser: a prod deployment keeps two replicas through a node drain.
        ("gpu-h100", 1, "triton-platform:tritonDeployments.plan-1.minReplicas: 1 is below the prod minimum; "
                        "allowed: 2 or more in prod (one replica cannot survive a node drain)"),
    ],
)  # fmt: skip
def test_a_refusal_is_one_line_exit_2_and_leaves_the_file_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], group: str, min_replicas: int, message: str
) -> None:
    stack, plan = _stack(tmp_path, H100_GROUP + SHARED_H100), _plan(tmp_path, min_replicas)
    before = stack.read_text()
    assert stack_plan.main(["--plan", str(plan), "--stack-file", str(stack), "--node-group", group]) == errors.USAGE
    assert capsys.readouterr().err.splitlines() == [f"stack_plan: {message}"]
    assert stack.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Pulumi.prod.yaml", "plan.json"]


def test_a_planned_name_over_a_deployment_that_keeps_unplanned_models_is_refused(tmp_path: Path) -> None:
    stack, plan = _stack(tmp_path), _plan(tmp_path, models=("resnet18",))
    stack.write_text(stack.read_text().replace("    default:\n", "    plan-1:\n", 1))
    before = stack.read_text()
    with pytest.raises(stack_plan.Refused, match=r"tritonDeployments\.plan-1 serves text-encoder, which the plan"):
        stack_plan.write(plan, stack, "gpu-h100", dry_run=False)
    assert stack.read_text() == before


def test_a_file_that_is_not_a_plan_is_one_usage_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack, other = _stack(tmp_path), tmp_path / "plan.json"
    other.write_text(PROFILES.read_text())
    assert stack_plan.main(["--plan", str(other), "--stack-file", str(stack), "--node-group", "gpu-h100"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"stack_plan: plan file {other}: schema 'triton-platform/bench-model-profiles/v1'; allowed:")
