"""model_sync/push/skip_cache.py on disk (tmp_path): where the caches live, what each file holds, and that a
stale, racy, corrupt or foreign entry is only ever a miss."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from model_sync.push import skip_cache

DIGEST = "a" * 64


def _file(tmp_path: Path, data: bytes = b"weights") -> tuple[str, list[int]]:
    path = tmp_path / "model.pt"
    path.write_bytes(data)
    return str(path), skip_cache.stat_key(os.stat(path))


def _settled(key: list[int]) -> int:
    """A hashing start time safely after the file's last change (not racy)."""
    return max(key[1], key[2]) + skip_cache.RACY_NS + 1


def test_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MODEL_SYNC_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert skip_cache.cache_dir() == str(tmp_path / "explicit")
    monkeypatch.delenv("MODEL_SYNC_CACHE_DIR")
    assert skip_cache.cache_dir() == str(tmp_path / "xdg" / "model-sync")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert skip_cache.cache_dir() == str(tmp_path / "home" / ".cache" / "model-sync")
    for off in ("off", "OFF", "0", "false", "no"):
        monkeypatch.setenv("MODEL_SYNC_CACHE", off)
        assert skip_cache.cache_dir() is None
    monkeypatch.setenv("MODEL_SYNC_CACHE", "on")
    assert skip_cache.cache_dir() == str(tmp_path / "home" / ".cache" / "model-sync")


def test_hashes_persist_atomically_and_are_reused_while_the_stat_is_unchanged(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    path, key = _file(tmp_path)
    hashes = skip_cache.HashCache(str(directory))
    hashes.put(path, key, DIGEST, _settled(key))
    assert not directory.exists()  # nothing written before save()
    hashes.save()
    assert sorted(p.name for p in directory.iterdir()) == [skip_cache.HASHES_FILE]  # no temporary left behind
    assert json.loads((directory / skip_cache.HASHES_FILE).read_text()) == {path: [*key, DIGEST]}
    assert oct(directory.stat().st_mode & 0o777) == oct(0o700)
    again = skip_cache.HashCache(str(directory))
    assert again.get(path, key) == DIGEST
    assert again.get(path, [key[0] + 1, *key[1:]]) is None  # another size
    assert again.get(path, [*key[:2], key[2] + 1, *key[3:]]) is None  # rewritten: another ctime
    assert again.get(str(tmp_path / "other"), key) is None


def test_a_rewrite_of_the_same_size_is_a_miss(tmp_path: Path) -> None:
    path, key = _file(tmp_path, b"aaaa")
    hashes = skip_cache.HashCache(str(tmp_path / "c"))
    hashes.put(path, key, DIGEST, _settled(key))
    Path(path).write_bytes(b"bbbb")
    os.utime(path, ns=(key[1], key[1]))  # `touch -d`: same size and mtime; ctime still moves
    assert hashes.get(path, skip_cache.stat_key(os.stat(path))) is None


def test_racily_clean_files_are_never_cached(tmp_path: Path) -> None:
    path, key = _file(tmp_path)
    hashes = skip_cache.HashCache(str(tmp_path / "c"))
    hashes.put(path, key, DIGEST, max(key[1], key[2]) + skip_cache.RACY_NS - 1)
    hashes.save()
    assert hashes.get(path, key) is None
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    ("mtime_ns", "ctime_ns", "hashed_at_ns", "racy"),
    [(10**18, 10**18 + 5, 10**18 + 5 + skip_cache.RACY_NS, False), (10**18 + 1, 10**18, 10**18 + skip_cache.RACY_NS, True),
     (10**18, 10**18, 10**18 + skip_cache.RACY_NS + 1, True),  # whole-second stamps: a coarse filesystem, 2 s
     (10**18, 10**18, 10**18 + skip_cache.COARSE_RACY_NS, False)],
)  # fmt: skip
def test_is_racy(mtime_ns: int, ctime_ns: int, hashed_at_ns: int, racy: bool) -> None:
    assert skip_cache.is_racy([1, mtime_ns, ctime_ns, 2, 3], hashed_at_ns) is racy


