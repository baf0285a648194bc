"""model_sync.python_backend_model, the python-backend wrapper `export --target local` ships as
<model>/<N>/model.py: pushed to a real moto_server byte for byte, then loaded from what the bucket
holds and run as Triton's python backend runs it (initialize, then execute on a dynamic batch of
two requests, split back per request)."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from tests.model_sync.helpers import python_model, run_cli, write_config
from tests.support.s3_servers import S3Server

WRAPPER = Path(__file__).resolve().parents[2] / "model_sync" / "python_backend_model.py"
CONFIG = (
    'name: "double"\nbackend: "python"\nmax_batch_size: 4\n'
    'input [{ name: "INPUT__0" data_type: TYPE_FP32 dims: [3] }]\n'
    'output [{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [3] }]\n'
)


class _Tensor:
    def __init__(self, name: str, array) -> None:
        self.name, self.array = name, array

    def as_numpy(self):
        return self.array


def _pb_utils():
    """What tritonserver's python backend stub provides the wrapper (triton_python_backend_utils)."""
    import numpy as np

    class Response:
        def __init__(self, output_tensors=None, error=None) -> None:
            self.output_tensors, self.error = output_tensors or [], error

    return types.SimpleNamespace(
        triton_string_to_numpy=lambda name: {"TYPE_FP32": np.float32}[name],
        get_input_tensor_by_name=lambda request, name: _Tensor(name, request[name]),
        Tensor=_Tensor, InferenceResponse=Response, TritonError=str,
    )  # fmt: skip


def test_the_pushed_wrapper_serves_a_dynamic_batch(
    tmp_path, capsys, moto_s3: S3Server, s3_bucket, aws_env, monkeypatch
) -> None:
    torch = pytest.importorskip("torch")
    import numpy as np

    from model_sync import python_backend_model

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    scripted = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(Double()), str(scripted))
    model = python_model(
        tmp_path / "src", "double", {"model.pt": scripted.read_bytes(), "model.py": WRAPPER.read_bytes()}, config=CONFIG
    )
    cfg = write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{s3_bucket}"})
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    served = tmp_path / "served" / "double"
    (served / "1").mkdir(parents=True)
    for rel in ("model.pt", "model.py"):
        (served / "1" / rel).write_bytes(moto_s3.get(s3_bucket, f"repository/double/1/{rel}"))
    assert (served / "1" / "model.py").read_bytes() == Path(python_backend_model.__file__).read_bytes()

    monkeypatch.setattr(python_backend_model, "pb_utils", _pb_utils())
    wrapper = python_backend_model.TritonPythonModel()
    model_config = {
        "max_batch_size": 4,
        "input": [{"name": "INPUT__0"}],
        "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32"}],
    }
    wrapper.initialize(
        {
            "model_config": json.dumps(model_config),
            "model_repository": str(served),
            "model_version": "1",
            "model_instance_kind": "CPU",
        }
    )
    one, two = np.ones((1, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    responses = wrapper.execute([{"INPUT__0": one}, {"INPUT__0": two}])
    assert [r.error for r in responses] == [None, None]
    assert [r.output_tensors[0].name for r in responses] == ["OUTPUT__0", "OUTPUT__0"]
    np.testing.assert_array_equal(responses[0].output_tensors[0].array, one * 2)
    np.testing.assert_array_equal(responses[1].output_tensors[0].array, two * 2)
