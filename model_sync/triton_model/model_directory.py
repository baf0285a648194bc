"""A local Triton model directory, as `export` writes it and `push` reads it:

    <dir>/config.pbtxt       ModelConfig text (name empty or equal to the model name)
    <dir>/<N>/...            exactly one numeric version directory: the files to publish
    <dir>/export.json        optional: what `export` recorded (format, method, torch and TorchScript
                             format versions, operators, target; a .pt2's device and GPU
                             architectures; an ONNX model's opset and IR version); copied into the manifest and
                             checked against the target's Triton image (compat.py), never uploaded

A repository directory (no config.pbtxt, subdirectories that have one) holds several models.
Symlinks, sockets and other non-regular files are refused, dot-named ones too; `__pycache__`, dot-named
regular files and dot-directories are skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Protocol

from model_sync import errors
from model_sync.contract import layout
from model_sync.triton_model import formats

EXPORT_META = "export.json"


class ConfigCache(Protocol):
    """What load() keeps of a parsed config.pbtxt between runs, keyed by the model and the bytes'
    sha256, so that it can skip the parse: push's config cache (model_sync/push/skip_cache.py)."""

    def get(self, model: str, digest: str) -> dict[str, Any] | None: ...

    def put(self, model: str, digest: str, platform: str, backend: str, required: list[str]) -> None: ...

    def pinned(self, model: str, digest: str, version: int) -> str | None: ...

    def put_pinned(self, model: str, digest: str, version: int, text: str) -> None: ...


@dataclass(frozen=True)
class LocalFile:
    rel: str  # path relative to the version directory, '/'-separated
    path: str  # absolute local path
    size: int
    mtime_ns: int
    ctime_ns: int = 0
    ino: int = 0
    dev: int = 0

    @property
    def stat_key(self) -> list[int]:
        """What the local hash cache (model_sync/push/skip_cache.py) and the post-upload re-stat compare."""
        return [self.size, self.mtime_ns, self.ctime_ns, self.ino, self.dev]


@dataclass
class LocalModel:
    name: str
    dir: str
    config: bytes  # config.pbtxt as read (parsed lazily: `cfg`)
    config_digest: str  # its sha256 (the config cache key)
    platform: str
    backend: str
    version_dir: str
    files: dict[str, LocalFile]
    export_meta: dict[str, Any]
    hashes: dict[str, str] | None = None
    configs: ConfigCache | None = field(default=None, repr=False)
    _cfg: Any = field(default=None, repr=False)

    @property
    def cfg(self) -> Any:
        """The ModelConfig, parsed on first use: load() skips the parse (and the protobuf import)
        when the config cache knows these bytes."""
        if self._cfg is None:
            self._cfg = _parse_config(self.config, os.path.join(self.dir, layout.CONFIG_FILE), self.name)
            _check_io_types(self._cfg, self.export_meta, os.path.join(self.dir, layout.CONFIG_FILE))
        return self._cfg

    def pinned_text(self, version: int) -> str:
        """The pin text for version N (model_config.pinned_text), from the config cache when it has it."""
        cached = self.configs.pinned(self.name, self.config_digest, version) if self.configs else None
        if cached is not None:
            return cached
        from model_sync.triton_model import model_config

        text = model_config.pinned_text(self.cfg, version, self.name)
        if self.configs:
            self.configs.put_pinned(self.name, self.config_digest, version, text)
        return text


def _check_io_types(cfg: Any, meta: dict[str, Any], config_path: str) -> None:
    """The inputs' data types against export.json's and the warm-up's (model_config.check_io_types): exit 2."""
    from model_sync.triton_model import model_config

    try:
        model_config.check_io_types(cfg, meta.get("example_dtypes"), config_path)
    except model_config.ConfigPbtxtError as e:
        raise errors.usage(str(e)) from None


def _parse_config(data: bytes, config_path: str, model: str) -> Any:
    from model_sync.triton_model import model_config

    try:
        cfg = model_config.parse(data, config_path)
        model_config.check(cfg, config_path, None if (cfg.name == model or not cfg.name) else model)
    except model_config.ConfigPbtxtError as e:
        raise errors.usage(str(e)) from None
    return cfg


