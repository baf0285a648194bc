"""A deployment's replicas on this machine: `LocalFleet` runs N replicas of one environment, each a
real tritonserver (model_sync.sandbox.runtime, its own local repository and log) and its own
repository agent (`python -m model_sync agent`, the image's ENTRYPOINT) reporting as
`status/<deployment>/<deployment>-<i>.json`, the way a Deployment's pods do. The bucket is any
S3 endpoint (`S3Target`): typically a bucket of the local moto server (`S3Target.moto`), or of a
`rclone serve s3` (`S3Target.rclone`).

    root/<replica-id>/models            replica i's repository (tritonserver's --model-repository)
    root/<replica-id>/.models.staging   its agent's staging area (the agent's default, beside it)
    root/logs/triton-<replica-id>.log, root/logs/agent-<replica-id>.log

The agents get the bucket from flags (--bucket, --endpoint-url, --region), never from a
model-sync.yaml: they run in their replica's directory with no $MODEL_SYNC_CONFIG.
`write_config` writes the fleet's environment entry for the CLI (tritonUrl = replica 0, and
tritonMetricsUrls: every replica's /metrics, for the canary analysis).

`agent_argv` and `subprocess_environ` build the agent's command line and the environment of a
model_sync subprocess; the demo (model_sync/sandbox/demo.py) starts its agents with them too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_sync.agent import AGENT_COMMAND
from model_sync.contract import layout
from model_sync.sandbox.procs import LOOPBACK, Process, wait_until
from model_sync.sandbox.runtime import TritonRuntime, TritonServer, ensure_tritonserver
from model_sync.sandbox.s3server import MotoS3Server, RcloneS3Server


def _seconds(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class S3Target:
    """Where a fleet's environment lives: a bucket (s3://bucket[/prefix]) on an S3 endpoint, and the
    environment variables that give a subprocess its credentials (AWS_ACCESS_KEY_ID, ...)."""

    bucket: str  # s3://bucket[/prefix], the repository root
    endpoint_url: str  # http(s)://host:port
    region: str
    credentials: Mapping[str, str] = field(default_factory=dict)
    unenforced_conditional_writes: bool = False  # the endpoint ignores If-None-Match / If-Match (rclone serve s3)

    def __post_init__(self) -> None:
        layout.Root.parse(self.bucket)  # LayoutError naming the value and what is allowed
        if not self.endpoint_url.startswith(("http://", "https://")):
            raise ValueError(f"S3Target.endpoint_url: {self.endpoint_url!r}; allowed: http(s)://host[:port]")

    @classmethod
    def rclone(cls, server: RcloneS3Server, bucket: str) -> S3Target:
        """A bucket (its name) of a local `rclone serve s3`, created if absent."""
        server.create_buckets(bucket)
        return cls(
            f"s3://{bucket}",
            server.endpoint_url,
            server.region,
            server.client_env(),
            unenforced_conditional_writes=True,
        )

    @classmethod
    def moto(cls, server: MotoS3Server, bucket: str) -> S3Target:
        """A bucket (its name) of the local moto server, created if absent (now, or when it starts).
        moto enforces If-None-Match and If-Match, as AWS S3 does."""
        server.create_buckets(bucket)
        return cls(f"s3://{bucket}", server.endpoint_url, server.region, server.client_env())

    def flags(self) -> list[str]:
        """The environment options every model_sync command takes, for this bucket."""
        return ["--bucket", self.bucket, "--endpoint-url", self.endpoint_url, "--region", self.region]


def subprocess_environ(
    credentials: Mapping[str, str], config: Path | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a model_sync subprocess (agent or CLI) talking to a local S3 endpoint:
    `base` (default os.environ) without any AWS_* or MODEL_SYNC_CONFIG, plus `credentials`, no AWS
    config or credentials files, and MODEL_SYNC_CONFIG=`config` when given."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith("AWS_") and k != "MODEL_SYNC_CONFIG"}
    env.update(credentials)
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    if config is not None:
        env["MODEL_SYNC_CONFIG"] = str(config)
    return env


def agent_argv(
    env: str,
    repository: Path,
    triton_url: str,
    deployment: str,
    replica_id: str,
    *,
    interval: float,
    heartbeat: float,
    s3: S3Target | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """`python -m model_sync agent` (AGENT_COMMAND, with this interpreter) for one replica: the
    sidecar, confirming loads through `triton_url`. With `s3`, the bucket comes from flags;
    without, from the model-sync.yaml environment `env`. `extra`: more agent flags."""
    argv = [sys.executable, *AGENT_COMMAND[1:], "--env", env]
    if s3 is not None:
        argv += s3.flags()
    argv += [
        "--repository",
        str(repository),
        "--triton-url",
        triton_url,
        "--interval",
        _seconds(interval),
        "--deployment",
        deployment,
        "--replica-id",
        replica_id,
        "--heartbeat",
        _seconds(heartbeat),
        *extra,
    ]
    return argv


@dataclass
class Replica:
    """One pod's worth: a tritonserver and its agent."""

    index: int
    replica_id: str
    triton: TritonServer
    agent: Process

    @property
    def http_url(self) -> str:
        return self.triton.http_url

    @property
    def grpc_url(self) -> str:
        return self.triton.grpc_url

    @property
    def metrics_url(self) -> str:
        return f"http://{LOOPBACK}:{self.triton.metrics_port}/metrics"


