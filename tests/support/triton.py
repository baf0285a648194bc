"""Serving-side test support: the REAL tritonserver (from the pinned nvidia-pytriton wheel), a
local persistent S3 server (rclone serve s3), the repository agent as a subprocess running the
same command as the agent image's ENTRYPOINT, and helpers that publish python-backend models
through `model_sync.push.publish.push` (what `model-sync push` runs: v2 manifests, pins, allocations),
so the agent is tested against real push output.

Fixtures (import into a test module: `from tests.support.triton import serving  # noqa: F401`):
    triton_runtime   session-scoped: the extracted tritonserver (fetched once into .cache/)
    serving          function-scoped `Serving`: rclone S3 + bucket + tritonserver on a local
                     repository + an agent subprocess; every process stopped at teardown
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from model_sync.agent import AGENT_COMMAND
from model_sync.contract import layout
from model_sync.records import codec
from model_sync.sandbox.procs import Process, wait_until
from model_sync.sandbox.runtime import TritonRuntime, TritonServer, ensure_tritonserver
from model_sync.sandbox.s3server import LocalS3Server, RcloneS3Server
from model_sync.triton_model import model_config
from tests.support.s3_servers import boto3_session

BUCKET = "models-test"
PROD_BUCKET = "models-prod"
# `push` writes here; versions are then copied byte for byte into BUCKET (files + manifest), and the
# pin flipped separately, so a test can damage a version between "uploaded" and "pinned".
PUBLISH_BUCKET = "models-publish"
DEPLOYMENT = "default"
REPLICA = "replica-0"

# A python-backend model whose output tells which version answered: OUTPUT0 = INPUT0 + VERSION.
ADD_MODEL_PY = """\
import numpy as np
import triton_python_backend_utils as pb_utils

VERSION = {version}
FAIL = {fail}


class TritonPythonModel:
    def initialize(self, args):
        if FAIL:
            raise RuntimeError("initialize failed on purpose (test model)")

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = (x + np.float32(VERSION)).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out)]))
        return responses
"""

ADD_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""


def metric_value(url: str, name: str, model: str, version: int) -> float:
    """`name` of `model` `version` in one Triton's /metrics (`url`), summed over its other labels,
    read with prometheus_client's parser (not model_sync's)."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()  # noqa: S310 - loopback
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name in (name, f"{name}_total")  # the parser names a counter's sample <name>_total
        and s.labels.get("model") == model
        and s.labels.get("version") == str(version)
    )


def add_model_files(version: int, fail: bool = False) -> dict[str, bytes]:
    return {"model.py": ADD_MODEL_PY.format(version=version, fail=fail).encode()}


def pinned_config(name: str, version: int) -> str:
    return str(model_config.pinned_text(model_config.parse(ADD_CONFIG.format(name=name)), version, name))


def s3_client(server: LocalS3Server) -> Any:
    from botocore.config import Config

    return boto3_session(server.access_key, server.secret_key, server.region).client(
        "s3",
        endpoint_url=server.endpoint_url,
        config=Config(
            retries={"mode": "standard", "max_attempts": 3},
            connect_timeout=2,
            read_timeout=10,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            s3={"addressing_style": "path"},
        ),
    )


def upload_version(
    client: Any, bucket: str, name: str, version: int, files: dict[str, bytes], config_text: str
) -> None:
    """Hand-built version files + v1 manifest without a pin: for the benches that need many
    versions fast and count S3 requests (bench/agent/p2_requests.py, bench/transfer/run.py), and
    for tests of versions `push` would refuse. Other tests publish through push_version."""
    for rel, data in files.items():
        client.put_object(Bucket=bucket, Key=layout.version_file_key(name, version, rel), Body=data)
    doc = {
        "schema": "model-sync.manifest/v1",
        "model": name,
        "version": version,
        "files": {rel: {"sha256": codec.sha256_bytes(data), "size": len(data)} for rel, data in files.items()},
        "config_pbtxt": config_text,
        "backend": "python",
        "platform": "",
        "source": {"path": "/bench", "host": "bench", "git_commit": None, "promoted_from": None},
        "exporter": {
            "tool": "bench",
            "method": None,
            "torch_version": None,
            "torchscript_format_version": None,
            "target": "local",
        },
        "created_by": "bench",
        "created_at": codec.now(),
    }
    client.put_object(Bucket=bucket, Key=layout.manifest_key(name, version), Body=codec.dumps(doc))


