"""The GPU benchmark's parts for Triton's own PyTorch backend that run without a GPU: the backend
build's checks and edits (bench.serving.pytorch_backend), the config a .pt2 server loads, the
summaries the result files carry (P4, whole-batch requests, consolidation, the memory plan against
what NVML saw), and the baseline server's answers to perf_analyzer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import zoo
from bench.consolidation import plan_check
from bench.consolidation import run as consolidation
from bench.serving import memory, protocol, pytorch_backend, stats
from bench.serving.baseline_server import describe
from bench.serving.served import served_config
from model_sync.admission import gpu_plan
from model_sync.planning import placement
from model_sync.triton_model import model_config

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
# The pinned upstream archives are build inputs, not part of this repository (bench.serving.bundle
# --triton-src / $TRITON_SRC): where they are given, every build edit is checked against them.
PINNED = Path(os.environ.get("TRITON_SRC") or "/nonexistent")


def result(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def test_a_tweak_edits_its_file_and_stops_the_build_when_its_target_is_gone(tmp_path: Path) -> None:
    """A build-only edit that no longer finds its line (a new upstream commit) stops the build
    with one line, instead of building something else."""
    (tmp_path / "backend").mkdir()
    cmake = tmp_path / "backend" / "CMakeLists.txt"
    cmake.write_text('set_target_properties(kernel_library_new PROPERTIES CUDA_ARCHITECTURES "53;60-real")\n')
    tweak = pytorch_backend.tweaks("90-real", pt2_by_env=False)[1]
    tweak.apply(tmp_path)
    assert cmake.read_text() == 'set_target_properties(kernel_library_new PROPERTIES CUDA_ARCHITECTURES "90-real")\n'
    cmake.write_text('set_target_properties(kernels PROPERTIES CUDA_ARCHITECTURES "${ARCHS}")\n')
    with pytest.raises(pytorch_backend.BuildError, match=r"not found in backend/CMakeLists.txt"):
        tweak.apply(tmp_path)


def test_an_archive_that_is_not_the_pinned_one_is_refused_before_anything_is_unpacked(tmp_path: Path) -> None:
    name = "core-r24.10.tar.gz"
    (tmp_path / name).write_bytes(b"not the archive")
    with pytest.raises(pytorch_backend.BuildError, match=r"sha256 .*; allowed: a77d172b"):
        pytorch_backend.verify(tmp_path, [name])
    with pytest.raises(pytorch_backend.BuildError, match="missing"):
        pytorch_backend.verify(tmp_path, ["common-r24.10.tar.gz"])
    with pytest.raises(pytorch_backend.BuildError, match=r"r24\.10 has no torch_aoti"):
        pytorch_backend.build(tmp_path, tmp_path, tmp_path, "r24.10", cuda_arch="90-real", gpu=True,
                              pt2_by_env=True, server_lib=None, log=tmp_path / "log")  # fmt: skip
    assert not (tmp_path / "r24.10").exists()


@pytest.mark.skipif(
    not PINNED.is_dir(),
    reason="needs the pinned upstream archives of Triton's PyTorch backend, which this repository does not carry "
    "(set $TRITON_SRC to their folder); the edits ran against them in the GPU and CPU builds that "
    "bench/results/serving-libtorch.json records (environment.backend_builds)",
)
@pytest.mark.parametrize("release", sorted(pytorch_backend.RELEASES))
def test_every_tweak_finds_its_target_in_the_pinned_sources(tmp_path: Path, release: str) -> None:
    root = pytorch_backend.unpack(PINNED, release, tmp_path)
    for tweak in pytorch_backend.tweaks("90-real", pt2_by_env=release == "main"):
        tweak.apply(root)
    assert pytorch_backend.PT2_ENV in (root / "pytorch_backend/src/libtorch.cc").read_text() or release == "r24.10"


def test_the_server_environment_finds_the_backend_torch_and_the_pt2_switch(tmp_path: Path) -> None:
    env = pytorch_backend.runtime_env({"LD_LIBRARY_PATH": "/x"}, tmp_path, pt2=True)
    paths = env["LD_LIBRARY_PATH"].split(":")
    assert paths[0] == str(tmp_path)
    assert paths[1].endswith("torch/lib")
    assert paths[-1] == "/x"
    assert env[pytorch_backend.PT2_ENV] == "1"
    assert pytorch_backend.PT2_ENV not in pytorch_backend.runtime_env({}, tmp_path)


def test_a_torch_aoti_config_is_served_to_the_measurement_build_as_backend_pytorch() -> None:
    cfg = model_config.ModelConfig(name="m", platform="torch_aoti", max_batch_size=8)
    served = model_config.parse(served_config(model_config.dumps(cfg), pt2=True))
    assert (served.platform, served.backend, served.default_model_filename) == ("", "pytorch", "model.pt2")
    assert served.max_batch_size == 8
    assert served_config("name: 'x'", pt2=False) == "name: 'x'"


def test_the_recorded_sweep_names_its_backend_and_its_p4_summary_is_recomputed_from_its_points() -> None:
    doc = result("serving-libtorch.json")
    assert doc["environment"]["backend"].startswith("pytorch_libtorch")
    assert all(t["backend"] for t in doc["triton"])
    assert [b["release"] for b in doc["environment"]["backend_builds"]] == ["r24.10", "main"]
    assert stats.p4_summary(doc) == doc["summary"]["p4"]
    assert stats.batched_summary(doc) == doc["summary"]["batched"]
    p4 = doc["summary"]["p4"]["best"]
    assert p4["client"] == stats.CUDA_SHM_CLIENT
    assert p4["p99_ms"] <= stats.TARGET_P4_P99_MS


def test_perf_analyzer_request_rate_csv() -> None:
    rows = stats.parse_perf_analyzer_csv(
        "Request Rate,Inferences/Second,Client Send,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n"
        "20,18.5,287,0,12402,18069,19663,61369\n"
    )
    assert rows == [{"request_rate": 20.0, "throughput": 18.5, "client_send_ms": 0.287, "client_recv_ms": 0.0,
                     "p50_ms": 12.402, "p90_ms": 18.069, "p95_ms": 19.663, "p99_ms": 61.369}]  # fmt: skip


def test_the_memory_plan_comes_within_ten_percent_of_every_observed_configuration() -> None:
    """GPU memory planning's constants against NVML's figures on Triton's PyTorch backend: a change
    to gpu_plan that breaks the 10 % fails here; the recorded comparison is what gpu_plan says now."""
    doc = result("memory-plan.json")
    assert len(doc["rows"]) == 11
    assert doc["backend"].startswith("pytorch_libtorch")
    assert memory.compare(doc) == doc["comparison"]
    assert all(abs(row["error_pct"]) <= 10 for row in doc["comparison"]), doc["comparison"]
    assert round(doc["fit"]["process_mib"]) * gpu_plan.MIB == gpu_plan.PROCESS_CONTEXT_BYTES
    assert round(doc["fit"]["instance_mib"]) * gpu_plan.MIB == gpu_plan.INSTANCE_BYTES


def test_the_consolidation_summary_is_recomputed_from_its_steps() -> None:
    doc = result("consolidation.json")
    assert len(doc["models"]) == len(zoo.ZOO) == 12
    assert consolidation.summary(doc["arms"], doc["p99_ms"]) == doc["summary"]
    assert doc["backend"]["b"].startswith("pytorch_libtorch")


def test_the_twelve_model_deployment_is_planned_within_ten_percent_of_what_it_used() -> None:
    """The consolidation run's arm (b), twelve models at two instances each in one server, planned
    by gpu_plan from export's figures against the GPU memory NVML saw with the models loaded."""
    doc = result("consolidation.json")
    needs = [gpu_plan.Need(n, n, m["gpu_memory_per_instance"], ({"kind": "KIND_GPU", "count": 2, "gpus": []},),
                           backend="pytorch_libtorch") for n, m in doc["models"].items()]  # fmt: skip
    row = {"models": [{"model": n.model, "bytes_per_instance": n.bytes_per_instance, "count": 2,
                       "platform": "pytorch_libtorch"} for n in needs]}  # fmt: skip
    observed = doc["arms"]["b"]["gpu_memory_idle_mib"] * gpu_plan.MIB
    assert abs(memory.planned(row) - observed) / observed <= 0.10


