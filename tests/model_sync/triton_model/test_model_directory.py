"""model_sync/triton_model/model_directory.py: discover() and load() on real model and repository directories in
tmp_path: what is scanned, what is skipped, and every refusal (one line, exit 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from model_sync import errors
from model_sync.contract import layout
from model_sync.push import skip_cache
from model_sync.triton_model import model_config, model_directory
from tests.model_sync.helpers import python_model


def refused(path: Path | str, match: str, name: str | None = None) -> errors.SyncError:
    with pytest.raises(errors.SyncError, match=match) as e:
        model_directory.discover(str(path), name)
    assert e.value.code == errors.USAGE
    assert "\n" not in str(e.value)
    return e.value


def test_one_model_directory_is_scanned_with_its_stat_fields(tmp_path: Path) -> None:
    d = python_model(tmp_path, "simple", files={"model.py": b"# m\n", "sub/dir/w.bin": b"1234"})
    models = model_directory.discover(str(d))
    assert [m.name for m in models] == ["simple"]
    m = models[0]
    assert (m.dir, m.version_dir, m.backend, m.platform, m.export_meta) == (str(d), str(d / "1"), "python", "", {})
    assert sorted(m.files) == ["model.py", "sub/dir/w.bin"]
    f = m.files["sub/dir/w.bin"]
    st = os.stat(d / "1" / "sub" / "dir" / "w.bin")
    assert (f.path, f.size, f.stat_key) == (str(d / "1" / "sub" / "dir" / "w.bin"), 4, skip_cache.stat_key(st))
    assert m.config == (d / layout.CONFIG_FILE).read_bytes()
    assert model_config.pinned_version(model_config.parse(m.pinned_text(5))) == 5


def test_a_repository_directory_yields_every_model_in_name_order(tmp_path: Path) -> None:
    for name in ("zeta", "alpha", "mid"):
        python_model(tmp_path / "repo", name)
    (tmp_path / "repo" / "notes").mkdir()  # no config.pbtxt: not a model
    assert [m.name for m in model_directory.discover(str(tmp_path / "repo"))] == ["alpha", "mid", "zeta"]
    refused(
        tmp_path / "repo",
        r"^--name: 'x' with a repository directory of 3 models; allowed: --name only with one model directory$",
        name="x",
    )


def test_name_overrides_the_directory_name_and_is_checked(tmp_path: Path) -> None:
    d = python_model(tmp_path, "Dir_Name", config='backend: "python"\n')
    assert model_directory.discover(str(d), "simple")[0].name == "simple"
    refused(d, r"^model name: 'Dir_Name'; allowed: .* \(from the directory name\)$")
    refused(d, r"^model name: 'a b'; allowed: .* \(from --name\)$", name="a b")


def test_dot_files_dot_dirs_and_pycache_are_skipped_but_a_dot_symlink_is_refused(tmp_path: Path) -> None:
    """Dot-named regular files and directories and __pycache__ are not published; a dot-named symlink
    is refused like every symlink (docs/model-sync.md; a dot-named one was skipped silently before)."""
    d = python_model(
        tmp_path,
        "simple",
        files={
            "model.py": b"x",
            ".hidden": b"h",
            ".git/config": b"g",
            "__pycache__/m.pyc": b"c",
            "pkg/__pycache__/x.pyc": b"c",
        },
    )
    assert sorted(model_directory.discover(str(d))[0].files) == ["model.py"]
    (d / "1" / ".link").symlink_to(d / "1" / "model.py")
    with pytest.raises(errors.SyncError, match=r"1/\.link is not a regular file; allowed: regular files only"):
        model_directory.discover(str(d))


def test_the_config_cache_spares_the_parse_of_known_bytes(tmp_path: Path) -> None:
    d = python_model(tmp_path, "simple")
    configs = skip_cache.ConfigCache(str(tmp_path / "cache"))
    first = model_directory.load(str(d), configs=configs)
    assert first._cfg is not None  # parsed
    assert first.pinned_text(2) == model_config.pinned_text(first.cfg, 2, "simple")
    configs.save()
    again = skip_cache.ConfigCache(str(tmp_path / "cache"))
    second = model_directory.load(str(d), configs=again)
    assert second._cfg is None  # from the cache: not parsed
    assert (second.platform, second.backend) == ("", "python")
    assert again.pinned("simple", second.config_digest, 2) == first.pinned_text(2)
    assert second.pinned_text(2) == first.pinned_text(2)
    assert second._cfg is None  # the pin text came from the cache too


def test_export_meta_is_read_and_checked(tmp_path: Path) -> None:
    d = python_model(tmp_path, "simple")
    meta = {
        "method": "trace",
        "torch_version": "2.13.0+cpu",
        "torchscript_format_version": 3,
        "target": "cloud",
        "operators": ["aten::relu"],
    }
    (d / model_directory.EXPORT_META).write_text(json.dumps(meta))
    assert model_directory.discover(str(d))[0].export_meta == meta
    assert (
        model_directory.EXPORT_META not in model_directory.discover(str(d))[0].files
    )  # beside the version, never uploaded
    (d / model_directory.EXPORT_META).write_text(json.dumps({**meta, "torchscript_format_version": True}))
    refused(d, r"export.json torchscript_format_version: True; allowed: an integer \(or absent\)$")
    (d / model_directory.EXPORT_META).write_text(json.dumps({**meta, "target": "edge"}))
    refused(d, r"export.json target: 'edge'; allowed: 'cloud' or 'local' \(or absent\)$")
    (d / model_directory.EXPORT_META).write_text("[]")
    refused(d, r"export.json: list; allowed: the JSON object `model-sync export` writes$")
    (d / model_directory.EXPORT_META).write_text("{nope")
    refused(d, r"export.json: not JSON \(.*\); allowed: the export.json `model-sync export` writes$")


def test_a_path_that_is_no_model_directory_is_refused(tmp_path: Path) -> None:
    refused(
        tmp_path / "missing", r"^model directory: '.*missing' is not a directory; allowed: a Triton model directory"
    )
    (tmp_path / "empty").mkdir()
    refused(
        tmp_path / "empty",
        r"^model directory: .*empty has no config.pbtxt; allowed: a Triton model directory \(config.pbtxt \+ one "
        r"<N>/\)$",
    )


@pytest.mark.parametrize(("versions", "shown"), [([], r"\[\]"), (["1", "2"], r"\['1', '2'\]")])
def test_exactly_one_version_directory(tmp_path: Path, versions: list[str], shown: str) -> None:
    d = tmp_path / "simple"
    d.mkdir()
    (d / layout.CONFIG_FILE).write_text('backend: "python"\n')
    for v in versions:
        (d / v).mkdir()
        (d / v / "model.py").write_text("x")
    (d / "01").mkdir()  # not a version directory
    refused(d, rf"has version directories {shown}; allowed: exactly one numeric version directory to publish$")


def test_missing_backend_files_and_bad_configs_are_refused(tmp_path: Path) -> None:
    d = python_model(tmp_path, "simple", files={"other.py": b"x"})
    refused(d, r"1 lacks model.py; allowed: a version directory with every file backend 'python' needs$")
    t = python_model(tmp_path, "torch", files={"model.py": b"x"}, config='platform: "pytorch_libtorch"\n')
    refused(t, r"1 lacks model.pt; allowed: a version directory with every file platform 'pytorch_libtorch' needs$")
    python_model(tmp_path, "bad", config='nmae: "x"\n')
    refused(tmp_path / "bad", r"config.pbtxt: does not parse .*no field named \"nmae\"")
    python_model(tmp_path, "other", config='name: "different"\nbackend: "python"\n')
    refused(tmp_path / "other", r"name: 'different'; allowed: 'other' \(the model directory / --name\)$")


def test_a_file_path_outside_the_layout_rule_is_refused(tmp_path: Path) -> None:
    d = python_model(tmp_path, "simple", files={"model.py": b"x", "a b.bin": b"y"})
    refused(d, r"^model directory .*/1: file path: 'a b.bin'; allowed: ")


def test_symlinks_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    d = python_model(tmp_path, "files")
    (d / "1" / "link.bin").symlink_to(outside / "secret")
    refused(d, r"^model directory: .*/1/link.bin is not a regular file; allowed: regular files only \(no symlinks\)$")
    d = python_model(tmp_path, "dirs")
    (d / "1" / "sub").symlink_to(outside)
    refused(d, r"^model directory: .*/1/sub is a symlink; allowed: regular files and directories only$")
    d = python_model(tmp_path, "dangling")
    (d / "1" / "gone").symlink_to(tmp_path / "nothing-here")
    refused(d, r"/1/gone is not a regular file")


def test_symlinked_version_config_and_model_directories_are_refused(tmp_path: Path) -> None:
    real = python_model(tmp_path / "real", "simple")
    d = tmp_path / "ver" / "simple"
    d.mkdir(parents=True)
    (d / layout.CONFIG_FILE).write_text('backend: "python"\n')
    (d / "1").symlink_to(real / "1")
    refused(
        d,
        r"^model directory: .*/ver/simple/1 is a symlink to .*/real/simple/1; allowed: a version directory, not "
        r"a symlink$",
    )
    c = python_model(tmp_path / "cfg", "simple")
    (c / layout.CONFIG_FILE).unlink()
    (c / layout.CONFIG_FILE).symlink_to(real / layout.CONFIG_FILE)
    refused(
        c,
        r"config.pbtxt is a symlink to .*/real/simple/config.pbtxt, outside the model directory; allowed: a "
        r"config.pbtxt inside ",
    )
    (c / "configs").mkdir()
    (c / "configs" / "main.pbtxt").write_text('backend: "python"\n')
    (c / layout.CONFIG_FILE).unlink()
    (c / layout.CONFIG_FILE).symlink_to(c / "configs" / "main.pbtxt")  # inside: accepted
    assert model_directory.discover(str(c))[0].backend == "python"
    repo = tmp_path / "repo"
    python_model(repo, "alpha")
    (repo / "beta").symlink_to(real)
    refused(
        repo,
        r"^repository directory: .*/repo/beta is a symlink to .*/real/simple; allowed: model directories, not "
        r"symlinks$",
    )


def test_a_fifo_is_not_a_regular_file(tmp_path: Path) -> None:
    d = python_model(tmp_path, "simple")
    os.mkfifo(d / "1" / "pipe")
    refused(d, r"/1/pipe is not a regular file; allowed: regular files only")


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="as root (CAP_DAC_OVERRIDE) chmod 0 cannot make a directory unreadable, so the refusal cannot be provoked; "
    "it runs for any other user",
)
def test_an_unreadable_directory_is_refused(tmp_path: Path) -> None:
    d = python_model(tmp_path, "simple", files={"model.py": b"x", "sub/w": b"y"})
    (d / "1" / "sub").chmod(0)
    try:
        refused(d, r"^model directory: .*/1/sub cannot be read \(Permission denied\); allowed: a readable directory$")
    finally:
        (d / "1" / "sub").chmod(0o755)
