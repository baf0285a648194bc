"""promote, rollback, status and prune against a real moto_server (staging and prod buckets)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from model_sync.records import codec
from tests.model_sync.helpers import manifest_doc, pinned_version, promote_args, python_model, run_cli, write_config
from tests.support.s3_servers import S3Server, aws_environ


@pytest.fixture
def envs(tmp_path: Path, moto_s3: S3Server, aws_env) -> tuple[str, str, str]:
    staging, prod = moto_s3.make_bucket(), moto_s3.make_bucket()
    cfg = write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{staging}", "prod": f"s3://{prod}"})
    return cfg, staging, prod


def _push(capsys, tmp_path: Path, cfg: str, content: str, env: str = "staging") -> None:
    model = python_model(
        tmp_path / f"src-{content}", "simple", {"model.py": content.encode(), "model.pt": content.encode() * 100}
    )
    r = run_cli(capsys, "push", str(model), "--env", env, "--config", cfg)
    assert r.code == 0, r.err


def _verify_record(server: S3Server, bucket: str, version: int, passed: bool = True, pinned: bool = True) -> str:
    """One verify attempt of simple `version`, written by verify.record (the one writer)."""
    from model_sync import environments
    from model_sync.observation import verify as vf
    from model_sync.s3.bucket import Bucket

    raw = server.get(bucket, f"manifests/simple/{version}.json")
    result = vf.Verification("simple", version, replicas={"triton/pod-0": "READY" if passed else "FAILED: boom"},
                             smoke_inference=passed,
                             manifest_sha256=codec.sha256_bytes(raw), pinned=pinned,
                             problems=[] if passed else ["replica triton/pod-0: FAILED: boom"])  # fmt: skip
    result.checks["replicas"] = "passed" if passed else "failed"
    env = environments.resolve(None, None, f"s3://{bucket}", server.endpoint, "us-east-1")
    return vf.record(Bucket(env), result, "test")


def test_promote_requires_verification_then_copies_verifies_and_records(tmp_path, capsys, moto_s3, envs) -> None:
    cfg, staging, prod = envs
    _push(capsys, tmp_path, cfg, "one")
    _push(capsys, tmp_path, cfg, "two")
    r = run_cli(capsys, *promote_args("simple", 2, cfg))
    assert r.code == 4
    assert "verification: simple 2 has no record in staging" in r.err
    r = run_cli(capsys, *promote_args("simple", 1, cfg))
    assert (r.code, "simple 1 is not pinned in staging (pinned: 2)" in r.err) == (4, True)
    r = run_cli(capsys, *promote_args("simple", 99, cfg))
    assert (r.code, "version: simple 99 does not exist in staging" in r.err) == (3, True), r.err
    _verify_record(moto_s3, staging, 2, passed=False)
    r = run_cli(capsys, *promote_args("simple", 2, cfg))
    assert (r.code, "FAILED in staging" in r.err) == (4, True)
    assert moto_s3.keys(prod) == []
    key = _verify_record(moto_s3, staging, 2)
    before = len(moto_s3.requests())
    r = run_cli(capsys, *promote_args("simple", 2, cfg))
    assert r.code == 0, r.err
    assert "pinned: simple version 2 in prod (promoted from staging version 2)" in r.out
    # server-side copies (CopyObject carries x-amz-copy-source; no body goes through the client) then re-hash reads
    copies = [q for q in moto_s3.requests()[before:] if q.startswith(f"PUT /{prod}/repository/simple/2/")]
    assert len(copies) == 2
    assert pinned_version(moto_s3, prod, "simple") == 2
    src, dst = manifest_doc(moto_s3, staging, "simple", 2), manifest_doc(moto_s3, prod, "simple", 2)
    assert dst["files"] == src["files"]
    assert dst["source"]["promoted_from"] == {"env": "staging", "bucket_uri": f"s3://{staging}", "version": 2}
    prov = json.loads(moto_s3.get(prod, "audit/promotions/simple/2.json"))
    assert prov["verification"] == {"skipped": False, "record_key": key}
    assert prov["checksums_verified"] == "rehash"
    codec.read(json.dumps(prov), "model-sync.promotion/v3")
    assert prov["canary"] == {"skipped": True, "id": None}  # --no-canary, recorded
    assert prov["compatibility"]["result"] == "exempt"  # python backend: not LibTorch
    # Idempotent re-run.
    r = run_cli(capsys, *promote_args("simple", 2, cfg))
    assert (r.code, "up to date" in r.out) == (0, True)


def test_verification_attempts_are_appended_and_the_gate_reads_the_latest_pinned_one(
    tmp_path, capsys, moto_s3, envs
) -> None:
    """verifying a version while it is not pinned never replaces the evidence of
    an earlier pinned attempt; the latest attempt made while pinned decides."""
    cfg, staging, prod = envs
    _push(capsys, tmp_path, cfg, "one")
    first = _verify_record(moto_s3, staging, 1)
    _verify_record(moto_s3, staging, 1, passed=False, pinned=False)  # e.g. run after version 2 was pushed
    assert len(moto_s3.keys(staging, "audit/verifications/simple/1/")) == 2
    assert moto_s3.get(staging, first)  # the passing record is still there
    r = run_cli(capsys, *promote_args("simple", 1, cfg))
    assert r.code == 0, r.err
    assert json.loads(moto_s3.get(prod, "audit/promotions/simple/1.json"))["verification"]["record_key"] == first
    _push(capsys, tmp_path, cfg, "two")
    _verify_record(moto_s3, staging, 2)
    _verify_record(moto_s3, staging, 2, passed=False)  # a later pinned attempt failed: it decides
    r = run_cli(capsys, *promote_args("simple", 2, cfg))
    assert (r.code, "FAILED in staging" in r.err) == (4, True), r.err


def test_promote_takes_next_free_number_and_records_skipped_verification(tmp_path, capsys, moto_s3, envs) -> None:
    cfg, _staging, prod = envs
    _push(capsys, tmp_path, cfg, "prod-one", env="prod")  # prod already has its own version 1
    _push(capsys, tmp_path, cfg, "staging-one")
    r = run_cli(capsys, *promote_args("simple", 1, cfg, "--skip-verification"))
    assert r.code == 0, r.err
    assert pinned_version(moto_s3, prod, "simple") == 2
    assert moto_s3.get(prod, "repository/simple/1/model.py") == b"prod-one"  # never overwritten
    assert moto_s3.get(prod, "repository/simple/2/model.py") == b"staging-one"
    prov = json.loads(moto_s3.get(prod, "audit/promotions/simple/2.json"))
    assert prov["verification"] == {"skipped": True, "record_key": None}


def test_promote_refuses_a_tampered_source_file(tmp_path, capsys, moto_s3, envs) -> None:
    """A verified version whose object was rewritten after push (same size) is refused before
    anything is copied or allocated in the target (before: it was copied, then refused, leaving
    an allocation marker and two stderr lines), and `status` no longer calls it verified."""
    cfg, staging, prod = envs
    _push(capsys, tmp_path, cfg, "one")
    _verify_record(moto_s3, staging, 1)
    time.sleep(1.01 - time.time() % 1)  # S3's LastModified has whole seconds: the rewrite comes a second later
    moto_s3.client().put_object(
        Bucket=staging, Key="repository/simple/1/model.pt", Body=b"x" * 300
    )  # same size as "one"*100
    r = run_cli(capsys, *promote_args("simple", 1, cfg))
    assert r.code == 4, r.err
    assert r.err.splitlines() == [
        f"model-sync: checksum: s3://{staging}/repository/simple/1/model.pt is "
        f"{hashlib.sha256(b'x' * 300).hexdigest()}/300 bytes, manifest says "
        f"{hashlib.sha256(b'one' * 100).hexdigest()}/300; nothing was copied to prod; allowed: a version whose "
        "files match its manifest (push it again)"
    ]
    assert moto_s3.keys(prod) == []
    r = run_cli(capsys, "status", "--env", "staging", "--config", cfg, "--output", "json")
    s = json.loads(r.out)["staging"]["models"][0]
    assert (s["pinned"], s["verified"]) == (1, False)
    assert s["files_changed"] == "model.pt was rewritten after its manifest"
    r = run_cli(capsys, "status", "--env", "staging", "--config", cfg)
    assert "NO (files changed)" in r.out
    assert "FILES CHANGED: simple in staging version 1: model.pt was rewritten after its manifest" in r.out


def test_promote_dry_run_writes_nothing(tmp_path, capsys, moto_s3, envs) -> None:
    cfg, staging, prod = envs
    _push(capsys, tmp_path, cfg, "one")
    r = run_cli(capsys, *promote_args("simple", 1, cfg, "--skip-verification", "--dry-run"))
    assert r.code == 0
    assert (
        f"(dryrun) copy: s3://{staging}/repository/simple/1/model.pt to s3://{prod}/repository/simple/1/model.pt"
        in r.out
    )
    assert moto_s3.keys(prod) == []


def test_rollback_walks_back_the_pin_history_and_never_deletes(tmp_path, capsys, moto_s3, envs) -> None:
    cfg, staging, _ = envs
    for content in ("one", "two", "three"):
        _push(capsys, tmp_path, cfg, content)
    keys = set(moto_s3.keys(staging, "repository/"))
    r = run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg)
    assert (r.code, pinned_version(moto_s3, staging, "simple")) == (0, 2), r.err
    r = run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg)
    assert (r.code, pinned_version(moto_s3, staging, "simple")) == (0, 1), r.err
    r = run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg)
    assert r.code == 4
    assert "no previous pin recorded for version 1; allowed: --model-version N" in r.err
    r = run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg, "--model-version", "3")
    assert (r.code, pinned_version(moto_s3, staging, "simple")) == (0, 3)
    # The pin carries version 3's own config, and nothing was deleted.
    assert "versions: 3" in moto_s3.get(staging, "repository/simple/config.pbtxt").decode()
    assert set(moto_s3.keys(staging, "repository/")) == keys


@pytest.mark.parametrize(
    ("args", "code", "match"),
    [
        (["--model-version", "9"], 3, r"manifest: s3://.*/manifests/simple/9\.json does not exist"),
        (["--model-version", "1"], 4, r"--model-version: 1 is already pinned"),
        (["--model-version", "0"], 2, r"version: 0; allowed"),
    ],
)
def test_rollback_bad_targets(tmp_path, capsys, moto_s3, envs, args, code, match) -> None:
    cfg, staging, _ = envs
    _push(capsys, tmp_path, cfg, "one")
    r = run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg, *args)
    assert r.code == code
    assert __import__("re").search(match, r.err)
    assert pinned_version(moto_s3, staging, "simple") == 1


def test_rollback_refuses_an_incomplete_version(tmp_path, capsys, moto_s3, envs) -> None:
    cfg, staging, _ = envs
    _push(capsys, tmp_path, cfg, "one")
    _push(capsys, tmp_path, cfg, "two")
    moto_s3.client().delete_object(Bucket=staging, Key="repository/simple/1/model.pt")
    r = run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg)
    assert r.code == 4
    assert f"simple version 1 in staging: s3://{staging}/repository/simple/1/ is incomplete (model.pt missing)" in r.err
    assert pinned_version(moto_s3, staging, "simple") == 2


def _strip_backend_file(server: S3Server, bucket: str, version: int) -> None:
    """Version `version` of `simple` as another tool could write it past push: its manifest lists
    only model.pt, and model.py (what its config's python backend loads) is not in the bucket."""
    key = f"manifests/simple/{version}.json"
    doc = codec.read_manifest(server.get(bucket, key), "simple", version)
    del doc["files"]["model.py"]
    client = server.client()
    client.put_object(Bucket=bucket, Key=key, Body=codec.dumps(doc))
    client.delete_object(Bucket=bucket, Key=f"repository/simple/{version}/model.py")


def test_rollback_refuses_a_version_no_replica_would_serve(tmp_path, capsys, moto_s3, envs) -> None:
    """A rollback target whose manifest lacks the file its backend needs is refused before any
    write: every agent rejects such a version, so pinning it would leave every replica on the
    old version while the rollback reported success."""
    cfg, staging, _ = envs
    _push(capsys, tmp_path, cfg, "one")
    _push(capsys, tmp_path, cfg, "two")
    _strip_backend_file(moto_s3, staging, 1)
    before = {k: moto_s3.get(staging, k) for k in moto_s3.keys(staging)}
    r = run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg)
    assert r.code == 4, (r.code, r.out, r.err)
    assert r.err.count("\n") == 1
    assert (
        f"rollback: simple version 1 in staging: manifest s3://{staging}/manifests/simple/1.json: lists no "
        "model.py; allowed: a version with every file its backend needs (model_config.required_files), which "
        "every replica serves" in r.err
    ), r.err
    assert pinned_version(moto_s3, staging, "simple") == 2
    assert {k: moto_s3.get(staging, k) for k in moto_s3.keys(staging)} == before  # nothing written


