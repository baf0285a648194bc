"""model_sync.promote's command function against a real moto_server (staging and prod buckets):
two environments of one repository are refused, a promotion copies the pinned version and pins
it in the target, and a re-run is a no-op. The verification gate and the checksum checks are in
test_lifecycle.py."""

from __future__ import annotations

import pytest

from tests.model_sync.helpers import pinned_version, python_model, run_cli, write_config


def _promote(cfg: str, source: str = "staging", target: str = "prod", **kw: bool) -> dict:
    from model_sync import promote

    flags = {
        "skip_verification": True,
        "dry_run": False,
        "allow_version_skew": False,
        "allow_local_target": False,
        "canary": False,
        **kw,
    }
    return promote.promote_command("simple", 1, source, target, cfg, quiet=True, wait=lambda *a: None, **flags)


def test_promote_copies_pins_and_is_idempotent(tmp_path, capsys, moto_s3, aws_env) -> None:
    staging, prod = moto_s3.make_bucket(), moto_s3.make_bucket()
    cfg = write_config(
        tmp_path / "model-sync.yaml",
        moto_s3,
        {"staging": f"s3://{staging}", "prod": f"s3://{prod}", "twin": f"s3://{staging}"},
    )
    model = python_model(tmp_path / "src", "simple")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    from model_sync import errors

    with pytest.raises(
        errors.SyncError,
        match=r"^--to: 'twin' has the same repository as 'staging' \(s3://.*\); allowed: two different repositories$",
    ):
        _promote(cfg, target="twin")
    with pytest.raises(errors.SyncError, match=r"^--to: 'staging' equals --from; allowed: two different environments$"):
        _promote(cfg, target="staging")
    assert _promote(cfg, dry_run=True) == {
        "model": "simple",
        "from": {"env": "staging", "version": 1},
        "to": {"env": "prod", "version": 1},
        "dry_run": True,
        "canary": None,
    }
    assert moto_s3.keys(prod) == []
    doc = _promote(cfg)
    assert doc == {
        "model": "simple",
        "from": {"env": "staging", "version": 1},
        "to": {"env": "prod", "version": 1},
        "dry_run": False,
        "canary": None,
        "served": None,
    }
    assert pinned_version(moto_s3, prod, "simple") == 1
    for rel in ("model.py", "model.pt"):
        assert moto_s3.get(prod, f"repository/simple/1/{rel}") == moto_s3.get(staging, f"repository/simple/1/{rel}")
    keys = moto_s3.keys(prod)
    assert _promote(cfg)["to"] == {"env": "prod", "version": 1}
    assert moto_s3.keys(prod) == keys