def test_each_models_profile_is_its_best_passing_step_and_its_server_is_planned_within_ten_percent() -> None:
    """bench/results/model-profiles.json, each zoo model alone on one instance of Triton's PyTorch backend:
    its best is the highest passing step of its curve, a step the search could not bracket says so, and
    gpu_plan predicts the GPU memory its server held idle within 10 %; docs/gpu-benchmark.md prints them."""
    doc = result("model-profiles.json")
    assert set(doc["models"]) == set(zoo.ZOO)
    assert doc["backend"].startswith("pytorch_libtorch")
    assert (doc["gpu"], doc["config"]["instances"], doc["errors"]) == ("NVIDIA H100 80GB HBM3", 1, [])
    text = (ROOT / "docs" / "gpu-benchmark.md").read_text()
    for name, m in doc["models"].items():
        passing = [p for p in m["curve"] if p["passed"]]
        best = max(passing, key=lambda p: p["rate"])
        assert (m["best"]["rate"], m["best"]["throughput"], m["best"]["p99_ms"]) == (
            best["rate"], best["throughput"], best["p99_ms"]
        ), name  # fmt: skip
        assert best["p99_ms"] <= doc["p99_ms"], name
        assert best["throughput"] >= doc["served_share"] * best["rate"], name
        assert m["complete"] == any(not p["passed"] for p in m["curve"]), name
        row = {"models": [{"model": name, "bytes_per_instance": m["bytes_per_instance"], "count": 1,
                           "platform": "pytorch_libtorch"}]}  # fmt: skip
        observed = m["gpu_memory_idle_mib"] * gpu_plan.MIB
        assert abs(memory.planned(row) - observed) / observed <= 0.10, name
        assert f"| {name} | {m['bytes_per_instance'] / 2**20:,.0f} | {best['throughput']:,.1f}" in text, name


