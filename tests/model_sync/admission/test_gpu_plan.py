"""model_sync/admission/gpu_plan.py: Triton's placement of instance groups on the GPUs of a replica, the sum
over a deployment's models against the headroom of one GPU, unknown models, the lines it prints,
and reading the pinned versions from a real moto_server. The refusals of `push`, `promote` and the
plan in `status` are in test_push.py, test_promote.py and test_status.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_sync import errors
from model_sync.admission import gpu_plan
from model_sync.admission.gpu_plan import CUDA_CONTEXT_BYTES, HEADROOM, Need, human
from model_sync.environments import DeploymentGpu

GIB, MIB = 1 << 30, 1 << 20
CARD = DeploymentGpu("default", "H100", 80, ("resnet", "bert", "tok", "pinned0"))


def _group(kind: str = "KIND_GPU", count: int = 1, gpus: tuple[int, ...] = ()) -> dict:
    return {"kind": kind, "count": count, "gpus": list(gpus)}


def _need(model: str, bytes_per_instance: int | None, *groups: dict) -> Need:
    return Need(model, f"{model} v1", bytes_per_instance, groups, 1)


def test_the_docs_state_the_allowance_and_the_headroom_the_planner_uses() -> None:
    doc = " ".join((Path(__file__).resolve().parents[3] / "docs" / "model-sync.md").read_text().split())
    assert f"`CUDA_CONTEXT_BYTES`, {CUDA_CONTEXT_BYTES // MIB} MiB, measured on an H200" in doc
    assert f"`PROCESS_CONTEXT_BYTES`, {gpu_plan.PROCESS_CONTEXT_BYTES // MIB} MiB" in doc
    assert f"`INSTANCE_BYTES`, {gpu_plan.INSTANCE_BYTES // MIB} MiB" in doc
    assert f"`HEADROOM` ({HEADROOM:.0%})".replace("%", " %") in doc


def test_instances_of_one_server_process_share_its_context_and_python_backend_instances_do_not() -> None:
    """The recalibration (bench/results/memory-plan.json): Triton's own backends' instances are threads
    of one process, one context for the deployment; a python-backend instance is a process of its own."""
    libtorch = Need("r", "r v1", GIB, (_group(count=4),), 1, "pytorch_libtorch")
    aoti = Need("p", "p v1", 2 * GIB, (_group(count=1),), 1, "torch_aoti")
    python = Need("w", "w v1", GIB, (_group(count=2),), 1, "python")
    per = GIB + gpu_plan.INSTANCE_BYTES
    assert gpu_plan.plan(CARD, [libtorch]).planned == gpu_plan.PROCESS_CONTEXT_BYTES + 4 * per
    both = gpu_plan.plan(CARD, [libtorch, aoti])
    assert both.planned == gpu_plan.PROCESS_CONTEXT_BYTES + 4 * per + 2 * GIB + gpu_plan.INSTANCE_BYTES
    assert gpu_plan.plan(CARD, [python]).planned == 2 * (GIB + CUDA_CONTEXT_BYTES)
    mixed = gpu_plan.plan(CARD, [libtorch, python])
    assert mixed.planned == gpu_plan.PROCESS_CONTEXT_BYTES + 4 * per + 2 * (GIB + CUDA_CONTEXT_BYTES)
    assert mixed.to_json()["process_context_bytes"] == gpu_plan.PROCESS_CONTEXT_BYTES
    assert "696.0 MiB for the server process, each instance + 76.0 MiB" in mixed.refusal("r", "prod")


def test_instances_per_gpu_follow_tritons_placement() -> None:
    need = _need("m", 1, _group(count=2), _group(count=3, gpus=(1,)), _group("KIND_CPU", 5), _group("KIND_AUTO"))
    assert need.on_gpu(None) == 3  # every-GPU groups only; KIND_CPU costs nothing, KIND_AUTO counts
    assert need.on_gpu(0) == 3
    assert need.on_gpu(1) == 6  # plus the group that lists GPU 1


def test_the_plan_sums_the_fullest_gpu_with_the_context_allowance() -> None:
    resnet = _need("resnet", 3 * GIB, _group(count=4))  # 4 instances on each GPU
    bert = _need("bert", 10 * GIB, _group(count=2, gpus=(1,)))  # 2 instances on GPU 1 only
    tok = _need("tok", 0, _group("KIND_CPU", 8))  # costs nothing
    plan = gpu_plan.plan(CARD, [resnet, bert, tok])
    assert plan.planned == 4 * (3 * GIB + CUDA_CONTEXT_BYTES) + 2 * (10 * GIB + CUDA_CONTEXT_BYTES)  # GPU 1
    assert [(s.need.model, s.instances) for s in plan.shares] == [("bert", 2), ("resnet", 4)]  # largest first
    assert plan.allowed == int(80 * GIB * 0.9)
    assert (plan.fits, plan.unknown) == (True, ())
    assert gpu_plan.plan(CARD, [resnet, _need("bert", 30 * GIB, _group(count=2, gpus=(1,)))]).fits is False


def test_unknown_models_are_not_counted_and_are_named() -> None:
    plan = gpu_plan.plan(CARD, [_need("resnet", GIB, _group()), _need("bert", None, _group(count=64))])
    assert (plan.planned, plan.unknown) == (GIB + CUDA_CONTEXT_BYTES, ("bert v1",))
    assert plan.summary("prod") == (
        "gpu memory: deployment default in prod plans 1.7 GiB of the 72.0 GiB allowed on one H100 (80.0 GiB); "
        "not counted (GPU memory unknown): bert v1"
    )
    assert gpu_plan.plan(CARD, []).planned == 0


def test_the_refusal_is_one_line_naming_the_deployment_the_gpu_the_bytes_and_the_largest() -> None:
    needs = [
        _need(m, size * GIB, _group(count=n)) for m, size, n in (("a", 1, 1), ("b", 20, 2), ("c", 9, 3), ("d", 2, 1))
    ]
    plan = gpu_plan.plan(CARD, [*needs, _need("e", None, _group())])
    assert not plan.fits
    assert plan.refusal("b", "prod") == (
        "b -> prod: gpu memory: deployment default would plan 74.7 GiB on one H100 (80.0 GiB), more than the "
        "72.0 GiB allowed (90% of it); largest: b v1 2 x 20.7 GiB = 41.3 GiB, c v1 3 x 9.7 GiB = 29.0 GiB, "
        "d v1 1 x 2.7 GiB = 2.7 GiB (each python-backend instance + 686.0 MiB CUDA context); not counted (GPU memory "
        "unknown): e v1; allowed: fewer GPU instances (instance_group count), a smaller max_batch_size, or a "
        "bigger GPU"
    )


def test_a_deployment_on_a_shared_gpu_is_planned_in_its_share_and_says_so() -> None:
    """On a node group that time-slices its L4s two ways, the stack exports one replica's share (12 GiB):
    a set that fits a whole L4 but not the share is refused, and the line names the share."""
    share = DeploymentGpu("light", "L4", 12.0, ("a",), (), "time-slicing x2")
    need = [_need("a", 5 * GIB, _group(count=2))]  # 2 x (5 GiB + context) = 11.3 GiB
    assert gpu_plan.plan(DeploymentGpu("light", "L4", 24, ("a",)), need).fits
    plan = gpu_plan.plan(share, need)
    assert (plan.allowed, plan.fits) == (int(12 * GIB * HEADROOM), False)
    assert "would plan 11.3 GiB on one L4 share (time-slicing x2: 12.0 GiB), more than the 10.8 GiB" in plan.refusal(
        "a", "dev"
    )
    assert plan.to_json()["sharing"] == "time-slicing x2"


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (512 * MIB, "512.0 MiB"), (int(1.25 * GIB), "1.2 GiB")],
)
def test_human_units(n: int, text: str) -> None:
    assert human(n) == text


def test_need_of_a_manifest_v3_or_v4_and_of_older_ones() -> None:
    doc = {
        "schema": "model-sync.manifest/v3", "model": "resnet", "version": 4, "instance_groups": [_group(count=2)],
        "gpu_memory": {"bytes_per_instance": 7, "method": "estimated", "batch": 8, "device": None, "basis": "x"},
    }  # fmt: skip
    assert Need.from_manifest(doc) == Need("resnet", "resnet v4", 7, (_group(count=2),), 4)
    assert Need.from_manifest({**doc, "schema": "model-sync.manifest/v4"}).bytes_per_instance == 7
    assert Need.from_manifest({**doc, "gpu_memory": None}).bytes_per_instance is None
    v2 = {k: v for k, v in doc.items() if k not in ("gpu_memory", "instance_groups")}
    assert Need.from_manifest({**v2, "schema": "model-sync.manifest/v2"}).bytes_per_instance is None


def test_check_reads_the_pinned_versions_of_the_other_models(tmp_path, capsys, moto_s3, aws_env) -> None:
    """Against a real bucket: `pinned0` (pinned, a v3 manifest without GPU memory) is unknown, `bert`
    (never pushed) serves nothing, and the new version is counted with the check's own need."""
    from model_sync import environments
    from model_sync.s3.bucket import Bucket
    from tests.model_sync.helpers import python_model, run_cli, write_config

    bucket = moto_s3.make_bucket()
    cfg = write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{bucket}"})
    assert (
        run_cli(capsys, "push", str(python_model(tmp_path, "pinned0")), "--env", "staging", "--config", cfg).code == 0
    )
    env = environments.resolve("staging", cfg)
    repo = Bucket(environments.Environment(env.name, env.root, env.endpoint_url, env.region, triton_gpus=(CARD,)))
    assert gpu_plan.pinned_needs(repo, ["pinned0", "bert"]) == [
        Need("pinned0", "pinned0 v1", None, (_group("KIND_AUTO"),), 1, "python")
    ]
    keys = moto_s3.keys(bucket)
    new = _need("resnet", 30 * GIB, _group(count=2))
    lines = gpu_plan.check(repo, ["resnet", "t5"], lambda _m: new, ", ".join)
    assert lines == [
        "gpu memory: not checked for t5: in no deployment of staging's tritonGpus",
        "gpu memory: deployment default in staging plans 61.3 GiB of the 72.0 GiB allowed on one H100 (80.0 GiB); "
        "not counted (GPU memory unknown): pinned0 v1",
    ]
    big = _need("resnet", 40 * GIB, _group(count=2))
    with pytest.raises(
        errors.SyncError, match=r"^resnet -> staging: gpu memory: deployment default would plan 81\.3 GiB"
    ) as e:
        gpu_plan.check(repo, ["resnet"], lambda _m: big, ", ".join)
    assert e.value.code == errors.INCOMPATIBLE
    assert moto_s3.keys(bucket) == keys  # the check only reads
    bare = Bucket(env)
    assert gpu_plan.check(bare, ["resnet"], lambda _m: big, ", ".join) == [
        "gpu memory: not checked in staging: the environment does not name its GPUs (tritonGpus in model-sync.yaml "
        "or the stack output)"
    ]
    assert gpu_plan.environment_plans(bare) is None
    [plan] = gpu_plan.environment_plans(repo) or []
    assert (plan.planned, plan.unknown) == (0, ("pinned0 v1",))
