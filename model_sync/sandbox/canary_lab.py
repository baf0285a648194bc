"""A gray release on this machine (`CanaryLab`): the real local stack of docs/architecture.md#gray-release,
shared by the e2e scenarios (tests/model_sync/canary/test_e2e.py), the benchmark (bench/canary/run.py)
and what they measure. Nothing is faked:

- one local S3 server (model_sync.sandbox.s3server.MotoS3Server: moto, atomic overwrites, enforced
  conditional writes) with a staging and a prod bucket;
- a prod fleet of real tritonserver replicas, each with its own repository agent
  (model_sync.sandbox.fleet), reporting as `status/default/default-<i>.json`;
- round-robin traffic over the replicas, standing in for the Service (model_sync.sandbox.traffic):
  a replica that dies leaves it (`kill`), one that scales out joins it once READY (`scale_out`);
- the CLI as its users run it (`python -m model_sync`, subprocesses): push to staging, then
  `promote --to prod`, which runs the gray release with the policy in model-sync.yaml
  (canaryPolicies) and the replicas' /metrics (tritonMetricsUrls, the spares' included: the
  replicas a scale-out starts, as Prometheus would find new pods).

Two models: MODEL, the python-backend kinds of model_sync.sandbox.canary_models, and TS_MODEL,
TorchScript exported by the real `model-sync export --target local` (model_sync.sandbox.torchscript_models).

`measure()` turns the traffic's records and the final canary record into the figures the issue
asks for: the observed canary share against the configured and the effective one, the time from
the failing verdict to the last request the canary answered, and how many it answered.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from model_sync import environments
from model_sync.contract import layout
from model_sync.records import canary_record, codec
from model_sync.s3.bucket import Bucket
from model_sync.sandbox import canary_models, torchscript_models
from model_sync.sandbox.fleet import LocalFleet, S3Target, subprocess_environ
from model_sync.sandbox.procs import wait_until
from model_sync.sandbox.s3server import MotoS3Server
from model_sync.sandbox.traffic import Records, RoundRobinTraffic
from model_sync.versions import catalog

MODEL = "canary-demo"
TS_MODEL = "canary-ts"
# Short steps for a 2-core machine: the shares map exactly onto 4 replicas (1 and 2 of them). The
# deadline leaves room for a latency failure confirmed in each step (latencyConfirmAfterSeconds, 60 s).
POLICY = {"steps": [25, 50], "stepSeconds": 5, "deadlineSeconds": 300, "minRequests": 40, "loadTimeoutSeconds": 45}


def inputs(seq: int) -> dict[str, Any]:
    """Request `seq`'s input. INPUT0[0] is a hash of `seq` below 2**20 (exact in float32), so the
    `errors` kind fails 1 request in 20 on every replica: a counter would send every failing
    input (13 mod 20) to the same replica of a round robin over 4."""
    return {canary_models.INPUT: np.array([float(seq * 2654435761 % 1048573), 1.0, 2.0, 3.0], dtype=np.float32)}


def ts_inputs(seq: int) -> dict[str, Any]:
    """Request `seq`'s input for TS_MODEL: the same values, as its one batch-less [1, 4] tensor."""
    return {torchscript_models.INPUT: inputs(seq)[canary_models.INPUT].reshape(1, 4)}


INPUTS = {MODEL: inputs, TS_MODEL: ts_inputs}
# `python -m model_sync` with SIGINT handled as Python handles it by default (CanaryLab.start_cli).
INTERRUPTIBLE_CLI = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'model-sync'; runpy.run_module('model_sync', run_name='__main__', alter_sys=True)"
)
# A pod joins the Service at its next readiness probe after it serves: at worst the Deployment's
# readinessProbe.periodSeconds (components/triton_deployment.py) later.
READINESS_PERIOD_S = 5.0
# The clients: 160 requests a second, half of what 4 replicas of one 10 ms instance each answer (so
# 3 of them, after one died, still keep up), at most 8 in flight.
TRAFFIC_RATE = 160.0
TRAFFIC_THREADS = 8
# The tail regression's traffic (`tail` against a stable `slow`, 30 ms): 20 requests a second per
# replica, 60 % of what one instance of the stable answers.
TAIL_RATE = 80.0