def test_corrupt_or_foreign_cache_files_are_misses(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    directory.mkdir()
    (directory / skip_cache.HASHES_FILE).write_text("{not json")
    assert skip_cache.HashCache(str(directory)).get("/x", [1, 2, 3, 4, 5]) is None
    (directory / skip_cache.HASHES_FILE).write_text(
        json.dumps({"/a": [1, 2, 3, 4, 5, DIGEST], "/b": "str", "/c": [1, 2, 3, 4, 5, "short"], "/d": [1, 2, 3, 4, 5]})
    )
    hashes = skip_cache.HashCache(str(directory))
    assert [hashes.get(p, [1, 2, 3, 4, 5]) for p in ("/a", "/b", "/c", "/d")] == [DIGEST, None, None, None]
    (directory / skip_cache.HASHES_FILE).write_text("[1, 2]")
    assert skip_cache.HashCache(str(directory)).get("/a", [1, 2, 3, 4, 5]) is None


def test_the_oldest_entries_go_beyond_the_limit(tmp_path: Path) -> None:
    hashes = skip_cache.HashCache(str(tmp_path / "c"))
    hashes.limit = 2
    key = [1, 10**18, 10**18 + 1, 2, 3]
    for name in ("/a", "/b", "/c"):
        hashes.put(name, key, DIGEST, 2 * 10**18)
    hashes.put("/a", key, DIGEST, 2 * 10**18)  # re-inserted: now the newest
    hashes.save()
    assert list(json.loads((tmp_path / "c" / skip_cache.HASHES_FILE).read_text())) == ["/c", "/a"]


def test_no_directory_means_no_cache(tmp_path: Path) -> None:
    for store in (skip_cache.HashCache(None), skip_cache.ConfigCache(None), skip_cache.PinCache(None, "repo")):
        assert store.path is None
    hashes = skip_cache.HashCache(None)
    hashes.put("/a", [1, 2, 3, 4, 5], DIGEST, 10**19)
    hashes.save()
    assert hashes.get("/a", [1, 2, 3, 4, 5]) is None
    configs = skip_cache.ConfigCache(None)
    configs.put("m", DIGEST, "", "python", ["model.py"])
    assert configs.get("m", DIGEST) is None


def test_an_unwritable_cache_directory_is_silently_skipped(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    hashes = skip_cache.HashCache(str(blocker / "c"))
    hashes.put("/a", [1, 10**18, 10**18, 2, 3], DIGEST, 2 * 10**18)
    hashes.save()  # no exception
    assert blocker.read_text() == "not a directory"


def test_pins_are_per_repository_and_need_both_etag_and_last_modified(tmp_path: Path) -> None:
    doc = {"schema": "model-sync.manifest/v2", "version": 3}
    pins = skip_cache.PinCache(str(tmp_path), "http://s3|us-east-1|models|")
    pins.put("m", "etag1", 1700000000, 3, "pin text", doc)
    pins.put("nometa", "etag1", None, 3, "pin text", doc)  # without LastModified nothing is cached
    pins.put("noetag", None, 1700000000, 3, "pin text", doc)
    pins.save()
    name = hashlib.sha256(b"http://s3|us-east-1|models|").hexdigest()[:32] + ".json"
    assert [p.name for p in (tmp_path / skip_cache.PINS_DIR).iterdir()] == [name]
    again = skip_cache.PinCache(str(tmp_path), "http://s3|us-east-1|models|")
    entry = again.get("m", "etag1", 1700000000)
    assert entry is not None
    assert (entry["version"], entry["pin_text"], entry["manifest"]) == (3, "pin text", doc)
    assert again.get("m", "etag1", 1700000001) is None  # same bytes, rewritten (a recreated bucket)
    assert again.get("m", "etag2", 1700000000) is None
    assert again.get("m", None, 1700000000) is None
    assert again.get("nometa", "etag1", None) is None
    assert again.get("noetag", None, 1700000000) is None
    assert skip_cache.PinCache(str(tmp_path), "http://s3|us-east-1|other|").get("m", "etag1", 1700000000) is None


def test_config_facts_and_pin_texts_round_trip(tmp_path: Path) -> None:
    configs = skip_cache.ConfigCache(str(tmp_path))
    configs.put("m", DIGEST, "", "python", ["model.py"])
    configs.put_pinned("m", DIGEST, 1, "pin 1")
    configs.save()
    again = skip_cache.ConfigCache(str(tmp_path))
    assert again.get("m", DIGEST) == {
        "platform": "",
        "backend": "python",
        "required": ["model.py"],
        "pinned": {"1": "pin 1"},
    }
    assert again.pinned("m", DIGEST, 1) == "pin 1"
    assert again.pinned("m", DIGEST, 2) is None
    assert again.get("other", DIGEST) is None  # the model name is part of the key
    assert again.get("m", "b" * 64) is None
    (key,) = json.loads((tmp_path / skip_cache.CONFIGS_FILE).read_text())
    assert key == f"{skip_cache.parser_fingerprint()}|m|{DIGEST}"


def test_a_re_parse_keeps_the_pin_texts_and_pin_texts_need_facts(tmp_path: Path) -> None:
    """(Eviction of the oldest pin texts: test_push_cache.py.)"""
    configs = skip_cache.ConfigCache(str(tmp_path))
    configs.put("m", DIGEST, "pytorch_libtorch", "", ["model.pt"])
    configs.put_pinned("m", DIGEST, 3, "pin 3")
    configs.put("m", DIGEST, "pytorch_libtorch", "", ["model.pt"])  # re-parsed (same bytes): pin texts survive
    assert configs.pinned("m", DIGEST, 3) == "pin 3"
    configs.put_pinned("unknown", DIGEST, 1, "x")  # no facts for it: nothing to attach to
    assert configs.pinned("unknown", DIGEST, 1) is None
    configs.save()
    assert list(json.loads((tmp_path / skip_cache.CONFIGS_FILE).read_text()).values()) == [
        {"platform": "pytorch_libtorch", "backend": "", "required": ["model.pt"],
         "pinned": {"3": "pin 3"}}]  # fmt: skip


def test_a_malformed_or_older_parser_entry_is_a_miss(tmp_path: Path) -> None:
    fingerprint = skip_cache.parser_fingerprint()
    good = {"platform": "", "backend": "python", "required": ["model.py"], "pinned": {}}
    (tmp_path / skip_cache.CONFIGS_FILE).write_text(json.dumps({
        f"{fingerprint}|good|{DIGEST}": good,
        f"0.0.0/0/0000000000000000|m|{DIGEST}": good,  # written by another parser version
        f"{fingerprint}|req|{DIGEST}": {**good, "required": [1]},
        f"{fingerprint}|pinned|{DIGEST}": {**good, "pinned": []},
        f"{fingerprint}|platform|{DIGEST}": {**good, "platform": None},
    }))  # fmt: skip
    configs = skip_cache.ConfigCache(str(tmp_path))
    assert [configs.get(m, DIGEST) is not None for m in ("good", "m", "req", "pinned", "platform")] == [
        True,
        False,
        False,
        False,
        False,
    ]


def test_the_parser_fingerprint_names_versions_and_a_digest() -> None:
    import google.protobuf

    from model_sync import __version__

    assert re.fullmatch(
        rf"{re.escape(__version__)}/{re.escape(google.protobuf.__version__)}/[0-9a-f]{{16}}",
        skip_cache.parser_fingerprint(),
    )
    assert skip_cache.parser_fingerprint() == skip_cache.parser_fingerprint()


def test_the_parser_fingerprint_reads_the_modules_that_hold_the_rules() -> None:
    """The fingerprint hashes the files whose rules decide a parse; a moved module must not turn
    it into a constant that never misses."""
    from model_sync.contract import layout
    from model_sync.triton_model import model_config

    assert sorted(os.path.realpath(p) for p in skip_cache.RULE_FILES) == sorted(
        os.path.realpath(m.__file__) for m in (model_config, layout)
    )