def test_a_repeated_profile_holds_its_memory_and_the_docs_state_how_far_its_best_rate_moved() -> None:
    """model-profiles-repeat.json, six models profiled again on another H100: memory byte for byte the
    same, the best rate not; docs/gpu-benchmark.md's range is computed from the two files."""
    first, again = result("model-profiles.json"), result("model-profiles-repeat.json")
    assert again["gpu"] == first["gpu"] == "NVIDIA H100 80GB HBM3"
    assert again["config"] == first["config"]
    moves = []
    for name, m in again["models"].items():
        keys = ("bytes_per_instance", "gpu_memory_idle_mib")
        assert [m[k] for k in keys] == [first["models"][name][k] for k in keys], name
        moves.append(m["best"]["throughput"] / first["models"][name]["best"]["throughput"] - 1)
    text = (ROOT / "docs" / "gpu-benchmark.md").read_text()
    assert f"moved from {min(moves) * 100:.0f} % to +{max(moves) * 100:.0f} %" in text


def test_the_plan_check_passes_only_with_every_rate_in_its_p99_and_the_memory_within_ten_percent() -> None:
    """bench.consolidation.plan_check's verdict on one measured step: a model served under its rate's share,
    or over its p99 target, fails the rates; memory is the plan's against the server's idle."""
    plan = {"memory_bytes": 1000, "models": [
        {"model": "a", "rate": 100, "p99_ms": 80, "instances": 1},
        {"model": "b", "rate": 200, "p99_ms": 20, "instances": 2}]}  # fmt: skip
    good = {"gpu_util_pct": 40.0, "models": {"a": {"throughput": 99.0, "p99_ms": 30.0},
                                              "b": {"throughput": 190.0, "p99_ms": 19.0}}}  # fmt: skip
    check = plan_check.verdict(plan, good, 950)
    assert (check["rates_met"], check["memory_within_10_percent"]) == (True, True)
    assert round(check["memory_error"], 4) == round(50 / 950, 4)
    slow = {**good, "models": {**good["models"], "b": {"throughput": 190.0, "p99_ms": 21.0}}}
    assert plan_check.verdict(plan, slow, 950)["models"]["b"]["ok"] is False
    short = {**good, "models": {**good["models"], "a": {"throughput": 70.0, "p99_ms": 30.0}}}  # < 75 % served
    assert plan_check.verdict(plan, short, 950)["rates_met"] is False
    assert plan_check.verdict(plan, {**good, "models": {"a": good["models"]["a"]}}, 950)["rates_met"] is False
    assert plan_check.verdict(plan, good, 800)["memory_within_10_percent"] is False  # plan 25 % above