@dataclass(frozen=True)
class Release:
    """One gray release in the lab: the promote's exit code, stderr and duration, what the clients
    saw, the final canary record and measure() of both, and the promote's stdout."""

    code: int
    stderr: str
    seconds: float
    records: Records
    doc: dict[str, Any]
    figures: dict[str, Any]
    stdout: str = ""


@dataclass
class CanaryLab:
    """Staging (a bucket only) and prod (a bucket and `replicas` serving replicas) under `root`."""

    root: Path
    replicas: int = 4
    spares: int = 2  # replicas `scale_out` can start (their metrics endpoints listed from the start)
    policy: dict[str, Any] = field(default_factory=lambda: dict(POLICY))
    agent_interval: float = 0.5  # seconds between an agent's passes (its heartbeat stays 2 s)
    s3: MotoS3Server = field(init=False)
    fleet: LocalFleet = field(init=False)
    traffic: RoundRobinTraffic | None = field(default=None, init=False)
    _pending: list[Any] = field(default_factory=list, init=False, repr=False)  # prepared by prepare_scale_out
    _prod_repo: Any = field(default=None, init=False, repr=False)  # the lab's reader of the prod bucket

    def __post_init__(self) -> None:
        self.root = self.root.absolute()
        self.s3 = MotoS3Server(self.root / "s3", self.root / "logs" / "s3.log")

    @property
    def config(self) -> Path:
        return self.root / "model-sync.yaml"

    def start(self) -> CanaryLab:
        self.s3.create_buckets("models-staging")
        self.s3.start()
        target = S3Target.moto(self.s3, "models-prod")
        self.fleet = LocalFleet(self.root / "prod", target, replica_count=self.replicas, env="prod",
                                interval=self.agent_interval, heartbeat=2.0, spares=self.spares)  # fmt: skip
        self.fleet.start()
        staging = {"bucket": "s3://models-staging", "endpointUrl": self.s3.endpoint_url, "region": self.s3.region}
        self.config.write_text(json.dumps({"environments": {"staging": staging}}))  # YAML is a superset of JSON
        self.use_policy()
        return self

    def use_policy(self, policy: dict[str, Any] | None = None, model: str = MODEL) -> None:
        """The gray release policy the next promotes of `model` run (canaryPolicies in model-sync.yaml,
        read by each promote); None: the lab's own, for every model."""
        policies = {MODEL: self.policy, TS_MODEL: self.policy}
        if policy is not None:
            policies[model] = policy
        self.fleet.write_config(self.config, {"canaryPolicies": policies})

    def stop(self) -> None:
        if self.traffic is not None:
            self.traffic.stop()
        self.fleet.stop()
        self.s3.shutdown()

    # -- the CLI --

    def environ(self) -> dict[str, str]:
        return subprocess_environ(self.s3.client_env(), self.config)

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "model_sync", *args], capture_output=True, text=True,
                              env=self.environ(), timeout=timeout, check=False)  # fmt: skip

    def start_cli(self, *args: str) -> subprocess.Popen[str]:
        """`model-sync ARGS` in the background, as from a terminal: Ctrl-C (SIGINT) reaches it. A
        parent that ignores SIGINT passes that on (a background job of a non-interactive shell,
        `make test &` in a script, does), and Python then never raises KeyboardInterrupt: measured,
        the interrupted release ran to its end. So the child takes Python's handler back first."""
        return subprocess.Popen([sys.executable, "-c", INTERRUPTIBLE_CLI, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.environ())  # fmt: skip

    def publish(self, kind: str, model: str = MODEL) -> int:
        """Push a `kind` model to staging; its staging version. MODEL's kinds are
        model_sync.sandbox.canary_models', TS_MODEL's model_sync.sandbox.torchscript_models' (exported)."""
        src = self.root / "src" / f"{kind}-{time.monotonic_ns()}"
        if model == TS_MODEL:
            model_dir = torchscript_models.export_local(src, model, kind)
        else:
            model_dir = canary_models.write_model(src, model, kind)
        with (model_dir / "1" / "model.py").open("a") as f:  # a new version even of a kind published before
            f.write(f"# published {codec.now()}\n")
        done = self.cli("push", str(model_dir), "--env", "staging", "--output", "json")
        assert done.returncode == 0, done.stderr
        return int(json.loads(done.stdout)["models"][0]["version"])

    def promote_args(self, version: int, *extra: str, model: str = MODEL) -> tuple[str, ...]:
        return ("promote", model, "--model-version", str(version), "--from", "staging", "--to", "prod",
                "--skip-verification", *extra)  # fmt: skip

    def pin(self, version: int, model: str = MODEL) -> int:
        """Promote staging `version` to prod at once (--no-canary); its prod version."""
        done = self.cli(*self.promote_args(version, "--no-canary", "--output", "json", model=model))
        assert done.returncode == 0, done.stderr
        return int(json.loads(done.stdout)["to"]["version"])

    def repin(self, version: int, model: str = MODEL) -> None:
        """Pin prod `version` again (`rollback --model-version`), once every replica serves it."""
        done = self.cli("rollback", model, "--env", "prod", "--model-version", str(version), "--yes")
        assert done.returncode == 0, done.stderr
        self.fleet.wait_ready(model, version)

    def stable(self, kind: str = "good", model: str = MODEL) -> int:
        """A first prod version, pinned at once (--no-canary: nothing to compare with yet), served by all."""
        version = self.pin(self.publish(kind, model), model)
        self.fleet.wait_ready(model, version)
        return version

    # -- the fleet as Kubernetes changes it --

    def kill(self, index: int) -> None:
        """Replica `index`'s pod dies (agent and tritonserver SIGKILLed) and leaves the Service."""
        if self.traffic is not None:
            self.traffic.remove(self.fleet.replicas[index].http_url)
        self.fleet.kill_replica(index)

    def replace_dead(self, index: int, model: str = MODEL) -> None:
        """Kubernetes replaces the pod of replica `index`, killed: it leaves the fleet, and a new pod
        (the next spare, under a new name) joins the Service once it serves the model."""
        self.fleet.forget_replica(index)
        self.prepare_scale_out(1)
        self.scale_out(model)

    def prepare_scale_out(self, count: int) -> None:
        """`count` more pods scheduled (the spares first): their tritonservers start, their agents
        not yet, so they report nothing and take no traffic until `scale_out`."""
        with ThreadPoolExecutor(max_workers=count) as pool:
            self._pending = list(pool.map(lambda _: self.fleet.add_replica(start_agent=False), range(count)))

    def scale_out(self, model: str = MODEL, ready: Callable[[], None] | None = None,
                  join_after: float = READINESS_PERIOD_S) -> list[int]:  # fmt: skip
        """The prepared pods' agents start: each loads what the bucket pins, reports, and joins the
        Service `join_after` seconds after it serves the model's pin READY (`ready()` then, before
        the readiness probe lets it in). Their indexes."""
        added, self._pending = self._pending, []
        for replica in added:
            replica.agent.start()
        if added:  # each pod's readiness probe is its own: they join side by side
            with ThreadPoolExecutor(max_workers=len(added)) as pool:
                joins = [pool.submit(self._join, r.http_url, self.fleet.replicas.index(r), model, ready, join_after)
                         for r in added]  # fmt: skip
                for join in joins:
                    join.result()
        return [r.index for r in added]

    def scale_in(self, count: int) -> None:
        """The last `count` replicas leave the Service, then stop (their agents delete their reports)."""
        for _ in range(count):
            if self.traffic is not None:
                self.traffic.remove(self.fleet.replicas[-1].http_url)
            self.fleet.remove_replica()

    def _join(self, url: str, position: int, model: str, ready: Callable[[], None] | None = None,
              join_after: float = READINESS_PERIOD_S) -> None:  # fmt: skip
        """The replica at `position` joins the Service `join_after` seconds after it serves a version
        of `model` READY (the pin, or the canary version when a running gray release lists it
        already): by default READINESS_PERIOD_S, as the kubelet's readiness probe lets it in at worst."""
        pinned = self.pinned(model)
        versions = {pinned} if pinned is not None else set()
        doc = self.canary_record(model)
        if doc is not None and doc["state"] == "running":
            versions.add(int(doc["canary_version"]))
        wait_until(lambda: any(self.fleet.version_ready(position, model, v) for v in versions), 90,
                   what=f"{model} version {sorted(versions)} READY on replica {position}")  # fmt: skip
        if ready is not None:
            ready()
        time.sleep(join_after)  # the kubelet's next readiness probe: then the Service sends it traffic
        if self.traffic is not None:
            self.traffic.add(url)

    # -- traffic and the record --

    def start_traffic(self, model: str = MODEL, rate: float = TRAFFIC_RATE) -> RoundRobinTraffic:
        """Clients at `rate` requests a second over the Service's replicas, TRAFFIC_THREADS at most
        in flight: an open loop, so a replica slower for a moment gets no more requests than the
        others (a closed loop over fewer replicas than threads piles them onto it)."""
        pending = {r.http_url for r in self._pending}  # scheduled pods: in no Service until scale_out
        urls = [url for url in self.fleet.http_urls if url not in pending]
        self.traffic = RoundRobinTraffic(urls, model, INPUTS[model], concurrency=TRAFFIC_THREADS,
                                         rate=rate).start()  # fmt: skip
        return self.traffic

    def stop_traffic(self) -> Records:
        assert self.traffic is not None
        records, self.traffic = self.traffic.stop(), None
        return records

    def pinned(self, model: str = MODEL) -> int | None:
        """The prod stable pin of `model`, read through model_sync's strict reader (the lab's one client:
        no CLI start-up, 1.5 s of CPU each, between the scenarios' steps)."""
        return catalog.read_pin(self._prod(), model).version

    def canary_record(self, model: str = MODEL) -> dict[str, Any] | None:
        """The prod canary record, through model_sync's strict reader (one client for the lab)."""

        return canary_record.read(self._prod(), model).doc

    def _prod(self) -> Any:
        if self._prod_repo is None:
            import botocore.session

            session = botocore.session.get_session()
            session.set_credentials(self.s3.access_key, self.s3.secret_key)
            env = environments.Environment("prod", layout.Root("models-prod"), self.s3.endpoint_url, self.s3.region)
            self._prod_repo = Bucket(env, session=session)
        return self._prod_repo

    def release(self, kind: str, model: str = MODEL, during: Callable[[subprocess.Popen[str]], None] | None = None,
                rate: float = TRAFFIC_RATE) -> Release:  # fmt: skip
        """Publish `kind` and promote it to prod under traffic at `rate` (a gray release), 2 s of
        traffic after its decision included: the canary replicas are back on stable, or every
        replica on the new version. `during(run)` runs once the promote `run` has started (e.g. a
        replica dies)."""
        version = self.publish(kind, model)
        self.start_traffic(model=model, rate=rate)  # before the promote: its copy takes seconds
        started = time.monotonic()
        run = self.start_cli(*self.promote_args(version, model=model))
        try:
            if during is not None:
                during(run)
        except BaseException:  # the scenario failed: no run and no clients are left behind for the next
            run.kill()
            run.wait(timeout=30)
            self.stop_traffic()
            raise
        stdout, stderr = run.communicate(timeout=300)
        seconds = time.monotonic() - started
        time.sleep(2)
        records = self.stop_traffic()
        doc = self.canary_record(model)
        assert doc is not None, stderr
        return Release(run.returncode, stderr, seconds, records, doc, measure(records, doc), stdout)

    def wait_record(self, done: Callable[[dict[str, Any]], bool], timeout: float = 60, what: str = "the canary record",
                    model: str = MODEL) -> dict[str, Any]:  # fmt: skip
        """Until the canary record satisfies `done`; the record. A timeout names what the record
        last said (its state, steps and decision)."""
        failed: list[AssertionError] = []
        last: list[dict[str, Any]] = []

        def check() -> bool:
            try:
                doc = self.canary_record(model)
                last[:] = [doc] if doc else []
                return bool(doc and done(doc))
            except AssertionError as e:  # `done` says waiting is over
                failed.append(e)
                return True

        try:
            wait_until(check, timeout, what=what)
        except TimeoutError as e:
            said = {k: last[0].get(k) for k in ("state", "canary_version", "steps", "decision")} if last else None
            raise TimeoutError(f"{e}; the canary record last read: {json.dumps(said, default=str)[:1500]}") from None
        if failed:
            raise failed[0]
        doc = self.canary_record(model)
        assert doc is not None
        return doc

    def wait_step(
        self, timeout: float | None = None, model: str = MODEL, run: subprocess.Popen[str] | None = None
    ) -> dict[str, Any]:
        """Until the running record's replicas serve the canary and its first step judges it, at most
        `timeout` (default: the policy's deadline, by which the run itself ends); with `run` (the
        promote), an AssertionError with its stderr as soon as it exits."""
        if timeout is None:
            timeout = float(self.policy["deadlineSeconds"])

        def judged(doc: dict[str, Any]) -> bool:
            if run is not None and run.poll() is not None:
                raise AssertionError(f"the release ended (exit {run.returncode}): {run.communicate()[1]}")
            return doc["state"] == "running" and bool(doc["steps"]) and bool(doc["steps"][-1]["verdict"])

        return self.wait_record(judged, timeout, "the canary's first verdict", model)

    def wait_output(self, run: subprocess.Popen[str], prefix: str, timeout: float = 60) -> str:
        """Read the promote's stdout until a line starting with `prefix` (its progress: "step: "
        once a step has listed its replicas), as it is printed, without a bucket read in between;
        that line. An AssertionError with its stderr when the run ends first or `timeout` passes."""
        assert run.stdout is not None
        stdout, found = run.stdout, []

        def read() -> None:
            for line in stdout:
                if line.startswith(prefix):
                    found.append(line)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if found:
            return found[0]
        run.kill()
        raise AssertionError(f"no {prefix!r} line (exit {run.wait()}): {run.stderr.read() if run.stderr else ''}")


def measure(records: Records, doc: dict[str, Any]) -> dict[str, Any]:
    """The figures of one gray release from what the clients saw and the final canary record."""
    canary, stable = doc["canary_version"], doc["stable_version"]
    failures = records.failures(stable, canary, canary_models.injected_version)
    steps = []
    for step in doc["steps"]:
        start = codec.parse_time(step["window_from"] or step["started_at"]).timestamp()
        end = codec.parse_time(step["ended_at"]).timestamp() if step["ended_at"] else None
        observed = records.fraction(canary, _mono(start), _mono(end) if end else None)
        steps.append({"configured_percent": step["share_percent"], "effective_percent": step["effective_percent"],
                      "observed_percent": None if observed is None else round(100 * observed, 2),
                      "verdict": step["verdict"]})  # fmt: skip
    out: dict[str, Any] = {
        "outcome": doc["decision"]["outcome"] if doc["decision"] else doc["state"],
        "reason": doc["decision"]["reason"] if doc["decision"] else None,
        "requests": len(records),
        "failed_stable": failures.stable,
        "failed_canary": failures.canary,
        "failed_other": failures.other,
        "answered_by_canary": records.version_counts().get(canary, 0),
        # The failures the canary model did not inject (up to 10): what a `failed_stable` or `failed_other` was.
        "unexpected_failures": [
            {"replica": r.replica, "attributed_version": records.attributed_version(r), "error": r.error}
            for r in records.failed()
            if r.error is not None and canary_models.injected_version(r.error) is None
        ][:10],
        "steps": steps,
    }
    if doc["decision"] and doc["decision"]["outcome"] == "aborted":
        decided = codec.parse_time(doc["decision"]["at"]).timestamp()
        last = records.last_answered_by(canary)
        out["seconds_to_zero_canary"] = None if last is None else round(max(0.0, last - _mono(decided)), 3)
    return out


def _mono(wall: float) -> float:
    """A wall-clock time (the records' timestamps) on the traffic's monotonic clock."""
    return time.monotonic() - (time.time() - wall)
