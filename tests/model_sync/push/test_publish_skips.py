"""Fast `push` (the push benchmark's targets) without weaker guarantees, against a real moto_server:
one GET per pin for a repository no-op (never a listing of every version's files), the local pin cache (keyed by the
pin's ETag + LastModified, never trusted
for more than skipping), the local hash cache (keyed by size/mtime/ctime/inode/device), a stale
allocation hint, and lazy identity lookup."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model_sync import environments
from model_sync.contract import layout
from model_sync.push import publish, skip_cache
from model_sync.s3.bucket import Bucket
from model_sync.triton_model import model_directory
from model_sync.ui import Console
from tests.model_sync.helpers import manifest_doc, pinned_version, python_model, run_cli, write_config
from tests.support.s3_servers import S3Server


@pytest.fixture
def cfg(tmp_path: Path, moto_s3: S3Server, s3_bucket: str, aws_env) -> str:
    return write_config(tmp_path / "model-sync.yaml", moto_s3, {"staging": f"s3://{s3_bucket}"})


def _paths(server: S3Server, bucket: str, since: int) -> list[str]:
    """'METHOD key?query' (query parameters sorted) of the requests moto logged since `since`."""
    out = []
    for q in server.requests()[since:]:
        path, _, query = q.split()[1].removeprefix(f"/{bucket}").lstrip("/").partition("?")
        out.append(f"{q.split()[0]} {path}" + ("?" + "&".join(sorted(query.split("&"))) if query else ""))
    return out


def _repo(tmp_path: Path, names: tuple[str, ...] = ("a", "b", "c")) -> Path:
    for name in names:
        python_model(tmp_path / "repo", name, {"model.py": f"# {name}\n".encode(), "model.pt": os.urandom(4096)})
    return tmp_path / "repo"


def test_repository_noop_reads_only_the_pins_and_no_cache_still_agrees(
    tmp_path, capsys, moto_s3, s3_bucket, cfg
) -> None:
    repo = _repo(tmp_path)
    assert run_cli(capsys, "push", str(repo), "--env", "staging", "--config", cfg).code == 0
    before = len(moto_s3.requests())
    r = run_cli(capsys, "push", str(repo), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    assert sorted(r.out.splitlines()) == [
        f"up to date: {n} version 1 (s3://{s3_bucket}/repository/{n}/config.pbtxt)" for n in ("a", "b", "c")
    ]
    assert sorted(_paths(moto_s3, s3_bucket, before)) == [f"GET repository/{n}/config.pbtxt" for n in "abc"]
    before = len(moto_s3.requests())
    r = run_cli(capsys, "push", str(repo), "--env", "staging", "--config", cfg, "--no-cache")
    assert (r.code, r.out.count("up to date")) == (0, 3)
    reads = sorted(_paths(moto_s3, s3_bucket, before))
    assert reads == sorted(
        [f"GET repository/{n}/config.pbtxt" for n in "abc"] + [f"GET manifests/{n}/1.json" for n in "abc"]
    )


def test_pin_cache_is_keyed_by_the_pin_etag(tmp_path, capsys, moto_s3, s3_bucket, cfg, monkeypatch) -> None:
    """Another publisher (its own cache) moves the pin: a stale entry is a miss, never a no-op."""
    mine, theirs = str(tmp_path / "cache-mine"), str(tmp_path / "cache-theirs")
    x = python_model(tmp_path / "x", "simple", {"model.py": b"# x\n", "model.pt": b"x" * 100})
    y = python_model(tmp_path / "y", "simple", {"model.py": b"# y\n", "model.pt": b"y" * 100})

    def publish(model: Path, cache_dir: str) -> str:
        monkeypatch.setenv("MODEL_SYNC_CACHE_DIR", cache_dir)
        r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
        assert r.code == 0, r.err
        return r.out.strip()

    assert publish(x, mine).split("\n", 1)[1].startswith("upload:")  # after the GPU memory note (not checked)
    assert pinned_version(moto_s3, s3_bucket, "simple") == 1
    assert publish(y, theirs).endswith(f"pinned: simple version 2 (s3://{s3_bucket}/repository/simple/config.pbtxt)")
    # Rolled back to 1 by them: the pin bytes (and so the ETag) are version 1's again -> a real no-op
    # (read from S3 when the rewrite's LastModified differs from the cached one).
    monkeypatch.setenv("MODEL_SYNC_CACHE_DIR", theirs)
    assert run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg).code == 0
    assert publish(x, mine).startswith("up to date: simple version 1")
    # Pinned to 2 again: my cached entry (pin of version 1) must not make x look published.
    assert run_cli(capsys, "rollback", "simple", "--env", "staging", "--config", cfg, "--model-version", "2").code == 0
    out = publish(x, mine)
    assert "pinned: simple version 3" in out, out
    assert manifest_doc(moto_s3, s3_bucket, "simple", 3)["files"]["model.py"]["size"] == len(b"# x\n")


def test_pin_cache_misses_on_identical_pin_bytes_in_a_reset_bucket(
    tmp_path, capsys, moto_s3, s3_bucket, cfg, monkeypatch
) -> None:
    """moto (like SSE-S3 / unencrypted AWS buckets) uses the content MD5 as ETag: a bucket emptied
    and re-published with byte-identical pins has the same pin ETags over DIFFERENT manifests."""
    mine = _repo(tmp_path / "mine", ("a", "b"))
    theirs = _repo(tmp_path / "theirs", ("a", "b"))  # same config.pbtxt, other model.pt bytes
    my_cache = os.environ["MODEL_SYNC_CACHE_DIR"]
    assert run_cli(capsys, "push", str(mine), "--env", "staging", "--config", cfg).code == 0
    old_etag = moto_s3.client().head_object(Bucket=s3_bucket, Key="repository/a/config.pbtxt")["ETag"]
    objects = [{"Key": k} for k in moto_s3.keys(s3_bucket)]
    moto_s3.client().delete_objects(Bucket=s3_bucket, Delete={"Objects": objects})
    time.sleep(1.1)  # LastModified has whole-second resolution
    monkeypatch.setenv("MODEL_SYNC_CACHE_DIR", str(tmp_path / "their-cache"))
    assert run_cli(capsys, "push", str(theirs), "--env", "staging", "--config", cfg).code == 0
    assert moto_s3.client().head_object(Bucket=s3_bucket, Key="repository/a/config.pbtxt")["ETag"] == old_etag
    monkeypatch.setenv("MODEL_SYNC_CACHE_DIR", my_cache)
    r = run_cli(
        capsys, "push", str(mine), "--env", "staging", "--config", cfg
    )  # my cache: same ETags, older LastModified
    assert r.code == 0, r.err
    assert "up to date" not in r.out, r.out
    assert sorted(ln for ln in r.out.splitlines() if ln.startswith("pinned:")) == [
        f"pinned: {n} version 2 (s3://{s3_bucket}/repository/{n}/config.pbtxt)" for n in ("a", "b")
    ]
    assert moto_s3.get(s3_bucket, "repository/a/2/model.pt") == (mine / "a" / "1" / "model.pt").read_bytes()
    # The entry written after the flip (ETag + LastModified from one HeadObject) makes the next run a no-op again.
    before = len(moto_s3.requests())
    r = run_cli(capsys, "push", str(mine / "a"), "--env", "staging", "--config", cfg)
    assert r.out.strip() == f"up to date: a version 2 (s3://{s3_bucket}/repository/a/config.pbtxt)"
    assert [q.split()[0] for q in moto_s3.requests()[before:]] == ["GET"]


def test_corrupt_or_foreign_cache_files_are_ignored(tmp_path, capsys, moto_s3, s3_bucket, cfg) -> None:
    repo = _repo(tmp_path, ("a", "b"))
    assert run_cli(capsys, "push", str(repo), "--env", "staging", "--config", cfg).code == 0
    directory = Path(os.environ["MODEL_SYNC_CACHE_DIR"])
    pins = list((directory / skip_cache.PINS_DIR).iterdir())
    assert len(pins) == 1
    doc = json.loads(pins[0].read_text())
    doc["a"]["manifest"]["files"] = {"model.py": {"sha256": "0" * 64, "size": 1}}  # valid, but not what is pinned
    doc["b"]["manifest"]["schema"] = "bogus"
    pins[0].write_text(json.dumps(doc))
    (directory / skip_cache.HASHES_FILE).write_text("{not json")
    r = run_cli(capsys, "push", str(repo), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    # a's tampered entry differs from the local files: the full path reads the real pin and manifest,
    # finds them identical -> up to date (and no new version); b's invalid entry is a miss.
    assert r.out.count("up to date") == 2, r.out
    assert pinned_version(moto_s3, s3_bucket, "a") == pinned_version(moto_s3, s3_bucket, "b") == 1


def test_hash_cache_misses_on_a_same_size_rewrite_with_the_old_mtime(tmp_path, capsys, moto_s3, s3_bucket, cfg) -> None:
    model = python_model(tmp_path / "m", "simple", {"model.py": b"# one\n", "model.pt": b"a" * 64})
    pt = model / "1" / "model.pt"
    old = pt.stat()
    time.sleep(0.15)  # older than cache.RACY_NS: the first push caches the digest
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    entries = json.loads((Path(os.environ["MODEL_SYNC_CACHE_DIR"]) / skip_cache.HASHES_FILE).read_text())
    assert str(pt) in entries
    pt.write_bytes(b"b" * 64)  # same size ...
    os.utime(pt, ns=(old.st_atime_ns, old.st_mtime_ns))  # ... and the old mtime: only ctime moved
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    assert "pinned: simple version 2" in r.out
    assert moto_s3.get(s3_bucket, "repository/simple/2/model.pt") == b"b" * 64


def test_hash_cache_rules(tmp_path) -> None:
    f = tmp_path / "f.bin"
    f.write_bytes(b"x")
    st = os.stat(f)
    key = skip_cache.stat_key(st)
    now = time.time_ns()
    assert skip_cache.is_racy(key, now)  # just written
    assert not skip_cache.is_racy(key, max(st.st_mtime_ns, st.st_ctime_ns) + skip_cache.RACY_NS + 1)
    coarse = [key[0], 1_000_000_000_000_000_000, 1_000_000_000_000_000_000, key[3], key[4]]  # whole seconds
    assert skip_cache.is_racy(coarse, 1_000_000_000_000_000_000 + skip_cache.RACY_NS + 1)
    assert not skip_cache.is_racy(coarse, 1_000_000_000_000_000_000 + skip_cache.COARSE_RACY_NS + 1)
    hashes = skip_cache.HashCache(str(tmp_path / "c"))
    hashes.put(str(f), key, "a" * 64, now)  # racy: not kept
    hashes.put(str(f), key, "b" * 64, now + skip_cache.COARSE_RACY_NS * 10)
    hashes.save()
    again = skip_cache.HashCache(str(tmp_path / "c"))
    assert again.get(str(f), key) == "b" * 64
    assert again.get(str(f), [key[0] + 1, *key[1:]]) is None
    assert skip_cache.HashCache(None).get(str(f), key) is None


@pytest.mark.parametrize(
    ("var", "value", "expected"), [("MODEL_SYNC_CACHE", "off", None), ("MODEL_SYNC_CACHE_DIR", "/x/y", "/x/y")]
)
def test_cache_dir_setting(monkeypatch, var, value, expected) -> None:
    monkeypatch.setenv(var, value)
    assert skip_cache.cache_dir() == expected


def test_allocation_from_the_pin_never_writes_into_an_occupied_version(
    tmp_path, capsys, moto_s3, s3_bucket, cfg
) -> None:
    """The first candidate is the pinned version + 1 (no listing); a directory another tool wrote
    there without an allocation marker is never written into, and the number is skipped."""
    repo = _repo(tmp_path, ("a", "b"))
    assert run_cli(capsys, "push", str(repo), "--env", "staging", "--config", cfg).code == 0
    moto_s3.client().put_object(Bucket=s3_bucket, Key="repository/a/2/theirs.bin", Body=b"not ours")  # no marker
    (repo / "a" / "1" / "model.py").write_text("# a, changed\n")
    r = run_cli(capsys, "push", str(repo), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    assert (pinned_version(moto_s3, s3_bucket, "a"), pinned_version(moto_s3, s3_bucket, "b")) == (3, 1)
    assert moto_s3.keys(s3_bucket, "repository/a/2/") == ["repository/a/2/theirs.bin"]
    assert sorted(moto_s3.keys(s3_bucket, "audit/allocations/a/")) == [
        f"audit/allocations/a/{n}.json" for n in (1, 2, 3)
    ]
    # Rolled back to 1 while 2 and 3 exist: candidate 2 collides with its marker, then the highest + 1.
    assert run_cli(capsys, "rollback", "a", "--env", "staging", "--config", cfg, "--model-version", "1").code == 0
    (repo / "a" / "1" / "model.py").write_text("# a, changed again\n")
    r = run_cli(capsys, "push", str(repo / "a"), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    assert pinned_version(moto_s3, s3_bucket, "a") == 4
    assert moto_s3.keys(s3_bucket, "repository/a/2/") == ["repository/a/2/theirs.bin"]


def test_noop_never_asks_who_is_publishing(tmp_path, moto_s3, s3_bucket, aws_env) -> None:
    models = [model_directory.load(str(python_model(tmp_path, "m")))]
    repo = Bucket(environments.Environment("staging", layout.Root(s3_bucket), moto_s3.endpoint, "us-east-1"))
    first = publish.push(repo, models, Console(quiet=True), publish.PushOptions(), "tester")
    assert [r.action for r in first] == ["pushed"]

    def no_identity() -> str:
        raise AssertionError("identity looked up for a no-op")

    models = [model_directory.load(str(tmp_path / "m"))]
    again = publish.push(repo, models, Console(quiet=True), publish.PushOptions(), no_identity)
    assert [(r.action, r.version) for r in again] == [("up-to-date", 1)]


# ---- the config cache and what a no-op leaves unimported ------------------------------------


def test_noop_loads_neither_s3transfer_nor_protobuf_text_format(tmp_path, capsys, moto_s3, s3_bucket, cfg) -> None:
    """The point of the config cache and of lazy transfers: a no-op push of an unchanged
    repository reads its pins through botocore but never imports s3transfer (nothing to move)
    nor protobuf's text_format (nothing to parse)."""
    repo = _repo(tmp_path)
    assert run_cli(capsys, "push", str(repo), "--env", "staging", "--config", cfg).code == 0
    probe = (
        "import sys; from model_sync import cli; code = cli.main(sys.argv[1:]); "
        "print(sorted(m for m in sys.modules if m.startswith(('boto3', 's3transfer', "
        "'google.protobuf.text_format')))); sys.exit(code)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, "push", str(repo), "--env", "staging", "--config", cfg],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "[]", proc.stdout
    assert sorted(lines[:-1]) == [
        f"up to date: {n} version 1 (s3://{s3_bucket}/repository/{n}/config.pbtxt)" for n in "abc"
    ]
    # A changed config needs the parser again (and a new version), in the same kind of process.
    (repo / "b" / "config.pbtxt").write_text('name: "b"\nbackend: "python"\nmax_batch_size: 8\n')
    proc = subprocess.run(
        [sys.executable, "-c", probe, "push", str(repo), "--env", "staging", "--config", cfg],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "google.protobuf.text_format" in proc.stdout.splitlines()[-1]
    assert f"pinned: b version 2 (s3://{s3_bucket}/repository/b/config.pbtxt)" in proc.stdout
    assert "max_batch_size: 8" in moto_s3.get(s3_bucket, "repository/b/config.pbtxt").decode()


def test_config_cache_holds_the_pin_text_s3_got_and_misses_on_any_change(
    tmp_path, capsys, moto_s3, s3_bucket, cfg, monkeypatch
) -> None:
    from model_sync.triton_model import model_config

    model = python_model(tmp_path, "simple")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    configs = skip_cache.ConfigCache(os.environ["MODEL_SYNC_CACHE_DIR"])
    digest = hashlib.sha256((model / "config.pbtxt").read_bytes()).hexdigest()
    assert configs.get("simple", digest) == {
        "platform": "",
        "backend": "python",
        "required": ["model.py"],
        "pinned": {"1": moto_s3.get(s3_bucket, "repository/simple/config.pbtxt").decode()},
    }
    assert configs.get("other-name", digest) is None  # the name is part of the key (it is written into the pin)

    parses: list[str] = []
    real_parse = model_config.parse

    def counting_parse(text, source="config.pbtxt"):
        parses.append(str(source))
        return real_parse(text, source)

    monkeypatch.setattr(model_config, "parse", counting_parse)
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert (r.code, r.out.startswith("up to date"), parses) == (0, True, [])
    # Another parser (model-sync, protobuf or model_config.py changed): every entry is a miss.
    real_fingerprint = skip_cache.parser_fingerprint
    monkeypatch.setattr(skip_cache, "parser_fingerprint", lambda: "another-parser")
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert (r.code, r.out.startswith("up to date")) == (0, True)
    assert [p.endswith("config.pbtxt") for p in parses] == [True], parses
    # A corrupt cache file is a miss for everything, and is replaced by a good one.
    monkeypatch.setattr(skip_cache, "parser_fingerprint", real_fingerprint)
    directory = os.environ["MODEL_SYNC_CACHE_DIR"]
    (Path(directory) / skip_cache.CONFIGS_FILE).write_text("[1, 2")
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert (r.code, r.out.startswith("up to date")) == (0, True)
    assert skip_cache.ConfigCache(directory).get("simple", digest) is not None
    # A config that does not parse is refused and never cached.
    (model / "config.pbtxt").write_text('name: "simple"\nbackend: "python"\nmax_batch_sise: 4\n')
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 2
    assert "does not parse" in r.err
    assert (
        skip_cache.ConfigCache(directory).get(
            "simple", hashlib.sha256((model / "config.pbtxt").read_bytes()).hexdigest()
        )
        is None
    )
    assert skip_cache.ConfigCache(directory).get("simple", digest) is not None


def test_a_cached_config_still_refuses_a_version_directory_without_its_backend_files(
    tmp_path, capsys, moto_s3, s3_bucket, cfg
) -> None:
    model = python_model(tmp_path, "simple")
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    (model / "1" / "model.py").unlink()  # same config bytes (a cache hit), files its backend needs are gone
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 2
    assert r.err.strip() == (
        f"model-sync: model directory: {model / '1'} lacks model.py; allowed: a version directory with every "
        "file backend 'python' needs"
    )


# ---- credentials, endpoint and region resolution of the stdlib client ------------------------


def _env_file(tmp_path: Path, server: S3Server, bucket: str, **extra: str) -> str:
    path = tmp_path / "model-sync.yaml"
    path.write_text(json.dumps({"environments": {"staging": {"bucket": f"s3://{bucket}", **extra}}}))
    return str(path)


def test_credentials_outside_the_environment_come_from_the_rest_of_the_aws_chain(
    tmp_path, capsys, rclone_s3, aws_env, monkeypatch
) -> None:
    """rclone checks access keys and signatures: only the profile's real key can publish."""
    bucket = rclone_s3.make_bucket()
    cfg = _env_file(tmp_path, rclone_s3, bucket, endpointUrl=rclone_s3.endpoint, region="us-east-1")
    model = python_model(tmp_path / "m", "simple")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    creds = tmp_path / "credentials"
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    creds.write_text(
        f"[default]\naws_access_key_id = {aws_env['AWS_ACCESS_KEY_ID']}\naws_secret_access_key = not-the-secret\n"
    )
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert (r.code, "SignatureDoesNotMatch" in r.err) == (5, True), r.err
    assert rclone_s3.keys(bucket) == []
    creds.write_text(
        f"[default]\naws_access_key_id = {aws_env['AWS_ACCESS_KEY_ID']}\naws_secret_access_key = "
        f"{aws_env['AWS_SECRET_ACCESS_KEY']}\n"
    )
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    assert pinned_version(rclone_s3, bucket, "simple") == 1
    creds.write_text("")
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 5
    assert r.err.strip() == (
        f"model-sync: AWS credentials: none found for s3://{bucket}/repository/simple/config.pbtxt; "
        "allowed: the standard AWS chain (env vars, profile, SSO, instance/IRSA role)"
    )


def test_endpoint_from_aws_endpoint_url_s3_and_a_missing_region(
    tmp_path, capsys, moto_s3, s3_bucket, aws_env, monkeypatch
) -> None:
    cfg = _env_file(tmp_path, moto_s3, s3_bucket)  # no endpointUrl, no region
    model = python_model(tmp_path / "m", "simple")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_s3.endpoint)  # as the AWS SDKs and CLI read it
    assert run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg).code == 0
    assert pinned_version(moto_s3, s3_bucket, "simple") == 1
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 2
    assert r.err.strip() == (
        "model-sync: region: none configured for environment staging; allowed: `region` in model-sync.yaml, "
        "--region, AWS_REGION or a profile's region"
    )