def test_promote_refuses_a_version_no_replica_would_serve_even_unverified(tmp_path, capsys, moto_s3, envs) -> None:
    """--skip-verification skips the evidence, never the rule every agent applies: a source version
    without its backend's files is refused before anything is copied to the target."""
    cfg, staging, prod = envs
    _push(capsys, tmp_path, cfg, "one")
    _strip_backend_file(moto_s3, staging, 1)
    r = run_cli(capsys, *promote_args("simple", 1, cfg, "--skip-verification"))
    assert r.code == 4, (r.code, r.out, r.err)
    assert (
        f"promote: simple version 1 in staging: manifest s3://{staging}/manifests/simple/1.json: lists no model.py"
        in r.err
    ), r.err
    assert moto_s3.keys(prod) == []


def test_prune_keeps_newest_pinned_and_previous_pin(tmp_path, capsys, moto_s3, envs) -> None:
    cfg, staging, _ = envs
    for content in ("v1", "v2", "v3", "v4", "v5"):
        _push(capsys, tmp_path, cfg, content)
    assert (
        run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg, "--model-version", "2").code == 0
    )  # pinned 2, previous 5
    r = run_cli(capsys, "prune", "simple", "--env", "staging", "--config", cfg, "--keep", "1", "--dry-run")
    assert r.code == 0
    assert f"(dryrun) delete: s3://{staging}/repository/simple/1/model.pt" in r.out
    assert len(moto_s3.keys(staging, "repository/simple/")) == 11
    r = run_cli(capsys, "prune", "simple", "--env", "staging", "--config", cfg, "--keep", "1")
    assert r.code == 0
    remaining = {k.split("/")[2] for k in moto_s3.keys(staging, "repository/simple/") if k.count("/") == 3}
    assert remaining == {"2", "5"}  # pinned 2, newest (and previous pin) 5
    assert {k.rsplit("/", 1)[1] for k in moto_s3.keys(staging, "manifests/simple/")} == {"2.json", "5.json"}
    assert len(moto_s3.keys(staging, "audit/allocations/simple/")) == 5  # numbers are never reused
    _push(capsys, tmp_path, cfg, "v6")
    assert pinned_version(moto_s3, staging, "simple") == 6
    r = run_cli(capsys, "prune", "simple", "--env", "staging", "--config", cfg, "--keep", "0")
    assert (r.code, "--keep: 0; allowed: an integer >= 1" in r.err) == (2, True)


