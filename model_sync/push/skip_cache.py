"""Local caches that let `push` SKIP work. Never a source of truth: a stale or corrupt entry can
only cause a cache miss (the work is redone), never a wrong publish or a wrong pin.

    <dir>/hashes.json              {abs path: [size, mtime_ns, ctime_ns, inode, device, sha256]}
                                   sha256 of a local file, reused while all five stat fields are
                                   unchanged (git's index uses the same test). ctime cannot be set
                                   from user space, so `touch -d` + same-size rewrites still miss.
    <dir>/configs.json             {"<fingerprint>|<model>|<sha256 of config.pbtxt>": {"platform", "backend",
                                   "required": [...], "pinned": {"N": text}}} what parsing and
                                   checking a config.pbtxt established, and the pin text written for
                                   version N. Parsing is a pure function of the bytes, the model name
                                   and the code that parses (fingerprint: model-sync's version, the
                                   protobuf version and a digest of model_config.py), so an entry
                                   spares an unchanged config the protobuf import and parse (~30 ms
                                   of a 50-model no-op push).
    <dir>/pins/<sha256(repo)>.json {model: {"etag": pin ETag, "modified": LastModified, "version":
                                   N, "pin_text": ..., "manifest": {...}}} the pinned manifest, keyed
                                   by the ETag AND LastModified (whole epoch seconds) of
                                   repository/<model>/config.pbtxt as ListObjectsV2 / GetObject /
                                   HeadObject return them. Either differing is a miss. The ETag alone
                                   is not enough: on SSE-S3 / unencrypted buckets and S3-compatible
                                   servers it is the MD5 of the content, so byte-identical pin text in
                                   a reset or recreated bucket (whose manifest N may differ) has the
                                   same ETag; the rewrite gives it a new LastModified. (VersionId is
                                   not used: ListObjectsV2 does not return it.) Manifests are
                                   create-only and never overwritten, so (pin object -> version N ->
                                   manifest N) cannot change while both keys do not.

Directory: $MODEL_SYNC_CACHE_DIR, else $XDG_CACHE_HOME/model-sync, else ~/.cache/model-sync.
`MODEL_SYNC_CACHE=off` (or `push --no-cache`) disables both. Files are written atomically
(temporary file + rename); concurrent processes race benignly (last writer wins, every entry is
self-validating). Racily-clean files (modified within RACY_NS of hashing, or on a filesystem with
whole-second timestamps within 2 s) are never cached: a same-size rewrite inside the same
timestamp tick would otherwise be invisible.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from typing import Any

from model_sync import __version__

HASHES_FILE = "hashes.json"
CONFIGS_FILE = "configs.json"
MAX_CONFIG_ENTRIES = 20_000
MAX_PINNED_TEXTS = 8  # pin texts kept per config (the newest versions): the file is read by every push
PINS_DIR = "pins"
MAX_HASH_ENTRIES = 200_000
RACY_NS = 100_000_000  # 100 ms: well above the coarse-clock tick that stamps mtimes (1-10 ms)
COARSE_RACY_NS = 2_000_000_000  # filesystems with 1-2 s timestamp resolution (FAT, some NFS)


def cache_dir() -> str | None:
    if os.environ.get("MODEL_SYNC_CACHE", "").lower() in ("off", "0", "false", "no"):
        return None
    explicit = os.environ.get("MODEL_SYNC_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "model-sync")


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_json(path: str, doc: Any) -> None:
    """Atomic replace; a cache that cannot be written is silently skipped (it is only a cache)."""
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        import tempfile

        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, separators=(",", ":"))
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def is_racy(key: list[int], hashed_at_ns: int) -> bool:
    """True when the file changed too recently for its stat fields to prove the content.
    `key` is stat_key(); hashed_at_ns the wall-clock time (time.time_ns) the read started."""
    mtime_ns, ctime_ns = key[1], key[2]
    coarse = mtime_ns % 1_000_000_000 == 0 and ctime_ns % 1_000_000_000 == 0
    return hashed_at_ns - max(mtime_ns, ctime_ns) < (COARSE_RACY_NS if coarse else RACY_NS)


class _Store:
    """One cache file: a JSON object of entries, loaded once (entries of another type dropped),
    rewritten atomically by save() when something changed; beyond `limit` entries the oldest go
    (dict order is insertion order: re-insert to refresh)."""

    def __init__(self, path: str | None, entry_type: type, limit: int | None = None) -> None:
        self.path = path
        self.limit = limit
        self._lock = threading.Lock()
        self._entries: dict[str, Any] = {}
        self._dirty = False
        if self.path:
            doc = _read_json(self.path)
            if isinstance(doc, dict):
                self._entries = {k: v for k, v in doc.items() if isinstance(v, entry_type)}

    def save(self) -> None:
        if self.path is None or not self._dirty:
            return
        with self._lock:
            excess = len(self._entries) - self.limit if self.limit is not None else 0
            for key in list(self._entries)[: max(excess, 0)]:
                del self._entries[key]
            doc = dict(self._entries)
            self._dirty = False
        _write_json(self.path, doc)


class HashCache(_Store):
    """sha256 of local files keyed by (size, mtime_ns, ctime_ns, inode, device)."""

    def __init__(self, directory: str | None) -> None:
        super().__init__(os.path.join(directory, HASHES_FILE) if directory else None, list, MAX_HASH_ENTRIES)

    def get(self, path: str, key: list[int]) -> str | None:
        entry = self._entries.get(path)
        if not isinstance(entry, list) or len(entry) != 6 or entry[:5] != key:
            return None
        digest = entry[5]
        return digest if isinstance(digest, str) and len(digest) == 64 else None

    def put(self, path: str, key: list[int], digest: str, hashed_at_ns: int) -> None:
        if self.path is None or is_racy(key, hashed_at_ns):
            return
        with self._lock:
            self._entries.pop(path, None)  # re-insert: dict order is the eviction order
            self._entries[path] = [*key, digest]
            self._dirty = True


class PinCache(_Store):
    """Pinned manifests of one repository (endpoint + bucket + prefix), keyed by the pin's ETag + LastModified."""

    def __init__(self, directory: str | None, repository_id: str) -> None:
        name = hashlib.sha256(repository_id.encode()).hexdigest()[:32] + ".json"
        super().__init__(os.path.join(directory, PINS_DIR, name) if directory else None, dict)

    def get(self, model: str, etag: str | None, modified: int | None) -> dict[str, Any] | None:
        """{"version", "pin_text", "manifest"} when the cached entry is for exactly this ETag and LastModified."""
        entry = self._entries.get(model)
        if (
            not etag
            or modified is None
            or entry is None
            or entry.get("etag") != etag
            or entry.get("modified") != modified
        ):
            return None
        return entry

    def put(
        self,
        model: str,
        etag: str | None,
        modified: int | None,
        version: int,
        pin_text: str,
        manifest_doc: dict[str, Any],
    ) -> None:
        if self.path is None or not etag or modified is None:
            return
        with self._lock:
            self._entries[model] = {
                "etag": etag,
                "modified": modified,
                "version": version,
                "pin_text": pin_text,
                "manifest": manifest_doc,
                "at": int(time.time()),
            }
            self._dirty = True


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # model_sync/
# The modules whose rules decide what parsing a config.pbtxt gives: a change to either is a miss.
RULE_FILES = (
    os.path.join(_PACKAGE, "triton_model", "model_config.py"),
    os.path.join(_PACKAGE, "contract", "layout.py"),
)