def test_a_config_the_cache_vouches_for_is_still_parsed_before_any_write(
    tmp_path, capsys, moto_s3, s3_bucket, cfg
) -> None:
    """An entry that says a malformed config is fine (a schema change the fingerprint missed, a
    hand-edited cache) spares load() the parse, but a model that needs publishing is parsed
    before its first write: exit 2 and an empty bucket."""
    model = python_model(tmp_path, "simple", config='name: "simple"\nbackend: "python"\nmax_batch_sise: 4\n')
    configs = skip_cache.ConfigCache(os.environ["MODEL_SYNC_CACHE_DIR"])
    configs.put("simple", hashlib.sha256((model / "config.pbtxt").read_bytes()).hexdigest(), "", "python", ["model.py"])
    configs.save()
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 2
    assert "config.pbtxt: does not parse" in r.err
    assert moto_s3.keys(s3_bucket) == []


def test_config_cache_keeps_the_newest_pin_texts_only(tmp_path) -> None:
    configs = skip_cache.ConfigCache(str(tmp_path))
    configs.put("m", "d" * 64, "", "python", ["model.py"])
    for version in range(1, 13):
        configs.put_pinned("m", "d" * 64, version, f"pin {version}")
    configs.put_pinned("m", "d" * 64, 7, "pin 7 again")  # re-put moves it to the newest end
    configs.save()
    entry = skip_cache.ConfigCache(str(tmp_path)).get("m", "d" * 64)
    assert entry is not None
    assert skip_cache.MAX_PINNED_TEXTS == 8
    assert list(entry["pinned"]) == ["5", "6", "8", "9", "10", "11", "12", "7"]
    assert entry["pinned"]["7"] == "pin 7 again"
    assert "1" not in entry["pinned"]