def test_status_offers_and_rollback_takes_only_versions_that_still_exist_after_prune(
    tmp_path, capsys, moto_s3, envs
) -> None:
    """pins 1 -> 2 -> 3 -> 4, prune --keep 1 keeps 4 and 3 (the rollback
    target); after a rollback to 3 the older pins 1 and 2 are gone, so status offers no PREVIOUS
    and rollback refuses in one line (it used to offer 2 and fail with exit 3)."""
    cfg, staging, _ = envs
    for content in ("v1", "v2", "v3", "v4"):
        _push(capsys, tmp_path, cfg, content)
    assert run_cli(capsys, "prune", "simple", "--env", "staging", "--config", cfg, "--keep", "1").code == 0
    assert {k.rsplit("/", 1)[1] for k in moto_s3.keys(staging, "manifests/simple/")} == {"3.json", "4.json"}
    assert run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg).code == 0
    assert pinned_version(moto_s3, staging, "simple") == 3
    r = run_cli(capsys, "status", "--env", "staging", "--config", cfg, "simple", "--output", "json")
    assert json.loads(r.out)["staging"]["models"][0]["previous_pin"] is None
    r = run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg)
    assert r.code == 4, r.err
    assert "earlier pins [1, 2] no longer exist: pruned" in r.err
    assert len(r.err.strip().splitlines()) == 1
    # rollback --model-version the newer version still works, and a later default rollback skips pruned entries.
    assert run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg, "--model-version", "4").code == 0
    assert run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg).code == 0
    assert pinned_version(moto_s3, staging, "simple") == 3


