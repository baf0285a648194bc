"""model_sync/sandbox/canary_models.py: the gray-release scenario models. Each kind is written as
`push` reads a model directory (model_sync.triton_model.model_directory.load, what push validates) and then served by one real
tritonserver, which shows what each kind does: good answers 2x, errors fails exactly the inputs
`fails()` names (5 %), slow takes 3x good's time, broken never becomes READY."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from model_sync.agent.pod_disk import precompile_python
from model_sync.contract import layout
from model_sync.observation import smoke
from model_sync.sandbox import canary_models
from model_sync.sandbox.procs import wait_until
from model_sync.sandbox.runtime import TritonRuntime, TritonServer
from model_sync.sandbox.traffic import Records, RoundRobinTraffic
from model_sync.triton_model import model_config, model_directory
from tests.support.triton import metric_value
from tests.support.triton import triton_runtime as triton_runtime_fixture

pytestmark = pytest.mark.latency  # judged on latency figures (tests/conftest.py, UNIT_NICE)

triton_runtime = triton_runtime_fixture


def _counting(seq: int) -> dict[str, np.ndarray]:
    """INPUT0 = [seq, 1, 2, 3]: the `errors` kind fails seq % 20 == 13."""
    return {canary_models.INPUT: np.array([seq, 1, 2, 3], dtype=np.float32)}


# ---- the directories (no processes) ---------------------------------------------------------


@pytest.mark.parametrize("kind", canary_models.KINDS)
def test_every_kind_is_a_model_directory_push_accepts_with_one_shared_config(tmp_path: Path, kind: str) -> None:
    model_dir = canary_models.write_model(tmp_path, "scenario", kind, version_dir=3)
    assert model_dir == tmp_path / "scenario"
    assert sorted(str(p.relative_to(model_dir)) for p in model_dir.rglob("*")) == ["3", "3/model.py", "config.pbtxt"]
    m = model_directory.load(str(model_dir))  # push's own validation (config checks, the backend's files)
    assert (m.name, m.backend, sorted(m.files)) == ("scenario", "python", ["model.py"])
    cfg = model_config.read_file(str(model_dir / "config.pbtxt"))
    instances = canary_models.TAIL_INSTANCES if kind in ("tail", "cold") else 1  # a slow request holds one each
    assert model_config.dumps(cfg) == model_config.dumps(canary_models.config("scenario", instances))
    assert (cfg.max_batch_size, [g.count for g in cfg.instance_group]) == (0, [instances])
    compile((model_dir / "3" / "model.py").read_text(), "model.py", "exec")


def test_the_errors_kind_fails_one_input_in_twenty_and_never_the_smoke_inference() -> None:
    failing = [seq for seq in range(1000) if canary_models.fails(_counting(seq)[canary_models.INPUT])]
    assert len(failing) == 50  # 5 %
    assert failing[:3] == [13, 33, 53]
    specs, _ = smoke.tensor_specs(canary_models.config("scenario"))
    (smoke_input,) = smoke.smoke_inputs(specs).values()
    assert not canary_models.fails(smoke_input)


def test_slow_sleeps_three_times_as_long_as_good() -> None:
    assert canary_models.delay_s("slow") == pytest.approx(3 * canary_models.delay_s("good"))
    assert canary_models.delay_s("errors") == canary_models.delay_s("good") == canary_models.GOOD_DELAY_S


def test_write_model_rejects_an_unknown_kind_a_bad_name_or_version_and_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"kind: 'flaky'; allowed: good, errors, slow, broken, tail, cold"):
        canary_models.write_model(tmp_path, "m", "flaky")
    with pytest.raises(layout.LayoutError, match=r"model name: 'Bad Name'"):
        canary_models.write_model(tmp_path, "Bad Name", "good")
    with pytest.raises(layout.LayoutError, match=r"version: 0; allowed: an integer 1\.\."):
        canary_models.write_model(tmp_path, "m", "good", version_dir=0)
    canary_models.write_model(tmp_path, "m", "good")
    with pytest.raises(FileExistsError, match=r"/m: exists; allowed: a new directory, or overwrite=True"):
        canary_models.write_model(tmp_path, "m", "slow", version_dir=2)
    canary_models.write_model(tmp_path, "m", "slow", version_dir=2, overwrite=True)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["2", "config.pbtxt"]  # one version dir for push
    assert "KIND = 'slow'" in (tmp_path / "m" / "2" / "model.py").read_text()


# ---- one real tritonserver serving every kind -----------------------------------------------


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory, triton_runtime: TritonRuntime) -> Iterator[TritonServer]:
    root = tmp_path_factory.mktemp("canary-models")
    for kind in canary_models.KINDS:
        # Served straight from the directory push would upload, with its __pycache__ written first as
        # the agent does before a version becomes visible: else the stub writes it on load, Triton's
        # poller sees the change and loads the model again (the warm-up counted twice in /metrics).
        precompile_python(canary_models.write_model(root / "models", kind, kind) / "1")
    server = TritonServer(root / "models", root / "triton.log", runtime=triton_runtime)
    try:
        server.start()
        for kind in ("good", "errors", "slow", "tail", "cold"):
            server.wait_version_ready(kind, 1, timeout=60)
        yield server
    finally:
        if server.process is not None:
            server.process.kill()  # its graceful shutdown (~2.5 s) is not under test here


def _traffic(server: TritonServer, model: str, requests: int, concurrency: int = 1) -> Records:
    # One thread by default: requests never queue behind each other, so latency is the model's own.
    traffic = RoundRobinTraffic([server.http_url], model, _counting, concurrency=concurrency, limit=requests).start()
    assert traffic.wait(60), f"{model}: {requests} requests not answered within 60 s"
    return traffic.records()


def _metric(server: TritonServer, name: str, model: str) -> float:
    """`name` of `model` version 1 in the server's /metrics, summed over its other labels (reason)."""
    return metric_value(f"http://127.0.0.1:{server.metrics_port}/metrics", name, model, 1)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_good_doubles_its_input_and_never_fails(triton: TritonServer) -> None:
    client = httpclient.InferenceServerClient(triton.http_url.split("://")[1])
    tensor = httpclient.InferInput(canary_models.INPUT, [4], "FP32")
    tensor.set_data_from_numpy(np.array([1.5, -2, 0, 7], dtype=np.float32))
    result = client.infer("good", [tensor])
    assert result.as_numpy(canary_models.OUTPUT).tolist() == [3.0, -4.0, 0.0, 14.0]
    assert result.get_response()["model_version"] == "1"
    client.close()
    records = _traffic(triton, "good", 40)
    assert len(records) == 40
    assert not records.failed(), records.errors()
    assert records.version_counts() == {1: 40}


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_errors_fails_exactly_the_predicted_five_percent(triton: TritonServer) -> None:
    failed_before = _metric(triton, "nv_inference_request_failure", "errors")
    succeeded_before = _metric(triton, "nv_inference_request_success", "errors")
    records = _traffic(triton, "errors", 200)
    assert [r.seq for r in records] == list(range(200))
    predicted = {r.seq for r in records if canary_models.fails(_counting(r.seq)[canary_models.INPUT])}
    assert {r.seq for r in records.failed()} == predicted
    assert len(predicted) == 10  # 5 %
    errors = sorted(records.errors())
    assert len(errors) == len(predicted), errors
    for seq, error in zip(sorted(predicted, key=str), errors, strict=True):
        assert error.startswith("InferenceServerException: [500] Failed to process the request(s) for model 'errors")
        assert f"TritonModelException: canary model 'errors' version 1: input {seq} rejected on purpose" in error
        assert canary_models.injected_version(error) == 1  # what the gray release's figures attribute by
    assert records.version_counts() == {1: len(records) - len(predicted)}
    # Triton counts them as failed requests of version 1 (what the canary analysis reads).
    assert _metric(triton, "nv_inference_request_failure", "errors") - failed_before == len(predicted)
    assert _metric(triton, "nv_inference_request_success", "errors") - succeeded_before == 200 - len(predicted)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_slow_takes_three_times_as_long_as_good(triton: TritonServer) -> None:
    def compute_us() -> dict[str, tuple[float, float]]:
        return {
            m: (
                _metric(triton, "nv_inference_compute_infer_duration_us", m),
                _metric(triton, "nv_inference_exec_count", m),
            )
            for m in ("good", "slow")
        }

    before = compute_us()
    good, slow = _traffic(triton, "good", 60), _traffic(triton, "slow", 30)
    after = compute_us()
    assert not good.failed(), good.errors()
    assert not slow.failed(), slow.errors()
    p50_good, p50_slow = good.latency_quantile(0.5), slow.latency_quantile(0.5)
    assert p50_good is not None
    assert p50_slow is not None
    assert 2.0 <= p50_slow / p50_good <= 3.6, (p50_good, p50_slow)  # ~2.5 measured: dispatch adds ~3 ms to each
    assert (slow.latency_quantile(0.01) or 0) >= 3 * canary_models.GOOD_DELAY_S  # it sleeps 30 ms, always
    # Server side (the /metrics the canary analysis reads): compute time per execution of these requests.
    per_exec = {m: (after[m][0] - before[m][0]) / (after[m][1] - before[m][1]) for m in ("good", "slow")}
    assert 2.2 <= per_exec["slow"] / per_exec["good"] <= 3.3, per_exec


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_tail_slows_exactly_the_predicted_inputs_by_150_ms(triton: TritonServer) -> None:
    """The tail regression the gray release must catch: only the predicted inputs (INPUT0[0] >= 100
    and 0..2 mod 100) take 150 ms more; every other request answers as fast as good's, also while a
    slowed one holds an instance (four threads: no request waits behind it)."""
    records = _traffic(triton, "tail", 300, concurrency=canary_models.TAIL_INSTANCES)
    assert not records.failed(), records.errors()
    slowed = {r.seq for r in records if canary_models.slowed(_counting(r.seq)[canary_models.INPUT])}
    assert slowed == {100, 101, 102, 200, 201, 202}
    assert all(r.latency >= canary_models.TAIL_EXTRA_S for r in records if r.seq in slowed)
    # A busy machine can hold back any request; the model never answers a slowed input under
    # TAIL_EXTRA_S. So a fast answer to the same input sent alone proves the model did not slow it,
    # and queueing behind a slowed request (one instance, not four) would hold back far more than 2 %.
    held_back = [r for r in records if r.seq not in slowed and r.latency >= canary_models.TAIL_EXTRA_S]
    assert len(held_back) <= 0.02 * (len(records) - len(slowed)), held_back
    client = httpclient.InferenceServerClient(triton.http_url.split("://")[1])
    for r in held_back:
        assert min(_latency_alone(client, "tail", r.seq) for _ in range(3)) < canary_models.TAIL_EXTRA_S, r
    client.close()


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_cold_answers_its_first_requests_after_the_load_late_then_as_good(triton: TritonServer) -> None:
    """The cold canary: the warm-up (zeros) and the smoke (ones) do not count; its first instance
    answers its first COLD_REQUESTS requests COLD_EXTRA_S late, every other request as `good` would
    (one at a time here: nothing queues behind them)."""
    records = _traffic(triton, "cold", 40)  # seq 0 and 1 are the warm-up's and the smoke's values
    assert not records.failed(), records.errors()
    late = sorted(r.seq for r in records if r.latency >= canary_models.COLD_EXTRA_S)
    assert len(late) == canary_models.COLD_REQUESTS, [(r.seq, round(r.latency, 3)) for r in records]
    warm = sorted(r.latency for r in records if r.seq not in late)
    assert warm[len(warm) // 2] < canary_models.COLD_EXTRA_S / 2  # the median answers as good's


def _latency_alone(client: httpclient.InferenceServerClient, model: str, seq: int) -> float:
    tensor = httpclient.InferInput(canary_models.INPUT, [4], "FP32")
    tensor.set_data_from_numpy(_counting(seq)[canary_models.INPUT])
    start = time.monotonic()
    client.infer(model, [tensor])
    return time.monotonic() - start


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_broken_fails_to_load_and_is_never_ready(triton: TritonServer) -> None:
    client = httpclient.InferenceServerClient(triton.http_url.split("://")[1])
    holder: dict[str, dict[str, str]] = {}

    def settled() -> bool:
        entry = {e["name"]: e for e in client.get_model_repository_index()}.get("broken", {})
        holder["entry"] = entry
        return entry.get("state") == "UNAVAILABLE"

    wait_until(settled, 30, what="broken settled")
    assert "initialize fails on purpose" in holder["entry"].get("reason", ""), holder
    assert not triton.version_ready("broken", 1)
    assert triton.version_ready("good", 1)  # the other models serve on
    client.close()
