"""model_sync.lifecycle.prune against a real moto_server: what plan() keeps (the newest K complete
versions, the pinned one, the previous pin), what prune() deletes (files first, manifest last),
and a dry run that deletes nothing. The CLI's flags, prompts and the stale debris are in
test_lifecycle.py."""

from __future__ import annotations

import pytest

from tests.model_sync.helpers import python_model, run_cli, write_config


def test_plan_keeps_the_newest_complete_and_the_protected_versions() -> None:
    from model_sync.lifecycle import prune

    assert prune.plan([1, 2, 3, 4, 5], 2, {1}) == [2, 3]
    assert prune.plan([1, 2, 3, 4, 5], 1, set(), complete={1, 2, 3, 5}, stale={4}) == [1, 2, 3, 4]
    assert prune.plan([1, 2, 3, 4, 5], 1, set(), complete={1, 2, 3, 5}) == [
        1,
        2,
        3,
    ]  # 4: incomplete, not stale: a push may be writing it


@pytest.mark.parametrize("dry_run", [True, False])
def test_prune_deletes_old_versions_and_keeps_the_pin_and_the_previous_one(
    tmp_path, capsys, moto_s3, aws_env, dry_run
) -> None:
    from model_sync import environments
    from model_sync.lifecycle import prune

    bucket = moto_s3.make_bucket()
    cfg = write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{bucket}"})
    for content in ("one", "two", "three", "four"):
        model = python_model(
            tmp_path / f"src-{content}", "simple", {"model.py": content.encode(), "model.pt": content.encode() * 100}
        )
        assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    before = moto_s3.keys(bucket)
    asked: list[str] = []
    doc = prune.command("simple", lambda: environments.resolve("staging", cfg), keep=1, stale_hours=24.0,
                      dry_run=dry_run, quiet=True,
                      confirm=lambda env, question: asked.append(question))  # fmt: skip
    assert doc == {
        "env": "staging",
        "model": "simple",
        "deleted": [1, 2],
        "aborted_uploads": [],
        "kept_incomplete": [],
        "protected": [3, 4],
        "dry_run": dry_run,
    }
    assert asked == ["Delete simple version(s) 1, 2 and 0 unfinished upload(s) from staging?"]
    gone = (
        []
        if dry_run
        else [
            k
            for k in before
            if k.startswith(
                ("repository/simple/1/", "repository/simple/2/", "manifests/simple/1.", "manifests/simple/2.")
            )
        ]
    )
    assert moto_s3.keys(bucket) == sorted(set(before) - set(gone))
    assert any(k.startswith("audit/allocations/simple/1") for k in moto_s3.keys(bucket))  # a number is never reused
