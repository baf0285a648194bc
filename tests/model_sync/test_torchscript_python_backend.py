"""model_sync.torchscript_python_backend, the python-backend model `export --target local` ships as
<model>/<N>/model.py: pushed to a real moto_server byte for byte, and served by the real
tritonserver, which batches concurrent requests into one execute() (the staging buffers) and
splits the outputs back per request."""

from __future__ import annotations

import re
import textwrap
import urllib.request
from pathlib import Path

import pytest

from model_sync import model_config
from model_sync.agent.local_repository import precompile_python
from model_sync.local.procs import wait_until
from model_sync.local.runtime import TritonRuntime, TritonServer
from tests.model_sync.helpers import run_cli, write_config
from tests.support.s3_servers import S3Server
from tests.support.triton import triton_runtime  # noqa: F401 (fixture)

WRAPPER = Path(__file__).resolve().parents[2] / "model_sync" / "torchscript_python_backend.py"
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


def _metric(text: str, name: str) -> float:
    return sum(float(v) for v in re.findall(rf'^{name}{{model="mix",version="1"}} (\S+)$', text, re.M))


def _metrics(server: TritonServer) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as resp:
        return resp.read().decode()


@pytest.mark.e2e
@pytest.mark.timeout(150)
def test_the_real_tritonserver_batches_requests_and_every_request_gets_its_own_rows(
    exported: Path,
    tmp_path: Path,
    triton_runtime: TritonRuntime,  # noqa: F811
) -> None:
    """Rounds of concurrent requests of 1-3 rows each, with distinct data: Triton's dynamic batcher
    puts several into one execute() (fewer executions than requests), the later rounds need larger
    staging buffers than the warm-up made, and every response equals eager on its own rows."""
    import mixfactory  # type: ignore[import-not-found]
    import numpy as np
    import torch
    import tritonclient.http as http

    eager = mixfactory.mix().eval()
    # Served straight from export's output, with its __pycache__ written first as the agent does
    # before a version becomes visible: else the stub writes it on load, Triton's poller sees the
    # change and loads the model again (its warm-up counted twice in /metrics; CI saw 35 for 18).
    precompile_python(exported / "mix" / "1")
    server = TritonServer(exported, tmp_path / "triton.log", runtime=triton_runtime)
    rng = np.random.default_rng(7)
    try:
        server.start()
        server.wait_version_ready("mix", 1, timeout=90)
        client = http.InferenceServerClient(server.http_url.removeprefix("http://"), concurrency=8)

        def request(rows: int) -> tuple[np.ndarray, np.ndarray, list[http.InferInput]]:
            x = rng.standard_normal((rows, 6), dtype=np.float32)
            k = rng.integers(0, 1000, (rows, 5), dtype=np.int64)
            inputs = [http.InferInput("INPUT__0", [rows, 6], "FP32"), http.InferInput("INPUT__1", [rows, 5], "INT64")]
            inputs[0].set_data_from_numpy(x)
            inputs[1].set_data_from_numpy(k)
            return x, k, inputs

        before = _metrics(server)  # the warm-up samples count too
        requests = 0
        for sizes in ([1, 2, 3, 1], [3, 3, 2, 1, 2, 3], [2, 3, 3, 3, 1, 3, 2, 3]):  # 16 rows in the last round
            sent = [request(rows) for rows in sizes]
            pending = [client.async_infer("mix", inputs) for _, _, inputs in sent]  # all in flight at once
            answers = [p.get_result() for p in pending]
            results = [
                (x, k, a.as_numpy("OUTPUT__0"), a.as_numpy("OUTPUT__1"))
                for (x, k, _), a in zip(sent, answers, strict=True)
            ]
            requests += len(sizes)
            for (x, k, y0, y1), rows in zip(results, sizes, strict=True):
                assert y0.shape == (rows, 4)
                assert y1.shape == (rows, 5)
                with torch.no_grad():
                    e0, e1 = eager(torch.from_numpy(x), torch.from_numpy(k))
                np.testing.assert_allclose(y0, e0.numpy(), rtol=1e-5, atol=1e-6)
                np.testing.assert_array_equal(y1, e1.numpy())
        succeeded = _metric(before, "nv_inference_request_success") + requests
        # Triton counts a request when it releases it, which can trail the response: wait for the
        # counter to reach what was sent, then the figures are exact.
        wait_until(lambda: _metric(_metrics(server), "nv_inference_request_success") >= succeeded, 10,
                   what=f"Triton's success counter to reach {succeeded:.0f}")  # fmt: skip
        after = _metrics(server)
        assert _metric(after, "nv_inference_request_success") == succeeded
        executions = _metric(after, "nv_inference_exec_count") - _metric(before, "nv_inference_exec_count")
        assert 0 < executions < requests, (executions, requests)  # the dynamic batcher merged requests
    finally:
        server.stop()
