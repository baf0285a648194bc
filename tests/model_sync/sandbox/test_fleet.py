"""model_sync/sandbox/fleet.py: a deployment's replicas on this machine. The e2e tests share one
2-replica fleet (the local moto S3 server, two real tritonservers, two real agents) serving a `good` canary
model pushed through `python -m model_sync push`; the others check the agent's command line and
environment, which the demo uses too."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from model_sync import environments
from model_sync.contract import layout
from model_sync.sandbox import canary_models
from model_sync.sandbox.demo import LocalPlatform
from model_sync.sandbox.fleet import LocalFleet, S3Target, agent_argv, subprocess_environ
from model_sync.sandbox.procs import wait_until
from model_sync.sandbox.runtime import TritonRuntime
from model_sync.sandbox.s3server import MotoS3Server, RcloneS3Server
from model_sync.sandbox.traffic import RoundRobinTraffic
from tests.support.triton import metric_value, s3_client
from tests.support.triton import triton_runtime as triton_runtime_fixture

triton_runtime = triton_runtime_fixture

MODEL = "canary-good"
BUCKET = "models-fleet"


def _target() -> S3Target:
    return S3Target("s3://models-x/team", "http://127.0.0.1:9", "us-east-1", {"AWS_ACCESS_KEY_ID": "k"})


# ---- the agent's command line and environment (no processes) --------------------------------


def test_fleet_replicas_are_named_after_the_deployment_and_their_agents_take_the_bucket_from_flags(
    tmp_path: Path,
) -> None:
    fleet = LocalFleet(
        tmp_path, _target(), replica_count=3, deployment="resnet-a10g", runtime=TritonRuntime(tmp_path / "rt")
    )
    assert fleet.replica_ids == ["resnet-a10g-0", "resnet-a10g-1", "resnet-a10g-2"]
    assert len(set(fleet.http_urls)) == len(set(fleet.metrics_urls)) == 3
    assert all(u.startswith("http://127.0.0.1:") and u.endswith("/metrics") for u in fleet.metrics_urls)
    r = fleet.replicas[1]
    assert r.metrics_url == f"http://127.0.0.1:{r.triton.metrics_port}/metrics"
    argv = r.agent.argv
    assert argv[:4] == [sys.executable, "-m", "model_sync", "agent"]
    flags = dict(zip(argv[4::2], argv[5::2], strict=True))
    assert flags == {
        "--env": "local",
        "--bucket": "s3://models-x/team",
        "--endpoint-url": "http://127.0.0.1:9",
        "--region": "us-east-1",
        "--repository": str(tmp_path / "resnet-a10g-1" / "models"),
        "--triton-url": r.http_url,
        "--interval": "1",
        "--deployment": "resnet-a10g",
        "--replica-id": "resnet-a10g-1",
        "--heartbeat": "5",
    }
    assert r.agent.cwd == tmp_path / "resnet-a10g-1"  # no model-sync.yaml is read from there
    assert r.agent.env is not None
    assert "MODEL_SYNC_CONFIG" not in r.agent.env
    assert r.agent.env["AWS_ACCESS_KEY_ID"] == "k"


def test_agent_argv_without_a_target_reads_the_environment_from_model_sync_yaml_and_appends_extra() -> None:
    argv = agent_argv(
        "staging",
        Path("/m"),
        "http://127.0.0.1:1",
        "local",
        "staging-0",
        interval=0.5,
        heartbeat=10,
        extra=("--ready-timeout", "60"),
    )
    assert argv[4:] == [
        "--env",
        "staging",
        "--repository",
        "/m",
        "--triton-url",
        "http://127.0.0.1:1",
        "--interval",
        "0.5",
        "--deployment",
        "local",
        "--replica-id",
        "staging-0",
        "--heartbeat",
        "10",
        "--ready-timeout",
        "60",
    ]


def test_the_demo_starts_its_agents_with_the_shared_command_line_and_environment() -> None:
    assert "agent_argv" in LocalPlatform.start.__code__.co_names
    assert "subprocess_environ" in LocalPlatform.env.__code__.co_names


def test_subprocess_environ_drops_the_callers_aws_settings_and_config() -> None:
    base = {"PATH": "/bin", "AWS_PROFILE": "prod", "AWS_ACCESS_KEY_ID": "real", "MODEL_SYNC_CONFIG": "/x.yaml"}
    env = subprocess_environ({"AWS_ACCESS_KEY_ID": "local"}, base=base)
    assert env == {
        "PATH": "/bin",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    assert subprocess_environ({}, Path("/c.yaml"), base=base)["MODEL_SYNC_CONFIG"] == "/c.yaml"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"replica_count": 0}, r"replica_count: 0; allowed: >= 1"),
        ({"interval": 0}, r"interval: 0; allowed: > 0 seconds"),
        ({"heartbeat": -1}, r"heartbeat: -1; allowed: > 0 seconds"),
        ({"deployment": "Bad_Name"}, r"deployment: 'Bad_Name'; allowed: a Kubernetes DNS subdomain name"),
    ],
)
def test_fleet_rejects_bad_settings(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LocalFleet(tmp_path, _target(), **kwargs)


def test_s3_target_rejects_a_bad_bucket_or_endpoint() -> None:
    with pytest.raises(layout.LayoutError):
        S3Target("models-x", "http://127.0.0.1:9", "us-east-1")
    with pytest.raises(ValueError, match=r"endpoint_url: '127.0.0.1:9'; allowed: http\(s\)://host\[:port\]"):
        S3Target("s3://models-x", "127.0.0.1:9", "us-east-1")


def test_s3_target_of_the_moto_server_enforces_conditional_writes_and_its_bucket_is_created_on_start(
    tmp_path: Path,
) -> None:
    server = MotoS3Server(tmp_path / "s3", tmp_path / "s3.log")  # never started: nothing runs
    target = S3Target.moto(server, BUCKET)
    assert (target.bucket, target.endpoint_url, target.region) == (f"s3://{BUCKET}", server.endpoint_url, "us-east-1")
    assert target.credentials == server.client_env()
    assert target.unenforced_conditional_writes is False
    assert server.buckets == [BUCKET]
    assert server.process is None
    rclone = S3Target.rclone(RcloneS3Server(tmp_path / "rclone", tmp_path / "rclone.log"), BUCKET)
    assert rclone.unenforced_conditional_writes is True
    fleet = LocalFleet(tmp_path, target, runtime=TritonRuntime(tmp_path / "rt"))
    assert "unenforcedConditionalWrites" not in fleet.environment_entry()
    rclone_entry = LocalFleet(tmp_path, rclone, runtime=TritonRuntime(tmp_path / "rt")).environment_entry()
    assert rclone_entry["unenforcedConditionalWrites"] == "accepted"


def test_write_config_replaces_the_fleets_environment_and_keeps_the_others(tmp_path: Path) -> None:
    fleet = LocalFleet(tmp_path, _target(), env="canary", runtime=TritonRuntime(tmp_path / "rt"))
    path = tmp_path / "model-sync.yaml"
    path.write_text("environments:\n  prod:\n    bucket: s3://p\n  canary:\n    bucket: s3://old\n")
    fleet.write_config(path, extra={"canaryPolicies": {MODEL: {"steps": [10, 50]}}})
    envs = yaml.safe_load(path.read_text())["environments"]
    assert envs["prod"] == {"bucket": "s3://p"}
    assert envs["canary"] == {
        "bucket": "s3://models-x/team",
        "endpointUrl": "http://127.0.0.1:9",
        "region": "us-east-1",
        "tritonUrl": fleet.replicas[0].http_url,
        "grpcUrl": fleet.replicas[0].grpc_url,
        "tritonMetricsUrls": {"default-0": fleet.metrics_urls[0], "default-1": fleet.metrics_urls[1]},
        "canaryPolicies": {MODEL: {"steps": [10, 50]}},
    }


def test_the_fleets_config_is_one_model_sync_reads(tmp_path: Path) -> None:
    fleet = LocalFleet(tmp_path, _target(), runtime=TritonRuntime(tmp_path / "rt"))
    env = environments.resolve("local", config=str(fleet.write_config(tmp_path / "model-sync.yaml")))
    assert (env.bucket, env.endpoint_url, env.region) == ("models-x", "http://127.0.0.1:9", "us-east-1")
    assert (env.triton_url, env.grpc_url) == (fleet.replicas[0].http_url, fleet.replicas[0].grpc_url)
    assert dict(env.metrics_urls) == {"default-0": fleet.metrics_urls[0], "default-1": fleet.metrics_urls[1]}


# ---- one real fleet, shared by the e2e tests below ------------------------------------------


@dataclass
class Pushed:
    fleet: LocalFleet
    s3: MotoS3Server
    version: int
    push_doc: dict[str, Any]
    started_s: float

    def status(self, replica_id: str) -> dict[str, Any] | None:
        client = s3_client(self.s3)
        try:
            body = client.get_object(Bucket=BUCKET, Key=layout.status_key("default", replica_id))["Body"].read()
        except client.exceptions.NoSuchKey:
            return None
        doc: dict[str, Any] = json.loads(body)
        return doc

    def smoked(self, replica_id: str, version: int) -> bool:
        """Whether `replica_id`'s status record reports MODEL READY and its smoke of `version` passed."""
        model = ((self.status(replica_id) or {}).get("models") or {}).get(MODEL) or {}
        smoke = model.get("smoke") or {}
        return model.get("state") == "READY" and smoke.get("ok") is True and smoke.get("version") == version