def test_the_first_plan_check_missed_two_p99s_above_the_busy_target_the_planner_now_keeps() -> None:
    """plan-check-busy80.json, the plan of the twelve models on one H100 at the first BUSY_TARGET (0.8):
    its verdict recomputed from its measured step; it is the evidence the planner's BUSY_TARGET is set below."""
    doc = result("plan-check-busy80.json")
    (deployment,) = doc["plan"]["deployments"]
    check = plan_check.verdict(deployment, doc["step"], doc["check"]["memory_idle_bytes"])
    assert check == doc["check"]
    assert doc["plan"]["busy_target"] == 0.8
    assert doc["backend"].startswith("pytorch_libtorch")
    assert doc["gpu"] == "NVIDIA H100 80GB HBM3"
    assert sorted(n for n, m in check["models"].items() if not m["ok"]) == ["efficientnet-b0", "resnet50"]
    assert check["memory_within_10_percent"]
    assert placement.BUSY_TARGET < deployment["gpu_busy_pct"] / 100


def test_the_one_instance_plan_check_missed_resnet50_again_the_evidence_for_two_instances_on_a_shared_gpu() -> None:
    """plan-check-one-instance.json, the two-GPU plan of the twelve models at one instance each, served on
    one H100: each deployment's verdict recomputed from its measured step. plan-1 met every rate; plan-2
    missed resnet50's p99 (as the first check did) at far below BUSY_TARGET, and the planner now plans
    SHARED_MIN_INSTANCES of each model where models share a GPU."""
    doc = result("plan-check-one-instance.json")
    assert (doc["schema"], doc["gpu"], doc["errors"]) == (
        "triton-platform/bench-plan-check/v2",
        "NVIDIA H100 80GB HBM3",
        [],
    )
    assert doc["backend"].startswith("pytorch_libtorch")
    planned = {d["name"]: d for d in doc["plan"]["deployments"]}
    missed = {}
    for run in doc["deployments"]:
        check = plan_check.verdict(planned[run["name"]], run["step"], run["check"]["memory_idle_bytes"])
        assert check == run["check"]
        assert check["memory_within_10_percent"]
        missed[run["name"]] = sorted(n for n, m in check["models"].items() if not m["ok"])
    assert missed == {"plan-1": [], "plan-2": ["resnet50"]}
    assert doc["check"] == {"rates_met": False, "memory_within_10_percent": True}
    assert planned["plan-2"]["gpu_busy_pct"] <= 100 * placement.BUSY_TARGET
    assert {m["instances"] for d in planned.values() for m in d["models"]} == {1}
    assert placement.SHARED_MIN_INSTANCES > 1


def test_the_plan_the_planner_makes_now_was_served_as_planned_and_its_checked_deployment_met_every_target() -> None:
    """plan-check.json: the plan is today's `model-sync plan` of the twelve models at 100 req/s (two GPUs,
    two instances of each model); its verdict is recomputed from the measured step. Device time covered
    plan-2 only (the deployment whose resnet50 missed at one instance); plan-1 is named as unchecked."""
    doc = result("plan-check.json")
    assert (doc["schema"], doc["gpu"], doc["errors"]) == (plan_check.SCHEMA, "NVIDIA H100 80GB HBM3", [])
    assert doc["backend"].startswith("pytorch_libtorch")
    done = subprocess.run(
        [sys.executable, "-m", "model_sync", "plan", "--profiles", str(ROOT / "bench" / "results" / "model-profiles.json"),
         "--demand", str(ROOT / "bench" / "consolidation" / "twelve-at-100.yaml"), "--gpu-memory-gib", "80",
         "--output", "json"], capture_output=True, text=True, cwd=ROOT, check=True)  # fmt: skip
    assert doc["plan"] == json.loads(done.stdout)
    planned = {d["name"]: d for d in doc["plan"]["deployments"]}
    assert sorted(planned) == ["plan-1", "plan-2"]
    assert doc["checked"] == ["plan-2"]
    (run,) = doc["deployments"]
    check = plan_check.verdict(planned["plan-2"], run["step"], run["check"]["memory_idle_bytes"])
    assert check == run["check"]
    assert (check["rates_met"], check["memory_within_10_percent"]) == (True, True)
    assert {m["instances"] for m in planned["plan-2"]["models"]} == {placement.SHARED_MIN_INSTANCES}
    assert doc["check"] == {"rates_met": True, "memory_within_10_percent": True}


