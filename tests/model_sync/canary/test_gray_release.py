"""model_sync.canary.gray_release against a real moto_server: the refusals a gray release makes before it lists
any replica, and what it does when a listed replica stops reporting (replicas' status records
written as the agents write them; which replicas it lists: test_canary_fleet.py).
The releases themselves run end to end in test_canary_e2e.py (real replicas, real traffic)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from model_sync import environments, errors
from model_sync.canary import ending, fleet_watch, gray_release
from model_sync.canary.metrics import TritonMetrics
from model_sync.contract import layout
from model_sync.contract.canary_policy import CanaryPolicy
from model_sync.records import canary_record, codec
from model_sync.s3.bucket import Bucket
from model_sync.ui import Console
from model_sync.versions import catalog
from tests.model_sync.helpers import python_model, run_cli, write_config
from tests.support.s3_servers import S3Server


def _release(tmp_path: Path, capsys, server: S3Server, bucket: str, aws_env, version: int) -> gray_release.GrayRelease:
    cfg = write_config(tmp_path / "model-sync.yaml", server, {"prod": f"s3://{bucket}"})
    for tag in ("1", "2"):
        src = python_model(tmp_path / f"src{tag}", "m", {"model.py": f"# {tag}\n".encode(), "model.pt": tag.encode()})
        assert run_cli(capsys, "push", str(src), "--env", "prod", "--config", cfg).code == 0
    assert run_cli(capsys, "rollback", "m", "--env", "prod", "--config", cfg, "--yes").code == 0  # pin 1; 2 published
    repo = Bucket(environments.Environment("prod", layout.Root(bucket), server.endpoint, "us-east-1"))
    return gray_release.GrayRelease(repo, "m", version, CanaryPolicy(), TritonMetrics("m", {"default-0": "http://127.0.0.1:9/metrics"}),
                              console=Console(quiet=True), by="tests", poll=0.01)  # fmt: skip


def test_a_release_is_refused_before_it_lists_a_replica(
    tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    release = _release(tmp_path, capsys, moto_s3, s3_bucket, aws_env, 2)
    with pytest.raises(
        errors.SyncError, match=r"^canary: 0 live replica\(s\) report m in prod; allowed: at least 2 "
    ) as e:
        release.run()  # no replica reports the model: nothing to compare on
    assert e.value.code == errors.REFUSED
    assert canary_record.read(release.repo, "m").doc is None  # nothing written
    pinned = gray_release.GrayRelease(release.repo, "m", 1, release.policy, release.metrics, console=release.console,
                                by="tests")  # fmt: skip
    with pytest.raises(errors.SyncError, match=r"^canary: m version 1 is already the stable pin in prod; allowed: "):
        pinned.run()
    now = codec.now()
    other = {
        "schema": canary_record.CANARY, "model": "m", "id": canary_record.new_id(), "state": "running",
        "deployment": "default", "stable_version": 1, "canary_version": 3, "replicas": ["default-0"],
        "share_percent": 10, "steps": [], "policy": {}, "started_by": "someone", "started_at": now,
        "deadline_at": now, "updated_at": now, "decision": None,
    }  # fmt: skip
    canary_record.write(release.repo, canary_record.Stored(None, None), other)
    with pytest.raises(errors.SyncError, match=r"^canary: m version 3 is in a gray release \(.*\); allowed: one at a"):
        release.run()
    ended = ending.abort(release.repo, "m", "tests")
    assert ended is not None
    assert (ended["state"], ended["replicas"], ended["decision"]["by"]) == ("aborted", [], "tests")
    assert ending.abort(release.repo, "m", "tests") is None  # nothing running
    archived = moto_s3.get(s3_bucket, layout.canary_audit_key("m", other["id"]))
    assert codec.read(archived, canary_record.CANARY)["state"] == "aborted"


def _lose_model_py(server: S3Server, bucket: str, version: int) -> None:
    """m `version` as another tool could leave it: its manifest no longer lists model.py (what the
    python backend loads) and the object is gone."""
    key = layout.manifest_key("m", version)
    doc = codec.read_manifest(server.get(bucket, key), "m", version)
    del doc["files"]["model.py"]
    server.client().put_object(Bucket=bucket, Key=key, Body=codec.dumps(doc))
    server.client().delete_object(Bucket=bucket, Key=layout.version_file_key("m", version, "model.py"))


def test_a_version_no_replica_would_serve_is_refused_at_the_start_and_at_the_final_flip(
    tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    """The gray release applies the rule every agent applies (model_sync.versions.pinnable): before
    its record is written, and again before its final flip (a file lost during the run): exit 4,
    the pin untouched, the record ended aborted with the reason."""
    release = _release(tmp_path, capsys, moto_s3, s3_bucket, aws_env, 2)
    pin = catalog.read_pin(release.repo, "m")
    config_text = catalog.read_manifest(release.repo, "m", 2)["config_pbtxt"]  # type: ignore[index]
    now = time.time()
    release.record.create(canary_record.new("m", release.canary_id, "default", 1, 2, {}, "tests", now, 600))
    _lose_model_py(moto_s3, s3_bucket, 2)
    refused = (
        rf"^canary: m version 2 in prod: manifest s3://{s3_bucket}/manifests/m/2\.json: lists no model\.py; "
        r"allowed: a version with every file its backend needs \(model_config\.required_files\), which every "
        r"replica serves"
    )
    with pytest.raises(errors.SyncError, match=refused) as e:
        release._promote(pin, config_text)  # the final flip of a run whose steps passed
    assert e.value.code == errors.REFUSED
    assert catalog.read_pin(release.repo, "m").version == 1
    ended = canary_record.read(release.repo, "m").doc
    assert ended is not None
    assert ended["state"] == "aborted" and ended["decision"]["reason"].startswith("not pinned: canary: m version 2")  # noqa: PT018
    # A new run of the same version is refused before it writes anything.
    etag = canary_record.read(release.repo, "m").etag
    with pytest.raises(errors.SyncError, match=refused) as e:
        release.run()
    assert e.value.code == errors.REFUSED
    assert canary_record.read(release.repo, "m").etag == etag


def _report(replica: str, serving: int, heartbeat: float, pinned: int = 1) -> bytes:
    """Replica `replica`'s status record, as its agent writes it: serving m `serving` READY, now."""
    now = codec.format_time(time.time())
    entry = {"pinned": [pinned], "serving": [serving], "state": "READY", "error": None, "failed": {},
             "local_versions": sorted({pinned, serving}), "smoke": None}  # fmt: skip
    return codec.dumps({"schema": codec.REPLICA_STATUS, "env": "prod", "deployment": "default",
                           "replica": replica, "bucket_uri": "s3://b", "triton_url": None,
                           "heartbeat_seconds": heartbeat, "s3_reachable": True, "last_s3_ok_at": now,
                           "last_error": None, "agent_started_at": now, "reported_at": now,
                           "models": {"m": entry}})  # fmt: skip