@pytest.fixture(scope="module")
def pushed(tmp_path_factory: pytest.TempPathFactory, triton_runtime: TritonRuntime) -> Iterator[Pushed]:
    """The local moto S3 + a 2-replica fleet, and `good` pushed through the CLI with --wait."""
    root = tmp_path_factory.mktemp("fleet")
    s3 = MotoS3Server(root / "s3", root / "logs" / "s3.log")
    target = S3Target.moto(s3, BUCKET)
    fleet = LocalFleet(root / "fleet", target, runtime=triton_runtime)
    try:
        s3.start()
        t0 = time.monotonic()
        fleet.start()
        started_s = time.monotonic() - t0
        model_dir = canary_models.write_model(root / "src", MODEL, "good")
        env = fleet.environ()
        env["MODEL_SYNC_CACHE_DIR"] = str(root / "cache")
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "model_sync", "push", str(model_dir), "--env", "local", *target.flags()),
                *("--output", "json", "--wait", "--wait-timeout", "60"),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=root,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr + fleet.logs()
        assert "ignores If-None-Match" not in proc.stderr  # moto enforces both conditions: nothing to warn
        doc = json.loads(proc.stdout)
        fleet.wait_ready(MODEL, 1, timeout=60)
        pushed = Pushed(fleet, s3, int(doc["models"][0]["version"]), doc, started_s)
        # Triton READY comes before each agent's report of it and its one smoke inference (a request
        # Triton counts): the tests start once both agents have reported the smoke of version 1.
        for replica_id in fleet.replica_ids:
            wait_until(
                functools.partial(pushed.smoked, replica_id, 1),
                60,
                what=f"{replica_id}'s report of its smoke inference of {MODEL} 1",
            )
        yield pushed
    finally:
        fleet.stop()
        s3.shutdown()


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_two_replica_fleet_serves_a_pushed_model_on_every_replica(pushed: Pushed) -> None:
    fleet = pushed.fleet
    assert pushed.started_s < 30, "the replicas start concurrently"
    assert pushed.version == 1
    # --wait waits for the replicas that report the model: for a NEW model, a replica whose agent has not
    # seen its pin yet reports nothing and is not waited for (the fixture waits for both itself).
    served = pushed.push_doc["served"][MODEL]
    assert served
    assert set(served) <= {"default/default-0", "default/default-1"}
    assert set(served.values()) == {"READY"}
    assert all(fleet.version_ready(i, MODEL, 1) for i in range(2))
    for replica_id in fleet.replica_ids:
        status = pushed.status(replica_id)
        assert status is not None
        assert status["models"][MODEL]["state"] == "READY"
        assert status["models"][MODEL]["serving"] == [1]
    repositories = {r.triton.repository for r in fleet.replicas}
    assert len(repositories) == 2
    assert all((p / MODEL / "1" / "model.py").is_file() for p in repositories)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_round_robin_traffic_over_the_fleet_is_answered_by_the_pushed_version_on_both_replicas(
    pushed: Pushed,
) -> None:
    fleet = pushed.fleet
    before = [metric_value(u, "nv_inference_request_success", MODEL, 1) for u in fleet.metrics_urls]
    traffic = RoundRobinTraffic(
        fleet.http_urls, MODEL, lambda seq: {"INPUT0": np.array([seq, 1, 2, 3], np.float32)}, concurrency=2
    )
    with traffic:
        time.sleep(1.5)
    records = traffic.records()
    assert len(records) >= 40, records
    assert records.version_counts() == {1: len(records)}, records.errors()
    assert records.failures(stable=1, canary=2).total == 0
    counts = records.replica_counts()
    assert set(counts) == {0, 1}
    assert abs(counts[0] - counts[1]) <= 2, counts
    # What each tritonserver saw: exactly the requests the traffic sent it.
    after = [metric_value(u, "nv_inference_request_success", MODEL, 1) for u in fleet.metrics_urls]
    assert [a - b for a, b in zip(after, before, strict=True)] == [counts[0], counts[1]]


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_stop_agent_deletes_its_report_while_triton_keeps_serving_and_start_agent_brings_it_back(
    pushed: Pushed,
) -> None:
    fleet = pushed.fleet
    assert fleet.stop_agent(1) == 0
    assert pushed.status("default-1") is None  # SIGTERM: the report is deleted
    assert not fleet.replicas[1].agent.running
    assert fleet.version_ready(1, MODEL, 1)  # tritonserver serves on without its agent
    assert pushed.status("default-0") is not None
    fleet.start_agent(1)
    wait_until(
        lambda: (pushed.status("default-1") or {}).get("models", {}).get(MODEL, {}).get("state") == "READY",
        30,
        what="default-1 reports READY again",
    )
    assert fleet.replicas[1].agent.running


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_readmes_client_example_runs_against_a_real_tritonserver(
    pushed: Pushed, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """README.md's "Calling a model" snippet, run as written but for the hosts (a local replica,
    no TLS) and the model: tritonclient sends the bearer token and the deployment selector as HTTP
    headers and gRPC metadata (grpc refuses a metadata key that is not lower case) and gets answers."""
    from tests.test_readme import _blocks

    (snippet,) = _blocks("python")
    replica = pushed.fleet.replicas[0]
    hosts = 'HTTP, GRPC, SSL = "infer.inference.example.com", "grpc.inference.example.com:443", True'
    model = 'MODEL, DEPLOYMENT = "mlp", "default"'
    assert hosts in snippet
    assert model in snippet
    local = f"HTTP, GRPC, SSL = {replica.http_url.split('://', 1)[1]!r}, {replica.grpc_url!r}, False"
    code = snippet.replace(hosts, local).replace(model, f'MODEL, DEPLOYMENT = "{MODEL}", "default"')
    monkeypatch.setenv("TRITON_TOKEN", "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJjaSJ9.c2ln")
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 (the README's own example)
    assert capsys.readouterr().out.split("\n") == ["[2. 2. 2. 2.]", "[2. 2. 2. 2.]", ""]
