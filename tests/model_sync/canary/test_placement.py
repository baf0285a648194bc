"""model_sync.canary.placement: which replicas of the fleet a gray release lists: k of the N live ones
for a share (never above it, but for the one replica it needs), stable as the fleet changes, and
which replicas are live (their status records, on a real moto_server)."""

from __future__ import annotations

import datetime as _dt
import time

import pytest

from model_sync.canary.placement import LIVE_HEARTBEATS, canary_replicas, observe, share_count
from model_sync.records import codec
from tests.support.s3_servers import S3Server

FLEET = [f"default-{i}" for i in range(10)]


@pytest.mark.parametrize(
    ("n", "share", "k"),
    [
        (10, 10, 1),
        (10, 25, 2),
        (10, 50, 5),
        (4, 10, 1),
        (4, 25, 1),
        (4, 50, 2),
        (3, 50, 1),
        (2, 10, 1),
        (2, 50, 1),
        (6, 25, 1),
        (10, 35, 3),
        (7, 50, 3),
        (1, 50, 0),
    ],
)
def test_k_of_n_is_the_floor_of_the_share_at_least_one_at_most_half(n: int, share: int, k: int) -> None:
    """The canary never takes more than the configured share of the replicas (25 % of 6 is 1, not
    round(1.5) = 2), except the one replica it needs to run at all."""
    chosen = canary_replicas(FLEET[:n], [], share, "20261202T000000000000Z-00000000")
    assert len(chosen) == k
    assert set(chosen) <= set(FLEET[:n])
    assert chosen == sorted(chosen)


def test_a_rebalance_keeps_the_replicas_already_on_the_canary() -> None:
    cid = "20261202T000000000000Z-0000beef"
    first = canary_replicas(FLEET[:4], [], 25, cid)
    assert canary_replicas(FLEET[:4], [], 25, cid) == first  # the same order for the same canary
    grown = canary_replicas(FLEET, first, 25, cid)  # the HPA adds 6 replicas: k 1 -> 2
    assert len(grown) == 2
    assert set(first) <= set(grown)
    survivors = [r for r in FLEET if r != grown[0]]  # one canary replica is gone (a rollout, a scale-in)
    again = canary_replicas(survivors, grown, 25, cid)
    assert grown[1] in again
    assert len(again) == 2  # floor(0.25 x 9)
    assert canary_replicas(FLEET[:1], [], 50, cid) == []  # one replica: none (it stays stable)


def test_share_count_is_never_above_the_share_but_for_one_replica() -> None:
    for n in range(2, 40):
        for share in range(1, 51):
            k = share_count(n, share)
            assert 1 <= k <= n // 2
            assert k == 1 or 100 * k / n <= share, (n, share, k)


def _doc(replica: str, age: float, heartbeat: float) -> bytes:
    at = codec.format_time(time.time() - age)
    entry = {"pinned": [1], "serving": [1], "state": "READY", "error": None, "failed": {}, "local_versions": [1],
             "smoke": None}  # fmt: skip
    doc = {"schema": codec.REPLICA_STATUS, "env": "prod", "deployment": "default", "replica": replica,
           "bucket_uri": "s3://b", "triton_url": None, "heartbeat_seconds": heartbeat, "s3_reachable": True,
           "last_s3_ok_at": at, "last_error": None, "agent_started_at": at, "reported_at": at,
           "models": {"m": entry}}  # fmt: skip
    return codec.dumps(doc)


def test_a_replica_is_live_within_three_of_its_own_heartbeats(moto_s3: S3Server, s3_bucket: str, aws_env) -> None:
    from model_sync import environments
    from model_sync.contract import layout
    from model_sync.s3.bucket import Bucket

    client = moto_s3.client()
    for replica, age, heartbeat in (("default-0", 1, 30), ("default-1", 89, 30), ("default-2", 91, 30),
                                    ("default-3", 7, 2), ("default-4", 5, 2)):  # fmt: skip
        client.put_object(Bucket=s3_bucket, Key=f"status/default/{replica}.json", Body=_doc(replica, age, heartbeat))
    repo = Bucket(environments.Environment("prod", layout.Root(s3_bucket), moto_s3.endpoint, "us-east-1"))
    fleet = observe(repo, "m", None, _dt.datetime.now(_dt.UTC))
    assert LIVE_HEARTBEATS == 3
    assert (fleet.deployment, fleet.ids, sorted(fleet.silent)) == (
        "default",
        ["default-0", "default-1", "default-4"],
        ["default-2", "default-3"],
    )
    assert fleet.describe_gone(["default-0", "default-3", "default-9"]) == (
        "default-3 stopped reporting (7s since its last report); default-9 no longer reports the model"
    )


def test_after_an_s3_outage_no_report_is_older_than_s3_has_been_back(
    moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    """No agent can write its report while S3 is away: right after the outage every report is old,
    and none of those replicas is dead for that."""
    from model_sync import environments
    from model_sync.contract import layout
    from model_sync.s3.bucket import Bucket

    client = moto_s3.client()
    for replica in ("default-0", "default-1"):
        client.put_object(Bucket=s3_bucket, Key=f"status/default/{replica}.json", Body=_doc(replica, 40, 2))
    repo = Bucket(environments.Environment("prod", layout.Root(s3_bucket), moto_s3.endpoint, "us-east-1"))
    now = _dt.datetime.now(_dt.UTC)
    assert observe(repo, "m", None, now).silent.keys() == {"default-0", "default-1"}
    back = observe(repo, "m", None, now, reachable_since=now - _dt.timedelta(seconds=5))
    assert (back.ids, back.silent) == (["default-0", "default-1"], {})
    later = observe(repo, "m", None, now, reachable_since=now - _dt.timedelta(seconds=7))  # 3 heartbeats of 2 s
    assert sorted(later.silent) == ["default-0", "default-1"]
