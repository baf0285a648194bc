"""model_sync.agent.loop and the `agent` command: backoff, the CLI's options and exit codes, and the
loop against a real S3 server (access denied, unclassified errors, the pin index, backend files).
The agent with a real tritonserver is in tests/model_sync/agent/test_e2e.py."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
from pathlib import Path

import pytest

from model_sync import agent as ag
from model_sync.cli import build_parser
from model_sync.commands import agent as agent_cmd
from model_sync.contract import layout
from tests.model_sync.helpers import settings_on
from tests.support.prometheus import Samples, scrape
from tests.support.s3_servers import boto3_session
from tests.support.triton import pinned_config


def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    lows = [ag.backoff_delay(n, 1.0, 30.0, rng=lambda lo, hi: lo) for n in range(1, 8)]
    highs = [ag.backoff_delay(n, 1.0, 30.0, rng=lambda lo, hi: hi) for n in range(1, 8)]
    assert highs == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert lows == [h / 2 for h in highs]
    assert 15.0 <= ag.backoff_delay(10, 1.0, 30.0) <= 30.0


def test_cli_parses_agent_options_and_rejects_bad_header(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        [
            "agent",
            "--env",
            "prod",
            "--bucket",
            "s3://models-prod",
            "--repository",
            str(tmp_path / "m"),
            "--once",
            "--triton-header",
            "bad",
        ]
    )
    assert args.once is True
    assert agent_cmd.options(args, {})["interval"] == 5.0
    from model_sync import environments, errors

    env = environments.resolve("prod", None, "s3://models-prod")
    with pytest.raises(errors.SyncError, match=r"^--triton-header: 'bad'; allowed: NAME:VALUE$"):
        agent_cmd.build_settings(args, env, {})
    args.triton_header = ["Triton-Admin-Key: s3cr3t"]
    s = agent_cmd.build_settings(args, env, {})
    assert s.triton_headers == (("Triton-Admin-Key", "s3cr3t"),)
    assert s.triton_url is None  # --once: the init container does not wait for Triton
    assert s.staging == (tmp_path / ".m.staging")
    assert (s.max_failures, s.metrics_port) == (5, None)
    assert agent_cmd.build_settings(args, env, {"MODEL_SYNC_AGENT_MAX_FAILURES": "2"}).max_failures == 2
    args.interval = 0
    with pytest.raises(errors.SyncError, match=r"^interval: 0"):
        agent_cmd.build_settings(args, env, {})


def test_agent_command_exits_with_usage_code_on_bad_staging(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "model_sync",
            "agent",
            "--env",
            "prod",
            "--bucket",
            "s3://models-prod",
            "--repository",
            str(tmp_path / "m"),
            "--staging-dir",
            str(tmp_path / "m" / "s"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "staging" in proc.stderr
    assert "outside the repository root" in proc.stderr


# ---- error handling against a real S3 server (rclone serve s3, auth enforced) ---------------------


def _client(server: object, key: str, secret: str) -> object:
    from botocore.config import Config

    return boto3_session(key, secret, "us-east-1").client(
        "s3",
        endpoint_url=server.endpoint,
        config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10),  # type: ignore[attr-defined]
    )


def _repo(server: object, bucket: str, key: str, secret: str) -> object:
    """The agent's view of `bucket`: model_sync's own S3 layer (clients.AGENT) with these credentials."""
    import botocore.session

    from model_sync import environments
    from model_sync.s3 import clients
    from model_sync.s3.bucket import Bucket

    session = clients.share_data_loader(botocore.session.get_session())
    session.set_credentials(key, secret)
    env = environments.Environment(
        "test",
        layout.Root(bucket),
        server.endpoint,  # type: ignore[attr-defined]
        "us-east-1",
    )
    return Bucket(env, clients.AGENT, session=session)


def _adopted(tmp_path: Path, bucket: str, **overrides: object) -> ag.AgentSettings:
    s = settings_on(tmp_path, root=layout.Root(bucket), interval=0.05, backoff_max=0.1, heartbeat=0.05, **overrides)
    (s.repository / "add" / "3").mkdir(parents=True)
    (s.repository / "add" / "3" / "model.py").write_text("# serving\n")
    (s.repository / "add" / "config.pbtxt").write_text(pinned_config("add", 3))
    return s


def test_loop_survives_access_denied_keeps_serving_and_recovers(tmp_path: Path, rclone_s3: object) -> None:
    from tests.support.s3_servers import KEY, SECRET, free_port

    bucket = rclone_s3.make_bucket("models-denied")  # type: ignore[attr-defined]
    port = free_port()
    s = _adopted(tmp_path, bucket, metrics_port=port, metrics_address="127.0.0.1")
    stop = threading.Event()
    agent = ag.RepositoryAgent(s, _repo(rclone_s3, bucket, KEY, "wrong-secret"), stop=stop)  # type: ignore[arg-type]
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(agent.run()), daemon=True)
    thread.start()
    try:
        from model_sync.sandbox.procs import wait_until

        wait_until(
            lambda: agent.last_error is not None and "list pin index" in agent.last_error, 20, what="a denied pass"
        )
        first = agent.last_error
        wait_until(lambda: agent.last_error is not None and agent.s3_ok is False, 5, what="more denied passes")
        assert thread.is_alive()  # the sidecar did not exit
        assert "SignatureDoesNotMatch" in (first or "") or "AccessDenied" in (first or ""), first
        assert (s.repository / "add" / "3" / "model.py").read_text() == "# serving\n"  # nothing local touched
        assert "versions: 3" in (s.repository / "add" / "config.pbtxt").read_text()
        # What Prometheus scrapes meanwhile: failed passes by kind, no successful one yet.
        wait_until(
            lambda: _scraped(port).get(("model_sync_agent_pass_failures_total", (("kind", "denied"),)), 0) >= 1,
            10,
            what="a denied pass counted",
        )
        assert _scraped(port)["model_sync_agent_last_success_timestamp_seconds", ()] == 0
        # Credentials fixed (e.g. the bucket policy restored): the same loop reports again.
        agent.s3 = _repo(rclone_s3, bucket, KEY, SECRET)  # type: ignore[assignment]
        key = layout.status_key("default", "replica-0")
        # The pass in flight when the credentials changed may still fail its listing (old client) and
        # then write the status with the new one, reporting s3_reachable false: the next pass is good.
        wait_until(
            lambda: key in rclone_s3.keys(bucket) and agent.s3_ok is True,  # type: ignore[attr-defined]
            20,
            what="status written after recovery, from a good pass",
        )
        # The pass is counted once it returns (s3_ok is set inside it): the scrape is polled.
        wait_until(lambda: _scraped(port)["model_sync_agent_passes_total", ()] >= 1, 10, what="a pass counted")
        assert _scraped(port)["model_sync_agent_last_success_timestamp_seconds", ()] > 0
    finally:
        stop.set()
        thread.join(timeout=20)
    assert codes == [0]
    with pytest.raises(OSError, match="Connection refused"):  # the endpoint closed with the agent
        _scraped(port)
    # Clean exit: the replica's status object is deleted (pods are replaced; verify must not see it).
    assert key not in rclone_s3.keys(bucket)  # type: ignore[attr-defined]


def test_once_maps_access_denied_and_no_such_bucket_to_exit_5(
    tmp_path: Path, rclone_s3: object, caplog: pytest.LogCaptureFixture
) -> None:
    """--once gives up with exit 5 after --max-failures passes denied or without a bucket, and its
    last line says that it gave up, why and the exit code (before: it ended on "retrying in 0.7s")."""
    from model_sync import errors
    from tests.support.s3_servers import KEY, SECRET

    bucket = rclone_s3.make_bucket("models-once")  # type: ignore[attr-defined]
    denied = ag.RepositoryAgent(
        _adopted(tmp_path / "a", bucket),
        _repo(rclone_s3, bucket, KEY, "wrong-secret"),  # type: ignore[arg-type]
    )
    assert denied.run(once=True) == errors.S3
    assert denied.last_error is not None
    assert _sample(denied, "model_sync_agent_pass_failures_total", kind="denied") == 5  # the default --max-failures
    last = caplog.records[-1]
    assert last.levelname == "ERROR", caplog.text
    assert re.fullmatch(
        r"gave up after 5 failed passes in a row \(--max-failures 5\), the last: s3 access denied: .+; the local "
        r"repository is as it was; exit 5",
        last.getMessage(),
    ), last.getMessage()
    assert sum("retrying" in r.getMessage() for r in caplog.records) == 4  # never after the last attempt
    missing = ag.RepositoryAgent(
        _adopted(tmp_path / "b", "models-absent"), _repo(rclone_s3, "models-absent", KEY, SECRET)
    )  # type: ignore[arg-type]
    assert missing.run(once=True) == errors.S3
    assert "NoSuchBucket" in (missing.last_error or "")
    assert caplog.records[-1].getMessage().startswith("gave up after 5 failed passes in a row"), caplog.text
    assert caplog.records[-1].getMessage().endswith("; exit 5")
    assert _sample(missing, "model_sync_agent_pass_failures_total", kind="no-bucket") == 5


def _scraped(port: int) -> Samples:
    return scrape(f"http://127.0.0.1:{port}/metrics")


def _sample(agent: ag.RepositoryAgent, name: str, **labels: str) -> float:
    """One sample of the agent's metrics registry (0 when absent)."""
    value = agent.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_unclassified_error_is_recorded_and_retried_not_raised(tmp_path: Path, rclone_s3: object) -> None:
    """ENOSPC-like failures while staging: logged, last_error, backoff; --once gives up with 1."""
    from model_sync import errors
    from model_sync.records import codec
    from tests.support.s3_servers import KEY, SECRET

    bucket = rclone_s3.make_bucket("models-enospc")  # type: ignore[attr-defined]
    client = _client(rclone_s3, KEY, SECRET)
    data = b"x = 1\n"
    doc = {
        "schema": "model-sync.manifest/v1",
        "model": "new",
        "version": 1,
        "files": {"model.py": {"sha256": codec.sha256_bytes(data), "size": len(data)}},
        "config_pbtxt": pinned_config("new", 1),
        "backend": "python",
        "platform": "",
        "source": {"path": "/t", "host": "t", "git_commit": None, "promoted_from": None},
        "exporter": {
            "tool": "t",
            "method": None,
            "torch_version": None,
            "torchscript_format_version": None,
            "target": "local",
        },
        "created_by": "t",
        "created_at": codec.now(),
    }
    client.put_object(  # type: ignore[attr-defined]
        Bucket=bucket, Key=layout.version_file_key("new", 1, "model.py"), Body=data
    )
    client.put_object(  # type: ignore[attr-defined]
        Bucket=bucket, Key=layout.manifest_key("new", 1), Body=codec.dumps(doc)
    )
    client.put_object(  # type: ignore[attr-defined]
        Bucket=bucket, Key=layout.config_key("new"), Body=pinned_config("new", 1).encode()
    )
    s = _adopted(tmp_path, bucket)
    a = ag.RepositoryAgent(dataclasses.replace(s, max_failures=3), _repo(rclone_s3, bucket, KEY, SECRET))  # type: ignore[arg-type]
    calls = []

    def no_space(*args: object, **kwargs: object) -> None:
        calls.append(args)
        raise OSError(28, "No space left on device")

    a._stage_version = no_space  # type: ignore[method-assign]
    assert a.run(once=True) == errors.UNEXPECTED
    assert len(calls) == 3  # --max-failures
    assert _sample(a, "model_sync_agent_pass_failures_total", kind="other") == 3
    assert _sample(a, "model_sync_agent_passes_total") == 0
    assert a.last_error is not None
    assert "No space left on device" in a.last_error
    assert not (s.repository / "new").exists()
    status = json.loads(
        client.get_object(  # type: ignore[attr-defined]
            Bucket=bucket, Key=layout.status_key("default", "replica-0")
        )["Body"].read()
    )
    assert "No space left" in status["last_error"]
    assert "No space left" in status["models"]["new"]["error"]
    assert status["models"]["add"]["serving"] == [3]  # the other model is untouched


