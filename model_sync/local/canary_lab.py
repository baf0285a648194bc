"""A gray release on this machine (`CanaryLab`): the real local stack of docs/architecture.md#gray-release,
shared by the e2e scenarios (tests/model_sync/test_canary_e2e.py), the benchmark (bench/canary/run.py)
and what they measure. Nothing is faked:

- one `rclone serve s3` with a staging and a prod bucket;
- a prod fleet of real tritonserver replicas, each with its own repository agent
  (model_sync.local.fleet), reporting as `status/default/default-<i>.json`;
- round-robin traffic over the replicas, standing in for the Service (model_sync.local.traffic);
- the CLI as its users run it (`python -m model_sync`, subprocesses): push to staging, then
  `promote --to prod`, which runs the gray release with the policy in model-sync.yaml
  (canaryPolicies) and the replicas' /metrics (tritonMetricsUrls).

`measure()` turns the traffic's records and the final canary record into the figures the issue
asks for: the observed canary share against the configured and the effective one, the time from
the failing verdict to the last request the canary answered, and how many it answered.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from model_sync import layout, manifest
from model_sync.local import canary_models
from model_sync.local.fleet import LocalFleet, S3Target, subprocess_environ
from model_sync.local.procs import wait_until
from model_sync.local.s3server import RcloneS3Server
from model_sync.local.traffic import Records, RoundRobinTraffic

MODEL = "canary-demo"
# Short steps for a 2-core machine: the shares map exactly onto 4 replicas (1 and 2 of them).
POLICY = {"steps": [25, 50], "stepSeconds": 5, "deadlineSeconds": 90, "minRequests": 40, "loadTimeoutSeconds": 45}


def inputs(seq: int) -> dict[str, Any]:
    """Request `seq`'s input. INPUT0[0] is a hash of `seq` below 2**20 (exact in float32), so the
    `errors` kind fails 1 request in 20 on every replica: a counter would send every failing
    input (13 mod 20) to the same replica of a round robin over 4."""
    return {canary_models.INPUT: np.array([float(seq * 2654435761 % 1048573), 1.0, 2.0, 3.0], dtype=np.float32)}


@dataclass(frozen=True)
class Release:
    """One gray release in the lab: the promote's exit code, stderr and duration, what the clients
    saw, the final canary record and measure() of both."""

    code: int
    stderr: str
    seconds: float
    records: Records
    doc: dict[str, Any]
    figures: dict[str, Any]


@dataclass
class CanaryLab:
    """Staging (a bucket only) and prod (a bucket and `replicas` serving replicas) under `root`."""

    root: Path
    replicas: int = 4
    policy: dict[str, Any] = field(default_factory=lambda: dict(POLICY))
    s3: RcloneS3Server = field(init=False)
    fleet: LocalFleet = field(init=False)
    traffic: RoundRobinTraffic | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.root = self.root.absolute()
        self.s3 = RcloneS3Server(self.root / "s3", self.root / "logs" / "s3.log")

    @property
    def config(self) -> Path:
        return self.root / "model-sync.yaml"

    def start(self) -> CanaryLab:
        self.s3.create_buckets("models-staging")
        self.s3.start()
        target = S3Target.rclone(self.s3, "models-prod")
        self.fleet = LocalFleet(self.root / "prod", target, replica_count=self.replicas, env="prod",
                                interval=0.5, heartbeat=2.0)  # fmt: skip
        self.fleet.start()
        staging = {"bucket": "s3://models-staging", "endpointUrl": self.s3.endpoint_url, "region": self.s3.region,
                   "unenforcedConditionalWrites": "accepted"}  # fmt: skip
        self.config.write_text(json.dumps({"environments": {"staging": staging}}))  # YAML is a superset of JSON
        self.fleet.write_config(self.config, {"canaryPolicies": {MODEL: self.policy}})
        return self

    def stop(self) -> None:
        if self.traffic is not None:
            self.traffic.stop()
        self.fleet.stop()
        self.s3.stop()

    # -- the CLI --

    def environ(self) -> dict[str, str]:
        return subprocess_environ(self.s3.client_env(), self.config)

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "model_sync", *args], capture_output=True, text=True,
                              env=self.environ(), timeout=timeout, check=False)  # fmt: skip

    def start_cli(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "model_sync", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.environ())  # fmt: skip

    def publish(self, kind: str) -> int:
        """Push a `kind` model (model_sync.local.canary_models) to staging; its staging version."""
        src = self.root / "src" / f"{kind}-{time.monotonic_ns()}"
        model_py = canary_models.write_model(src, MODEL, kind) / "1" / "model.py"
        with model_py.open("a") as f:  # a new version even of a kind published before
            f.write(f"# published {manifest.now()}\n")
        done = self.cli("push", str(src / MODEL), "--env", "staging", "--output", "json")
        assert done.returncode == 0, done.stderr
        return int(json.loads(done.stdout)["models"][0]["version"])

    def promote_args(self, version: int, *extra: str) -> tuple[str, ...]:
        return ("promote", MODEL, "--model-version", str(version), "--from", "staging", "--to", "prod",
                "--skip-verification", *extra)  # fmt: skip

    def stable(self, kind: str = "good") -> int:
        """A first prod version, pinned at once (--no-canary: nothing to compare with yet), served by all."""
        done = self.cli(*self.promote_args(self.publish(kind), "--no-canary", "--output", "json"))
        assert done.returncode == 0, done.stderr
        version = int(json.loads(done.stdout)["to"]["version"])
        self.fleet.wait_ready(MODEL, version)
        return version

    # -- traffic and the record --

    def start_traffic(self, concurrency: int = 4) -> RoundRobinTraffic:
        self.traffic = RoundRobinTraffic(self.fleet.http_urls, MODEL, inputs, concurrency=concurrency).start()
        return self.traffic

    def stop_traffic(self) -> Records:
        assert self.traffic is not None
        records, self.traffic = self.traffic.stop(), None
        return records

    def canary_record(self) -> dict[str, Any] | None:
        """The prod canary record, through model_sync's strict reader."""
        import botocore.session

        from model_sync import canary_record, environments
        from model_sync.s3 import Repo

        session = botocore.session.get_session()
        session.set_credentials(self.s3.access_key, self.s3.secret_key)
        env = environments.Environment("prod", layout.Root("models-prod"), self.s3.endpoint_url, self.s3.region)
        return canary_record.read(Repo(env, session=session), MODEL).doc

    def release(self, kind: str) -> Release:
        """Publish `kind` and promote it to prod under traffic (a gray release), 2 s of traffic after
        its decision included: the canary replicas are back on stable, or every replica on the new version."""
        version = self.publish(kind)
        self.start_traffic()
        time.sleep(1)
        started = time.monotonic()
        done = self.cli(*self.promote_args(version))
        seconds = time.monotonic() - started
        time.sleep(2)
        records = self.stop_traffic()
        doc = self.canary_record()
        assert doc is not None, done.stderr
        return Release(done.returncode, done.stderr, seconds, records, doc, measure(records, doc))

    def wait_step(self, timeout: float = 60) -> dict[str, Any]:
        """Until the running record's replicas serve the canary and its first step judges it."""

        def judged() -> bool:
            doc = self.canary_record()
            return bool(doc and doc["state"] == "running" and doc["steps"] and doc["steps"][-1]["verdict"])

        wait_until(judged, timeout, what="the canary's first verdict")
        doc = self.canary_record()
        assert doc is not None
        return doc


def measure(records: Records, doc: dict[str, Any]) -> dict[str, Any]:
    """The figures of one gray release from what the clients saw and the final canary record."""
    canary, stable = doc["canary_version"], doc["stable_version"]
    failures = records.failures(stable, canary, canary_models.injected_version)
    steps = []
    for step in doc["steps"]:
        start = manifest.parse_time(step["window_from"] or step["started_at"]).timestamp()
        end = manifest.parse_time(step["ended_at"]).timestamp() if step["ended_at"] else None
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
        decided = manifest.parse_time(doc["decision"]["at"]).timestamp()
        last = records.last_answered_by(canary)
        out["seconds_to_zero_canary"] = None if last is None else round(max(0.0, last - _mono(decided)), 3)
    return out


def _mono(wall: float) -> float:
    """A wall-clock time (the records' timestamps) on the traffic's monotonic clock."""
    return time.monotonic() - (time.time() - wall)
