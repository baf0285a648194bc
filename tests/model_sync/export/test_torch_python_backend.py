"""model_sync.export.torch_python_backend (and onnx_python_backend), the python-backend models `export
--target local` ships as <model>/<N>/model.py: pushed to a real moto_server byte for byte, and
served by the real tritonserver (TorchScript through this wrapper, ONNX through ONNX Runtime's; a .pt2
goes through this wrapper too, served in tests/model_sync/sandbox/test_demo.py), which batches
concurrent requests into one execute() (the staging buffers) and splits the outputs back per request. A model that raises fails exactly the requests of its
execute() call and Triton counts them as failures (what the gray release reads), exported through
model_sync/sandbox/torchscript_models.py (the real `model-sync export` in a subprocess)."""

from __future__ import annotations

import re
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from model_sync.agent.pod_disk import precompile_python
from model_sync.observation import smoke
from model_sync.sandbox import torchscript_models
from model_sync.sandbox.procs import wait_until
from model_sync.sandbox.runtime import TritonRuntime, TritonServer
from model_sync.triton_model import model_config, model_directory
from tests.model_sync.helpers import run_cli, write_config
from tests.support.s3_servers import S3Server
from tests.support.triton import triton_runtime  # noqa: F401 (fixture)

WRAPPER = Path(__file__).resolve().parents[3] / "model_sync" / "export" / "torch_python_backend.py"
ONNX_WRAPPER = WRAPPER.with_name("onnx_python_backend.py")
# The served models: Mix in each wrapper's formats, and the tolerance its outputs get against eager.
# A .pt2 runs through this same wrapper (only its loader differs); it is served, dynamic batch
# included (warm-up at batch 1 and 8, then traffic), by the demo's e2e test
# (tests/model_sync/sandbox/test_demo.py): one AOTInductor compile is 14-35 s of a 2-core budget.
FORMATS = {"mix": ("torchscript", 1e-5, 1e-6), "mix-onnx": ("onnx", 1e-4, 1e-5)}
FACTORY = textwrap.dedent(
    """
    import torch

    class Mix(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a = torch.nn.Linear(6, 4)
        def forward(self, x, k):
            return torch.tanh(self.a(x)), k * 3

    def mix():
        return Mix()
    """
)


@pytest.fixture(scope="module")
def formats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Mix (two inputs, two outputs, a 200 ms batching window) exported `--target local` once per
    format (FORMATS), into one repository: what the local tritonserver serves for each."""
    import sys

    from model_sync.export import exporter

    src = tmp_path_factory.mktemp("mixsrc")
    (src / "mixfactory.py").write_text(FACTORY)
    sys.path.insert(0, str(src))
    repo = tmp_path_factory.mktemp("formats") / "repository"
    try:
        for name, (fmt, _, _) in FORMATS.items():
            exporter.command(exporter.ExportOptions(
                factory="mixfactory:mix", output=str(repo), name=name, shapes=((2, 6), (2, 5)),
                dtypes=("float32", "int64"), target="local", max_batch_size=16, preferred_batch_sizes=(16,),
                max_queue_delay_us=200_000, format=fmt,
            ))  # fmt: skip
        yield repo
    finally:
        sys.path.remove(str(src))


@pytest.fixture
def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> Path:
    """`export --target local` of Mix (two inputs, two outputs) with a 200 ms batching window."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "mixfactory.py").write_text(FACTORY)
    monkeypatch.chdir(src)
    monkeypatch.syspath_prepend(str(src))
    repo = tmp_path / "repository"
    r = run_cli(capsys, "export", "mixfactory:mix", "--name", "mix", "--output", str(repo),
                "--example-shape", "2,6", "--example-shape", "2,5", "--example-dtype", "float32",
                "--example-dtype", "int64", "--target", "local", "--max-batch-size", "16",
                "--preferred-batch-size", "16", "--max-queue-delay-us", "200000")  # fmt: skip
    assert r.code == 0, r.err
    return repo


def test_export_ships_this_file_and_push_uploads_it_byte_for_byte(
    exported: Path, tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket, aws_env
) -> None:
    assert (exported / "mix" / "1" / "model.py").read_bytes() == WRAPPER.read_bytes()
    cfg = model_config.read_file(str(exported / "mix" / "config.pbtxt"))
    assert "FORCE_CPU_ONLY_INPUT_TENSORS" not in cfg.parameters  # only a KIND_GPU instance takes GPU inputs
    conf = write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{s3_bucket}"})
    assert run_cli(capsys, "push", str(exported / "mix"), "--env", "staging", "--config", conf).code == 0
    assert moto_s3.get(s3_bucket, "repository/mix/1/model.py") == WRAPPER.read_bytes()