class Agents:
    """Heartbeats of replica status records (0.3 s) for `replicas`, each serving version 1, until
    `silence(replica)` stops one: what a pod that died leaves behind; and each replica's metrics
    endpoint (a real prometheus_client exposition server, no series: the gray release asks it only
    whether it answers), until `die(replica)` shuts it down too. With `canary` (the replicas a run
    lists), those report serving version 2, the canary, as their agents would once loaded."""

    def __init__(self, server: S3Server, bucket: str, replicas: list[str], heartbeat: float = 0.3,
                 canary: Callable[[], list[str]] = list, pending: Sequence[str] = ()) -> None:  # fmt: skip
        self.client, self.bucket, self.live, self.heartbeat = server.client(), bucket, set(replicas), heartbeat
        self.canary = canary
        self.registries = {r: CollectorRegistry() for r in [*replicas, *pending]}  # pending: report once join()ed
        self.endpoints = {r: start_http_server(0, addr="127.0.0.1", registry=reg) for r, reg in self.registries.items()}
        self._stop = threading.Event()
        self._beat()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def metrics(self) -> TritonMetrics:
        return TritonMetrics(
            "m", {r: f"http://127.0.0.1:{s.server_port}/metrics" for r, (s, _) in self.endpoints.items()}
        )

    def die(self, replica: str) -> float:
        """The replica's pod dies: its metrics endpoint stops answering (its report stops too)."""
        endpoint, _ = self.endpoints[replica]
        endpoint.shutdown()
        endpoint.server_close()
        return self.silence(replica)

    def _beat(self) -> None:
        canary = set(self.canary())
        for replica in sorted(self.live):
            self.client.put_object(Bucket=self.bucket, Key=f"status/default/{replica}.json",
                                   Body=_report(replica, 2 if replica in canary else 1, self.heartbeat))  # fmt: skip

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            self._beat()

    def join(self, replica: str) -> None:
        """A pending replica's agent starts reporting (serving version 1 READY)."""
        self.live.add(replica)

    def silence(self, replica: str) -> float:
        self.live.discard(replica)
        return time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for endpoint, _ in self.endpoints.values():
            endpoint.shutdown()
            endpoint.server_close()


