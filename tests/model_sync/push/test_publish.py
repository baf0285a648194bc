"""`model-sync push` against a real moto_server process: the publish protocol, no-op and
copy-instead-of-upload, --dry-run, the S3 requests made, races between two processes, bad input."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.model_sync.helpers import (
    TOY_GPUS,
    gpu_config,
    gpu_export,
    gpu_factories,
    manifest_doc,
    pinned_version,
    python_model,
    run_cli,
    write_config,
)
from tests.support.s3_servers import S3Server, aws_environ

DOC_TEXT = " ".join((Path(__file__).resolve().parents[3] / "docs" / "model-sync.md").read_text().split())
NOT_CHECKED = (
    "gpu memory: not checked in staging: the environment does not name its GPUs (tritonGpus in model-sync.yaml or "
    "the stack output)"
)


@pytest.fixture
def cfg(tmp_path: Path, moto_s3: S3Server, s3_bucket: str, aws_env) -> str:
    return write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{s3_bucket}"})


def test_push_publishes_files_manifest_and_pin_last(tmp_path, capsys, moto_s3, s3_bucket, cfg) -> None:
    model = python_model(tmp_path / "m", "simple")
    before = len(moto_s3.requests())
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    assert f"upload: {model}/1/model.pt to s3://{s3_bucket}/repository/simple/1/model.pt" in r.out
    assert f"pinned: simple version 1 (s3://{s3_bucket}/repository/simple/config.pbtxt)" in r.out
    assert moto_s3.keys(s3_bucket) == sorted(
        [
            "audit/.conditional-write-probe",
            "audit/allocations/simple/1.json",
            *[k for k in moto_s3.keys(s3_bucket, "audit/pins/")],
            "manifests/_pins/simple.json",
            "manifests/simple/1.json",
            "repository/simple/1/model.pt",
            "repository/simple/1/model.py",
            "repository/simple/config.pbtxt",
        ]
    )
    assert len(moto_s3.keys(s3_bucket, "audit/pins/simple/")) == 1
    from model_sync.records import codec

    assert (
        codec.read_pin_index(moto_s3.get(s3_bucket, "manifests/_pins/simple.json"), "simple")["version"] == 1
    )  # what agents list
    doc = manifest_doc(moto_s3, s3_bucket, "simple", 1)
    for rel in ("model.pt", "model.py"):
        data = (model / "1" / rel).read_bytes()
        assert doc["files"][rel] == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        assert moto_s3.get(s3_bucket, f"repository/simple/1/{rel}") == data
        head = moto_s3.client().head_object(Bucket=s3_bucket, Key=f"repository/simple/1/{rel}", ChecksumMode="ENABLED")
        assert base64.b64decode(head["ChecksumSHA256"]).hex() == doc["files"][rel]["sha256"]
    assert pinned_version(moto_s3, s3_bucket, "simple") == 1
    # The exact write sequence: probe (If-None-Match twice, If-Match once) -> allocation (create-only)
    # -> files -> manifest -> pin -> pin history -> pin index.
    puts = [
        line.split()[1].split("?")[0].removeprefix(f"/{s3_bucket}/")
        for line in moto_s3.requests()[before:]
        if line.startswith("PUT ")
    ]
    assert puts[:4] == ["audit/.conditional-write-probe"] * 3 + ["audit/allocations/simple/1.json"]
    assert sorted(puts[4:6]) == ["repository/simple/1/model.pt", "repository/simple/1/model.py"]
    assert puts[6:8] == ["manifests/simple/1.json", "repository/simple/config.pbtxt"]
    assert puts[8].startswith("audit/pins/simple/")
    assert puts[9:] == ["manifests/_pins/simple.json"]


def test_identical_repush_is_a_noop_with_one_read(tmp_path, capsys, moto_s3, s3_bucket, cfg) -> None:
    model = python_model(tmp_path / "m", "simple")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    keys = moto_s3.keys(s3_bucket)
    before = len(moto_s3.requests())
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 0
    assert r.out.strip() == f"up to date: simple version 1 (s3://{s3_bucket}/repository/simple/config.pbtxt)"
    # The pin (its ETag selects the pinned manifest cached locally by the push that wrote it).
    requests = moto_s3.requests()[before:]
    assert [q.split()[0] for q in requests] == ["GET"], requests
    assert "/repository/simple/config.pbtxt" in requests[0]
    # Without the cache: the pin, then its manifest.
    before = len(moto_s3.requests())
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg, "--no-cache")
    assert (r.code, "up to date: simple version 1" in r.out) == (0, True)
    requests = moto_s3.requests()[before:]
    assert [q.split()[1].removeprefix(f"/{s3_bucket}/") for q in requests] == [
        "repository/simple/config.pbtxt",
        "manifests/simple/1.json",
    ], requests
    assert moto_s3.keys(s3_bucket) == keys


def test_changed_file_makes_a_new_version_and_copies_unchanged_files(tmp_path, capsys, moto_s3, s3_bucket, cfg) -> None:
    model = python_model(tmp_path / "m", "simple")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    (model / "1" / "model.py").write_text("# changed\n")
    before = len(moto_s3.requests())
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    assert (
        f"copy: s3://{s3_bucket}/repository/simple/1/model.pt to s3://{s3_bucket}/repository/simple/2/model.pt" in r.out
    )
    assert f"upload: {model}/1/model.py to s3://{s3_bucket}/repository/simple/2/model.py" in r.out
    uploads = [q for q in moto_s3.requests()[before:] if q.startswith("PUT ") and "/repository/simple/2/" in q]
    assert len(uploads) == 2  # one PUT upload + one PUT CopyObject, the 2 KiB model.pt never re-sent
    assert pinned_version(moto_s3, s3_bucket, "simple") == 2
    assert moto_s3.get(s3_bucket, "repository/simple/2/model.pt") == (model / "1" / "model.pt").read_bytes()
    assert moto_s3.get(s3_bucket, "repository/simple/1/model.py") == b"# model\n"  # version 1 untouched
    assert manifest_doc(moto_s3, s3_bucket, "simple", 2)["files"]["model.py"]["size"] == len("# changed\n")


def test_dry_run_prints_and_writes_nothing(tmp_path, capsys, moto_s3, s3_bucket, cfg) -> None:
    model = python_model(tmp_path / "m", "simple")
    before = len(moto_s3.requests())
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg, "--dry-run")
    assert r.code == 0
    assert r.out.splitlines() == [
        NOT_CHECKED,  # GPU memory planning: staging has no tritonGpus
        f"(dryrun) upload: {model}/1/model.pt to s3://{s3_bucket}/repository/simple/1/model.pt",
        f"(dryrun) upload: {model}/1/model.py to s3://{s3_bucket}/repository/simple/1/model.py",
        f"(dryrun) pin: simple version 1 (s3://{s3_bucket}/repository/simple/config.pbtxt)",
    ]
    assert moto_s3.keys(s3_bucket) == []
    assert all(q.split()[0] == "GET" for q in moto_s3.requests()[before:])


def test_repository_directory_pushes_every_model_under_a_prefix(tmp_path, capsys, moto_s3, s3_bucket, aws_env) -> None:
    cfg = write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{s3_bucket}/team-a/models"})
    names = [f"m{i:02d}" for i in range(12)]
    for name in names:
        python_model(tmp_path / "repo", name)
    before = len(moto_s3.requests())
    r = run_cli(capsys, "push", str(tmp_path / "repo"), "--env", "staging", "--config", cfg, "--quiet")
    assert (r.code, r.out) == (0, "")
    for name in names:
        assert pinned_version(moto_s3, s3_bucket, name, prefix="team-a/models") == 1
    assert all(k.startswith("team-a/models/") for k in moto_s3.keys(s3_bucket))
    # the conditional-write probe runs once per run (3 writes), not once per worker.
    probes = [
        q
        for q in moto_s3.requests()[before:]
        if q.startswith(f"PUT /{s3_bucket}/team-a/models/audit/.conditional-write-probe")
    ]
    assert len(probes) == 3, probes


def test_two_concurrent_pushes_get_distinct_versions_and_no_pin_is_lost(tmp_path, moto_s3, s3_bucket, cfg) -> None:
    first = python_model(tmp_path / "x", "racy", {"model.py": b"# x\n", "model.pt": os.urandom(4096)})
    second = python_model(tmp_path / "y", "racy", {"model.py": b"# y\n", "model.pt": os.urandom(4096)})
    env = aws_environ()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "model_sync", "push", str(d), "--env", "staging", "--config", cfg],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for d in (first, second)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) in ([0, 0], [0, 4]), outs
    allocated = sorted(
        json.loads(moto_s3.get(s3_bucket, k))["nonce"] for k in moto_s3.keys(s3_bucket, "audit/allocations/racy/")
    )
    assert len(allocated) == 2
    by_version = {v: manifest_doc(moto_s3, s3_bucket, "racy", v) for v in (1, 2)}
    # Each version holds exactly one of the two models, intact, and they are not the same one.
    sources = {v: doc["source"]["path"] for v, doc in by_version.items()}
    assert sorted(sources.values()) == sorted([str(first), str(second)])
    for v, doc in by_version.items():
        local = Path(doc["source"]["path"]) / "1"
        for rel in ("model.pt", "model.py"):
            assert moto_s3.get(s3_bucket, f"repository/racy/{v}/{rel}") == (local / rel).read_bytes()
    # The pin and its history agree, and no version was silently lost: each one is either
    # in the pin chain or reported by the push whose flip was refused (published, unpinned).
    pinned = pinned_version(moto_s3, s3_bucket, "racy")
    history = [json.loads(moto_s3.get(s3_bucket, k)) for k in moto_s3.keys(s3_bucket, "audit/pins/racy/")]
    assert history[-1]["version"] == pinned
    assert history[0]["previous"] is None
    for earlier, later in itertools.pairwise(history):
        assert later["previous"] == earlier["version"]
        assert later["stack"] == [earlier["version"]]
    chain = {h["version"] for h in history}
    refused = [err for (_, err), code in zip(outs, codes, strict=True) if code == 4]
    for v in (1, 2):
        if v not in chain:
            assert len(refused) == 1, outs
            assert "moved from None to" in refused[0], refused
            assert f"version {v} is published but NOT pinned" in refused[0], refused
            assert f"--model-version {v}` pins it" in refused[0]
    assert len(chain) + len(refused) == 2, (chain, outs)


@pytest.mark.parametrize("server", ["moto", "rclone"])
def test_pin_moved_while_pushing_refuses_the_flip(tmp_path, capsys, request, aws_env, monkeypatch, server) -> None:
    """A rollback (or another push) between reading the pin and flipping it is never undone: moto
    enforces If-Match; rclone ignores it and the re-read just before the write catches it."""
    from model_sync.push import publish

    s3: S3Server = request.getfixturevalue(f"{server}_s3")
    bucket = s3.make_bucket()
    cfg = write_config(tmp_path / "model-sync.yaml", s3, {"staging": f"s3://{bucket}"})
    model = python_model(tmp_path / "m", "simple", {"model.py": b"# a\n", "model.pt": b"a"})
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    v1_pin = s3.get(bucket, "repository/simple/config.pbtxt")
    (model / "1" / "model.py").write_bytes(b"# b\n")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    real = publish.Publisher._check_unchanged

    def rolled_back_meanwhile(self, m):  # after the upload, before the manifest and the flip
        s3.client().put_object(Bucket=bucket, Key="repository/simple/config.pbtxt", Body=v1_pin)
        real(self, m)

    monkeypatch.setattr(publish.Publisher, "_check_unchanged", rolled_back_meanwhile)
    (model / "1" / "model.py").write_bytes(b"# c\n")
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 4, r.err
    assert r.err.strip().splitlines()[-1] == (
        "model-sync: pin: simple in staging moved from 2 to 1 while this push ran; allowed: re-run push "
        "(version 3 is published but NOT pinned; `model-sync rollback simple --env staging --model-version 3` pins it)"
    )
    assert pinned_version(s3, bucket, "simple") == 1  # the rollback stands
    assert manifest_doc(s3, bucket, "simple", 3)["files"]["model.py"]["size"] == 4
    assert len(s3.keys(bucket, "audit/pins/simple/")) == 2  # no history record for the refused flip
    r = run_cli(
        capsys, "rollback", "simple", "--env", "staging", "--config", cfg, "--model-version", "3"
    )  # what the message says
    assert r.code == 0, r.err
    assert pinned_version(s3, bucket, "simple") == 3


def test_a_taken_version_number_is_never_overwritten(tmp_path, capsys, moto_s3, s3_bucket, cfg) -> None:
    # Another publisher claimed version 1 (marker only, e.g. it is still uploading).
    moto_s3.client().put_object(Bucket=s3_bucket, Key="repository/simple/1/model.py", Body=b"# theirs\n")
    model = python_model(tmp_path / "m", "simple")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    assert moto_s3.get(s3_bucket, "repository/simple/1/model.py") == b"# theirs\n"
    assert pinned_version(moto_s3, s3_bucket, "simple") == 2


BAD_INPUTS = [
    # (setup(tmp_path) -> model dir, extra args, exit code, stderr regex)
    (
        lambda t: t / "missing",
        [],
        2,
        r"^model-sync: model directory: '.*missing' is not a directory; allowed: a Triton model directory",
    ),
    (
        lambda t: python_model(t, "m", config='nmae: "m"\n'),
        [],
        2,
        r"^model-sync: .*config\.pbtxt: does not parse .*nmae",
    ),
    (
        lambda t: python_model(t, "m", {"model.pt": b"x"}),
        [],
        2,
        r"lacks model\.py; allowed: a version directory with every file backend 'python' needs",
    ),
    (
        lambda t: python_model(t, "m", config='platform: "pytorch_libtorch"\n', files={"model.py": b"x"}),
        [],
        2,
        r"lacks model\.pt",
    ),
    (lambda t: python_model(t, "m"), ["--name", "bad/name"], 2, r"model name: 'bad/name'; allowed: .* \(from --name\)"),
    (
        lambda t: python_model(t, "m", config='name: "other"\nbackend: "python"\n'),
        [],
        2,
        r"name: 'other'; allowed: 'm'",
    ),
    (
        lambda t: (python_model(t, "m"), (t / "m" / "2").mkdir())[0],
        [],
        2,
        r"has version directories \['1', '2'\]; allowed: exactly one",
    ),
    (lambda t: python_model(t, "m"), ["--env", "nope"], 3, r"environment: 'nope' is not configured; allowed: staging"),
    (lambda t: python_model(t, "m"), ["--env", "Bad Env"], 2, r"--env: 'Bad Env'; allowed"),
    (
        lambda t: python_model(t, "m"),
        ["--bucket", "s3://no-such-bucket-x"],
        3,
        r"bucket: 'no-such-bucket-x' does not exist",
    ),
    (lambda t: python_model(t, "m"), ["--concurrency", "0"], 2, r"--concurrency: 0; allowed: 1\.\.128"),
]


@pytest.mark.parametrize(("setup", "extra", "code", "match"), BAD_INPUTS)
def test_bad_input_one_line_error_and_nothing_written(
    tmp_path, capsys, moto_s3, s3_bucket, cfg, setup, extra, code, match
) -> None:
    model = setup(tmp_path)
    args = ["push", str(model), "--config", cfg, *extra]
    if "--env" not in extra:
        args += ["--env", "staging"]
    r = run_cli(capsys, *args)
    assert r.code == code, r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert __import__("re").search(match, r.err.strip()), r.err
    assert moto_s3.keys(s3_bucket) == []


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda v: (v / "link.bin").symlink_to("/etc/hostname"), "link.bin is not a regular file"),
        (lambda v: (v / "loop").symlink_to(v / "loop"), "loop is not a regular file"),  # ELOOP: refused, not a crash
        (lambda v: (v / "dangling").symlink_to(v / "nowhere"), "dangling is not a regular file"),
        (lambda v: (v / "linked-dir").symlink_to(v.parent), "linked-dir is a symlink"),
        (
            lambda v: (v / ".hidden-dir").symlink_to(v.parent),
            ".hidden-dir is a symlink",
        ),  # never entered, even dot-named
        (lambda v: (v / ".hidden-link").symlink_to("/etc/hostname"), ".hidden-link is not a regular file"),
        (lambda v: (v / ".dangling").symlink_to(v / "nowhere"), ".dangling is not a regular file"),
    ],
)
def test_symlinks_are_refused(tmp_path, capsys, moto_s3, s3_bucket, cfg, make, message) -> None:
    """Every symlink inside a version is refused with exit 2 and nothing written, dot-named ones
    too (before: a dot-named file symlink was skipped silently, against docs/model-sync.md)."""
    model = python_model(tmp_path / "m", "simple")
    make(model / "1")
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 2, r.err
    assert message in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert moto_s3.keys(s3_bucket) == []


def _link_version_dir(model: Path) -> None:
    """m/1 -> a directory elsewhere holding a 'private key' (and model.py, so it would publish)."""
    elsewhere = model.parent / "elsewhere"
    (model / "1").rename(elsewhere)
    (elsewhere / "id_rsa").write_text("-----BEGIN PRIVATE KEY-----\n")
    (model / "1").symlink_to(elsewhere)


def _link_config_outside(model: Path) -> None:
    outside = model.parent / "outside.pbtxt"
    (model / "config.pbtxt").rename(outside)
    (model / "config.pbtxt").symlink_to(outside)


def _link_model_dir_in_repository(model: Path) -> None:
    repository = model.parent / "repo"
    repository.mkdir()
    (repository / "simple").symlink_to(model)


@pytest.mark.parametrize(
    ("make", "target", "message"),
    [
        (
            _link_version_dir,
            "m/simple",
            r"simple/1 is a symlink to .*elsewhere; allowed: a version directory, not a symlink",
        ),
        (
            _link_config_outside,
            "m/simple",
            r"config.pbtxt is a symlink to .*outside.pbtxt, outside the model directory",
        ),
        (
            _link_model_dir_in_repository,
            "m/repo",
            r"repo/simple is a symlink to .*; allowed: model directories, not symlinks",
        ),
    ],
)
def test_symlinked_version_dir_config_or_model_dir_is_refused(
    tmp_path, capsys, moto_s3, s3_bucket, cfg, make, target, message
) -> None:
    """a symlink would publish (and pin) whatever it points at."""
    model = python_model(tmp_path / "m", "simple")
    make(model)
    r = run_cli(capsys, "push", str(tmp_path / target), "--env", "staging", "--config", cfg)
    assert r.code == 2, r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert __import__("re").search(message, r.err), r.err
    assert moto_s3.keys(s3_bucket) == []


def test_a_config_input_type_the_export_contradicts_is_refused_before_any_request(
    tmp_path, capsys, moto_s3, s3_bucket, cfg
) -> None:
    """An input declared TYPE_STRING in config.pbtxt while the export (export.json's example and the
    config's own warm-up) says float32 is refused with exit 2, one line naming the input and both
    types, and nothing is written (before: it was published and pinned; Triton refuses it at load)."""
    config = (
        'name: "simple"\nbackend: "python"\nmax_batch_size: 4\n'
        'input { name: "INPUT__0" data_type: TYPE_STRING dims: [3] }\n'
        'output { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [3] }\n'
        'model_warmup { name: "batch_1" batch_size: 1 inputs { key: "INPUT__0" value { data_type: TYPE_FP32 '
        "dims: [3] zero_data: true } } }\n"
    )
    model = python_model(tmp_path / "m", "simple", config=config)
    (model / "export.json").write_text(json.dumps({"example_dtypes": ["float32"], "example_shapes": [[2, 3]]}))
    before = len(moto_s3.requests())
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 2, r.err
    assert r.err.splitlines() == [
        f"model-sync: {model / 'config.pbtxt'} input INPUT__0: data_type TYPE_STRING, but the export says TYPE_FP32 "
        "(export.json example_dtypes: float32; model_warmup batch_1: TYPE_FP32); allowed: data_type: TYPE_FP32, "
        "what the model was exported with (or export it again)"
    ]
    assert moto_s3.requests()[before:] == []  # refused before any request


def test_config_symlink_inside_the_model_directory_is_accepted(tmp_path, capsys, moto_s3, s3_bucket, cfg) -> None:
    model = python_model(tmp_path / "m", "simple")
    (model / "config.pbtxt").rename(model / "config.real.pbtxt")
    (model / "config.pbtxt").symlink_to("config.real.pbtxt")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    assert "repository/simple/config.pbtxt" in moto_s3.keys(s3_bucket)


def test_dot_files_dot_dirs_and_pycache_are_skipped_not_refused(tmp_path, capsys, moto_s3, s3_bucket, cfg) -> None:
    model = python_model(tmp_path / "m", "simple")
    version = model / "1"
    (version / ".hidden").write_text("x")
    (version / "__pycache__").mkdir()
    (version / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"pyc")
    (version / ".git").mkdir()
    (version / ".git" / "HEAD").write_text("ref")
    (version / "sub" / "deeper").mkdir(parents=True)
    (version / "sub" / "deeper" / "extra.bin").write_bytes(b"extra")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    assert sorted(moto_s3.keys(s3_bucket, "repository/simple/1/")) == [
        f"repository/simple/1/{rel}" for rel in ("model.pt", "model.py", "sub/deeper/extra.bin")
    ]


def test_file_changed_after_hashing_is_caught_by_the_restat(
    tmp_path, capsys, moto_s3, s3_bucket, cfg, monkeypatch
) -> None:
    """moto stores a wrong ChecksumSHA256 without checking it, so here the local re-stat after the
    upload refuses; the S3 BadDigest branch (AWS S3) is covered by the unit test below."""
    from model_sync.push import publish

    model = python_model(tmp_path / "m", "simple")
    real = publish.hash_files

    def hash_then_change(models, workers=4, hashes=None):
        real(models, workers, hashes)
        (model / "1" / "model.py").write_text("# edited while pushing\n")

    monkeypatch.setattr(publish, "hash_files", hash_then_change)
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 4, r.err
    assert len(r.err.splitlines()) == 1, r.err
    assert "file changed during push" in r.err
    # a change before the version is allocated is caught before anything is written
    assert moto_s3.keys(s3_bucket) == []


def test_a_file_changed_during_the_upload_leaves_no_file_of_the_refused_version(
    tmp_path, capsys, moto_s3, s3_bucket, cfg, monkeypatch
) -> None:
    """A push refused after its upload (a file edited while it was sent: exit 4, the pin kept)
    deletes what it uploaded (before: 302 MB stayed for `prune` to find 24 h later); only the
    allocation marker, an audit record, stays, so the number is never reused. One line."""
    from model_sync.push import uploads

    model = python_model(tmp_path / "m", "simple")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    (model / "1" / "model.pt").write_bytes(os.urandom(4096))  # version 2: one upload, one server-side copy
    real = uploads.Uploader.transfer

    def transfer_then_change(self, m, *args):
        real(self, m, *args)
        (model / "1" / "model.pt").write_bytes(os.urandom(4096))

    monkeypatch.setattr(uploads.Uploader, "transfer", transfer_then_change)
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 4, r.err
    assert r.err.splitlines() == [
        f"model-sync: file changed during push: {model / '1' / 'model.pt'}; nothing was pinned, re-run push when the "
        f"model directory is stable; its 2 file(s) in s3://{s3_bucket}/repository/simple/2/ were deleted (version 2 "
        "stays allocated, never reused)"
    ]
    assert pinned_version(moto_s3, s3_bucket, "simple") == 1
    assert moto_s3.keys(s3_bucket, "repository/simple/2/") == []
    assert moto_s3.keys(s3_bucket, "manifests/simple/") == ["manifests/simple/1.json"]


def test_file_vanishing_mid_push_pins_nothing(tmp_path, capsys, moto_s3, s3_bucket, cfg, monkeypatch) -> None:
    from model_sync.push import publish

    model = python_model(tmp_path / "m", "simple")
    real = publish.hash_files

    def hash_then_delete(models, workers=4, hashes=None):
        real(models, workers, hashes)
        (model / "1" / "model.pt").unlink()

    monkeypatch.setattr(publish, "hash_files", hash_then_delete)
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 4, r.err
    assert "file vanished during push" in r.err
    assert "model.pt" in r.err
    assert pinned_version(moto_s3, s3_bucket, "simple") is None
    assert moto_s3.keys(s3_bucket, "manifests/") == []


# ---- GPU memory planning (model_sync/admission/gpu_plan.py): refused before anything is written -------------


@pytest.fixture
def gpu_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    gpu_factories(tmp_path / "src", monkeypatch)
    return tmp_path / "out"


def _writes(server: S3Server, since: int) -> list[str]:
    return [q for q in server.requests()[since:] if q.split()[0] in ("PUT", "POST", "DELETE")]


def test_push_refuses_a_version_that_overcommits_its_deployments_gpu(tmp_path, capsys, moto_s3, s3_bucket, aws_env,
                                                                     gpu_out) -> None:  # fmt: skip
    cfg = gpu_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{s3_bucket}"}, {"staging": TOY_GPUS})
    a = gpu_export(capsys, gpu_out, "a", "narrow", 2)
    r = run_cli(capsys, "push", str(a), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    assert (
        "gpu memory: deployment default in staging plans 1.3 GiB of the 2.4 GiB allowed on one toy (2.7 GiB)\n" in r.out
    )
    b = gpu_export(capsys, gpu_out, "b", "wide", 2)
    keys, before = moto_s3.keys(s3_bucket), len(moto_s3.requests())
    for extra in ([], ["--dry-run"], ["--output", "json"]):
        r = run_cli(capsys, "push", str(b), "--env", "staging", "--config", cfg, *extra)
        assert r.code == 7, r.err
        assert r.err.splitlines() == [
            "model-sync: b -> staging: gpu memory: deployment default would plan 2.7 GiB on one toy (2.7 GiB), more "
            "than the 2.4 GiB allowed (90% of it); largest: b (this push) 2 x 686.0 MiB = 1.3 GiB, a v1 2 x 686.0 MiB "
            "= 1.3 GiB (each python-backend instance + 686.0 MiB CUDA context); allowed: fewer GPU instances "
            "(instance_group count), a smaller max_batch_size, or a bigger GPU"
        ]
        assert r.out == ""
    assert moto_s3.keys(s3_bucket) == keys  # nothing written: not even an allocation marker
    assert _writes(moto_s3, before) == []
    assert f"`{r.err.strip()}`" in DOC_TEXT  # docs/model-sync.md quotes this very line
    # One instance fewer fits, and its manifest carries what export recorded and the instance groups.
    b = gpu_export(capsys, gpu_out, "b", "wide", 1)
    r = run_cli(capsys, "push", str(b), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    fits = "gpu memory: deployment default in staging plans 2.0 GiB of the 2.4 GiB allowed on one toy (2.7 GiB)"
    assert f"{fits}\n" in r.out
    assert f"`{fits}`" in DOC_TEXT
    assert pinned_version(moto_s3, s3_bucket, "b") == 1
    doc = manifest_doc(moto_s3, s3_bucket, "b", 1)
    assert doc["schema"] == "model-sync.manifest/v4"
    assert doc["gpu_memory"] == json.loads((b / "export.json").read_text())["gpu_memory"]
    assert doc["gpu_memory"]["method"] == "estimated"
    assert doc["instance_groups"] == [{"kind": "KIND_GPU", "count": 1, "gpus": []}]
    # A new version of b fits, but not beside b v1, which stays loaded until it is READY: the plan's
    # line says so, and the version is published all the same (a load that fails keeps v1 serving).
    with (b / "1" / "model.py").open("a") as f:
        f.write("# version 2\n")
    r = run_cli(capsys, "push", str(b), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    switch = (
        f"{fits}; but 2.7 GiB while the new version loads beside the one served now (Triton unloads the old one "
        "only once the new one is READY): that load may run out of GPU memory and fail, and the replicas then keep "
        "serving the old version"
    )
    assert f"{switch}\n" in r.out
    assert f"`{switch}`" in DOC_TEXT
    assert pinned_version(moto_s3, s3_bucket, "b") == 2


def test_push_names_the_unknown_and_the_unchecked(tmp_path, capsys, moto_s3, aws_env, gpu_out) -> None:
    staging, dev = moto_s3.make_bucket(), moto_s3.make_bucket()
    cfg = gpu_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{staging}", "dev": f"s3://{dev}"},
                     {"staging": TOY_GPUS})  # fmt: skip
    c = python_model(tmp_path / "hand", "c")  # no export.json: its GPU memory is unknown, never guessed
    r = run_cli(capsys, "push", str(c), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    assert (
        "gpu memory: deployment default in staging plans 0 B of the 2.4 GiB allowed on one toy (2.7 GiB); not counted "
        "(GPU memory unknown): c (this push)\n"
    ) in r.out
    assert manifest_doc(moto_s3, staging, "c", 1)["gpu_memory"] is None
    a = gpu_export(capsys, gpu_out, "a", "narrow", 3)
    r = run_cli(capsys, "push", str(a), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err  # 1.5 GiB fits; c does not count, and is not a reason to refuse
    assert r.out.splitlines()[0] == (
        "gpu memory: deployment default in staging plans 2.0 GiB of the 2.4 GiB allowed on one toy (2.7 GiB); not "
        "counted (GPU memory unknown): c v1"
    )
    d = gpu_export(capsys, gpu_out, "d", "narrow", 8)
    r = run_cli(capsys, "push", str(d), "--env", "staging", "--config", cfg)
    assert (r.code, r.out.splitlines()[0]) == (
        0,
        "gpu memory: not checked for d: in no deployment of staging's tritonGpus",
    )
    r = run_cli(capsys, "push", str(a), "--env", "dev", "--config", cfg)
    assert (r.code, r.out.splitlines()[0]) == (0, NOT_CHECKED.replace("in staging", "in dev"))
    assert "gpu memory" not in run_cli(capsys, "push", str(a), "--env", "dev", "--config", cfg).out  # up to date
    for quiet in (["--quiet"], ["--output", "json"]):
        (a / "1" / "model.py").write_text(f"# {quiet}\n")
        r = run_cli(capsys, "push", str(a), "--env", "dev", "--config", cfg, *quiet)
        assert r.code == 0, r.err
        assert "gpu memory" not in r.out + r.err


def test_push_names_a_python_models_error_responses_and_still_publishes(tmp_path, capsys, moto_s3, s3_bucket,
                                                                        cfg) -> None:  # fmt: skip
    """Triton counts a python model's `InferenceResponse(error=...)` as a success, so no counter
    the gray release or an alert reads sees it: push names the file and line on stderr (one line
    per model), and publishes all the same. A model.py that raises instead, or one that does not
    parse (Triton's load reports that one), gets no such line."""
    responds = b"""\
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError("no")) for _ in requests]
"""
    model = python_model(tmp_path / "m", "responds", {"model.py": responds})
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    why = (
        "answers requests with InferenceResponse(error=...): Triton counts those as successes, so the gray release "
        "and every alert on nv_inference_request_failure miss them; raise pb_utils.TritonModelException instead"
    )
    assert [line for line in r.err.splitlines() if "error=" in line] == [
        f"model-sync: warning: responds: {model}/1/model.py:6 {why}"
    ]
    assert f"`... {why}`" in DOC_TEXT  # docs/model-sync.md quotes it
    assert pinned_version(moto_s3, s3_bucket, "responds") == 1
    raises = responds.replace(b'return [pb_utils.InferenceResponse(error=pb_utils.TritonError("no")) for _ in requests]',
                              b'raise pb_utils.TritonModelException("no")')  # fmt: skip
    for name, source in (("raises", raises), ("unparsable", b"def execute(self, requests)\n")):
        r = run_cli(capsys, "push", str(python_model(tmp_path / name, name, {"model.py": source})),
                    "--env", "staging", "--config", cfg)  # fmt: skip
        assert r.code == 0, r.err
        assert "warning" not in r.err, r.err
        assert pinned_version(moto_s3, s3_bucket, name) == 1