def test_export_for_a_gpu_instance_lets_gpu_inputs_through(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "mixfactory.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    r = run_cli(capsys, "export", "mixfactory:mix", "--name", "mix", "--output", str(tmp_path / "out"),
                "--example-shape", "2,6", "--example-shape", "2,5", "--example-dtype", "float32",
                "--example-dtype", "int64", "--target", "local", "--instance-kind", "KIND_GPU")  # fmt: skip
    assert r.code == 0, r.err
    cfg = model_config.read_file(str(tmp_path / "out" / "mix" / "config.pbtxt"))
    assert cfg.parameters["FORCE_CPU_ONLY_INPUT_TENSORS"].string_value == "no"


def _metric(text: str, name: str, model: str = "mix") -> float:
    return sum(float(v) for v in re.findall(rf'^{name}{{model="{model}",version="1"}} (\S+)$', text, re.M))


def _metrics(server: TritonServer) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as resp:
        return resp.read().decode()


def test_every_format_ships_its_wrapper_and_the_file_its_cloud_platform_loads(formats: Path) -> None:
    files = {name: sorted(p.name for p in (formats / name / "1").iterdir()) for name in FORMATS}
    assert files == {"mix": ["model.pt", "model.py"], "mix-onnx": ["model.onnx", "model.py"]}
    assert (formats / "mix" / "1" / "model.py").read_bytes() == WRAPPER.read_bytes()
    assert (formats / "mix-onnx" / "1" / "model.py").read_bytes() == ONNX_WRAPPER.read_bytes()


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_the_real_tritonserver_batches_requests_and_every_request_gets_its_own_rows(
    formats: Path,
    tmp_path: Path,
    triton_runtime: TritonRuntime,  # noqa: F811
) -> None:
    """Per export format, rounds of concurrent requests of 1-3 rows each, with distinct data:
    Triton's dynamic batcher puts several into one execute() (fewer executions than requests), the
    later rounds need larger staging buffers than the warm-up made, and every response equals
    eager on its own rows (within the format's tolerance). One tritonserver serves both."""
    import mixfactory  # type: ignore[import-not-found]
    import numpy as np
    import torch
    import tritonclient.http as http

    eager = mixfactory.mix().eval()
    # Served straight from export's output, with its __pycache__ written first as the agent does
    # before a version becomes visible: else the stub writes it on load, Triton's poller sees the
    # change and loads the model again (its warm-up counted twice in /metrics; CI saw 35 for 18).
    for name in FORMATS:
        precompile_python(formats / name / "1")
    server = TritonServer(formats, tmp_path / "triton.log", runtime=triton_runtime)
    rng = np.random.default_rng(7)
    try:
        server.start()
        for name in FORMATS:
            server.wait_version_ready(name, 1, timeout=120)
        client = http.InferenceServerClient(server.http_url.removeprefix("http://"), concurrency=8)

        def request(rows: int) -> tuple[np.ndarray, np.ndarray, list[http.InferInput]]:
            x = rng.standard_normal((rows, 6), dtype=np.float32)
            k = rng.integers(0, 1000, (rows, 5), dtype=np.int64)
            inputs = [http.InferInput("INPUT__0", [rows, 6], "FP32"), http.InferInput("INPUT__1", [rows, 5], "INT64")]
            inputs[0].set_data_from_numpy(x)
            inputs[1].set_data_from_numpy(k)
            return x, k, inputs

        for name, (_, rtol, atol) in FORMATS.items():
            before = _metrics(server)  # the warm-up samples count too
            requests = 0
            for sizes in ([1, 2, 3, 1], [3, 3, 2, 1, 2, 3], [2, 3, 3, 3, 1, 3, 2, 3]):  # 16 rows in the last round
                sent = [request(rows) for rows in sizes]
                pending = [client.async_infer(name, inputs) for _, _, inputs in sent]  # all in flight at once
                answers = [p.get_result() for p in pending]
                requests += len(sizes)
                for (x, k, _), a, rows in zip(sent, answers, sizes, strict=True):
                    y0, y1 = a.as_numpy("OUTPUT__0"), a.as_numpy("OUTPUT__1")
                    assert (y0.shape, y1.shape) == ((rows, 4), (rows, 5)), name
                    with torch.no_grad():
                        e0, e1 = eager(torch.from_numpy(x), torch.from_numpy(k))
                    np.testing.assert_allclose(y0, e0.numpy(), rtol=rtol, atol=atol, err_msg=name)
                    np.testing.assert_array_equal(y1, e1.numpy(), err_msg=name)
            succeeded = _metric(before, "nv_inference_request_success", name) + requests
            # Triton counts a request when it releases it, which can trail the response: wait for the
            # counter to reach what was sent, then the figures are exact.
            wait_until(lambda n=name, want=succeeded: _metric(_metrics(server), "nv_inference_request_success", n) >= want,
                       10,
                       what=f"Triton's success counter of {name} to reach {succeeded:.0f}")  # fmt: skip
            after = _metrics(server)
            assert _metric(after, "nv_inference_request_success", name) == succeeded, name
            executions = _metric(after, "nv_inference_exec_count", name) - _metric(before, "nv_inference_exec_count",
                                                                                   name)  # fmt: skip
            assert 0 < executions < requests, (name, executions, requests)  # the dynamic batcher merged requests
    finally:
        server.stop()


