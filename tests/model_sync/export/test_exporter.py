"""`model-sync export`: TorchScript round trip vs eager, generated config.pbtxt, failure modes of every
format (the round trips of .pt2 and ONNX on the real tritonserver: test_torch_python_backend.py).
One module with a few factories; torch is imported once per test process."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from model_sync.sandbox.runtime import TritonRuntime, TritonServer
from model_sync.triton_model import model_config
from tests.model_sync.helpers import run_cli
from tests.support.triton import triton_runtime  # noqa: F401 (fixture)

FACTORIES = textwrap.dedent(
    """
    import torch

    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a = torch.nn.Linear(4, 3)
        def forward(self, x, y):
            return torch.softmax(self.a(x), -1), y * 2

    class Baked(torch.nn.Module):  # traces the batch size into a reshape
        def forward(self, x):
            return torch.ones(int(x.shape[0]), 1) * x.sum(-1, keepdim=True)

    class Noisy(torch.nn.Module):  # different output every call: TorchScript != eager
        def forward(self, x):
            return x + torch.rand_like(x)

    def two():
        return Two()

    def baked():
        return Baked()

    def noisy():
        return Noisy()

    class Branchy(torch.nn.Module):  # a Python branch on a tensor: a real TracerWarning
        def forward(self, x):
            return x * 2 if x.sum() > -1e30 else x

    def branchy():
        return Branchy()

    class Eig(torch.nn.Module):  # eigenvalues: an operator ONNX has no function for
        def forward(self, x):
            return torch.linalg.eigvalsh(x @ x.transpose(-1, -2))

    def eig():
        return Eig()

    def not_a_module():
        return 42
    """
)


def warmups(cfg) -> list[tuple[str, int, list[tuple[str, str, list[int], str | None]]]]:
    """model_warmup as parsed back through the protobuf: (name, batch_size, [(input, dtype, dims, data)])."""
    return [
        (
            w.name,
            w.batch_size,
            [
                (k, model_config.pb2.DataType.Name(v.data_type), list(v.dims), v.WhichOneof("input_data_type"))
                for k, v in sorted(w.inputs.items())
            ],
        )
        for w in cfg.model_warmup
    ]


@pytest.fixture
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pkg = tmp_path / "src"
    pkg.mkdir()
    (pkg / "exportfactories.py").write_text(FACTORIES)
    monkeypatch.chdir(pkg)
    monkeypatch.syspath_prepend(str(pkg))
    return tmp_path / "out"


def test_export_local_round_trip(factories, capsys) -> None:
    import torch

    r = run_cli(
        capsys, "export", "exportfactories:two", "--name", "two", "--output", str(factories),
        "--example-shape", "4,4", "--example-shape", "4,5", "--example-dtype", "float32", "--example-dtype", "int64",
        "--target", "local", "--preferred-batch-size", "4", "--max-queue-delay-us", "500",
    )  # fmt: skip
    assert r.code == 0, r.err
    assert r.err == ""  # torch's TorchScript deprecation notice is not repeated on every export
    d = factories / "two"
    assert sorted(p.name for p in (d / "1").iterdir()) == ["model.pt", "model.py"]
    cfg = model_config.read_file(str(d / "config.pbtxt"))
    assert (cfg.backend, cfg.platform, cfg.max_batch_size) == ("python", "", 8)
    assert [(i.name, model_config.pb2.DataType.Name(i.data_type), list(i.dims)) for i in cfg.input] == [
        ("INPUT__0", "TYPE_FP32", [4]),
        ("INPUT__1", "TYPE_INT64", [5]),
    ]
    assert [(o.name, model_config.pb2.DataType.Name(o.data_type), list(o.dims)) for o in cfg.output] == [
        ("OUTPUT__0", "TYPE_FP32", [3]),
        ("OUTPUT__1", "TYPE_INT64", [5]),
    ]
    assert list(cfg.dynamic_batching.preferred_batch_size) == [4]
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 500
    assert [(model_config.pb2.ModelInstanceGroup.Kind.Name(g.kind), g.count) for g in cfg.instance_group] == [
        ("KIND_CPU", 1)
    ]
    # Warm-up on by default: batch 1 and the largest preferred batch (4), every input zero-filled.
    inputs = [("INPUT__0", "TYPE_FP32", [4], "zero_data"), ("INPUT__1", "TYPE_INT64", [5], "zero_data")]
    assert warmups(cfg) == [("batch_1", 1, inputs), ("batch_4", 4, inputs)]
    meta = json.loads((d / "export.json").read_text())
    assert (meta["method"], meta["torch_version"], meta["torchscript_format_version"]) == (
        "trace",
        torch.__version__,
        3,
    )
    # The saved TorchScript really matches eager on fresh inputs.
    import exportfactories  # type: ignore[import-not-found]

    x, y = torch.randn(3, 4), torch.randint(0, 9, (3, 5))
    loaded = torch.jit.load(str(d / "1" / "model.pt"))
    for a, b in zip(loaded(x, y), exportfactories.two()(x, y), strict=True):
        torch.testing.assert_close(a, b)
    assert "triton_python_backend_utils" in (d / "1" / "model.py").read_text()
    # The directory is a valid push input (model_sync.triton_model.model_directory validation).
    from model_sync.triton_model import model_directory

    assert sorted(model_directory.load(str(d)).files) == ["model.pt", "model.py"]


def test_a_tracer_warning_is_reported_on_one_line(factories, capsys) -> None:
    r = run_cli(
        capsys,
        "export",
        "exportfactories:branchy",
        "--name",
        "branchy",
        "--output",
        str(factories),
        "--example-shape",
        "4,4",
    )
    assert r.code == 0, r.err
    assert re.match(
        r"model-sync: warning: torch.jit.trace: \d warning\(s\) while tracing, "
        r"first: Converting a tensor to a Python boolean",
        r.err,
    ), r.err
    assert len(r.err.strip().splitlines()) == 1


def test_export_cloud_script_without_batching(factories, capsys) -> None:
    r = run_cli(capsys, "export", "exportfactories:two", "--name", "two", "--output", str(factories),
                "--example-shape", "4", "--example-shape", "5", "--example-dtype", "float32",
                "--example-dtype", "int64", "--method", "script", "--max-batch-size", "0",
                "--instance-count", "2")  # fmt: skip
    assert r.code == 0, r.err
    cfg = model_config.read_file(str(factories / "two" / "config.pbtxt"))
    assert (cfg.platform, cfg.max_batch_size, cfg.HasField("dynamic_batching")) == ("pytorch_libtorch", 0, False)
    assert list(cfg.input[0].dims) == [4]
    assert [(model_config.pb2.ModelInstanceGroup.Kind.Name(g.kind), g.count) for g in cfg.instance_group] == [
        ("KIND_GPU", 2)
    ]
    # No batching: one warm-up sample at batch 1 with the declared (full) shapes.
    assert warmups(cfg) == [
        ("batch_1", 1, [("INPUT__0", "TYPE_FP32", [4], "zero_data"), ("INPUT__1", "TYPE_INT64", [5], "zero_data")])
    ]
    assert sorted(p.name for p in (factories / "two" / "1").iterdir()) == ["model.pt"]


def test_no_warmup_writes_no_model_warmup(factories, capsys) -> None:
    r = run_cli(
        capsys,
        "export",
        "exportfactories:two",
        "--name",
        "two",
        "--output",
        str(factories),
        "--example-shape",
        "4,4",
        "--example-shape",
        "4,5",
        "--no-warmup",
    )
    assert r.code == 0, r.err
    cfg = model_config.read_file(str(factories / "two" / "config.pbtxt"))
    # --target cloud's default profile is gpu-throughput (max batch 32: model_sync/export/profiles.py)
    assert (len(cfg.model_warmup), cfg.max_batch_size, list(cfg.input[0].dims)) == (0, 32, [4])
    assert "model_warmup" not in (factories / "two" / "config.pbtxt").read_text()


def test_warmup_without_preferred_sizes_uses_max_batch_size(factories, capsys) -> None:
    r = run_cli(capsys, "export", "exportfactories:two", "--name", "two", "--output", str(factories),
                "--example-shape", "2,4", "--example-shape", "2,5", "--max-batch-size", "16")  # fmt: skip
    assert r.code == 0, r.err
    cfg = model_config.read_file(str(factories / "two" / "config.pbtxt"))
    assert [(w.name, w.batch_size) for w in cfg.model_warmup] == [("batch_1", 1), ("batch_16", 16)]


@pytest.mark.parametrize(
    ("args", "code", "match"),
    [
        (
            ["exportfactories:baked", "--example-shape", "4,2"],
            6,
            r"export check \(example 2, batch 3\): the TorchScript model failed where eager did not",
        ),
        (
            ["exportfactories:noisy", "--example-shape", "4,2"],
            6,
            r"export check \(example 1\): OUTPUT__0 TorchScript differs from eager",
        ),
        (
            ["exportfactories:two", "--example-shape", "4,7", "--example-shape", "4,5"],
            2,
            r"example inputs: \(4, 7\) float32; \(4, 5\) float32 rejected by the eager model",
        ),
        (
            ["exportfactories:not_a_module", "--example-shape", "4,2"],
            2,
            r"factory: 'exportfactories:not_a_module' returned int",
        ),
        (["exportfactories:missing", "--example-shape", "4,2"], 2, r"has no attribute 'missing'"),
        (["nosuchmodule_x:f", "--example-shape", "4,2"], 2, r"cannot be imported"),
        (
            ["exportfactories:two", "--example-shape", "16,4", "--max-batch-size", "8"],
            2,
            r"batch 16 > --max-batch-size 8",
        ),
        (["exportfactories:two", "--example-shape", "4,0"], 2, r"--example-shape: '4,0'"),
        (["exportfactories:two", "--example-shape", "4,x"], 2, r"'4,x' is not a shape"),
        (
            ["exportfactories:two", "--example-shape", "4,4", "--example-dtype", "complex64"],
            2,
            r"--example-dtype: 'complex64'",
        ),
        (
            ["exportfactories:two", "--example-shape", "4,4", "--max-batch-size", "8", "--preferred-batch-size", "9"],
            2,
            r"--preferred-batch-size: 9; allowed: 1\.\.max_batch_size",
        ),
        (
            ["exportfactories", "--example-shape", "4,4"],
            2,
            r"factory: 'exportfactories'; allowed: module\.path:callable",
        ),
        (
            ["exportfactories:two", "--example-shape", "4,4", "--example-shape", "4,2", "--format", "pt2"],
            2,
            r"--format pt2: KIND_GPU instances need a package compiled for CUDA, and torch sees no GPU here",
        ),  # --target cloud: KIND_GPU by default; this machine has no GPU
        (
            [
                "exportfactories:two",
                "--example-shape",
                "4,4",
                "--example-shape",
                "4,2",
                "--format",
                "pt2",
                "--instance-kind",
                "KIND_AUTO",
            ],
            2,
            r"--instance-kind: KIND_AUTO with --format pt2; allowed: KIND_GPU or KIND_CPU",
        ),
        (
            ["exportfactories:two", "--example-shape", "4,4", "--format", "onnx", "--method", "script"],
            2,
            r"--method: 'script' with --format onnx; allowed: --method only with --format torchscript",
        ),
        (
            ["exportfactories:two", "--example-shape", "4,4", "--onnx-opset", "18"],
            2,
            r"--onnx-opset: 18 with --format torchscript; allowed: 7\.\.30, with --format onnx only",
        ),
        (
            ["exportfactories:noisy", "--example-shape", "4,4", "--format", "onnx", "--target", "local"],
            6,
            r"export check \(example 1\): OUTPUT__0 ONNX Runtime differs from eager",
        ),
    ],
)
def test_export_failures_write_nothing(factories, capsys, args, code, match) -> None:
    r = run_cli(capsys, "export", args[0], "--name", "m", "--output", str(factories), *args[1:])
    assert r.code == code, r.err
    assert len(r.err.strip().splitlines()) == 1
    assert __import__("re").search(match, r.err), r.err
    assert not factories.exists() or list(factories.iterdir()) == []


def test_onnx_opset_is_the_one_asked_for_and_recorded(factories, capsys) -> None:
    """--onnx-opset exports that opset (an older image's ONNX Runtime runs it); export.json records
    the model's own opset and IR version, what push compares with the target's ONNX Runtime."""
    import onnx

    r = run_cli(capsys, "export", "exportfactories:two", "--name", "m", "--output", str(factories), "--example-shape",
                "4,4", "--example-shape", "4,2", "--format", "onnx", "--onnx-opset", "18", "--target", "local")  # fmt: skip
    assert r.code == 0, r.err
    assert "opset 18, IR " in r.out
    meta = json.loads((factories / "m" / "export.json").read_text())
    proto = onnx.load(str(factories / "m" / "1" / "model.onnx"))
    assert (meta["format"], meta["method"], meta["onnx_opset"], meta["onnx_ir_version"]) == (
        "onnx", "export", 18, proto.ir_version)  # fmt: skip
    assert [o.version for o in proto.opset_import if o.domain == ""] == [18]
    assert [i.name for i in proto.graph.input] == ["INPUT__0", "INPUT__1"]  # what config.pbtxt declares
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # the batch dimension is dynamic


def test_export_refuses_to_overwrite(factories, capsys) -> None:
    (factories / "m").mkdir(parents=True)
    r = run_cli(
        capsys,
        "export",
        "exportfactories:two",
        "--name",
        "m",
        "--output",
        str(factories),
        "--example-shape",
        "4,4",
        "--example-shape",
        "4,5",
    )
    assert (r.code, "exists; allowed: a new directory, or --overwrite" in r.err) == (4, True)


class _VerboseTriton(TritonServer):
    """The local tritonserver as the agent tests run it, plus --log-verbose=1: Triton logs each
    warm-up sample it runs only at verbose level 1 ("... is running warmup sample 'NAME'")."""

    def argv(self) -> list[str]:
        return [*super().argv(), "--log-verbose=1"]


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_the_real_tritonserver_runs_the_warmup_before_ready(
    factories,
    capsys,
    triton_runtime: TritonRuntime,  # noqa: F811
) -> None:
    """`export --target local`, then the real tritonserver: it runs both warm-up samples through
    the python-backend wrapper on the model's instance before the model is READY, and serves."""
    import numpy as np

    repo = factories / "repository"
    r = run_cli(capsys, "export", "exportfactories:two", "--name", "warm", "--output", str(repo),
                "--example-shape", "4,4", "--example-shape", "4,5", "--example-dtype", "float32",
                "--example-dtype", "int64", "--target", "local", "--preferred-batch-size", "4")  # fmt: skip
    assert r.code == 0, r.err
    server = _VerboseTriton(repo, factories / "triton.log", runtime=triton_runtime)
    try:
        server.start()
        server.wait_version_ready("warm", 1, timeout=60)
        log = server.log_path.read_text()
        ran = re.findall(r"model '(\w+)' instance \S+ is running warmup sample '(\w+)'", log)
        assert ran == [("warm", "batch_1"), ("warm", "batch_4")], log[-3000:]
        assert "failed to run warmup sample" not in log
        # Before READY: both samples are logged before "successfully loaded 'warm'".
        assert log.index("is running warmup sample 'batch_4'") < log.index("successfully loaded 'warm'")
        import tritonclient.http as http

        inputs = [http.InferInput("INPUT__0", [2, 4], "FP32"), http.InferInput("INPUT__1", [2, 5], "INT64")]
        y = np.arange(10, dtype=np.int64).reshape(2, 5)
        inputs[0].set_data_from_numpy(np.ones((2, 4), np.float32))
        inputs[1].set_data_from_numpy(y)
        out = http.InferenceServerClient(server.http_url.removeprefix("http://")).infer("warm", inputs)
        np.testing.assert_array_equal(out.as_numpy("OUTPUT__1"), y * 2)
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("factory", "shape", "fmt", "line"),
    [
        (
            "branchy",
            "4,3",
            "pt2",
            r"torch\.export: data-dependent control flow in forward at .*exportfactories\.py:\d+ \(`return x \* 2 if "
            r"x\.sum\(\) > -1e30 else x`\): --format pt2 captures one graph and cannot branch on a tensor's value; "
            r"allowed: torch\.cond for the branch, or --format torchscript; full log: (\S+)",
        ),
        (
            "branchy",
            "4,3",
            "onnx",
            r"torch\.onnx\.export: data-dependent control flow in forward at .*exportfactories\.py:\d+ \(`return x "
            r"\* 2 if x\.sum\(\) > -1e30 else x`\): --format onnx captures one graph and cannot branch on a "
            r"tensor's value; allowed: torch\.cond for the branch, or --format torchscript; full log: (\S+)",
        ),
        (
            "eig",
            "4,3,3",
            "onnx",
            r"torch\.onnx\.export: operator aten\._linalg_eigh\.default has no ONNX function \(--format onnx\); "
            r"allowed: --format torchscript or pt2, operators ONNX has, or a custom op with an ONNX translation; full "
            r"log: (\S+)",
        ),
    ],
)
def test_an_exporter_refusal_is_one_line_naming_the_construct_with_the_full_log_in_a_file(
    factories, capfd, factory, shape, fmt, line
) -> None:
    """A model torch.export or the ONNX exporter refuses (a branch on a tensor's value, an operator
    without an ONNX function) exits 6 with ONE line on stderr naming the construct or operator, the
    format and what is allowed, and nothing else on stdout or stderr (before: 14 to 26 lines of
    torch's warnings, or one line cut mid-sentence with ANSI colour codes); the exporters' whole
    output goes to the log file the line names."""
    from model_sync.cli import main

    capfd.readouterr()
    code = main(["export", f"exportfactories:{factory}", "--name", "m", "--output", str(factories),
                 "--example-shape", shape, "--format", fmt, "--target", "local"])  # fmt: skip
    r = capfd.readouterr()  # everything written: print, logging handlers, warnings and torch's C++ alike
    assert code == 6, r.err
    assert len(r.err.splitlines()) == 1, r.err
    assert "\x1b" not in r.err
    found = re.fullmatch("model-sync: " + line + "\n", r.err)
    assert found, r.err
    assert r.out == ""
    log = Path(found.group(1))
    assert log == factories / "m.export.log"
    assert log.stat().st_size > 0
    assert [p.name for p in factories.iterdir()] == ["m.export.log"]
