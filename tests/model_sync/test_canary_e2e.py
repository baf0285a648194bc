"""The gray release end to end on the real local stack (model_sync.local.canary_lab): rclone serve s3
with staging and prod, four real tritonserver replicas in prod each with its real agent, round-robin
traffic over them standing in for the Service, and the CLI in subprocesses: push to staging, then
`promote --to prod`, which runs the gray release (steps 25 and 50 %, 5 s each).

One stack for every scenario (the time budget); each scenario starts from one stable version
serving every replica. In every one, no request outside the canary share fails."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from model_sync import errors
from model_sync.local.canary_lab import MODEL, CanaryLab, measure
from model_sync.local.procs import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CanaryLab]:
    stack = CanaryLab(Path(tmp_path_factory.mktemp("canary"))).start()
    try:
        stack.stable()
        yield stack
    finally:
        stack.stop()


def _stable(lab: CanaryLab) -> int:
    pinned = json.loads(lab.cli("status", "--env", "prod", MODEL, "--output", "json").stdout)
    return int(pinned["prod"]["models"][0]["pinned"])


def _release(lab: CanaryLab, kind: str) -> tuple[int, dict, dict, str]:
    """Publish `kind`, promote it to prod under traffic: (exit code, measure(), final record, stderr)."""
    stable = _stable(lab)
    done = lab.release(kind)
    assert done.doc["stable_version"] == stable
    return done.code, done.figures, done.doc, done.stderr


def test_a_good_version_is_promoted_with_its_share_within_3_points(lab: CanaryLab) -> None:
    code, figures, doc, err = _release(lab, "good")
    assert code == errors.OK, err
    assert figures["outcome"] == "promoted"
    assert (figures["failed_stable"], figures["failed_canary"], figures["failed_other"]) == (0, 0, 0), figures[
        "unexpected_failures"
    ]
    assert [s["verdict"] for s in figures["steps"]] == ["pass", "pass"]
    for step in figures["steps"]:
        assert step["effective_percent"] == step["configured_percent"]  # 1 and 2 of 4 replicas
        assert abs(step["observed_percent"] - step["configured_percent"]) <= 3, figures
    assert _stable(lab) == doc["canary_version"]
    lab.fleet.wait_ready(MODEL, doc["canary_version"])  # every replica serves it


def test_a_version_failing_5_percent_of_requests_is_aborted(lab: CanaryLab) -> None:
    code, figures, doc, err = _release(lab, "errors")
    assert code == errors.CHECK_FAILED, err
    assert "error ratio: canary" in doc["decision"]["reason"], doc["decision"]
    assert figures["failed_stable"] == figures["failed_other"] == 0, figures["unexpected_failures"]
    assert figures["unexpected_failures"] == [], figures["unexpected_failures"]  # the canary's are all injected
    assert 0 < figures["failed_canary"] < 0.1 * figures["answered_by_canary"] + 5, figures
    assert figures["seconds_to_zero_canary"] is not None
    assert figures["seconds_to_zero_canary"] <= 10, figures
    assert _stable(lab) == doc["stable_version"]


def test_a_version_three_times_slower_is_aborted_on_latency(lab: CanaryLab) -> None:
    code, figures, doc, err = _release(lab, "slow")
    assert code == errors.CHECK_FAILED, err
    assert doc["decision"]["reason"].startswith("step 25 %: p99 latency: canary"), doc["decision"]
    assert (figures["failed_stable"], figures["failed_canary"], figures["failed_other"]) == (0, 0, 0), figures[
        "unexpected_failures"
    ]
    assert figures["seconds_to_zero_canary"] <= 10, figures


def test_a_version_that_fails_to_load_is_aborted_and_takes_no_traffic(lab: CanaryLab) -> None:
    code, figures, doc, err = _release(lab, "broken")
    assert code == errors.CHECK_FAILED, err
    assert "the canary failed to load on" in doc["decision"]["reason"], doc["decision"]
    assert figures["answered_by_canary"] == 0, figures
    assert (figures["failed_stable"], figures["failed_canary"], figures["failed_other"]) == (0, 0, 0), figures[
        "unexpected_failures"
    ]


def test_an_s3_outage_during_the_canary_fails_no_request_and_ends_decided(lab: CanaryLab) -> None:
    version = lab.publish("good")
    lab.start_traffic()
    run = lab.start_cli(*lab.promote_args(version))
    lab.wait_step()
    lab.s3.stop()  # the agents keep serving; the run retries until the deadline
    time.sleep(6)
    lab.s3.start()
    _, err = run.communicate(timeout=180)
    records = lab.stop_traffic()
    doc = lab.canary_record()
    assert doc is not None
    assert run.returncode == errors.OK, err
    assert "retrying until the deadline" in err, err
    assert doc["state"] == "promoted"
    figures = measure(records, doc)
    assert (figures["failed_stable"], figures["failed_canary"], figures["failed_other"]) == (0, 0, 0), figures[
        "unexpected_failures"
    ]


def test_an_interrupted_run_is_resumed_and_a_killed_one_aborted(lab: CanaryLab) -> None:
    stable = _stable(lab)
    lab.start_traffic()
    try:
        # SIGINT: exit 8, the record stays running with its share; status shows it; a re-run resumes it.
        version = lab.publish("good")
        run = lab.start_cli(*lab.promote_args(version))
        lab.wait_step()
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
        assert run.returncode == errors.INTERRUPTED, err
        assert "keeps its canary replicas in prod; allowed: re-run to resume, or `model-sync canary" in err
        doc = lab.canary_record()
        assert doc is not None
        assert (doc["state"], len(doc["replicas"])) == ("running", 1)
        shown = json.loads(lab.cli("status", "--env", "prod", MODEL, "--output", "json").stdout)
        assert shown["prod"]["models"][0]["canary"]["state"] == "running"
        resumed = lab.cli("canary", MODEL, "--env", "prod", "--model-version", str(version))
        assert resumed.returncode == errors.OK, resumed.stderr
        assert f"resuming: canary {doc['id']}" in resumed.stdout
        assert _stable(lab) == version
        # SIGKILL: the record stays running; `canary --abort` ends it and its replica returns to stable.
        lab.fleet.wait_ready(MODEL, version)
        killed = lab.publish("good")
        run = lab.start_cli(*lab.promote_args(killed))
        lab.wait_step()
        run.kill()
        run.wait(timeout=30)
        doc = lab.canary_record()
        assert doc is not None
        assert doc["state"] == "running"
        aborted = lab.cli("canary", MODEL, "--env", "prod", "--abort")
        assert aborted.returncode == errors.OK, aborted.stderr
        assert f"aborted: canary {doc['id']}" in aborted.stdout
        wait_until(lambda: all(lab.fleet.version_ready(i, MODEL, version) for i in range(4)), 30, what="stable")
        doc = lab.canary_record()
        assert doc is not None
        assert (doc["state"], doc["replicas"], doc["decision"]["reason"]) == ("aborted", [], "aborted by an operator")
    finally:
        records = lab.stop_traffic()
    assert stable != version
    assert not records.failed(), records.errors()