def test_once_exit_code_places_what_verified_and_fails_only_when_nothing_is_placed(tmp_path: Path) -> None:
    from model_sync import errors

    a = ag.RepositoryAgent(settings_on(tmp_path), s3=None)  # type: ignore[arg-type]
    assert a.once_exit_code() == errors.OK  # nothing pinned yet: Triton starts empty
    a.models["good"] = ag.ModelState(pin_text="x", pinned=(1,), serving=(1,), state=ag.PLACED)
    a.models["bad"] = ag.ModelState(pin_text="y", pinned=(2,), state=ag.FAILED, error="version 2 rejected")
    assert a.once_exit_code() == errors.OK
    del a.models["good"]
    assert a.once_exit_code() == errors.CHECK_FAILED


def test_etags_compare_unquoted() -> None:
    from model_sync.s3.bucket import etag_of

    assert etag_of({"ETag": '"abc"'}) == etag_of({"ETag": "abc"}) == "abc"
    assert etag_of({"ETag": None}) is None
    assert etag_of({"ETag": '""'}) is None


# ---- what a pass costs (moto's request log) ---------------------------------------------------


def test_steady_pass_lists_only_the_pin_index_and_a_full_resync_catches_a_pin_without_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], moto_s3: object, s3_bucket: str, aws_env: dict[str, str]
) -> None:
    """A pass lists manifests/_pins/ (one object per model) instead of repository/ (every
    version's files); a pin flipped by a writer that skips the index is picked up by the next
    full listing (--full-resync), not lost."""
    from model_sync import environments
    from model_sync.s3 import clients
    from model_sync.s3.bucket import Bucket
    from tests.model_sync.helpers import python_model, run_cli, write_config

    cfg = write_config(
        tmp_path / "model-sync.yaml",
        moto_s3,  # type: ignore[arg-type]
        {"staging": f"s3://{s3_bucket}"},
    )
    for name in ("a", "b", "c"):
        for version in ("1", "2"):  # two versions each: the full listing holds every one of their files
            model = python_model(
                tmp_path / f"src-{name}-{version}", name, {"model.py": f"# {name} {version}\n".encode()}
            )
            assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    env = environments.Environment(
        "staging",
        layout.Root(s3_bucket),
        moto_s3.endpoint,  # type: ignore[attr-defined]
        "us-east-1",
    )
    agent = ag.RepositoryAgent(
        settings_on(tmp_path / "node", root=layout.Root(s3_bucket), heartbeat=3600.0, resync=3600.0),
        Bucket(env, clients.AGENT),
    )
    agent.prepare()

    def one_pass() -> list[str]:
        before = len(moto_s3.requests())  # type: ignore[attr-defined]
        agent.sync_once()
        return [" ".join(r.split()[:2]) for r in moto_s3.requests()[before:]]  # type: ignore[attr-defined]

    first = one_pass()  # full listing, pins, manifests, files, the first status
    assert any("prefix=repository/" in r for r in first)
    assert {n: st.serving for n, st in agent.models.items()} == {"a": (2,), "b": (2,), "c": (2,)}
    steady = [one_pass() for _ in range(3)]
    assert all(
        len(p) == 1 and p[0].startswith(f"GET /{s3_bucket}") and "prefix=manifests/_&" in p[0] for p in steady
    ), steady
    # A push flips a pin and its index entry: the next pass re-reads just that pin.
    model = python_model(tmp_path / "src-b-3", "b", {"model.py": b"# b 3\n"})
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    pushed = one_pass()
    assert agent.models["b"].serving == (3,)
    assert not any("prefix=repository/" in r for r in pushed)
    # A pin rewritten without its index entry (another writer): unseen until the full resync.
    pin_a1 = (
        moto_s3.client()  # type: ignore[attr-defined]
        .get_object(Bucket=s3_bucket, Key="manifests/a/1.json")["Body"]
        .read()
    )
    moto_s3.client().put_object(
        Bucket=s3_bucket, Key="repository/a/config.pbtxt", Body=json.loads(pin_a1)["config_pbtxt"].encode()
    )  # type: ignore[attr-defined]
    assert len(one_pass()) == 1
    assert agent.models["a"].serving == (2,)
    agent._listed_at = -1e9  # the resync interval has passed
    resynced = one_pass()
    assert any("prefix=repository/" in r for r in resynced)
    assert agent.models["a"].serving == (1,)
    agent.close()