def _listed(release: gray_release.GrayRelease, count: int = 1, timeout: float = 10) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc = canary_record.read(release.repo, "m").doc
        if doc and len(doc["replicas"]) == count:
            return doc
        time.sleep(0.05)
    raise AssertionError(f"no record listing {count} replica(s) within {timeout}s")


def test_a_listed_replica_that_stops_reporting_is_replaced_and_the_window_restarts(
    tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    release = _release(tmp_path, capsys, moto_s3, s3_bucket, aws_env, 2)
    release.policy = CanaryPolicy(steps=(25, 50), step_seconds=5, deadline_seconds=120, load_timeout_seconds=60)
    agents = Agents(moto_s3, s3_bucket, ["default-0", "default-1", "default-2"])
    release.metrics = agents.metrics()
    outcome: list[BaseException] = []
    run = threading.Thread(target=lambda: _catch(release.run, outcome), daemon=True)
    try:
        run.start()
        first = _listed(release)
        silenced = agents.silence(first["replicas"][0])
        doc = _relisted(release, first["replicas"], 10)
        took = time.monotonic() - silenced
        step = doc["steps"][-1]
        assert len(doc["replicas"]) == 1 and doc["replicas"][0] != first["replicas"][0], doc  # noqa: PT018
        assert (step["fleet"], step["replicas"], step["restarts"], step["window_from"]) == (2, 1, 1, None), step
        assert step["listed_at"] >= step["started_at"]
        assert took <= 3 * 0.3 + 1.0, took  # 3 heartbeats, then the next poll (0.01 s)
        assert ending.abort(release.repo, "m", "tests") is not None  # ends it: the run exits 4 at its next poll
        run.join(10)
    finally:
        agents.stop()
    assert len(outcome) == 1 and isinstance(outcome[0], errors.SyncError), outcome  # noqa: PT018
    assert outcome[0].code == errors.REFUSED
    assert str(outcome[0]).startswith(
        "canary: m version 2: another writer ended it aborted (aborted by an operator, by"
    )


def test_a_replica_that_appears_joins_the_fleet_once_clients_reach_it_not_at_its_agents_smoke_inference(
    tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    """A pod scaled out during a step reports READY, then its agent's smoke inference is the one
    request it has answered: the Service sends it clients only after its readiness probe. The run
    keeps the fleet at the replicas clients reach, and counts the new one (re-balancing, the window
    restarted) once it has answered more than its agent's request."""
    release = _release(tmp_path, capsys, moto_s3, s3_bucket, aws_env, 2)
    release.policy = CanaryPolicy(steps=(50,), step_seconds=60, deadline_seconds=120, load_timeout_seconds=60)
    agents = Agents(moto_s3, s3_bucket, ["default-0", "default-1", "default-2"], pending=["default-3"])
    requests = Counter(
        "nv_inference_request_success", "", ["model", "version"], registry=agents.registries["default-3"]
    )
    release.metrics = agents.metrics()
    outcome: list[BaseException] = []
    run = threading.Thread(target=lambda: _catch(release.run, outcome), daemon=True)
    try:
        run.start()
        first = _listed(release)
        agents.join("default-3")  # READY reported ...
        time.sleep(0.5)
        requests.labels("m", "1").inc(fleet_watch.AGENT_REQUESTS_AFTER_READY)  # ... then its agent's smoke inference
        time.sleep(1.5)  # five of its reports, about 150 polls
        still = canary_record.read(release.repo, "m").doc
        assert still is not None and still["steps"][-1]["fleet"] == 3, still  # noqa: PT018
        requests.labels("m", "1").inc(3)  # clients' requests: the Service sends it traffic
        doc = _relisted(release, first["replicas"], 5)
        step = doc["steps"][-1]
        assert (step["fleet"], step["replicas"], step["restarts"]) == (4, 2, 1), step
        assert ending.abort(release.repo, "m", "tests") is not None
        run.join(10)
    finally:
        agents.stop()
    assert len(outcome) == 1 and outcome[0].code == errors.REFUSED, outcome  # type: ignore[attr-defined]  # noqa: PT018


def test_a_listed_replica_whose_metrics_stop_answering_is_replaced_at_the_next_poll(
    tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    """Liveness at every decision: a canary replica's pod dies and its reports would take 3 of its
    30 s heartbeats to age; its metrics endpoint stops answering at once, so the next poll lists a
    live replica instead and the step's window starts again (nothing judged on the dead one)."""
    release = _release(tmp_path, capsys, moto_s3, s3_bucket, aws_env, 2)
    release.policy = CanaryPolicy(steps=(25, 50), step_seconds=5, deadline_seconds=120, load_timeout_seconds=60)
    agents = Agents(moto_s3, s3_bucket, ["default-0", "default-1", "default-2"], heartbeat=30.0)
    release.metrics = agents.metrics()
    outcome: list[BaseException] = []
    run = threading.Thread(target=lambda: _catch(release.run, outcome), daemon=True)
    try:
        run.start()
        first = _listed(release)
        died = agents.die(first["replicas"][0])
        doc = _relisted(release, first["replicas"], 10)
        took = time.monotonic() - died
        step = doc["steps"][-1]
        assert first["replicas"][0] not in doc["replicas"] and len(doc["replicas"]) == 1, doc  # noqa: PT018
        assert (step["fleet"], step["replicas"], step["restarts"], step["window_from"]) == (2, 1, 1, None), step
        assert took <= 3.0, took  # a poll (0.01 s) and its reads: not 3 heartbeats (90 s)
        assert ending.abort(release.repo, "m", "tests") is not None
        run.join(10)
    finally:
        agents.stop()
    assert len(outcome) == 1 and outcome[0].code == errors.REFUSED, outcome  # type: ignore[attr-defined]  # noqa: PT018


def _relisted(release: gray_release.GrayRelease, before: list[str], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc = canary_record.read(release.repo, "m").doc
        if doc and doc["replicas"] and doc["replicas"] != before:
            return doc
        time.sleep(0.05)
    raise AssertionError(f"the replicas {before} were not relisted within {timeout}s")


def test_with_fewer_than_two_live_replicas_the_run_aborts_at_once_naming_the_silent_one(
    tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    release = _release(tmp_path, capsys, moto_s3, s3_bucket, aws_env, 2)
    release.policy = CanaryPolicy(steps=(25, 50), step_seconds=5, deadline_seconds=600, load_timeout_seconds=300)
    agents = Agents(moto_s3, s3_bucket, ["default-0", "default-1"])
    release.metrics = agents.metrics()
    try:
        outcome: list[BaseException] = []
        run = threading.Thread(target=lambda: _catch(release.run, outcome), daemon=True)
        run.start()
        victim = _listed(release)["replicas"][0]
        silenced = agents.silence(victim)
        run.join(15)
        took = time.monotonic() - silenced
    finally:
        agents.stop()
    assert len(outcome) == 1 and isinstance(outcome[0], errors.SyncError), outcome  # noqa: PT018
    assert outcome[0].code == errors.CHECK_FAILED
    assert took <= 3 * 0.3 + 2.0, took  # not the load timeout (300 s), not the deadline (600 s)
    assert (
        f"aborted (no live replica can take the canary: 1 live replica(s) of default report m (at least 2 are "
        f"needed); {victim} stopped reporting ("
    ) in str(outcome[0])
    ended = canary_record.read(release.repo, "m").doc
    assert ended is not None
    assert (ended["state"], ended["replicas"]) == ("aborted", [])
    assert ended["decision"]["reason"].startswith("no live replica can take the canary")


class _DiesBeforeItsFigures:
    """The run's metrics, where the canary replica's pod dies between a poll's liveness check and
    the figures it reads next, in the poll whose window has run stepSeconds: the one that would pass
    the step. The run's clock moves only in its own sleeps (the test's), so that poll is known
    exactly. Requests keep coming to every replica: `tick()` adds 20 to each version, alike."""

    def __init__(self, agents: Agents, release: gray_release.GrayRelease) -> None:
        self.inner, self.agents, self.release = agents.metrics(), agents, release
        self.died: list[str] = []
        self.marked = release.clock()
        self._requests = []
        for registry in agents.registries.values():
            ok = Counter("nv_inference_request_success", "", ["model", "version"], registry=registry)
            tail = Gauge("nv_inference_request_summary_us", "", ["model", "version", "quantile"], registry=registry)
            for version in ("1", "2"):
                for quantile in ("0.99", "0.95"):
                    tail.labels("m", version, quantile).set(10_000)
            self._requests.append(ok)

    def tick(self) -> None:
        for ok in self._requests:
            for version in ("1", "2"):
                ok.labels("m", version).inc(20)

    def mark(self) -> Any:
        self.marked = self.release.clock()  # the window's start: the run reads its clock next, unmoved
        return self.inner.mark()

    def answering(self, replicas: Sequence[str]) -> dict[str, float]:
        return self.inner.answering(replicas)

    def figures(self, mark: Any, versions: Sequence[int]) -> Any:
        if not self.died and self.release.clock() - self.marked >= self.release.policy.step_seconds:
            self.died.append(self.release.doc["replicas"][0])
            self.agents.die(self.died[0])
        return self.inner.figures(mark, versions)


def test_a_canary_replica_that_dies_between_the_liveness_check_and_the_figures_does_not_pass_the_step(
    tmp_path: Path, capsys, moto_s3: S3Server, s3_bucket: str, aws_env
) -> None:
    """The edge of a replica dying just before the decision: its metrics answered this poll's
    liveness check, then it died before the figures were read, which sum the replicas that answer.
    The window is not judged on the survivors: the next poll lists a live replica instead, the
    window starts again, and only a whole window passes the step."""
    release = _release(tmp_path, capsys, moto_s3, s3_bucket, aws_env, 2)
    release.policy = CanaryPolicy(steps=(50,), step_seconds=1, deadline_seconds=60, load_timeout_seconds=30,
                                  min_requests=10)  # fmt: skip
    now = [time.time()]

    def sleep(seconds: float) -> None:  # the run's time passes in its sleeps only
        time.sleep(min(seconds, 0.05))
        now[0] += seconds

    release.clock, release.sleep, release.poll = (lambda: now[0]), sleep, 0.5  # two polls a window
    listed = lambda: (canary_record.read(release.repo, "m").doc or {}).get("replicas", [])  # noqa: E731
    agents = Agents(moto_s3, s3_bucket, ["default-0", "default-1", "default-2"], heartbeat=30.0, canary=listed)
    metrics = _DiesBeforeItsFigures(agents, release)
    release.metrics = metrics
    outcome: list[BaseException] = []
    run = threading.Thread(target=lambda: _catch(release.run, outcome), daemon=True)
    try:
        run.start()
        while run.is_alive():
            metrics.tick()
            time.sleep(0.05)
    finally:
        agents.stop()
    assert outcome == [], outcome
    doc = canary_record.read(release.repo, "m").doc
    assert doc is not None and doc["state"] == "promoted", doc  # noqa: PT018
    assert len(metrics.died) == 1, metrics.died
    step = doc["steps"][-1]
    assert (step["verdict"], step["fleet"], step["replicas"], step["restarts"]) == ("pass", 2, 1, 1), step


def _catch(fn, into: list[BaseException]) -> None:  # type: ignore[no-untyped-def]
    try:
        fn()
    except BaseException as e:  # the run's exit, for the test to look at
        into.append(e)