def _on_a_terminal(cfg: str, answer: bytes, *argv: str) -> tuple[int, str]:
    """`model-sync ARGV` with stdin/stderr on a pseudo-terminal, answering the prompt with `answer`."""
    import pty
    import select
    import subprocess
    import sys

    from tests.support.s3_servers import aws_environ

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "model_sync", *argv, "--config", cfg],
        stdin=follower,
        stderr=follower,
        stdout=subprocess.PIPE,
        env=aws_environ(),
    )
    os.close(follower)
    seen = b""
    while b"[y/n]" not in seen and proc.poll() is None:
        if select.select([leader], [], [], 30)[0]:
            seen += os.read(leader, 4096)
    os.write(leader, answer)
    out = proc.communicate(timeout=60)[0].decode()
    with contextlib.suppress(OSError):
        while select.select([leader], [], [], 0.2)[0]:
            seen += os.read(leader, 4096)
    os.close(leader)
    return proc.returncode, out + seen.decode(errors="replace")


def test_rollback_and_prune_on_prod_ask_first_and_ci_passes_yes(tmp_path, capsys, moto_s3, envs) -> None:
    """on prod, rollback and prune ask on a terminal; without one they refuse
    (exit 2) unless --yes; --dry-run never asks."""
    cfg, _, prod = envs
    for content in ("p1", "p2", "p3", "p4"):
        _push(capsys, tmp_path, cfg, content, env="prod")
    r = run_cli(capsys, "rollback", "simple", "--env", "prod", "--config", cfg)
    assert r.code == 2, r.err
    assert r.err.strip() == (
        "model-sync: rollback in prod: needs confirmation and stdin is not a terminal; allowed: --yes (CI: after "
        "the environment's approval)"
    )
    assert pinned_version(moto_s3, prod, "simple") == 4
    assert run_cli(capsys, "rollback", "simple", "--env", "prod", "--config", cfg, "--dry-run").code == 0
    code, out = _on_a_terminal(cfg, b"n\n", "rollback", "simple", "--env", "prod")
    assert code == 2, out
    assert "Pin simple version 3 in prod (now 4)?" in out
    assert pinned_version(moto_s3, prod, "simple") == 4
    code, out = _on_a_terminal(cfg, b"y\n", "rollback", "simple", "--env", "prod")
    assert code == 0, out
    assert pinned_version(moto_s3, prod, "simple") == 3
    r = run_cli(capsys, "prune", "simple", "--env", "prod", "--config", cfg, "--keep", "1")
    assert (r.code, "prune in prod: needs confirmation" in r.err) == (2, True), r.err
    assert len(moto_s3.keys(prod, "manifests/simple/")) == 4
    assert run_cli(capsys, "prune", "simple", "--env", "prod", "--config", cfg, "--keep", "1", "--yes").code == 0
    assert len(moto_s3.keys(prod, "manifests/simple/")) == 3  # 3 pinned, 4 newest, 2 the rollback target
    # Not prod: no question.
    _push(capsys, tmp_path, cfg, "s1")
    _push(capsys, tmp_path, cfg, "s2")
    assert run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg).code == 0


