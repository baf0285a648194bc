"""model_sync.lifecycle.rollback against a real moto_server: the pin walks back the pin history (popping
it), an explicit version is pinned with its own config, a dry run writes nothing, and nothing is
ever deleted. The CLI's flags, prompts and exit codes are in test_lifecycle.py."""

from __future__ import annotations

import pytest

from tests.model_sync.helpers import pinned_version, python_model, run_cli, write_config


def _pushed(tmp_path, capsys, moto_s3, *contents: str) -> tuple[str, str]:
    bucket = moto_s3.make_bucket()
    cfg = write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{bucket}"})
    for content in contents:
        model = python_model(
            tmp_path / f"src-{content}", "simple", {"model.py": content.encode(), "model.pt": content.encode() * 100}
        )
        assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    return cfg, bucket


def _rollback(cfg: str, to: int | None = None, dry_run: bool = False) -> dict:
    from model_sync import environments
    from model_sync.lifecycle import rollback

    asked: list[str] = []
    doc = rollback.command("simple", to, lambda: environments.resolve("staging", cfg), dry_run=dry_run, quiet=True,
                            confirm=lambda env, question: asked.append(question), wait=lambda *a: None)  # fmt: skip
    assert len(asked) == (0 if dry_run else 1)
    return doc


def test_rollback_pops_the_history_then_pins_an_explicit_version(tmp_path, capsys, moto_s3, aws_env) -> None:
    cfg, bucket = _pushed(tmp_path, capsys, moto_s3, "one", "two", "three")
    keys = set(moto_s3.keys(bucket, "repository/"))
    assert _rollback(cfg) == {
        "env": "staging",
        "model": "simple",
        "version": 2,
        "previous": 3,
        "dry_run": False,
        "served": None,
    }
    assert _rollback(cfg)["version"] == 1
    assert pinned_version(moto_s3, bucket, "simple") == 1
    assert _rollback(cfg, to=3)["previous"] == 1
    assert "versions: 3" in moto_s3.get(bucket, "repository/simple/config.pbtxt").decode()
    assert set(moto_s3.keys(bucket, "repository/")) == keys


def test_a_dry_run_writes_nothing_and_a_missing_history_is_refused(tmp_path, capsys, moto_s3, aws_env) -> None:
    from model_sync import errors

    cfg, bucket = _pushed(tmp_path, capsys, moto_s3, "one", "two")
    before = {k: moto_s3.get(bucket, k) for k in moto_s3.keys(bucket)}
    assert _rollback(cfg, dry_run=True)["version"] == 1
    assert {k: moto_s3.get(bucket, k) for k in moto_s3.keys(bucket)} == before
    _rollback(cfg)
    with pytest.raises(
        errors.SyncError, match=r"^rollback simple: no previous pin recorded for version 1; allowed: --model-version N"
    ) as e:
        _rollback(cfg)
    assert e.value.code == 4