def _scan_version_dir(root: str) -> dict[str, LocalFile]:
    """Every regular file under `root` by its '/'-separated relative path. Dot-named regular files,
    dot-directories and __pycache__ are skipped; every symlink (dot-named too) and every other
    non-regular entry is refused, and so is a directory that cannot be read. One scandir per
    directory and one lstat per file (os.walk + lstat + relpath cost twice as much: 50 models)."""
    import stat as _stat

    files: dict[str, LocalFile] = {}
    pending = [(root, "")]
    while pending:
        directory, prefix = pending.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError as e:
            raise errors.usage(
                f"model directory: {directory} cannot be read ({e.strerror or e}); allowed: a readable directory"
            ) from None
        for entry in entries:
            name, full = entry.name, entry.path
            if entry.is_symlink():
                try:
                    to_directory = entry.is_dir()  # follows: raises on a loop or an unreadable target
                except OSError:
                    to_directory = False
                if to_directory:
                    raise errors.usage(
                        f"model directory: {full} is a symlink; allowed: regular files and directories only"
                    )
                raise errors.usage(  # dot-named too: what it points at would decide what Triton loads
                    f"model directory: {full} is not a regular file; allowed: regular files only (no symlinks)"
                )
            if entry.is_dir(follow_symlinks=False):
                if not (name.startswith(".") or name == "__pycache__"):
                    pending.append((full, f"{prefix}{name}/"))
                continue
            st = entry.stat(follow_symlinks=False)
            if not _stat.S_ISREG(st.st_mode):
                raise errors.usage(
                    f"model directory: {full} is not a regular file; allowed: regular files only (no symlinks)"
                )
            if name.startswith("."):
                continue
            rel = prefix + name
            try:
                layout.check_file_path(rel)
            except layout.LayoutError as e:
                raise errors.usage(f"model directory {root}: {e}") from None
            files[rel] = LocalFile(rel, full, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    return files


def check_export_meta(meta: Any, where: str) -> None:
    """The export.json fields push copies into the manifest and version alignment relies on."""
    if not isinstance(meta, dict):
        raise errors.usage(f"{where}: {type(meta).__name__}; allowed: the JSON object `model-sync export` writes")
    for key, ok, allowed in (
        ("torch_version", lambda v: isinstance(v, str) and bool(v), "a torch version string such as '2.13.0+cpu'"),
        ("torchscript_format_version", lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
        ("format", lambda v: v in formats.FORMATS, formats.allowed()),
        ("method", lambda v: v in ("trace", "script", "export"), "'trace', 'script' or 'export'"),
        ("target", lambda v: v in ("cloud", "local"), "'cloud' or 'local'"),
        ("device", lambda v: v in ("cpu", "cuda"), "'cpu' or 'cuda'"),
        (
            "gpu_architectures",
            lambda v: isinstance(v, list) and all(isinstance(a, str) and a.startswith("sm_") for a in v),
            "a list of CUDA architectures such as ['sm_90']",
        ),
        ("onnx_opset", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a positive integer"),
        ("onnx_ir_version", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a positive integer"),
        (
            "operators",
            lambda v: isinstance(v, list) and all(isinstance(o, str) and o for o in v),
            "a list of operator names",
        ),
    ):
        if meta.get(key) is not None and not ok(meta[key]):
            raise errors.usage(f"{where} {key}: {meta[key]!r}; allowed: {allowed} (or absent)")


def load(path: str, name: str | None = None, configs: ConfigCache | None = None) -> LocalModel:
    """Validate and scan one model directory. --name overrides the directory name. With `configs`
    (cache.ConfigCache), a config.pbtxt whose bytes were parsed and checked before by the same
    parser is not parsed again (its platform, backend and required files come from the cache)."""
    if not os.path.isdir(path):
        raise errors.usage(
            f"model directory: {path!r} is not a directory; allowed: a Triton model directory (config.pbtxt + one <N>/)"
        )
    path = os.path.abspath(path)
    model = name or os.path.basename(path.rstrip("/"))
    try:
        layout.check_model_name(model)
    except layout.LayoutError as e:
        raise errors.usage(f"{e} (from {'--name' if name else 'the directory name'})") from None
    config_path = os.path.join(path, layout.CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise errors.usage(
            f"model directory: {path} has no config.pbtxt; allowed: a Triton model directory (config.pbtxt + one <N>/)"
        )
    if os.path.islink(config_path) and not _inside(os.path.realpath(config_path), os.path.realpath(path)):
        raise errors.usage(
            f"model directory: {config_path} is a symlink to {os.path.realpath(config_path)}, outside the model "
            f"directory; allowed: a config.pbtxt inside {path}"
        )
    try:
        with open(config_path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise errors.usage(f"{config_path}: cannot read ({e.strerror}); allowed: a readable config.pbtxt") from None
    digest = hashlib.sha256(data).hexdigest()
    facts = configs.get(model, digest) if configs else None
    cfg = None
    if facts is None:
        from model_sync.triton_model import model_config

        cfg = _parse_config(data, config_path, model)
        facts = {"platform": cfg.platform, "backend": cfg.backend, "required": list(model_config.required_files(cfg))}
        if configs:
            configs.put(model, digest, cfg.platform, cfg.backend, facts["required"])
    versions = sorted(
        e for e in os.listdir(path) if layout.version_from_dir(e) is not None and os.path.isdir(os.path.join(path, e))
    )
    if len(versions) != 1:
        raise errors.usage(
            f"model directory: {path} has version directories {versions}; allowed: exactly one numeric version "
            "directory to publish"
        )
    version_dir = os.path.join(path, versions[0])
    if os.path.islink(version_dir):  # it would publish whatever it points at
        raise errors.usage(
            f"model directory: {version_dir} is a symlink to {os.path.realpath(version_dir)}; allowed: a version "
            "directory, not a symlink"
        )
    files = _scan_version_dir(version_dir)
    for required in facts["required"]:
        if required not in files:
            kind = f"backend {facts['backend']!r}" if facts["backend"] else f"platform {facts['platform']!r}"
            raise errors.usage(
                f"model directory: {version_dir} lacks {required}; allowed: a version directory with every file "
                f"{kind} needs"
            )
    meta: dict[str, Any] = {}
    meta_path = os.path.join(path, EXPORT_META)
    if os.path.isfile(meta_path):
        try:
            with open(meta_path) as f:
                meta = json.load(f)
        except ValueError as e:
            raise errors.usage(
                f"{meta_path}: not JSON ({e}); allowed: the export.json `model-sync export` writes"
            ) from None
        check_export_meta(meta, meta_path)
    if cfg is not None:  # parsed here (else on first use of LocalModel.cfg, before any write)
        _check_io_types(cfg, meta, config_path)
    return LocalModel(
        model,
        path,
        data,
        digest,
        facts["platform"],
        facts["backend"],
        version_dir,
        files,
        meta,
        configs=configs,
        _cfg=cfg,
    )


def _inside(target: str, directory: str) -> bool:
    return target.startswith(directory.rstrip(os.sep) + os.sep)


def discover(path: str, name: str | None = None, configs: ConfigCache | None = None) -> list[LocalModel]:
    """One model directory, or a repository directory of model directories."""
    if os.path.isdir(path) and not os.path.isfile(os.path.join(path, layout.CONFIG_FILE)):
        subdirs = sorted(d for d in os.listdir(path) if os.path.isfile(os.path.join(path, d, layout.CONFIG_FILE)))
        for d in subdirs:
            if os.path.islink(os.path.join(path, d)):
                raise errors.usage(
                    f"repository directory: {os.path.join(path, d)} is a symlink to "
                    f"{os.path.realpath(os.path.join(path, d))}; allowed: model directories, not symlinks"
                )
        if subdirs:
            if name:
                raise errors.usage(
                    f"--name: {name!r} with a repository directory of {len(subdirs)} models; allowed: --name "
                    "only with one model directory"
                )
            return [load(os.path.join(path, d), configs=configs) for d in subdirs]
    return [load(path, name, configs)]