def test_prune_removes_stale_incomplete_versions_and_unfinished_uploads_but_never_counts_them(
    tmp_path, capsys, rclone_s3, aws_env
) -> None:
    """an interrupted push's version (files, no manifest) is not one of the K
    kept; it and an unfinished multipart upload are removed once older than --stale-hours, and
    left alone while younger (a push may still be writing them). On rclone: moto 5.2.5 reports
    every multipart upload as initiated in 2010."""
    staging = rclone_s3.make_bucket("staging-debris")
    cfg = write_config(tmp_path / "model-sync.yaml", rclone_s3, {"staging": f"s3://{staging}"})
    for content in ("v1", "v2"):
        _push(capsys, tmp_path, cfg, content)
    client = rclone_s3.client()
    client.put_object(Bucket=staging, Key="repository/simple/3/model.pt", Body=b"half")  # interrupted push of 3
    upload = client.create_multipart_upload(Bucket=staging, Key="repository/simple/3/model.pt")["UploadId"]
    client.upload_part(
        Bucket=staging, Key="repository/simple/3/model.pt", UploadId=upload, PartNumber=1, Body=b"x" * 1024
    )
    r = run_cli(capsys, "prune", "simple", "--env", "staging", "--config", cfg, "--keep", "1")
    assert r.code == 0, r.err
    assert "kept incomplete version(s) [3]: younger than --stale-hours 24" in r.out
    assert "abort upload" not in r.out
    assert rclone_s3.keys(staging, "repository/simple/3/") == ["repository/simple/3/model.pt"]
    assert len(client.list_multipart_uploads(Bucket=staging).get("Uploads", [])) == 1
    # --keep 1 kept version 2 (complete), not the incomplete 3; version 1 is the rollback target.
    assert {k.rsplit("/", 1)[1] for k in rclone_s3.keys(staging, "manifests/simple/")} == {"1.json", "2.json"}
    r = run_cli(capsys, "prune", "simple", "--env", "staging", "--config", cfg, "--keep", "1", "--stale-hours", "0")
    assert r.code == 0, r.err
    assert f"delete: s3://{staging}/repository/simple/3/model.pt" in r.out
    assert f"abort upload: s3://{staging}/repository/simple/3/model.pt" in r.out
    assert rclone_s3.keys(staging, "repository/simple/3/") == []
    assert client.list_multipart_uploads(Bucket=staging).get("Uploads", []) == []
    assert pinned_version(rclone_s3, staging, "simple") == 2


