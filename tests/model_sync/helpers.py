"""Helpers for model_sync functional tests: model directories, a model-sync.yaml pointing at a
real S3 server, and running the CLI in-process (main([...])) with captured output."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from model_sync import layout, manifest, model_config
from model_sync.cli import main
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
    """The version the pin of `model` names, read back from the server (keys through model_sync.layout)."""
    root = layout.Root(bucket, prefix.strip("/"))
    try:
        return model_config.pinned_version(model_config.parse(server.get(bucket, root.key(layout.config_key(model)))))
    except Exception as e:
        if "NoSuchKey" in str(e):
            return None
        raise


def manifest_doc(server: S3Server, bucket: str, model: str, version: int) -> dict:
    """The manifest of `model` version `version` on the server, through the strict reader."""
    return manifest.read_manifest(server.get(bucket, layout.manifest_key(model, version)), model, version)