def push_version(stack: Serving, name: str, fail: bool = False, extra: dict[str, bytes] | None = None) -> int:
    """`push` (model_sync.push.publish.push, the CLI's code path) of the add model into PUBLISH_BUCKET,
    then a server-side copy of the version's files and manifest into BUCKET, without its pin.
    Returns the version push allocated (the model's output tells it: INPUT0 + N)."""
    from model_sync import environments
    from model_sync.push import publish
    from model_sync.s3.bucket import Bucket
    from model_sync.triton_model import model_directory
    from model_sync.ui import Console
    from model_sync.versions import catalog

    env = environments.Environment(
        "publish", layout.Root(PUBLISH_BUCKET), endpoint_url=stack.s3.endpoint_url, region=stack.s3.region
    )
    stack.s3.create_buckets(BUCKET, PUBLISH_BUCKET)
    with _s3_env(stack):
        repo = Bucket(env)
        version = catalog.highest_allocated(repo, name) + 1
        src = stack.tmp / "src" / f"{name}-{version}"
        (src / "1").mkdir(parents=True)
        (src / layout.CONFIG_FILE).write_text(ADD_CONFIG.format(name=name))
        for rel, data in {**add_model_files(version, fail), **(extra or {})}.items():
            (src / "1" / rel).write_bytes(data)
        results = publish.push(
            repo,
            model_directory.discover(str(src), name),
            Console(quiet=True),
            publish.PushOptions(use_cache=False),
            "tests",
        )
    assert [(r.action, r.version, r.error) for r in results] == [("pushed", version, None)], results
    client = stack.client
    keys = [layout.version_file_key(name, version, rel) for rel in sorted({*add_model_files(version), *(extra or {})})]
    for key in [*keys, layout.manifest_key(name, version)]:
        client.copy_object(Bucket=BUCKET, Key=key, CopySource={"Bucket": PUBLISH_BUCKET, "Key": key})
    return version


def flip_pin(stack: Serving, name: str, version: int, bucket: str = BUCKET, config_text: str | None = None) -> None:
    """The commit point through the product's own code (model_sync.versions.catalog.flip_pin, what push
    and rollback run): the pinned config text of the version's manifest (or `config_text`, for a
    version written past push), written conditionally on the current pin, then the pin history and
    the pin-index entry agents list."""
    from model_sync import environments
    from model_sync.s3.bucket import Bucket
    from model_sync.versions import catalog

    if config_text is None:
        body = stack.client.get_object(Bucket=PUBLISH_BUCKET, Key=layout.manifest_key(name, version))["Body"].read()
        config_text = codec.read_manifest(body, name, version)["config_pbtxt"]
    env = environments.Environment(
        "serving", layout.Root(bucket), endpoint_url=stack.s3.endpoint_url, region=stack.s3.region
    )
    with _s3_env(stack):
        repo = Bucket(env)
        catalog.flip_pin(repo, name, version, config_text, "push", "tests", catalog.read_pin(repo, name))


def publish(stack: Serving, name: str, fail: bool = False, extra: dict[str, bytes] | None = None) -> int:
    """push + pin: returns the new version."""
    version = push_version(stack, name, fail, extra)
    flip_pin(stack, name, version)
    return version


