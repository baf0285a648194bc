"""Real S3-protocol server processes for tests, on free 127.0.0.1 ports.

    moto_server -H 127.0.0.1 -p PORT            in-memory; enforces If-None-Match: * like AWS S3;
                                                every request is logged (S3Server.requests())
    rclone serve s3 DIR --addr 127.0.0.1:PORT   on-disk (DIR/<bucket>/<key>); survives restarts;
                                                IGNORES If-None-Match (silently overwrites)

Fixtures (import them into a conftest.py: `from tests.support.s3_servers import *  # noqa`):
    moto_s3        session-scoped moto server (use a fresh bucket per test: `s3_bucket`)
    s3_bucket      a new, empty bucket name on `moto_s3`
    rclone_s3      function-scoped rclone server on a fresh tmp dir (can be stopped/restarted)
    aws_env        monkeypatched environment: fake static credentials for the boto3 default
                   chain, no config files, no IMDS, region us-east-1

Servers are started with Popen, polled until an S3 call succeeds, and killed at teardown.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from model_sync.sandbox.procs import free_port  # one free-port helper, the product's (re-exported for tests)

KEY = "testing-key"
SECRET = "testing-secret"
REGION = "us-east-1"
BIN = Path(sys.executable).parent


def boto3_session(key: str, secret: str, region: str) -> Any:
    """A boto3 session with these static keys, on the process's one botocore data loader
    (model_sync.s3.clients.share_data_loader): a fresh session otherwise re-parses the S3 model."""
    import boto3
    import botocore.session

    from model_sync.s3 import clients

    core = clients.share_data_loader(botocore.session.get_session())
    return boto3.session.Session(
        aws_access_key_id=key, aws_secret_access_key=secret, region_name=region, botocore_session=core
    )


def aws_environ(base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment whose boto3 default credential chain resolves to the test key only."""
    env = dict(os.environ if base is None else base)
    for k in list(env):
        if k.startswith("AWS_"):
            del env[k]
    env.update(
        AWS_ACCESS_KEY_ID=KEY,
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_DEFAULT_REGION=REGION,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_EC2_METADATA_DISABLED="true",
    )
    return env


class S3Server:
    """One S3 server process. `kind` is "moto" or "rclone"."""

    def __init__(
        self,
        kind: str,
        data_dir: str | None = None,
        port: int | None = None,
        env: dict[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        """`env`: extra environment for the server process (e.g. moto's
        INITIAL_NO_AUTH_ACTION_COUNT, which makes moto_server enforce IAM after that many requests).
        `host`: the loopback address to listen on ("::1" for IPv6)."""
        self.kind = kind
        self.host = host
        self.extra_env = dict(env or {})
        self.port = port or free_port()
        self.data_dir = data_dir
        self.endpoint = f"http://{f'[{host}]' if ':' in host else host}:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._client: Any = None
        self._log_dir = tempfile.mkdtemp(prefix=f"{kind}-log-")
        self.log_path = os.path.join(self._log_dir, "server.log")

    def command(self) -> list[str]:
        if self.kind == "moto":
            return [str(BIN / "moto_server"), "-H", self.host, "-p", str(self.port)]
        assert self.data_dir
        return [
            str(BIN / "rclone"),
            "serve",
            "s3",
            self.data_dir,
            "--addr",
            f"{f'[{self.host}]' if ':' in self.host else self.host}:{self.port}",
            "--auth-key",
            f"{KEY},{SECRET}",
            "--config",
            os.devnull,
            "-vv",
        ]

    def start(self, timeout: float = 20.0) -> S3Server:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**aws_environ(), **self.extra_env},
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        client = self.client()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.kind} server exited with {self.proc.returncode}: {Path(self.log_path).read_text()[-2000:]}"
                )
            try:
                client.list_buckets()
                return self
            except Exception:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
        self._client = None  # its pooled connections were to the process just ended

    def client(self) -> Any:
        """A boto3 S3 client with the test key, one per server process (made again after stop()):
        a new client per call cost ~30 ms of CPU, and the helpers below make one per request."""
        from botocore.config import Config

        if self._client is None:
            self._client = boto3_session(KEY, SECRET, REGION).client(
                "s3",
                endpoint_url=self.endpoint,
                config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=30),
            )
        return self._client

    def make_bucket(self, name: str | None = None) -> str:
        name = name or f"b-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        out: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def get(self, bucket: str, key: str) -> bytes:
        return bytes(self.client().get_object(Bucket=bucket, Key=key)["Body"].read())

    def requests(self) -> list[str]:
        """moto only: the request lines logged so far ('PUT /bucket/key?x HTTP/1.1')."""
        lines = Path(self.log_path).read_text(errors="replace").splitlines()
        return [ln.split('"')[1] for ln in lines if ln.count('"') >= 2 and " HTTP/1." in ln]

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._log_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[S3Server]:
    server = S3Server("moto").start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def s3_bucket(moto_s3: S3Server) -> str:
    return moto_s3.make_bucket()


@pytest.fixture
def rclone_s3(tmp_path: Path) -> Iterator[S3Server]:
    data = tmp_path / "rclone-data"
    data.mkdir()
    server = S3Server("rclone", data_dir=str(data)).start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = aws_environ()
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    for k, v in env.items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    return env


__all__ = [
    "KEY",
    "REGION",
    "SECRET",
    "S3Server",
    "aws_env",
    "aws_environ",
    "boto3_session",
    "free_port",
    "moto_s3",
    "rclone_s3",
    "s3_bucket",
]

with contextlib.suppress(Exception):  # keep `python -m tests.support.s3_servers` usable for a quick manual check
    if __name__ == "__main__":
        for kind in ("moto", "rclone"):
            s = S3Server(kind, data_dir=tempfile.mkdtemp()).start()
            print(kind, s.endpoint, s.make_bucket())
            s.close()