def test_a_plan_is_checked_only_on_the_gpu_it_was_profiled_on(tmp_path: Path) -> None:
    """plan_check on another device serves nothing and records why: a faster GPU would pass a plan the
    profiled one fails."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(result("plan-check-busy80.json")["plan"]))
    out = tmp_path / "plan-check.json"
    argv = ["--plan", str(plan), "--triton-root", str(tmp_path / "none"), "--perf-analyzer", "none",
            "--out", str(out), "--work", str(tmp_path / "work"), "--device", "cpu"]  # fmt: skip
    assert plan_check.main(argv) == 1
    doc = json.loads(out.read_text())
    assert doc["errors"] == [f"the plan is for the NVIDIA H100 80GB HBM3, this GPU is the {doc['gpu']}: not checked"]
    assert doc["deployments"] == []
    assert doc["check"] == {"rates_met": False, "memory_within_10_percent": False}


def test_only_names_planned_deployments_and_is_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """plan_check --only: the deployments it checks are recorded (`checked`), so a partial check never reads
    as the whole plan's; a name the plan lacks is a usage error naming the planned ones."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(result("plan-check.json")["plan"]))
    out = tmp_path / "plan-check.json"
    argv = ["--plan", str(plan), "--triton-root", str(tmp_path / "none"), "--perf-analyzer", "none",
            "--out", str(out), "--work", str(tmp_path / "work"), "--device", "cpu", "--passes", "2"]  # fmt: skip
    assert plan_check.main([*argv, "--only", "plan-2"]) == 1  # not the plan's GPU: nothing served
    assert json.loads(out.read_text())["checked"] == ["plan-2"]
    with pytest.raises(SystemExit) as stop:
        plan_check.main([*argv, "--only", "plan-9"])
    assert stop.value.code == 2
    assert "--only plan-9: no such deployment; allowed: plan-1, plan-2" in capsys.readouterr().err


def test_the_baseline_answers_perf_analyzers_metadata_and_echoes_request_ids() -> None:
    pages = describe("m", (3, 4), (1, 10))
    assert json.loads(pages["/v2/models/m"])["inputs"][0]["shape"] == [1, 3, 4]
    assert json.loads(pages["/v2/models/m/config"])["max_batch_size"] == 0
    body, hl = protocol.encode_request(protocol.Tensor("INPUT__0", (1, 2), b"\0" * 8), "OUTPUT__0")
    assert protocol.request_id(body, hl) is None
    with_id = json.dumps({"id": "7", "inputs": []}).encode()
    assert protocol.request_id(with_id, len(with_id)) == "7"
    payload, header = protocol.encode_response("m", protocol.Tensor("OUTPUT__0", (1, 2), b"\0" * 8), "7")
    assert json.loads(payload[:header])["id"] == "7"


def test_the_readme_rows_state_what_the_result_files_hold() -> None:
    """README's rows for the real backend, the consolidation and the memory plan, against the files."""
    readme = (ROOT / "README.md").read_text()
    p4 = result("serving-libtorch.json")["summary"]["p4"]
    assert f"{p4['best']['throughput']:,.0f} req/s at p99 {p4['best']['p99_ms']:.1f} ms" in readme
    assert f"{p4['raw_fraction'] * 100:.1f} % of raw TorchScript" in readme
    s = result("consolidation.json")["summary"]
    assert f"one tritonserver: {s['b_req_s']:,.0f} req/s" in readme
    assert f"{s['a_req_s']:,.0f} req/s, at p99 {s['a_worst_p99_ms']:.0f} ms): {s['throughput_ratio']:.1f}x" in readme
    assert f"GPU memory in use -{s['memory_reduction'] * 100:.0f} %" in readme
    assert f"GPU {s['b_gpu_util_pct']:.0f} % busy" in readme
    errors = [row["error_pct"] for row in result("memory-plan.json")["comparison"]]
    assert f"({min(errors):.1f} to {max(errors):+.1f} %)" in readme
