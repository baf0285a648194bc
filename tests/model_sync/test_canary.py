"""model_sync.canary: which replicas serve the canary at a share (k of N, stable as the fleet
changes), and the refusals a gray release makes before it lists any, against a real moto_server.
The releases themselves run end to end in test_canary_e2e.py (real replicas, real traffic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_sync import canary, canary_record, environments, errors, layout, manifest
from model_sync.canary_metrics import TritonMetrics
from model_sync.canary_policy import CanaryPolicy
from model_sync.s3 import Repo
from model_sync.ui import Console
from tests.model_sync.helpers import python_model, run_cli, write_config
from tests.support.s3_servers import S3Server

FLEET = [f"default-{i}" for i in range(10)]


@pytest.mark.parametrize(
    ("n", "share", "k"),
    [(10, 10, 1), (10, 25, 2), (10, 50, 5), (4, 10, 1), (4, 25, 1), (4, 50, 2), (3, 50, 1), (2, 10, 1), (2, 50, 1)],
)
def test_k_of_n_is_round_share_at_least_one_at_most_half(n: int, share: int, k: int) -> None:
    chosen = canary.canary_replicas(FLEET[:n], [], share, "20261202T000000000000Z-00000000")
    assert len(chosen) == k
    assert set(chosen) <= set(FLEET[:n])
    assert chosen == sorted(chosen)


def test_a_rebalance_keeps_the_replicas_already_on_the_canary() -> None:
    cid = "20261202T000000000000Z-0000beef"
    first = canary.canary_replicas(FLEET[:4], [], 25, cid)
    assert canary.canary_replicas(FLEET[:4], [], 25, cid) == first  # the same order for the same canary
    grown = canary.canary_replicas(FLEET, first, 25, cid)  # the HPA adds 6 replicas: k 1 -> 2
    assert len(grown) == 2
    assert set(first) <= set(grown)
    survivors = [r for r in FLEET if r != grown[0]]  # one canary replica is gone (a rollout, a scale-in)
    again = canary.canary_replicas(survivors, grown, 25, cid)
    assert grown[1] in again
    assert len(again) == round(0.25 * 9)
    assert canary.canary_replicas(FLEET[:1], [], 50, cid) == []  # one replica: none (it stays stable)


def _release(tmp_path: Path, capsys, server: S3Server, bucket: str, aws_env, version: int) -> canary.GrayRelease:
    cfg = write_config(tmp_path / "model-sync.yaml", server, {"prod": f"s3://{bucket}"})
    for tag in ("1", "2"):
        src = python_model(tmp_path / f"src{tag}", "m", {"model.py": f"# {tag}\n".encode()})
        assert run_cli(capsys, "push", str(src), "--env", "prod", "--config", cfg).code == 0
    assert run_cli(capsys, "rollback", "m", "--env", "prod", "--config", cfg, "--yes").code == 0  # pin 1; 2 published
    repo = Repo(environments.Environment("prod", layout.Root(bucket), server.endpoint, "us-east-1"))
    return canary.GrayRelease(repo, "m", version, CanaryPolicy(), TritonMetrics("m", ("http://127.0.0.1:9/metrics",)),
                              console=Console(quiet=True), by="tests", poll=0.01)  # fmt: skip


def test_a_release_is_refused_before_it_lists_a_replica(
    tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    release = _release(tmp_path, capsys, moto_s3, s3_bucket, aws_env, 2)
    with pytest.raises(errors.SyncError, match=r"^canary: 0 replica\(s\) report m in prod; allowed: at least 2 ") as e:
        release.run()  # no replica reports the model: nothing to compare on
    assert e.value.code == errors.REFUSED
    assert canary_record.read(release.repo, "m").doc is None  # nothing written
    pinned = canary.GrayRelease(release.repo, "m", 1, release.policy, release.metrics, console=release.console,
                                by="tests")  # fmt: skip
    with pytest.raises(errors.SyncError, match=r"^canary: m version 1 is already the stable pin in prod; allowed: "):
        pinned.run()
    now = manifest.now()
    other = {
        "schema": canary_record.CANARY, "model": "m", "id": canary_record.new_id(), "state": "running",
        "deployment": "default", "stable_version": 1, "canary_version": 3, "replicas": ["default-0"],
        "share_percent": 10, "steps": [], "policy": {}, "started_by": "someone", "started_at": now,
        "deadline_at": now, "updated_at": now, "decision": None,
    }  # fmt: skip
    canary_record.write(release.repo, canary_record.Stored(None, None), other)
    with pytest.raises(errors.SyncError, match=r"^canary: m version 3 is in a gray release \(.*\); allowed: one at a"):
        release.run()
    ended = canary.abort(release.repo, "m", "tests")
    assert ended is not None
    assert (ended["state"], ended["replicas"], ended["decision"]["by"]) == ("aborted", [], "tests")
    assert canary.abort(release.repo, "m", "tests") is None  # nothing running
    archived = moto_s3.get(s3_bucket, layout.canary_audit_key("m", other["id"]))
    assert manifest.read(archived, canary_record.CANARY)["state"] == "aborted"
