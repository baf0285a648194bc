"""model_sync.status against a real moto_server: the pinned, previous and available versions,
what each replica reports serving (model_sync.replicas) and the pin flagged when no replica
serves it READY. The tables and JSON of `model-sync status` are in test_lifecycle.py."""

from __future__ import annotations

import pytest

from tests.model_sync.test_replicas import _report, two_versions


@pytest.fixture
def pushed(tmp_path, capsys, moto_s3, aws_env):
    return two_versions(tmp_path, capsys, moto_s3)


def test_model_status_shows_what_each_replica_serves(pushed) -> None:
    from model_sync import status

    client, bucket, repo = pushed
    client.put_object(
        Bucket=bucket, Key="status/triton/pod-0.json", Body=_report("simple", [1], "FAILED", {"2": "boom"})
    )
    client.put_object(Bucket=bucket, Key="status/triton/pod-1.json", Body=b"{not json")  # unreadable: serves nothing
    s = status.model_status(repo, "simple")
    assert (s["pinned"], s["versions"], s["previous_pin"], s["incomplete"], s["verified"]) == (2, [1, 2], 1, [], None)
    assert s["replicas"] == {
        "triton/pod-0": {"serving": [1], "state": "FAILED", "error": "load failed: boom", "failed": [2]}
    }
    assert (s["pin_served"], status.served_cell(s)) == (False, "0/1 PIN NOT SERVED")
    client.put_object(Bucket=bucket, Key="status/triton/pod-0.json", Body=_report("simple", [2]))
    s = status.model_status(repo, "simple")
    assert (s["pin_served"], status.served_cell(s)) == (True, "1/1")