def parser_fingerprint() -> str:
    """What the outcome of parsing a config.pbtxt depends on besides its bytes: model-sync's version,
    protobuf's (text_format output), and the bytes of the rules (model_config.py, layout.py) and
    of the schema (tritonclient's model_config_pb2.py): any change is a miss for every entry."""
    import sys

    import google.protobuf  # the package's __init__ only: not text_format

    # located, not imported (as model_config._load_pb2 loads it): the first sys.path entry that has it
    relative = os.path.join("tritonclient", "grpc", "model_config_pb2.py")
    schema = next((os.path.join(p, relative) for p in sys.path if os.path.isfile(os.path.join(p or ".", relative))), "")
    digest = hashlib.sha256()
    for path in (*RULE_FILES, schema):
        try:
            with open(path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
        except OSError:
            digest.update(b"missing:" + path.encode())
    return f"{__version__}/{google.protobuf.__version__}/{digest.hexdigest()[:16]}"


class ConfigCache(_Store):
    """Parsed facts of config.pbtxt files, keyed by parser fingerprint + model name + sha256 of the bytes."""

    def __init__(self, directory: str | None) -> None:
        super().__init__(os.path.join(directory, CONFIGS_FILE) if directory else None, dict, MAX_CONFIG_ENTRIES)
        self._fingerprint: str | None = None

    def _key(self, model: str, digest: str) -> str:
        if self._fingerprint is None:
            self._fingerprint = parser_fingerprint()
        return f"{self._fingerprint}|{model}|{digest}"

    def get(self, model: str, digest: str) -> dict[str, Any] | None:
        """{"platform", "backend", "required"} for this config, or None (a malformed entry is a miss)."""
        if self.path is None:
            return None
        entry = self._entries.get(self._key(model, digest))
        if not (entry and isinstance(entry.get("platform"), str) and isinstance(entry.get("backend"), str)
                and isinstance(entry.get("required"), list)
                and all(isinstance(r, str) for r in entry["required"])
                and isinstance(entry.get("pinned", {}), dict)):  # fmt: skip
            return None
        return entry

    def put(self, model: str, digest: str, platform: str, backend: str, required: list[str]) -> None:
        if self.path is None:
            return
        with self._lock:
            key = self._key(model, digest)
            old = self._entries.pop(key, None) or {}
            self._entries[key] = {
                "platform": platform,
                "backend": backend,
                "required": list(required),
                "pinned": old.get("pinned", {}),
            }
            self._dirty = True

    def pinned(self, model: str, digest: str, version: int) -> str | None:
        entry = self.get(model, digest)
        text = entry["pinned"].get(str(version)) if entry else None
        return text if isinstance(text, str) else None

    def put_pinned(self, model: str, digest: str, version: int, text: str) -> None:
        if self.path is None:
            return
        with self._lock:
            entry = self._entries.get(self._key(model, digest))
            if entry is not None and isinstance(entry.get("pinned"), dict):
                pinned = {k: v for k, v in entry["pinned"].items() if k != str(version)}
                pinned[str(version)] = text
                entry["pinned"] = dict(list(pinned.items())[-MAX_PINNED_TEXTS:])
                self._dirty = True
