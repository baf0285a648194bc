"""The local side of the agent: the repository root Triton polls and the staging area beside it.
The whole swap is here: lock the staging area, stage a version (download into staging, verify,
rename to the build), place it (one rename in, then the local pin flipped atomically), pin back,
remove a model, prune; every step atomic from Triton's view
(docs/architecture.md#the-agents-pass, steps 2, 3 and 6)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import random
import shutil
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from model_sync.agent.exceptions import AgentError
from model_sync.contract import layout
from model_sync.errors import Abandoned

log = logging.getLogger("model_sync.agent")


class PodDisk:
    """`repository`: the root Triton polls; `staging`: scratch on the same filesystem, outside it."""

    def __init__(self, repository: Path, staging: Path, stop: threading.Event) -> None:
        self.repository = repository
        self.staging = staging
        self.stop = stop
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Create the directories, take the single-agent lock, discard leftovers of a killed run."""
        self.repository.mkdir(parents=True, exist_ok=True)
        self.staging.mkdir(parents=True, exist_ok=True)
        if os.stat(self.repository).st_dev != os.stat(self.staging).st_dev:
            raise AgentError(
                f"staging: {str(self.staging)!r} is on another filesystem than the repository "
                f"{str(self.repository)!r}; allowed: the same filesystem (renames must be atomic)"
            )
        self._lock_fd = os.open(self.staging, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise AgentError(
                f"staging: {str(self.staging)!r} is locked by another agent; allowed: one agent per repository"
            ) from None
        leftovers = list(self.staging.iterdir())
        for entry in leftovers:
            remove(entry)
        if leftovers:
            log.warning(
                "discarded %d leftover staging entries from an interrupted run: %s",
                len(leftovers),
                ", ".join(sorted(p.name for p in leftovers)),
            )

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def in_place(self) -> dict[str, str]:
        """model -> its local pin text, for every model directory with a config.pbtxt and a valid name."""
        found = {}
        for model_dir in sorted(p for p in self.repository.iterdir() if p.is_dir()):
            text = read_local_pin(model_dir)
            if text is not None:
                with contextlib.suppress(layout.LayoutError):
                    layout.check_model_name(model_dir.name)
                    found[model_dir.name] = text
        return found

    def pin(self, name: str) -> str | None:
        """The local config.pbtxt of `name` (what Triton is told to serve), None without one."""
        return read_local_pin(self.repository / name)

    def versions(self, name: str) -> list[int]:
        return local_versions(self.repository / name)

    # -- the swap --

    def new_build(self, name: str) -> Path:
        """An empty path in staging where the pass assembles `name`'s verified versions."""
        build = self.staging / f"{name}.pin.{os.getpid()}"
        remove(build)
        return build

    def stage(
        self, name: str, version: int, files: Iterable[str], download: Callable[[str, Path], int], target: Path
    ) -> int:
        """Download every file of `name`/`version` (`download(rel, dest)` verifies each one
        against its manifest) into a work directory in staging, byte-compile its python files,
        then rename it to `target`. Returns the bytes placed; nothing is left in staging either way."""
        work = self.staging / f"{name}.{version}.{os.getpid()}.{random.randrange(1 << 30)}"  # noqa: S311 - unique name
        work.mkdir(parents=True)
        try:
            total = 0
            for rel in files:
                if self.stop.is_set():
                    raise Abandoned()
                total += download(rel, work / rel)
            precompile_python(work)
            target.parent.mkdir(parents=True, exist_ok=True)
            fsync_dir(work)
            os.rename(work, target)  # atomic: Triton sees no version dir, or the complete one
            fsync_dir(target.parent)
            return total
        finally:
            if work.exists():
                remove(work)

    def place(self, name: str, pin_text: str, build: Path) -> None:
        """Move the versions staged in `build` into the repository and pin them locally."""
        model_dir = self.repository / name
        if read_local_pin(model_dir) is None:
            # A new model appears whole: config + verified version directories in one rename.
            build.mkdir(parents=True, exist_ok=True)
            remove(model_dir)  # a directory without config.pbtxt (nothing Triton could load)
            (build / layout.CONFIG_FILE).write_bytes(pin_text.encode())
            os.rename(build, model_dir)
            fsync_dir(self.repository)
            return
        versions = sorted(build.iterdir()) if build.is_dir() else []
        for version_dir in versions:  # invisible to Triton until the config pins them
            os.rename(version_dir, model_dir / version_dir.name)
        if versions:
            fsync_dir(model_dir)
        self.flip(name, pin_text)

    def flip(self, name: str, pin_text: str) -> None:
        """Rewrite `name`'s local config.pbtxt atomically (a temporary file in staging, renamed over it)."""
        atomic_write(self.repository / name / layout.CONFIG_FILE, pin_text.encode(), self.staging)

    def remove_model(self, name: str) -> None:
        """Move repository/<name> into staging (one rename: Triton sees the model or nothing), then delete it."""
        trash = self.staging / f"trash.{name}.{os.getpid()}.{random.randrange(1 << 30)}"  # noqa: S311 - unique name
        with contextlib.suppress(FileNotFoundError):
            os.rename(self.repository / name, trash)
            fsync_dir(self.repository)
        remove(trash)

    def prune(self, name: str, keep: set[int], keep_versions: int) -> None:
        """Delete `name`'s local versions outside `keep`, except the `keep_versions` newest of them."""
        model_dir = self.repository / name
        others = [v for v in local_versions(model_dir) if v not in keep]
        for v in others[: max(0, len(others) - keep_versions)]:
            # Unpinned directories are invisible to Triton; move out first so deletion is atomic from its view.
            trash = self.staging / f"trash.{name}.{v}.{os.getpid()}"
            with contextlib.suppress(OSError):
                os.rename(model_dir / str(v), trash)
                remove(trash)
                log.info("pruned %s version %d (unpinned)", name, v)

    def discard(self, path: Path) -> None:
        """Delete `path` (a build or work directory in staging), whatever it holds."""
        remove(path)

    def clear_staging(self) -> None:
        remove_children(self.staging)


def local_versions(model_dir: Path) -> list[int]:
    if not model_dir.is_dir():
        return []
    return sorted(v for p in model_dir.iterdir() if p.is_dir() and (v := layout.version_from_dir(p.name)) is not None)


def read_local_pin(model_dir: Path) -> str | None:
    try:
        return (model_dir / layout.CONFIG_FILE).read_text()
    except FileNotFoundError:
        return None


def atomic_write(target: Path, data: bytes, scratch: Path) -> None:
    """Write `data` to a temp file in `scratch` (same filesystem), fsync, rename over `target`."""
    scratch.mkdir(parents=True, exist_ok=True)
    tmp = scratch / f".{target.name}.{os.getpid()}.{random.randrange(1 << 30)}.tmp"  # noqa: S311 - a unique name, not a secret
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    fsync_dir(target.parent)


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def precompile_python(version_dir: Path) -> None:
    """Write __pycache__ for python-backend files BEFORE the version becomes visible.

    Otherwise the python backend stub writes it on first load, Triton's poller sees the model
    directory change and loads the model a second time (measured locally). Checked-hash pycs stay
    valid after the rename; a stub on another Python minor version simply writes its own.
    In Kubernetes the Triton container mounts the model volume read-only, so nothing is written.
    Written beside the file, where the stub's isolated interpreter looks, even when this process
    keeps its own bytecode elsewhere (PYTHONPYCACHEPREFIX, which py_compile would otherwise follow).
    """
    import py_compile
    import sys

    for src in version_dir.rglob("*.py"):
        cfile = src.parent / "__pycache__" / f"{src.stem}.{sys.implementation.cache_tag}.pyc"
        with contextlib.suppress(py_compile.PyCompileError, OSError):
            py_compile.compile(
                str(src), str(cfile), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
            )


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def remove_children(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        for entry in directory.iterdir():
            remove(entry)
