"""The local environment: the pinned tritonserver fetch, and `python -m model_sync.sandbox demo`
end to end (the local moto S3 server, three real tritonservers with their agents, the model_sync CLI)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import yaml

from model_sync.sandbox import runtime

ROOT = Path(__file__).resolve().parents[3]


def test_fetch_wheel_rejects_a_wheel_whose_sha256_differs_from_the_pin(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / runtime.PYTRITON_WHEEL).write_bytes(b"not the wheel")
    with pytest.raises(
        runtime.LocalRuntimeError, match=r"sha256 [0-9a-f]{64}; allowed: 21f063ff.*the pinned nvidia-pytriton==0\.7\.0"
    ):
        runtime.fetch_wheel(tmp_path)
    with pytest.raises(runtime.LocalRuntimeError):
        runtime.ensure_tritonserver(tmp_path)  # never extracted
    assert not any(p.name.startswith("tritonserver-") for p in tmp_path.iterdir())


def test_extracted_runtime_has_the_binary_and_the_python_stub() -> None:
    rt = runtime.ensure_tritonserver()
    assert os.access(rt.binary, os.X_OK)
    stub = rt.backends / "python" / "triton_python_backend_stub"
    assert os.access(stub, os.X_OK)
    assert (rt.root / ".complete").read_text().strip() == runtime.PYTRITON_SHA256
    env = runtime.stub_environment({"PATH": "/usr/bin", "PYTHONPATH": "/x"})
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert "PYTHONPATH" not in env


def test_triton_argv_binds_loopback_and_polls_the_local_directory(tmp_path: Path) -> None:
    server = runtime.TritonServer(tmp_path / "models", tmp_path / "log", runtime=runtime.TritonRuntime(tmp_path))
    argv = server.argv()
    assert f"--model-repository={tmp_path / 'models'}" in argv
    assert {
        "--model-control-mode=poll",
        "--repository-poll-secs=1",
        "--disable-auto-complete-config",
        "--http-address=127.0.0.1",
        "--grpc-address=127.0.0.1",
        f"--exit-timeout-secs={runtime.LOCAL_EXIT_TIMEOUT_S}",  # a stop drains seconds, not the cloud's grace period
    } <= set(argv)
    assert not any(a.startswith("--model-repository=s3://") for a in argv)


@pytest.mark.e2e
@pytest.mark.timeout(360)
def test_demo_exports_pushes_verifies_promotes_and_serves_eager_equal_outputs(tmp_path: Path) -> None:
    """`make demo` with a version per export format: TorchScript pinned at once, then an AOTInductor
    .pt2, exported, pushed to staging, hot-reloaded there, verified, and promoted to prod through a
    gray release under traffic (hot-reloaded on the canary replica, then on both). ONNX, the third
    format, is served by the real tritonserver in tests/model_sync/export/test_torch_python_backend.py:
    a third version here cost make test most of a minute of its 2 cores."""
    state = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "model_sync.sandbox",
            "demo",
            "--dir",
            str(state),
            "--keep-running",
            "--format",
            "torchscript,pt2",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=420,
        check=False,
    )
    out = proc.stdout + proc.stderr
    pids = json.loads((state / "pids.json").read_text()) if (state / "pids.json").exists() else {}
    try:
        assert proc.returncode == 0, out[-3000:]
        assert out.count("smoke inference http+grpc ok") == 3  # staging v1, v2, prod v2
        # push and promote print their JSON documents (--output json), one line each, after --wait.
        for version in (1, 2):
            assert (
                f'"models": [{{"action": "pushed", "error": null, "model": "demo-mlp", "version": {version}}}]' in out
            )
        assert out.count('"served": {"local/prod-0": "READY", "local/prod-1": "READY"}') == 2
        # prod's first version is pinned at once, its successor through a gray release under traffic.
        assert '"canary": null, "dry_run": false, "from": {"env": "staging", "version": 1}' in out
        assert out.count('"outcome": "promoted", "reason": "every step passed (50 %)"') == 1
        assert '"to": {"env": "prod", "version": 2}' in out
        assert re.search(
            r"traffic during the gray release: \d+ requests \(version 1: \d+, version 2: \d+\), 0 failed", out
        ), out[-3000:]
        assert re.search(
            r"^    prod  demo-mlp  v2 vs v1  promoted  50 %  1/2       50 %       [0-9.]+ %  +pass", out, re.M
        ), out[-3000:]
        # Nothing to act on is repeated. The local S3 enforces If-None-Match/If-Match:
        # no push or promote warns that it ignores them.
        assert "warning:" not in out, [line for line in out.splitlines() if "warning:" in line]
        assert "ignores" not in out
        assert out.count("it enforces If-None-Match/If-Match") == 1
        m = re.search(r"prod inference demo-mlp v2: .* max \|diff\| ([0-9.e+-]+)\)", out)
        assert m is not None, out[-2000:]
        assert float(m.group(1)) <= 1e-4  # the .pt2's tolerance (export --format pt2)
        assert {"moto-s3", "agent-staging-0", "agent-prod-0", "agent-prod-1"} <= set(pids)
        assert len(pids) == 7
        for pid in pids.values():
            os.kill(pid, 0)  # all still running with --keep-running, the demo process gone
        prod = yaml.safe_load((state / "model-sync.yaml").read_text())["environments"]["prod"]
        assert "unenforcedConditionalWrites" not in prod
        client = boto3.client("s3", endpoint_url=prod["endpointUrl"], region_name=prod["region"],
                              aws_access_key_id="local", aws_secret_access_key="local")  # fmt: skip
        config = client.get_object(Bucket="models-prod", Key="repository/demo-mlp/config.pbtxt")["Body"].read()
        assert b"demo-mlp" in config  # the S3 server still serves what the demo pushed
        # Each prod version is the format it was exported in, its model file beside the wrapper.
        for version, fmt, filename in (
            (1, "torchscript", "model.pt"),
            (2, "pt2", "model.pt2"),
        ):
            doc = json.loads(
                client.get_object(Bucket="models-prod", Key=f"manifests/demo-mlp/{version}.json")["Body"].read()
            )
            assert (doc["exporter"]["format"], sorted(doc["files"])) == (fmt, sorted([filename, "model.py"])), version
    finally:
        stop = subprocess.run(
            [sys.executable, "-m", "model_sync.sandbox", "stop", "--dir", str(state)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            check=False,
        )
    assert stop.returncode == 0, stop.stdout + stop.stderr
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not (state / "pids.json").exists()
