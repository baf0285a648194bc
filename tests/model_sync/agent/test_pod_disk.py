"""model_sync.agent.pod_disk on real directories: the single-agent lock, staging a
version (verified download, byte-compile, one rename), placing it and flipping the local pin
atomically, removing a model, pruning, and atomic_write."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from model_sync import agent as ag
from model_sync.agent.exceptions import AgentError
from model_sync.agent.pod_disk import PodDisk, atomic_write, local_versions, read_local_pin
from model_sync.contract import layout
from model_sync.errors import Abandoned
from tests.model_sync.helpers import settings_on
from tests.support.triton import pinned_config


def _local(tmp_path: Path) -> PodDisk:
    local = PodDisk(tmp_path / "models", tmp_path / ".models.staging", threading.Event())
    local.lock()
    return local


def _writer(files: dict[str, bytes]):
    def download(rel: str, dest: Path) -> int:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(files[rel])
        return len(files[rel])

    return download


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_second_lock_on_the_same_staging_is_refused_until_the_first_is_released(tmp_path: Path) -> None:
    first = _local(tmp_path)
    second = PodDisk(tmp_path / "models", tmp_path / ".models.staging", threading.Event())
    with pytest.raises(AgentError, match="is locked by another agent; allowed: one agent per repository"):
        second.lock()
    first.unlock()
    second.lock()  # the lock is released with the first agent
    second.unlock()


def test_lock_creates_both_directories_and_discards_leftovers_of_a_killed_run(tmp_path: Path) -> None:
    staging = tmp_path / ".models.staging"
    (staging / "add.3.999.1").mkdir(parents=True)
    (staging / "add.3.999.1" / "model.py").write_text("# half\n")
    (staging / ".config.pbtxt.999.5.tmp").write_text("x")
    local = _local(tmp_path)
    assert (tmp_path / "models").is_dir()
    assert list(staging.iterdir()) == []
    local.unlock()


def test_stage_downloads_byte_compiles_and_renames_to_the_target(tmp_path: Path) -> None:
    local = _local(tmp_path)
    build = local.new_build("add")
    files = {"model.py": b"X = 1\n", "data/weights.bin": b"\x00" * 10}
    assert local.stage("add", 3, files, _writer(files), build / "3") == 16
    assert (build / "3" / "model.py").read_bytes() == b"X = 1\n"
    assert (build / "3" / "data" / "weights.bin").read_bytes() == b"\x00" * 10
    assert any(p.name.startswith("model.") and p.suffix == ".pyc" for p in (build / "3" / "__pycache__").iterdir())
    assert [p.name for p in local.staging.iterdir()] == [build.name]  # the work directory was renamed, not copied


def test_a_failed_or_abandoned_stage_leaves_nothing_in_staging_nor_at_the_target(tmp_path: Path) -> None:
    local = _local(tmp_path)
    target = local.new_build("add") / "3"

    def corrupt(rel: str, dest: Path) -> int:
        dest.write_bytes(b"partial")
        raise ValueError(f"{rel}: sha256 mismatch")

    with pytest.raises(ValueError, match="sha256 mismatch"):
        local.stage("add", 3, ["model.py"], corrupt, target)
    assert not target.exists()
    assert list(local.staging.iterdir()) == []
    local.stop.set()
    with pytest.raises(Abandoned):
        local.stage("add", 3, ["model.py"], _writer({"model.py": b"X = 1\n"}), target)
    assert not target.exists()
    assert list(local.staging.iterdir()) == []


def test_a_new_model_is_placed_whole_config_and_versions_in_one_rename(tmp_path: Path) -> None:
    local = _local(tmp_path)
    build = local.new_build("add")
    local.stage("add", 1, ["model.py"], _writer({"model.py": b"X = 1\n"}), build / "1")
    (local.repository / "add").mkdir()  # a directory without config.pbtxt: replaced
    local.place("add", pinned_config("add", 1), build)
    assert local.pin("add") == pinned_config("add", 1)
    assert local.versions("add") == [1]
    assert local.in_place() == {"add": pinned_config("add", 1)}
    assert list(local.staging.iterdir()) == []


def test_placing_a_version_of_a_served_model_moves_it_in_then_flips_the_pin_atomically(tmp_path: Path) -> None:
    local = _local(tmp_path)
    build = local.new_build("add")
    local.stage("add", 1, ["model.py"], _writer({"model.py": b"X = 1\n"}), build / "1")
    local.place("add", pinned_config("add", 1), build)
    config = local.repository / "add" / layout.CONFIG_FILE
    before = os.stat(config).st_ino
    with open(config) as reader:  # what Triton could be reading while the pin flips
        build = local.new_build("add")
        local.stage("add", 2, ["model.py"], _writer({"model.py": b"X = 2\n"}), build / "2")
        local.place("add", pinned_config("add", 2), build)
        assert reader.read() == pinned_config("add", 1)  # the old file was replaced, never rewritten in place
    assert os.stat(config).st_ino != before
    assert local.pin("add") == pinned_config("add", 2)
    assert local.versions("add") == [1, 2]
    assert (local.repository / "add" / "1" / "model.py").read_bytes() == b"X = 1\n"
    assert list(build.iterdir()) == []  # every staged version moved in; the pass discards the empty build
    local.discard(build)
    assert list(local.staging.iterdir()) == []  # no temporary config left behind
    local.flip("add", pinned_config("add", 1))  # pin back
    assert read_local_pin(local.repository / "add") == pinned_config("add", 1)
    assert list(local.staging.iterdir()) == []


def test_remove_model_takes_the_whole_directory_out(tmp_path: Path) -> None:
    local = _local(tmp_path)
    build = local.new_build("add")
    local.stage("add", 1, ["model.py"], _writer({"model.py": b"X = 1\n"}), build / "1")
    local.place("add", pinned_config("add", 1), build)
    local.remove_model("add")
    local.remove_model("never-there")  # nothing to remove: no error
    assert _tree(local.repository) == []
    assert list(local.staging.iterdir()) == []


def test_prune_keeps_the_pinned_and_the_newest_unpinned_versions(tmp_path: Path) -> None:
    local = _local(tmp_path)
    model = local.repository / "add"
    for v in (1, 2, 3, 5, 8, 13):
        (model / str(v)).mkdir(parents=True)
        (model / str(v) / "model.py").write_text(f"X = {v}\n")
    (model / "notes").mkdir()  # not a version directory: never touched
    local.prune("add", keep={3}, keep_versions=2)
    assert local.versions("add") == [3, 8, 13]
    assert (model / "notes").is_dir()
    local.prune("add", keep={3}, keep_versions=0)
    assert local.versions("add") == [3]
    assert list(local.staging.iterdir()) == []


def test_in_place_lists_only_models_with_a_pin_and_a_valid_name(tmp_path: Path) -> None:
    local = _local(tmp_path)
    for name in ("add", "Bad_Name", "nopin"):
        (local.repository / name / "1").mkdir(parents=True)
    (local.repository / "add" / layout.CONFIG_FILE).write_text(pinned_config("add", 1))
    (local.repository / "Bad_Name" / layout.CONFIG_FILE).write_text("x")
    (local.repository / "stray.txt").write_text("x")
    assert local.in_place() == {"add": pinned_config("add", 1)}
    assert local.pin("nopin") is None


def test_local_versions_are_the_numeric_directories_sorted(tmp_path: Path) -> None:
    model = tmp_path / "add"
    for d in ("10", "2", "x", "-1", "03"):
        (model / d).mkdir(parents=True)
    (model / "7").write_text("a file, not a version")
    assert local_versions(model) == [2, 10]
    assert local_versions(tmp_path / "absent") == []


def test_atomic_write_replaces_the_target_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target, scratch = tmp_path / "dir" / "config.pbtxt", tmp_path / "scratch"
    target.parent.mkdir()
    atomic_write(target, b"one\n", scratch)
    assert target.read_bytes() == b"one\n"
    atomic_write(target, b"two\n", scratch)
    assert target.read_bytes() == b"two\n"
    assert list(scratch.iterdir()) == []
    assert [p.name for p in target.parent.iterdir()] == ["config.pbtxt"]


def test_atomic_write_replaces_the_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "repo" / "config.pbtxt"
    target.parent.mkdir()
    target.write_text("old")
    ag.atomic_write(target, b"new", tmp_path / "staging")
    assert target.read_text() == "new"
    assert list((tmp_path / "staging").iterdir()) == []


def test_prepare_discards_leftovers_and_locks_the_staging_area(tmp_path: Path) -> None:
    s = settings_on(tmp_path)
    (s.staging / "add.2.123.456").mkdir(parents=True)
    (s.staging / "add.2.123.456" / "weights.bin").write_bytes(b"partial")
    first = ag.RepositoryAgent(s, s3=None)  # type: ignore[arg-type]
    first.prepare()
    assert list(s.staging.iterdir()) == []
    second = ag.RepositoryAgent(s, s3=None)  # type: ignore[arg-type]
    with pytest.raises(
        ag.AgentError, match=r"^staging: .* is locked by another agent; allowed: one agent per repository$"
    ):
        second.prepare()
    first.close()
    second.prepare()
    second.close()


def test_prepare_adopts_models_already_in_place(tmp_path: Path) -> None:
    s = settings_on(tmp_path)
    (s.repository / "add" / "3").mkdir(parents=True)
    (s.repository / "add" / "config.pbtxt").write_text(pinned_config("add", 3))
    a = ag.RepositoryAgent(s, s3=None, stop=threading.Event())  # type: ignore[arg-type]
    a.prepare()
    a.close()
    doc = a.status_document()
    assert doc["models"]["add"]["serving"] == [3]
    assert doc["models"]["add"]["state"] == ag.PLACED
    assert doc["models"]["add"]["local_versions"] == [3]
    assert doc["schema"] == ag.STATUS_SCHEMA
    assert doc["deployment"] == "default"
    assert doc["replica"] == "replica-0"


def test_precompile_writes_pycache_before_the_version_is_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside the file, where the stub looks, even when the agent's own bytecode goes to a
    PYTHONPYCACHEPREFIX (sys.pycache_prefix), as under `make test`."""
    (tmp_path / "model.py").write_text("X = 1\n")
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "elsewhere"))
    ag._precompile_python(tmp_path)
    assert [p.name for p in (tmp_path / "__pycache__").iterdir()] == [f"model.{sys.implementation.cache_tag}.pyc"]
    assert not (tmp_path / "elsewhere").exists()