@contextlib.contextmanager
def _s3_env(stack: Serving) -> Iterator[None]:
    """The S3 server's credentials in os.environ for model_sync's default credential chain."""
    saved = dict(os.environ)
    os.environ.update(stack.s3.client_env())
    os.environ.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def infer_http(url: str, name: str, timeout: float = 5.0) -> tuple[int, list[float] | str]:
    """One inference of [1,2,3,4] over HTTP/JSON: (status, OUTPUT0 values or error body)."""
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}).encode()
    req = urllib.request.Request(  # noqa: S310
        f"{url}/v2/models/{name}/infer", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            doc = json.loads(resp.read())
            return int(resp.status), [float(x) for x in doc["outputs"][0]["data"]]
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode(errors="replace")
    except OSError as err:
        return 0, str(err)


def served_version(url: str, name: str) -> int | None:
    """Which version answered (the add model adds its version to 1.0); None on failure."""
    code, out = infer_http(url, name)
    if code != 200 or not isinstance(out, list):
        return None
    return round(out[0] - 1.0)


@dataclass
class LoadGenerator:
    """Client load in a thread: one request after another; counts failures and versions seen."""

    url: str
    model: str
    ok: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    versions: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> LoadGenerator:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            code, out = infer_http(self.url, self.model)
            if code == 200 and isinstance(out, list):
                self.ok += 1
                v = round(out[0] - 1.0)
                if not self.versions or self.versions[-1][1] != v:
                    self.versions.append((time.monotonic(), v))
            else:
                self.failed += 1
                if len(self.errors) < 10:
                    self.errors.append(f"{code}: {str(out)[:200]}")
            time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def last_version(self) -> int | None:
        return self.versions[-1][1] if self.versions else None


@dataclass
class Serving:
    """One replica's serving stack on this machine: S3 server, tritonserver, agent process."""

    tmp: Path
    runtime: TritonRuntime
    interval: float = 1.0
    s3: RcloneS3Server = field(init=False)
    triton: TritonServer = field(init=False)
    agent: Process | None = field(default=None, init=False)
    repository: Path = field(init=False)
    staging: Path = field(init=False)
    agent_starts: int = 0
    _client: Any = field(default=None, init=False, repr=False)
    _client_of: Process | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.s3 = RcloneS3Server(
            self.tmp / "s3", self.tmp / "logs" / "s3.log", verbose=bool(os.environ.get("MODEL_SYNC_TEST_S3_VERBOSE"))
        )
        self.s3.create_buckets(BUCKET)
        self.repository = self.tmp / "node" / "models"
        self.staging = self.tmp / "node" / ".models.staging"
        self.repository.mkdir(parents=True)
        self.triton = TritonServer(self.repository, self.tmp / "logs" / "triton.log", runtime=self.runtime)

    @property
    def client(self) -> Any:
        """A boto3 client of the S3 server, one per server process (a restarted server gets a new
        one): wait_status polls through it every 0.3 s, and a new client is ~20 ms of CPU."""
        if self._client is None or self._client_of is not self.s3.process:
            self._client, self._client_of = s3_client(self.s3), self.s3.process
        return self._client

    def agent_argv(self, *extra: str) -> list[str]:
        return [
            sys.executable,
            *AGENT_COMMAND[1:],
            "--env",
            "test",
            "--bucket",
            f"s3://{BUCKET}",
            "--endpoint-url",
            self.s3.endpoint_url,
            "--region",
            self.s3.region,
            "--repository",
            str(self.repository),
            "--staging-dir",
            str(self.staging),
            "--triton-url",
            self.triton.http_url,
            "--interval",
            str(self.interval),
            "--deployment",
            DEPLOYMENT,
            "--replica-id",
            REPLICA,
            "--ready-timeout",
            "60",
            "--backoff-max",
            "4",
            "--heartbeat",
            "5",
            *extra,
        ]

    def agent_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(self.s3.client_env())
        env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
        return env

    def write_config(self) -> Path:
        """model-sync.yaml with environments `test` (this bucket) and `prod` (a second bucket)."""
        self.s3.create_buckets(BUCKET, PROD_BUCKET)
        path = self.tmp / "model-sync.yaml"
        lines = ["environments:"]
        for env, bucket in (("test", BUCKET), ("prod", PROD_BUCKET)):
            lines += [
                f"  {env}:",
                f"    bucket: s3://{bucket}",
                f"    endpointUrl: {self.s3.endpoint_url}",
                f"    region: {self.s3.region}",
                f"    tritonUrl: {self.triton.http_url}",
            ]
        path.write_text("\n".join(lines) + "\n")
        return path

    def cli(self, *args: str, timeout: float = 120) -> tuple[int, str]:
        """`python -m model_sync ARGS` against this stack (model-sync.yaml from write_config)."""
        import subprocess

        env = self.agent_env()
        env["MODEL_SYNC_CONFIG"] = str(self.write_config())
        proc = subprocess.run(
            [sys.executable, "-m", "model_sync", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        return proc.returncode, proc.stdout + proc.stderr

    def start_agent(self, *extra: str) -> Process:
        self.agent_starts += 1
        self.agent = Process(
            "agent", self.agent_argv(*extra), self.tmp / "logs" / f"agent-{self.agent_starts}.log", env=self.agent_env()
        ).start()
        return self.agent

    def run_agent_once(self, *extra: str, timeout: float = 120, triton: bool = False) -> tuple[int, str]:
        """The init container: `--once`, by default without --triton-url (Triton not started yet)."""
        argv = self.agent_argv("--once", *extra)
        if not triton:
            i = argv.index("--triton-url")
            del argv[i : i + 2]
        proc = Process("agent-once", argv, self.tmp / "logs" / "agent-once.log", env=self.agent_env()).start()
        assert proc.popen is not None
        rc = proc.popen.wait(timeout=timeout)
        return rc, proc.log_tail(60)

    def status(self) -> dict[str, Any] | None:
        try:
            body = self.client.get_object(Bucket=BUCKET, Key=layout.status_key(DEPLOYMENT, REPLICA))["Body"].read()
        except Exception:
            return None
        doc: dict[str, Any] = json.loads(body)
        return doc

    def wait_status(self, predicate: Any, timeout: float = 60, what: str = "status") -> dict[str, Any]:
        holder: dict[str, Any] = {}

        def check() -> bool:
            doc = self.status()
            holder["doc"] = doc
            return doc is not None and bool(predicate(doc))

        try:
            wait_until(check, timeout, interval=0.3, what=what)
        except TimeoutError as e:
            raise AssertionError(
                f"{e}; last status: {json.dumps(holder.get('doc'))[:1500]}; agent log: {self.agent_log()}"
            ) from None
        return holder["doc"]

    def wait_served(self, name: str, version: int, timeout: float = 60) -> None:
        try:
            wait_until(
                lambda: served_version(self.triton.http_url, name) == version,
                timeout,
                what=f"{name} served by version {version}",
            )
        except TimeoutError as e:
            raise AssertionError(
                f"{e}; agent log: {self.agent_log()}; triton log: "
                f"{self.triton.process.log_tail(20) if self.triton.process else ''}"
            ) from None

    def agent_log(self) -> str:
        return self.agent.log_tail(30) if self.agent else ""

    def local_entries(self) -> list[str]:
        """Every path under the local repository root (what Triton can see)."""
        return sorted(str(p.relative_to(self.repository)) for p in self.repository.rglob("*"))

    def stop(self) -> None:
        # Triton's graceful shutdown is not under test here: SIGKILL its process group (stubs included).
        triton_kill = self.triton.process.kill if self.triton.process else None
        for stopper in (self.agent.stop if self.agent else None, triton_kill, self.s3.stop):
            if stopper is not None:
                with contextlib.suppress(Exception):
                    stopper()


@pytest.fixture(scope="session")
def triton_runtime() -> TritonRuntime:
    return ensure_tritonserver()


@pytest.fixture
def serving(tmp_path: Path, triton_runtime: TritonRuntime) -> Iterator[Serving]:
    stack = Serving(tmp_path, triton_runtime)
    try:
        stack.s3.start()
        stack.triton.start()
        yield stack
    finally:
        stack.stop()
