"""`model-sync canary` (model_sync.canary.launch, commands/canary.py) through the CLI against a real
moto_server: usage errors, --dry-run, --abort, and promote refusing a gray release it cannot
analyse before it copies anything."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from model_sync import errors
from tests.model_sync.helpers import python_model, run_cli, write_config
from tests.support.s3_servers import S3Server


def _config(tmp_path: Path, server: S3Server, staging: str, prod: str, metrics: bool) -> str:
    cfg = write_config(tmp_path / "model-sync.yaml", server, {"staging": f"s3://{staging}", "prod": f"s3://{prod}"})
    if metrics:
        doc = yaml.safe_load(Path(cfg).read_text())
        doc["environments"]["prod"]["tritonMetricsUrls"] = {"r0": "http://127.0.0.1:9/metrics"}
        doc["environments"]["prod"]["canaryPolicies"] = {"m": {"steps": [50], "stepSeconds": 5}}
        Path(cfg).write_text(yaml.safe_dump(doc))
    return cfg


def test_canary_usage_dry_run_and_abort(tmp_path: Path, capsys, moto_s3: S3Server, aws_env) -> None:
    staging, prod = moto_s3.make_bucket(), moto_s3.make_bucket()
    cfg = _config(tmp_path, moto_s3, staging, prod, metrics=True)
    for tag in ("1", "2"):
        src = python_model(tmp_path / f"src{tag}", "m", {"model.py": f"# {tag}\n".encode()})
        assert run_cli(capsys, "push", str(src), "--env", "prod", "--config", cfg).code == 0
    assert run_cli(capsys, "rollback", "m", "--env", "prod", "--config", cfg, "--yes").code == 0
    r = run_cli(capsys, "canary", "m", "--env", "prod", "--config", cfg)
    assert (r.code, r.err.strip()) == (
        errors.USAGE,
        "model-sync: --model-version: missing; allowed: the version to release (or --abort)",
    )
    r = run_cli(capsys, "canary", "m", "--env", "prod", "--model-version", "2", "--config", cfg, "--dry-run")
    assert r.code == errors.OK, r.err
    assert "(dryrun) canary: m version 2 against stable 1 in prod, steps [50] % of the replicas, 5s each" in r.out
    assert moto_s3.keys(prod, "manifests/_canary/") == []  # nothing written
    r = run_cli(capsys, "canary", "m", "--env", "prod", "--abort", "--config", cfg, "--output", "json")
    assert (r.code, json.loads(r.out)) == (errors.OK, {"model": "m", "canary": None})
    r = run_cli(capsys, "canary", "m", "--env", "prod", "--model-version", "2", "--config", cfg)
    assert r.code == errors.REFUSED, r.err  # no replica reports m: nothing to compare on, nothing written
    assert "allowed: at least 2 (one keeps serving stable), or promote --no-canary" in r.err
    assert moto_s3.keys(prod, "manifests/_canary/") == []


def test_promote_to_prod_without_metrics_refuses_before_copying(
    tmp_path: Path, capsys, moto_s3: S3Server, aws_env
) -> None:
    staging, prod = moto_s3.make_bucket(), moto_s3.make_bucket()
    cfg = _config(tmp_path, moto_s3, staging, prod, metrics=False)
    assert (
        run_cli(capsys, "push", str(python_model(tmp_path / "src", "m")), "--env", "staging", "--config", cfg).code == 0
    )
    args = ("promote", "m", "--model-version", "1", "--from", "staging", "--to", "prod", "--config", cfg)
    r = run_cli(capsys, *args, "--skip-verification")
    assert r.code == errors.USAGE
    assert r.err.strip() == (
        "model-sync: canary: environment 'prod' has no metrics for the analysis; allowed: prometheusUrl (a stack "
        "output) or tritonMetricsUrls in model-sync.yaml, or promote --no-canary"
    )
    assert moto_s3.keys(prod) == []
    r = run_cli(capsys, *args, "--skip-verification", "--no-canary")
    assert r.code == errors.OK, r.err
    record = json.loads(moto_s3.get(prod, "audit/promotions/m/1.json"))
    assert (record["schema"], record["canary"]) == ("model-sync.promotion/v3", {"skipped": True, "id": None})