@dataclass
class LocalFleet:
    """`replica_count` replicas of deployment `deployment` in environment `env` (the bucket `s3`).

    interval    seconds between agent passes (--interval; 1 s: a pin is picked up within a second)
    heartbeat   seconds between status writes when nothing changes (--heartbeat)
    agent_args  more flags for every agent (e.g. --ready-timeout 60)
    poll_secs   tritonserver's --repository-poll-secs
    spares      replicas made ready to scale out to (`add_replica`), not started: their metrics
                endpoints are in tritonMetricsUrls from the start, as Prometheus would find a new pod
    """

    root: Path
    s3: S3Target
    replica_count: int = 2
    env: str = "local"
    deployment: str = "default"
    interval: float = 1.0
    heartbeat: float = 5.0
    agent_args: tuple[str, ...] = ()
    poll_secs: int = 1
    runtime: TritonRuntime | None = None
    spares: int = 0
    replicas: list[Replica] = field(default_factory=list, init=False)
    _spare: list[Replica] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.replica_count < 1:
            raise ValueError(f"LocalFleet.replica_count: {self.replica_count!r}; allowed: >= 1")
        if not self.interval > 0:
            raise ValueError(f"LocalFleet.interval: {self.interval!r}; allowed: > 0 seconds")
        if not self.heartbeat > 0:
            raise ValueError(f"LocalFleet.heartbeat: {self.heartbeat!r}; allowed: > 0 seconds")
        layout.status_key(self.deployment, f"{self.deployment}-{self.replica_count - 1}")  # LayoutError names it
        self.root = self.root.absolute()
        for i in range(self.replica_count):
            self.replicas.append(self._replica(i))
        self._spare = [self._replica(self.replica_count + i) for i in range(self.spares)]

    def _replica(self, i: int) -> Replica:
        """Replica `i` (not started): its tritonserver and its agent, in root/<deployment>-<i>."""
        replica_id = f"{self.deployment}-{i}"
        home = self.root / replica_id
        triton = TritonServer(
            home / "models",
            self.root / "logs" / f"triton-{replica_id}.log",
            runtime=self.runtime,
            poll_secs=self.poll_secs,
        )
        agent = Process(
            f"agent-{replica_id}",
            agent_argv(
                self.env,
                triton.repository,
                triton.http_url,
                self.deployment,
                replica_id,
                interval=self.interval,
                heartbeat=self.heartbeat,
                s3=self.s3,
                extra=self.agent_args,
            ),
            self.root / "logs" / f"agent-{replica_id}.log",
            env=subprocess_environ(self.s3.credentials),
            cwd=home,  # no ./model-sync.yaml there: the flags are the agent's only configuration
        )
        return Replica(i, replica_id, triton, agent)

    # -- what the fleet serves on -------------------------------------------------------------
    @property
    def replica_ids(self) -> list[str]:
        return [r.replica_id for r in self.replicas]

    @property
    def http_urls(self) -> list[str]:
        return [r.http_url for r in self.replicas]

    @property
    def grpc_urls(self) -> list[str]:
        return [r.grpc_url for r in self.replicas]

    @property
    def metrics_urls(self) -> list[str]:
        return [r.metrics_url for r in self.replicas]

    @property
    def metrics_by_replica(self) -> dict[str, str]:
        """replica id -> its metrics endpoint, the spares' included (tritonMetricsUrls)."""
        return {r.replica_id: r.metrics_url for r in [*self.replicas, *self._spare]}

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> LocalFleet:
        """Start every replica at once (tritonserver until live, then its agent); on any failure
        everything is stopped and the error raised."""
        if self.runtime is None:
            self.runtime = ensure_tritonserver()
        for r in self.replicas:
            r.triton.runtime = self.runtime
            (self.root / r.replica_id).mkdir(parents=True, exist_ok=True)
        try:
            with ThreadPoolExecutor(max_workers=len(self.replicas)) as pool:
                for future in [pool.submit(self._start_replica, r, timeout) for r in self.replicas]:
                    future.result()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_replica(self, replica: Replica, timeout: float) -> None:
        replica.triton.start(timeout=timeout)
        replica.agent.start()

    def stop(self) -> None:
        """Agents first (SIGTERM: each deletes its status report), then the tritonservers."""
        with ThreadPoolExecutor(max_workers=len(self.replicas)) as pool:
            list(pool.map(lambda r: r.agent.stop(timeout=20), self.replicas))
            list(pool.map(lambda r: r.triton.stop(), self.replicas))

    def __enter__(self) -> LocalFleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop_agent(self, index: int, timeout: float = 20.0) -> int | None:
        """SIGTERM replica `index`'s agent (it deletes its status report); returns its exit code.
        Its tritonserver keeps serving what it has."""
        return self.replicas[index].agent.stop(timeout=timeout)

    def kill_agent(self, index: int) -> None:
        """SIGKILL replica `index`'s agent: its last status report stays behind."""
        self.replicas[index].agent.kill()

    def start_agent(self, index: int) -> Process:
        """Start replica `index`'s agent again (same flags; its log is appended to)."""
        return self.replicas[index].agent.start()

    def kill_replica(self, index: int) -> None:
        """SIGKILL replica `index`'s agent and tritonserver: a pod that died. Its last status report
        stays behind and goes stale; its endpoints refuse connections."""
        replica = self.replicas[index]
        replica.agent.kill()
        if replica.triton.process is not None:
            replica.triton.process.kill()

    def forget_replica(self, index: int) -> None:
        """Replica `index`, killed (kill_replica), leaves the fleet; the replicas after it move up one."""
        replica = self.replicas.pop(index)
        replica.agent.kill()
        if replica.triton.process is not None:
            replica.triton.process.kill()

    def add_replica(self, timeout: float = 90.0, start_agent: bool = True) -> Replica:
        """Scale out by one: the next spare (else a new replica), started (tritonserver live, then
        its agent, which loads what the bucket pins; `start_agent` False: not yet, `start_agent(i)`
        later)."""
        if self.runtime is None:
            self.runtime = ensure_tritonserver()
        replica = self._spare.pop(0) if self._spare else self._replica(max(r.index for r in self.replicas) + 1)
        replica.triton.runtime = self.runtime
        (self.root / replica.replica_id).mkdir(parents=True, exist_ok=True)
        self.replicas.append(replica)
        if start_agent:
            self._start_replica(replica, timeout)
        else:
            replica.triton.start(timeout=timeout)
        return replica

    def remove_replica(self) -> None:
        """Scale in by one: the last replica stops (its agent first: it deletes its status report)
        and leaves the fleet."""
        replica = self.replicas.pop()
        replica.agent.stop(timeout=20)
        replica.triton.stop()

    # -- readiness ----------------------------------------------------------------------------
    def version_ready(self, index: int, model: str, version: int) -> bool:
        """Triton's /v2/models/<model>/versions/<version>/ready on replica `index` says 200."""
        return self.replicas[index].triton.version_ready(model, version)

    def wait_ready(
        self, model: str, version: int, replicas: Iterable[int] | None = None, timeout: float = 90.0
    ) -> None:
        """Until every replica (or those of `replicas`) serves `model` `version` READY; TimeoutError
        naming those that do not, with the end of their agent's log."""
        indexes = list(range(len(self.replicas)) if replicas is None else replicas)
        try:
            wait_until(
                lambda: all(self.version_ready(i, model, version) for i in indexes),
                timeout,
                interval=0.2,
                what=f"{model} version {version} READY on replicas {indexes}",
            )
        except TimeoutError as e:
            missing = [i for i in indexes if not self.version_ready(i, model, version)]
            logs = "; ".join(
                f"{self.replicas[i].replica_id} agent log: {self.replicas[i].agent.log_tail(8)}" for i in missing
            )
            raise TimeoutError(f"{e}; not READY: {[self.replicas[i].replica_id for i in missing]}; {logs}") from None

    # -- the CLI's view -----------------------------------------------------------------------
    def environment_entry(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The fleet's model-sync.yaml environment: bucket, endpoint, region, replica 0's Triton
        (tritonUrl, grpcUrl) and every replica's metrics endpoint (tritonMetricsUrls); `extra`
        keys (e.g. canaryPolicies) are added as given."""
        entry: dict[str, Any] = {
            "bucket": self.s3.bucket,
            "endpointUrl": self.s3.endpoint_url,
            "region": self.s3.region,
            "tritonUrl": self.replicas[0].http_url,
            "grpcUrl": self.replicas[0].grpc_url,
            "tritonMetricsUrls": self.metrics_by_replica,
        }
        if self.s3.unenforced_conditional_writes:
            entry["unenforcedConditionalWrites"] = "accepted"
        entry.update(extra or {})
        return entry

    def write_config(self, path: Path, extra: Mapping[str, Any] | None = None) -> Path:
        """Write (or replace) environment `env` in the model-sync.yaml at `path`, keeping the file's
        other environments; returns `path`."""
        import yaml

        doc: dict[str, Any] = {}
        if path.exists():
            loaded = yaml.safe_load(path.read_text()) or {}
            if not isinstance(loaded, dict) or not isinstance(loaded.get("environments", {}), dict):
                raise ValueError(f"{path}: not a model-sync.yaml mapping; allowed: a mapping with 'environments'")
            doc = loaded
        doc.setdefault("environments", {})[self.env] = self.environment_entry(extra)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
        os.replace(tmp, path)
        return path

    def environ(self, config: Path | None = None) -> dict[str, str]:
        """The environment for a model_sync CLI subprocess against this fleet's bucket."""
        return subprocess_environ(self.s3.credentials, config)

    def logs(self, lines: int = 20) -> str:
        """The end of every replica's agent and tritonserver log (for an assertion message)."""
        parts = []
        for r in self.replicas:
            parts.append(f"--- {r.replica_id} agent ---\n{r.agent.log_tail(lines)}")
            if r.triton.process is not None:
                parts.append(f"--- {r.replica_id} tritonserver ---\n{r.triton.process.log_tail(lines)}")
        return "\n".join(parts)


__all__ = [
    "LocalFleet",
    "Replica",
    "S3Target",
    "agent_argv",
    "subprocess_environ",
]
