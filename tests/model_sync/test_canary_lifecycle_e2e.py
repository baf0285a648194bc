"""What happens around a gray release end to end on the real local stack (model_sync.local.canary_lab,
a stack of its own beside test_canary_e2e.py's): an S3 outage, an interrupted or killed run, the
pin moved under it, the fleet scaled out, a canary replica that dies. The local S3 server with
staging and prod, four real tritonserver replicas in prod each with its real agent, round-robin
traffic over them standing in for the Service, and the CLI in subprocesses.

Each scenario starts from one stable version serving every replica (four of them; the scale-out
scenario adds two and removes them, the last one kills one). In every one, no request outside the
canary share fails, but those in flight to a replica that dies."""

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
    stack = CanaryLab(Path(tmp_path_factory.mktemp("canary-lifecycle"))).start()
    try:
        stack.stable()
        yield stack
    finally:
        stack.stop()


def _stable(lab: CanaryLab) -> int:
    pinned = json.loads(lab.cli("status", "--env", "prod", MODEL, "--output", "json").stdout)
    return int(pinned["prod"]["models"][0]["pinned"])


def _index(replica: str) -> int:
    return int(replica.rsplit("-", 1)[1])


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
        lab.wait_listed(run)
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
        lab.wait_listed(run)
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


def test_a_pin_moved_under_the_release_ends_it_within_one_poll(lab: CanaryLab) -> None:
    """`promote --no-canary` of another version, then `rollback`, while a canary runs: the run
    exits 4 within one poll, writes nothing back, and says where the replicas went."""
    lab.start_traffic()
    try:
        for move in ("promote", "rollback"):
            stable = _stable(lab)
            run = lab.start_cli(*lab.promote_args(lab.publish("good")))
            doc = lab.wait_listed(run)
            if move == "promote":
                target = lab.pin(lab.publish("good"))  # promote pins what staging pins
            else:
                rolled = lab.cli("rollback", MODEL, "--env", "prod", "--yes", "--output", "json")
                assert rolled.returncode == errors.OK, rolled.stderr
                target = int(json.loads(rolled.stdout)["version"])
            moved_at = time.monotonic()
            _, err = run.communicate(timeout=60)
            took = time.monotonic() - moved_at
            assert run.returncode == errors.REFUSED, err
            assert took <= 5, (move, took, err)  # one poll is 1.25 s here
            line = err.strip().splitlines()[-1]
            assert f"now version {target}" in line, line
            assert "writes nothing" in line or "the stable pin moved" in line, line
            ended = lab.canary_record()
            assert ended is not None
            assert (ended["id"], ended["state"], ended["replicas"]) == (doc["id"], "aborted", [])
            assert f"version {target}" in ended["decision"]["reason"], ended["decision"]
            assert _stable(lab) == target != stable
            lab.fleet.wait_ready(MODEL, target)
    finally:
        records = lab.stop_traffic()
    assert not records.failed(), records.errors()


def test_scaling_out_never_takes_more_than_the_configured_share_and_restarts_the_window(lab: CanaryLab) -> None:
    """4 -> 6 replicas in step 1 (25 %): the canary stays on 1 of 6 (floor, not round(1.5) = 2),
    the step's window restarts on the new fleet, and the record and `status` state the configured,
    effective and observed shares."""
    added: list[int] = []

    def scale_out() -> None:  # as soon as step 1 lists its replica: its window restarts on 6
        lab.wait_record(lambda d: d["state"] == "running" and bool(d["steps"]), what="step 1")
        added.extend(lab.scale_out())

    lab.prepare_scale_out(2)  # two pods scheduled, their tritonservers up: they report once their agents start
    try:
        done = lab.release("good", during=scale_out)
        shown = lab.cli("status", "--env", "prod", MODEL)
    finally:
        lab.scale_in(2)
    assert done.code == errors.OK, done.stderr
    first, second = done.doc["steps"]
    assert (first["replicas"], first["fleet"], first["effective_percent"]) == (1, 6, 16.67), first
    assert first["restarts"] >= 1, first
    assert (second["replicas"], second["fleet"], second["effective_percent"]) == (3, 6, 50.0), second
    for step in done.doc["steps"]:
        assert step["effective_percent"] <= step["share_percent"], step
        assert step["observed_percent"] is not None
        assert abs(step["observed_percent"] - step["effective_percent"]) <= 5, step
    for mine, theirs in zip(done.figures["steps"], done.doc["steps"], strict=True):
        assert abs(mine["observed_percent"] - theirs["effective_percent"]) <= 5, (mine, theirs)  # as clients saw it
    row = next(line for line in shown.stdout.splitlines() if line.startswith("prod") and " 25 % " in line)
    assert "1/6 (relisted" in row and "16.67 %" in row, shown.stdout  # noqa: PT018


def test_a_dead_canary_replica_is_replaced_by_a_live_one_and_its_window_restarts(lab: CanaryLab) -> None:
    """The only canary replica dies in step 1 (agent and tritonserver killed, gone from the
    Service): within 3 of its heartbeats the run lists a live replica instead, restarts the
    step's window and goes on; step 2 states the share of the 3 live replicas."""
    victim: dict[str, int] = {}

    def kill_the_canary() -> None:
        doc = lab.wait_step()
        victim["index"] = _index(doc["replicas"][0])
        lab.kill(victim["index"])
        victim["killed"] = time.monotonic()  # type: ignore[assignment]
        lab.wait_record(lambda d: d["state"] != "running" or doc["replicas"][0] not in d["replicas"], 30,
                        "the dead replica replaced")  # fmt: skip
        victim["relisted"] = time.monotonic()  # type: ignore[assignment]

    done = lab.release("good", during=kill_the_canary)  # the last scenario: the dead replica stays dead
    dead = f"default-{victim['index']}"
    assert done.code == errors.OK, done.stderr
    assert victim["relisted"] - victim["killed"] <= 3 * 2.0 + 10, victim  # 3 heartbeats of 2 s, then polls and reads
    first, second = done.doc["steps"]
    assert first["restarts"] >= 1 and first["fleet"] == 3, first  # noqa: PT018
    assert f"re-balance: {dead} stopped reporting" in done.stdout, done.stdout
    assert (second["replicas"], second["fleet"], second["effective_percent"]) == (1, 3, 33.33), second
    assert abs(done.figures["steps"][1]["observed_percent"] - 33.33) <= 5, done.figures
    # Only requests in flight to the dead replica when it died failed.
    lost = [r for r in done.records.failed() if r.replica != victim["index"]]
    assert lost == [], lost
    assert len(done.records.failed()) <= 4, done.records.errors()
    assert _stable(lab) == done.doc["canary_version"]
    lab.fleet.wait_ready(MODEL, done.doc["canary_version"], replicas=[i for i in range(4) if i != victim["index"]])