def test_a_version_without_its_backends_files_is_never_placed(tmp_path: Path, rclone_s3: object) -> None:
    """A manifest written past `push` (a script, another tool) that lists only model.pt for a
    python-backend model, or model.pt where the libtorch config names net.pt: tritonserver 2.51
    would stay LOADING on it and stop loading anything else. The agent refuses the version before
    a byte reaches Triton, reports why, and the previous version keeps serving."""
    from model_sync import errors
    from model_sync.triton_model import model_config
    from tests.support.s3_servers import KEY, SECRET
    from tests.support.triton import upload_version

    bucket = rclone_s3.make_bucket("models-backend-files")  # type: ignore[attr-defined]
    client = _client(rclone_s3, KEY, SECRET)
    libtorch = 'name: "lt"\nplatform: "pytorch_libtorch"\ndefault_model_filename: "net.pt"\nmax_batch_size: 0\n'

    def publish(name: str, version: int, text: str) -> None:  # what push refuses: only model.pt
        upload_version(client, bucket, name, version, {"model.pt": b"weights"}, text)
        client.put_object(Bucket=bucket, Key=layout.config_key(name), Body=text.encode())  # type: ignore[attr-defined]

    publish("add", 4, pinned_config("add", 4))  # the adopted model's next version: python backend, no model.py
    publish("new", 1, pinned_config("new", 1))  # a new model, the same mistake
    publish(
        "lt", 1, model_config.pinned_text(model_config.parse(libtorch), 1, "lt")
    )  # libtorch: net.pt named, model.pt listed
    s = _adopted(tmp_path, bucket)
    a = ag.RepositoryAgent(s, _repo(rclone_s3, bucket, KEY, SECRET))  # type: ignore[arg-type]
    assert a.run(once=True) == errors.OK  # "add" still serves version 3
    assert (s.repository / "add" / "3" / "model.py").read_text() == "# serving\n"
    assert "versions: 3" in (s.repository / "add" / "config.pbtxt").read_text()
    assert not (s.repository / "add" / "4").exists()
    assert not (s.repository / "new").exists()
    assert not (s.repository / "lt").exists()
    status = json.loads(
        client.get_object(  # type: ignore[attr-defined]
            Bucket=bucket, Key=layout.status_key("default", "replica-0")
        )["Body"].read()
    )
    for name, version, missing in (("add", 4, "model.py"), ("new", 1, "model.py"), ("lt", 1, "net.pt")):
        entry = status["models"][name]
        assert entry["state"] == "FAILED", entry
        assert entry["failed"][str(version)] == (
            f"manifest {layout.manifest_key(name, version)}: lists no {missing}; allowed: a version with every "
            "file its backend needs (model_config.required_files)"
        )
    assert status["models"]["add"]["serving"] == [3]