def test_status_table_and_json(tmp_path, capsys, moto_s3, envs) -> None:
    cfg, staging, prod = envs
    _push(capsys, tmp_path, cfg, "one")
    _push(capsys, tmp_path, cfg, "two")
    _verify_record(moto_s3, staging, 2)
    moto_s3.client().put_object(Bucket=staging, Key="repository/simple/7/model.py", Body=b"debris")
    r = run_cli(capsys, "status", "--config", cfg, "--output", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    s = doc["staging"]["models"][0]
    assert (s["model"], s["pinned"], s["previous_pin"], s["versions"], s["incomplete"], s["verified"]) == (
        "simple",
        2,
        1,
        [1, 2, 7],
        [7],
        True,
    )
    assert s["provenance"]["promoted_from"] is None
    no_gpus = "the environment does not name its GPUs (tritonGpus in model-sync.yaml or the stack output)"
    assert doc["prod"] == {
        "bucket": f"s3://{prod}",
        "triton_image": None,
        "models": [],
        "gpu_memory": {"known": False, "detail": no_gpus, "deployments": []},
    }
    r = run_cli(capsys, "status", "--env", "staging", "--config", cfg)
    lines = r.out.splitlines()
    assert lines[0].split()[:7] == ["ENV", "MODEL", "PINNED", "SERVED", "PREVIOUS", "VERSIONS", "VERIFIED"]
    assert lines[1].split()[:7] == ["staging", "simple", "2", "-", "1", "1,2,7*", "yes"]  # SERVED -: no replica reports


@pytest.mark.parametrize(("fault", "code", "message"), [
    ("deleted", 3, r"^model-sync: object: s3://src/repository/simple/1/model\.p[ty] does not exist"),
    ("stopped", 5, r"^model-sync: S3 endpoint: http://127\.0\.0\.1:\d+ unreachable"),
])  # fmt: skip
def test_promote_across_endpoints_translates_source_failures(
    tmp_path, capsys, moto_s3, rclone_s3, aws_env, monkeypatch, fault, code, message
) -> None:
    """staging on rclone, prod on moto: the files are streamed GET -> upload; a source object gone
    (exit 3) or the source endpoint down (exit 5) after the checks is one line, never exit 1."""
    from model_sync.versions import catalog

    src, dst = rclone_s3.make_bucket("src"), moto_s3.make_bucket()
    cfg = tmp_path / "model-sync.yaml"
    doc = {"environments": {"staging": {"bucket": f"s3://{src}", "endpointUrl": rclone_s3.endpoint,
                                        "region": "us-east-1"},
                            "prod": {"bucket": f"s3://{dst}", "endpointUrl": moto_s3.endpoint,
                                     "region": "us-east-1"}}}  # fmt: skip
    cfg.write_text(json.dumps(doc))
    _push(capsys, tmp_path, str(cfg), "a")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    real = catalog.allocate

    def allocate_then_fault(repo, *args, **kwargs):  # after every check of the source, before the copy
        version = real(repo, *args, **kwargs)
        if fault == "deleted":
            for rel in ("model.pt", "model.py"):
                rclone_s3.client().delete_object(Bucket=src, Key=f"repository/simple/1/{rel}")
        else:
            rclone_s3.stop()
        return version

    monkeypatch.setattr(catalog, "allocate", allocate_then_fault)
    r = run_cli(capsys, *promote_args("simple", 1, str(cfg), "--skip-verification"))
    assert r.code == code, r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert __import__("re").search(message, r.err.strip()), r.err
    assert pinned_version(moto_s3, dst, "simple") is None


def test_prune_access_denied_names_the_operator_role(tmp_path, capsys, monkeypatch) -> None:
    """No CI role may delete (by design); the error says which role prune needs. The denial
    comes from a real moto_server enforcing IAM (INITIAL_NO_AUTH_ACTION_COUNT): the caller is
    an IAM user allowed everything but s3:DeleteObject, like the CI publisher role."""
    import json

    import boto3

    # Unauthenticated requests before IAM enforcement starts: the readiness probe
    # (list_buckets), create_bucket, create_user, put_user_policy, create_access_key.
    server = S3Server("moto", env={"INITIAL_NO_AUTH_ACTION_COUNT": "5"}).start()
    try:
        admin = {
            "endpoint_url": server.endpoint,
            "region_name": "us-east-1",
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        staging = "prune-denied-staging"
        boto3.client("s3", **admin).create_bucket(Bucket=staging)
        iam = boto3.client("iam", **admin)
        iam.create_user(UserName="ci-publisher")
        iam.put_user_policy(
            UserName="ci-publisher",
            PolicyName="no-delete",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Action": "*", "Resource": "*"},
                        {"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "*"},
                    ],
                }
            ),
        )
        key = iam.create_access_key(UserName="ci-publisher")["AccessKey"]
        for name, value in aws_environ().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        cfg = write_config(tmp_path / "model-sync.yaml", server, {"staging": f"s3://{staging}"})
        for content in ("a", "b", "c"):
            _push(capsys, tmp_path, cfg, content)
        r = run_cli(capsys, "prune", "simple", "--env", "staging", "--config", cfg, "--keep", "1")
        assert r.code == 5, r.err
        assert r.err.strip().splitlines() == [
            f"model-sync: prune simple: s3:DeleteObject denied on s3://{staging}/repository/simple/1/model.pt; "
            "allowed: run prune with an operator role that may "
            "delete under repository/ and manifests/ (never audit/); CI publisher and promoter roles cannot "
            "delete, by design"
        ]
        user = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            aws_access_key_id=key["AccessKeyId"],
            aws_secret_access_key=key["SecretAccessKey"],
        )
        assert "repository/simple/1/model.pt" in {o["Key"] for o in user.list_objects_v2(Bucket=staging)["Contents"]}
    finally:
        server.stop()