# ---- a TorchScript model that raises (model_sync/sandbox/torchscript_models.py) ----------------

LAB = {  # name: (kind, max_batch_size, export_local's other options)
    "lab-errors": ("errors", 0, {}),
    "lab-good": ("good", 0, {}),
    # 8 concurrent requests fill one preferred batch well within the 200 ms window
    "lab-batched": ("errors", 8, {"preferred_batch_sizes": (8,), "max_queue_delay_us": 200_000}),
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lab models, each by the real `model-sync export --target local --method script`."""
    repo = tmp_path_factory.mktemp("torchscript-lab") / "repository"
    for name, (kind, max_batch_size, options) in LAB.items():
        assert torchscript_models.export_local(repo, name, kind, max_batch_size, **options) == repo / name
    return repo


def test_export_local_writes_a_directory_push_takes_with_exports_tensor_names(
    lab: Path, tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket, aws_env
) -> None:
    """export_local's output is what the lab pushes: config.pbtxt + 1/{model.pt,model.py} (this
    wrapper), INPUT__0/OUTPUT__0 FP32 with [1, 4] unbatched or [4] batched, and push publishes it
    without the error-response warning (the wrapper raises)."""
    for name, (_, max_batch_size, _) in LAB.items():
        m = model_directory.load(str(lab / name))
        assert (m.backend, sorted(m.files), m.export_meta["method"]) == ("python", ["model.pt", "model.py"], "script")
        assert (lab / name / "1" / "model.py").read_bytes() == WRAPPER.read_bytes()
        cfg = model_config.read_file(str(lab / name / "config.pbtxt"))
        dims = [4] if max_batch_size else [1, 4]
        assert [(t.name, model_config.pb2.DataType.Name(t.data_type), list(t.dims)) for t in cfg.input] == [
            ("INPUT__0", "TYPE_FP32", dims)
        ]
        assert [(t.name, list(t.dims)) for t in cfg.output] == [("OUTPUT__0", dims)]
        assert cfg.max_batch_size == max_batch_size
        specs, _ = smoke.tensor_specs(cfg)  # the agent's and verify's smoke inference (ones) never fails
        assert not torchscript_models.fails(smoke.smoke_inputs(specs)["INPUT__0"])
    conf = write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{s3_bucket}"})
    r = run_cli(capsys, "push", str(lab / "lab-errors"), "--env", "staging", "--config", conf)
    assert r.code == 0, r.err
    assert "error responses" not in r.err
    assert moto_s3.get(s3_bucket, "repository/lab-errors/1/model.py") == WRAPPER.read_bytes()


def test_the_errors_kind_fails_one_input_in_twenty_by_round_and_python_modulo() -> None:
    failing = [seq for seq in range(-20, 100) if torchscript_models.fails([[seq, 1, 2, 3]])]
    assert failing == [-7, 13, 33, 53, 73, 93]
    assert torchscript_models.fails([[0, 0, 0, 0], [12.6, 0, 0, 0]])  # any row of a batch
    assert not torchscript_models.fails([12.4, 0, 0, 0])
    with pytest.raises(ValueError, match=r"kind: 'flaky'; allowed: good, errors"):
        torchscript_models.export_local("/nonexistent", "m", "flaky")


def _counter(server: TritonServer, name: str, model: str, **labels: str) -> float:
    """Counter `name` of `model` version 1, summed over the labels not given."""
    return sum(
        s.value
        for family in text_string_to_metric_families(_metrics(server))
        for s in family.samples
        if s.name in (name, f"{name}_total")  # the parser names a counter's sample <name>_total
        and s.labels.get("model") == model
        and s.labels.get("version") == "1"
        and all(s.labels.get(k) == v for k, v in labels.items())
    )


@pytest.fixture(scope="module")
def lab_triton(lab: Path, triton_runtime: TritonRuntime) -> Iterator[TritonServer]:  # noqa: F811
    for name in LAB:
        precompile_python(lab / name / "1")  # as the agent does: no reload when the stub would write it
    server = TritonServer(lab, lab.parent / "triton.log", runtime=triton_runtime)
    try:
        server.start()
        for name in LAB:
            server.wait_version_ready(name, 1, timeout=90)
        yield server
    finally:
        if server.process is not None:
            server.process.kill()  # its graceful shutdown is not under test here


def _infer(client, name: str, rows: list[list[float]]):  # type: ignore[no-untyped-def]
    import numpy as np
    import tritonclient.http as http

    tensor = http.InferInput("INPUT__0", [len(rows), 4], "FP32")
    tensor.set_data_from_numpy(np.array(rows, dtype=np.float32))
    return client.async_infer(name, [tensor])


def _settle(server: TritonServer, name: str, before: tuple[float, float], sent: int) -> tuple[float, float]:
    """(successes, failures) of `name` since `before`, once Triton counted every request sent
    (it counts a request when it releases it, which can trail the response)."""

    def now() -> tuple[float, float]:
        return (
            _counter(server, "nv_inference_request_success", name) - before[0],
            _counter(server, "nv_inference_request_failure", name) - before[1],
        )

    wait_until(lambda: sum(now()) >= sent, 10, what=f"Triton's counters of {name} to reach {sent}")
    return now()


def _before(server: TritonServer, name: str) -> tuple[float, float]:
    return (
        _counter(server, "nv_inference_request_success", name),
        _counter(server, "nv_inference_request_failure", name),
    )


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_model_that_raises_fails_exactly_its_requests_and_triton_counts_them_as_backend_failures(
    lab_triton: TritonServer,
) -> None:
    """What the gray release relies on (it reads nv_inference_request_failure): a TorchScript model
    raising on 1 input in 20 fails exactly those requests with one line naming the model, its
    version and the model's own error, Triton counts exactly them as BACKEND failures and the rest
    as successes, and a good input still succeeds afterwards. The same inputs never fail `good`."""
    import numpy as np
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException

    client = http.InferenceServerClient(lab_triton.http_url.removeprefix("http://"))
    seqs = list(range(40))  # one request at a time: each execute() holds one request
    for name in ("lab-errors", "lab-good"):
        before = _before(lab_triton, name)
        failed: dict[int, str] = {}
        for seq in seqs:
            rows = [[seq, 1, 2, 3]]
            try:
                out = _infer(client, name, rows).get_result().as_numpy("OUTPUT__0")
                np.testing.assert_array_equal(out, np.array(rows, dtype=np.float32) * 2)
            except InferenceServerException as e:
                failed[seq] = str(e)
        expected = [13, 33] if name == "lab-errors" else []
        assert sorted(failed) == expected, failed
        ok = _infer(client, name, [[1.5, -2, 0, 7]]).get_result().as_numpy("OUTPUT__0")  # after the failures
        assert ok.tolist() == [[3.0, -4.0, 0.0, 14.0]]
        successes, failures = _settle(lab_triton, name, before, len(seqs) + 1)
        assert (successes, failures) == (len(seqs) + 1 - len(expected), len(expected)), name
        assert _counter(lab_triton, "nv_inference_request_failure", name, reason="BACKEND") - before[1] == len(expected)
        for seq, message in failed.items():
            assert f"model 'lab-errors' version 1 failed: builtins.ValueError: torchscript lab model 'errors': " \
                f"an input rounding to {seq} rejected" in message, message  # fmt: skip
            assert "Traceback of TorchScript" not in message, message


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_raise_in_a_dynamic_batch_fails_the_batch_and_triton_counts_what_clients_saw(
    lab_triton: TritonServer,
) -> None:
    """With dynamic batching one failing input fails every request of its execute() call (one
    forward over the batch): clients see those failures and Triton counts the same number, so the
    gray release's error ratio is the clients' own. A round without a failing input all succeeds."""
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException

    name = "lab-batched"
    client = http.InferenceServerClient(lab_triton.http_url.removeprefix("http://"), concurrency=8)
    before = _before(lab_triton, name)
    exec_before = _counter(lab_triton, "nv_inference_exec_count", name)
    errors: dict[int, list[str]] = {}
    sent = 0
    for start in (0, 8, 16):  # seq 13 is in the second round only
        pending = [_infer(client, name, [[seq, 1, 2, 3]]) for seq in range(start, start + 8)]  # all in flight
        errors[start] = []
        for p in pending:
            try:
                p.get_result()
            except InferenceServerException as e:
                errors[start].append(str(e))
        sent += len(pending)
    assert (errors[0], errors[16]) == ([], [])
    assert all("model 'lab-batched' version 1 failed: builtins.ValueError: " in e for e in errors[8]), errors[8]
    client_failed = len(errors[8])
    executions = _counter(lab_triton, "nv_inference_exec_count", name) - exec_before
    assert executions < sent, executions  # the batcher merged requests
    assert client_failed > 1  # seq 13's batch-mates failed with it
    successes, failures = _settle(lab_triton, name, before, sent)
    assert (successes, failures) == (sent - client_failed, client_failed)
