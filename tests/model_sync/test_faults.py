"""Faults against real server processes: the S3 server killed mid-push / mid-promote (rclone, on
disk, restarted on the same port), bad credentials, servers that ignore If-None-Match."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from model_sync import environments
from model_sync.push import publish
from model_sync.s3.bucket import Bucket
from tests.model_sync.helpers import pinned_version, promote_args, python_model, run_cli, write_config
from tests.support.s3_servers import S3Server, aws_environ


def _kill_when(server: S3Server, path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.005)
    server.stop()


def _big_model(root: Path, content: bytes) -> Path:
    return python_model(root, "big", {"model.py": content, "model.pt": os.urandom(48 * 1024 * 1024)})


def test_server_killed_mid_push_pins_nothing_and_a_rerun_completes(tmp_path, capsys, rclone_s3, aws_env) -> None:
    bucket = rclone_s3.make_bucket("repo")
    cfg = write_config(tmp_path / "model-sync.yaml", rclone_s3, {"staging": f"s3://{bucket}"})
    data = Path(rclone_s3.data_dir or "") / bucket
    assert (
        run_cli(
            capsys,
            "push",
            str(python_model(tmp_path / "a", "big", {"model.py": b"# v1\n", "model.pt": b"small"})),
            "--env",
            "staging",
            "--config",
            cfg,
        ).code
        == 0
    )
    model = _big_model(tmp_path / "b", b"# v2\n")
    env = {**aws_environ(), "AWS_MAX_ATTEMPTS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "model_sync",
        "push",
        str(model),
        "--env",
        "staging",
        "--config",
        cfg,
        "--multipart-threshold-mb",
        "8",
        "--concurrency",
        "2",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Killed once version 2 holds its first file (model.py, one PutObject) while the 48 MiB
    # model.pt is still going up in parts: a partial version directory.
    _kill_when(rclone_s3, data / "repository" / "big" / "2" / "model.py", proc)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 5, (out, err)
    errors_ = [
        ln for ln in err.strip().splitlines() if not ln.startswith("model-sync: warning:")
    ]  # rclone: If-None-Match warning
    assert len(errors_) == 1, err
    assert "unreachable" in errors_[0], err
    rclone_s3.start()
    assert pinned_version(rclone_s3, bucket, "big") == 1  # still the complete old version
    assert not (data / "manifests" / "big" / "2.json").exists()
    assert rclone_s3.keys(bucket, "repository/big/2/") == ["repository/big/2/model.py"]  # the partial upload
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg, "--multipart-threshold-mb", "8")
    assert r.code == 0, r.err
    assert pinned_version(rclone_s3, bucket, "big") == 3  # 2 is the abandoned allocation, never reused
    assert (data / "repository" / "big" / "3" / "model.pt").read_bytes() == (model / "1" / "model.pt").read_bytes()
    r = run_cli(capsys, "status", "--env", "staging", "--config", cfg, "--output", "json")
    s = __import__("json").loads(r.out)["staging"]["models"][0]
    assert s["pinned"] == 3
    assert 2 in s["versions"]
    assert 2 in s["incomplete"]  # debris of the killed push is flagged, never pinned
    assert 3 not in s["incomplete"]


def test_server_killed_mid_promote_pins_nothing_and_a_rerun_completes(tmp_path, capsys, rclone_s3, aws_env) -> None:
    staging, prod = rclone_s3.make_bucket("staging"), rclone_s3.make_bucket("prod")
    cfg = write_config(tmp_path / "model-sync.yaml", rclone_s3, {"staging": f"s3://{staging}", "prod": f"s3://{prod}"})
    model = _big_model(tmp_path / "a", b"# v1\n")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    env = {**aws_environ(), "AWS_MAX_ATTEMPTS": "1"}
    cmd = [sys.executable, "-m", "model_sync", *promote_args("big", 1, cfg, "--skip-verification")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _kill_when(rclone_s3, Path(rclone_s3.data_dir or "") / prod / "audit" / "allocations" / "big" / "1.json", proc)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 5, (out, err)
    rclone_s3.start()
    assert pinned_version(rclone_s3, prod, "big") is None
    r = run_cli(capsys, *promote_args("big", 1, cfg, "--skip-verification"))
    assert r.code == 0, r.err
    assert pinned_version(rclone_s3, prod, "big") == 2
    assert rclone_s3.get(prod, "repository/big/2/model.pt") == (model / "1" / "model.pt").read_bytes()


def test_bad_credentials_exit_5_with_one_line(tmp_path, capsys, rclone_s3, aws_env, monkeypatch) -> None:
    bucket = rclone_s3.make_bucket("repo")
    cfg = write_config(tmp_path / "model-sync.yaml", rclone_s3, {"staging": f"s3://{bucket}"})
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    r = run_cli(capsys, "push", str(python_model(tmp_path, "m")), "--env", "staging", "--config", cfg)
    assert r.code == 5
    assert r.err.startswith("model-sync: S3 credentials/access: SignatureDoesNotMatch on s3://repo/"), r.err
    assert r.err.count("\n") == 1, r.err
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    r = run_cli(capsys, "push", str(python_model(tmp_path, "m")), "--env", "staging", "--config", cfg)
    assert r.code == 5
    assert "AWS credentials: none found" in r.err
    assert rclone_s3.keys(bucket) == []


def test_unreachable_endpoint_exit_5(tmp_path, capsys, aws_env, monkeypatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    from tests.support.s3_servers import free_port

    r = run_cli(
        capsys, "status", "--env", "x", "--bucket", "s3://repo", "--endpoint-url", f"http://127.0.0.1:{free_port()}"
    )
    assert r.code == 5
    assert "S3 endpoint: http://127.0.0.1:" in r.err
    assert "unreachable" in r.err


def test_conditional_write_detection(rclone_s3, moto_s3, aws_env) -> None:
    r_bucket, m_bucket = rclone_s3.make_bucket(), moto_s3.make_bucket()
    rclone = Bucket(environments.Environment("r", environments.layout.Root(r_bucket), rclone_s3.endpoint, "us-east-1"))
    moto = Bucket(environments.Environment("m", environments.layout.Root(m_bucket), moto_s3.endpoint, "us-east-1"))
    assert (rclone.conditional_writes_enforced(), rclone.if_match_enforced()) == (False, False)
    assert (moto.conditional_writes_enforced(), moto.if_match_enforced()) == (
        True,
        True,
    )  # moto 5.2.5 enforces If-Match on PutObject
    assert (rclone.ignored_conditions(), moto.ignored_conditions()) == ("If-None-Match and If-Match", None)


def test_push_warns_when_the_server_ignores_if_none_match(tmp_path, capsys, rclone_s3, aws_env) -> None:
    bucket = rclone_s3.make_bucket("warn")
    cfg = write_config(tmp_path / "model-sync.yaml", rclone_s3, {"staging": f"s3://{bucket}"})
    r = run_cli(capsys, "push", str(python_model(tmp_path, "m")), "--env", "staging", "--config", cfg)
    assert r.code == 0
    assert "ignores If-None-Match and If-Match" in r.err


def test_an_unreachable_endpoint_fails_a_repository_push_once(tmp_path, capsys, aws_env, monkeypatch) -> None:
    """Every model would fail the same way: the first S3 failure skips the models not started yet,
    and the error is printed once (not once per model)."""
    from tests.support.s3_servers import free_port

    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    for i in range(40):
        python_model(tmp_path / "repo", f"m{i:02d}")
    endpoint = f"http://127.0.0.1:{free_port()}"
    r = run_cli(
        capsys, "push", str(tmp_path / "repo"), "--env", "x", "--bucket", "s3://repo", "--endpoint-url", endpoint
    )
    assert r.code == 5
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"S3 endpoint: {endpoint} unreachable (ConnectionRefusedError); allowed: a reachable S3 endpoint" in lines[0]
    # At most one wave of model workers (16) tried; the rest never started and are named.
    skipped = re.search(r"\((\d+) more not started: (m\d\d(?:, m\d\d){4}), \.\.\.\)$", lines[0])
    assert skipped is not None, lines[0]
    assert int(skipped.group(1)) >= 40 - publish.PushOptions.model_workers
