"""Helpers for model_sync functional tests: model directories, a model-sync.yaml pointing at a
real S3 server, and running the CLI in-process (main([...])) with captured output."""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from model_sync.admission.gpu_plan import CUDA_CONTEXT_BYTES
from model_sync.agent.settings import AgentSettings
from model_sync.cli import main
from model_sync.contract import layout
from model_sync.records import codec
from model_sync.triton_model import model_config
from tests.support.s3_servers import S3Server


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> CliResult:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def promote_args(model: str, version: int | str, cfg: str, *extra: str, source: str = "staging",
                 target: str = "prod") -> list[str]:  # fmt: skip
    """The argv of `model-sync promote` of `model` `version` between two environments of `cfg`, pinned
    at once (--no-canary: these tests are about the copy; the gray release has its own)."""
    return ["promote", model, "--model-version", str(version), "--from", source, "--to", target, "--no-canary",
            "--config", cfg, *extra]  # fmt: skip


def write_config(path: Path, server: S3Server, envs: dict[str, str]) -> str:
    """envs: {env name: bucket URI}; all on `server`."""
    doc = {
        "environments": {
            name: {"bucket": uri, "endpointUrl": server.endpoint, "region": "us-east-1"} for name, uri in envs.items()
        }
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def python_model(
    root: Path,
    name: str = "simple",
    files: dict[str, bytes] | None = None,
    config: str | None = None,
    version: str = "1",
) -> Path:
    d = root / name
    (d / version).mkdir(parents=True, exist_ok=True)
    (d / "config.pbtxt").write_text(
        config if config is not None else f'name: "{name}"\nbackend: "python"\nmax_batch_size: 4\n'
    )
    for rel, data in (files if files is not None else {"model.py": b"# model\n", "model.pt": os.urandom(2048)}).items():
        p = d / version / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return d


def pinned_version(server: S3Server, bucket: str, model: str, prefix: str = "") -> int | None:
    """The version the pin of `model` names, read back from the server (keys through model_sync.contract.layout)."""
    root = layout.Root(bucket, prefix.strip("/"))
    try:
        return model_config.pinned_version(model_config.parse(server.get(bucket, root.key(layout.config_key(model)))))
    except Exception as e:
        if "NoSuchKey" in str(e):
            return None
        raise


def manifest_doc(server: S3Server, bucket: str, model: str, version: int) -> dict:
    """The manifest of `model` version `version` on the server, through the strict reader."""
    return codec.read_manifest(server.get(bucket, layout.manifest_key(model, version)), model, version)


# Two small models for GPU memory planning (model_sync/export/gpu_memory.py, gpu_plan.py): `narrow` and `wide`.
GPU_FACTORIES = textwrap.dedent(
    """
    import torch

    class Small(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            torch.manual_seed(0)
            self.fc = torch.nn.Linear(16, width)
            self.bn = torch.nn.BatchNorm1d(width)  # buffers too: running mean/var, num_batches_tracked

        def forward(self, x):
            return self.bn(self.fc(x))

    def narrow():
        return Small(8)

    def wide():
        return Small(32)
    """
)


def gpu_factories(root: Path, monkeypatch: pytest.MonkeyPatch, *, cuda: bool = False) -> None:
    """The module `gpufactories` importable; unless `cuda`, torch sees no GPU here, so `export`
    estimates (the figures, and the lines that quote them, are the same on every machine)."""
    import torch

    root.mkdir(parents=True, exist_ok=True)
    (root / "gpufactories.py").write_text(GPU_FACTORIES)
    monkeypatch.syspath_prepend(str(root))
    if not cuda:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def export_model(
    capsys: pytest.CaptureFixture[str], out: Path, name: str, factory: str, *flags: str, shape: str = "2,16"
) -> Path:
    """`model-sync export gpufactories:<factory>` (example `shape`, float32) to out/<name>."""
    r = run_cli(capsys, "export", f"gpufactories:{factory}", "--name", name, "--output", str(out),
                "--example-shape", shape, *flags)  # fmt: skip
    assert r.code == 0, r.err
    return out / name


# A card of four CUDA context allowances (2 GiB while the allowance is 512 MiB; 1.8 GiB allowed at
# 90 %). Each KIND_GPU instance of the gpufactories models plans the allowance + a few KiB
# (estimated), so four instances overcommit it and three fit.
TOY_GPUS = {"default": {"gpu": "toy", "memoryGiB": 4 * CUDA_CONTEXT_BYTES / (1 << 30), "models": ["a", "b", "c"]}}


def gpu_export(capsys: pytest.CaptureFixture[str], out: Path, name: str, factory: str, count: int) -> Path:
    """A python-backend export (no tritonImage needed) with `count` KIND_GPU instances."""
    return export_model(capsys, out, name, factory, "--target", "local", "--instance-kind", "KIND_GPU",
                        "--instance-count", str(count), "--overwrite")  # fmt: skip


def gpu_config(path: Path, server: S3Server, envs: dict[str, str], gpus: dict[str, dict | None]) -> str:
    """write_config's environments, each with its `tritonGpus` from `gpus` (None or absent: none)."""
    doc = yaml.safe_load(Path(write_config(path, server, envs)).read_text())
    for name, value in gpus.items():
        if value is not None:
            doc["environments"][name]["tritonGpus"] = value
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def settings_on(tmp_path: Path, **overrides: object) -> AgentSettings:
    """An agent's settings on tmp_path (its pod disk and staging), `overrides` applied."""
    base: dict[str, object] = {
        "root": layout.Root("models-test"),
        "repository": tmp_path / "models",
        "staging": tmp_path / ".models.staging",
        "deployment": "default",
        "replica": "replica-0",
    }
    base.update(overrides)
    return AgentSettings(**base)  # type: ignore[arg-type]
