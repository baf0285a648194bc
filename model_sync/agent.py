"""The repository agent: keeps a replica's LOCAL Triton model repository in step with the pins
in its environment's bucket. Runs as the init container (`--once`) and as the sidecar.

One pass (`RepositoryAgent.sync_once`):
  1. read the pins cheaply: one ListObjectsV2 of the pin index (manifests/_pins/, one object
     per model, rewritten by every flip) shows which pins changed; only those are fetched (GET,
     If-None-Match). Every --full-resync seconds (and on the first pass) the full listing of
     repository/ compares every pin's ETag instead, catching a pin written without its index
     entry. Steady state: one request per pass plus a status PUT per heartbeat, whatever the
     number of versions or files (up to 1,000 models; `agent-pass` in bench/transfer/run.py).
  2. for a pin that changed: download every file of the pinned version listed in its manifest
     into a staging directory BESIDE the repository root (same filesystem, never inside it:
     Triton takes any directory in the root for a model) and verify sha256 + size of each file.
  3. once every changed pin is staged, commit them one after another in quick succession: move
     each version directory into place with one rename(2) (a new model is assembled whole,
     config + version, and renamed in at once) and rewrite the local config.pbtxt atomically
     (temp file in staging + rename) to the pin. Triton (poll mode on the local directory) sees
     them together and loads them concurrently (--model-load-thread-count), then swaps traffic.
  4. confirm through Triton's repository index (one request answers for every model) that the
     versions are READY, for up to one --interval; loads still in flight are confirmed by the
     next passes, which meanwhile place new pins (the status keeps being written every
     heartbeat). A version that fails to load has the previous version pinned back locally (the
     old version keeps serving), or, for a model with no previous version, the model moved out
     of the repository (a never-loading model must not hold the replica not-ready under
     --strict-readiness), and the failure is reported with Triton's reason. Versions adopted
     from the init container are confirmed the same way once Triton is live.
  5. run a smoke inference of every READY version on loopback (inputs of the declared
     shape/dtype from the pinned config, outputs checked against it) and record it per model.
  6. write what this replica has loaded / failed to status/<deployment>/<replica>.json.

Never exposed to Triton: an incomplete or corrupted version (only verified directories are
renamed in; a pin is only written after its version is in place). S3 unreachable: nothing
local changes, Triton keeps serving, the agent retries with exponential backoff + jitter. Access
denied (403, KMS) and NoSuchBucket are handled the same way; any other error of a pass is logged
on one line, recorded as last_error and retried with backoff: the sidecar never exits on its own.
SIGTERM: the current staging directory is abandoned (deleted), the replica's status object is
deleted (a departed pod leaves nothing stale for `verify`) and the agent exits 0.
Restart after a kill: the staging area is wiped at start; the repository only ever received
complete, verified directories, so nothing partial can be visible.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import random
import re
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_sync import errors, layout, manifest, transfer
from model_sync.s3 import NOT_MODIFIED, Repo, etag_of
from model_sync.s3errors import Kind, translate

log = logging.getLogger("model_sync.agent")

# The agent image's ENTRYPOINT (docker/agent.Dockerfile) and what the tests run: keep them equal.
AGENT_COMMAND = ("python", "-m", "model_sync", "agent")
STATUS_SCHEMA = "model-sync.replica-status/v1"
# Files of at least 16 MiB come down in 16 MiB ranges, 16 at a time (bench/transfer).
AGENT_TRANSFER = transfer.TransferSettings()

# Replica states written to status files and read by `verify`.
READY = "READY"
LOADING = "LOADING"
FAILED = "FAILED"
PLACED = "PLACED"  # on disk and pinned locally, Triton not asked (init container: Triton not started yet)
PENDING = "PENDING"  # pin seen, version not in place yet (download failed / S3 unreachable)


class AgentError(Exception):
    """Configuration or environment problem that stops the agent (one line)."""


class S3Unavailable(Exception):
    """The bucket could not be reached (connection refused, timeout, 5xx): keep serving, back off."""


class S3AccessDenied(S3Unavailable):
    """403 / credentials / KMS denied / NoSuchBucket: for serving, the same as unreachable."""


class PassError(Exception):
    """An unclassified error in one pass (ENOSPC, a bug...): logged, recorded, retried with backoff."""


class VersionRejected(Exception):
    """A pinned version that must not be placed: missing/corrupt files, bad manifest (one line)."""


class Abandoned(Exception):
    """Stop requested while staging a version."""


@dataclass(frozen=True)
class AgentSettings:
    """What one agent process does. Paths are local; `root` is the environment's bucket root.

    repository: the local Triton model repository root (Triton's --model-repository).
    staging: scratch area on the SAME filesystem as `repository` and not inside it
        (default: sibling `.<repository name>.staging`); wiped at start.
    deployment / replica: where this replica reports (status/<deployment>/<replica>.json).
    interval: seconds between passes (> 0). triton_url: Triton HTTP endpoint to confirm loads
        (None: place files only, e.g. the init container before Triton starts).
    ready_timeout: seconds to wait for a new version to become READY before pinning back; the
        status keeps being written every `heartbeat` while waiting, so it may exceed verify's
        staleness window.
    models: serve only these models (empty: every model pinned in the bucket).
    resync: seconds between full listings of repository/; between them a pass lists only the pin
        index (manifests/_pins/, one object per model) and re-reads the pins whose entry changed.
    heartbeat: seconds between status writes when nothing changed (verify's freshness window
        must be larger). backoff_max: cap (seconds) of the exponential backoff while S3 fails.
    keep_versions: how many unpinned version directories to keep per model for fast rollback.
    """

    root: layout.Root
    repository: Path
    staging: Path
    deployment: str
    replica: str
    env: str = "local"
    interval: float = 5.0
    triton_url: str | None = None
    ready_timeout: float = 120.0
    models: tuple[str, ...] = ()
    heartbeat: float = 30.0
    backoff_max: float = 60.0
    keep_versions: int = 2
    resync: float = 300.0  # seconds between full listings of repository/ (between them: the pin index)
    triton_headers: tuple[tuple[str, str], ...] = ()
    # ready_file: when set (sidecar), a file that exists exactly while this replica serves
    # every model it has in place: Triton is live and each model with a local version is
    # READY there. The pod's readiness probe checks it (components/triton_deployment.py),
    # because Triton 2.51's own /v2/health/ready (strict readiness) stays not-ready after
    # any failed load in poll mode, even once the agent has removed or rolled it back.
    ready_file: Path | None = None

    def __post_init__(self) -> None:
        layout.status_key(self.deployment, self.replica)  # validates both names (LayoutError)
        for name in self.models:
            layout.check_model_name(name)
        for fname in ("interval", "ready_timeout", "heartbeat", "backoff_max", "resync"):
            value = getattr(self, fname)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise AgentError(f"{fname}: {value!r}; allowed: a number of seconds > 0")
        if isinstance(self.keep_versions, bool) or not isinstance(self.keep_versions, int) or self.keep_versions < 0:
            raise AgentError(f"keep_versions: {self.keep_versions!r}; allowed: an integer >= 0")
        if self.triton_url is not None and not re.match(r"^https?://[^/\s]+$", self.triton_url):
            raise AgentError(f"triton_url: {self.triton_url!r}; allowed: http(s)://host:port without a path")
        repo, staging = self.repository.absolute(), self.staging.absolute()
        if staging == repo or repo in staging.parents:
            raise AgentError(f"staging: {str(self.staging)!r}; allowed: a directory outside the repository root {str(repo)!r} (Triton takes any directory inside it for a model)")
        if staging in repo.parents:
            raise AgentError(f"staging: {str(self.staging)!r}; allowed: a directory that does not contain the repository root {str(repo)!r} (it is wiped at start)")


def default_staging(repository: Path) -> Path:
    """`<parent>/.<name>.staging`: beside the repository root, hence (normally) the same filesystem."""
    repository = repository.absolute()
    return repository.parent / f".{repository.name}.staging"


def default_replica_id() -> str:
    """$POD_NAME, else the hostname, lower-cased into a DNS-subdomain-safe id."""
    raw = os.environ.get("POD_NAME") or socket.gethostname()
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", raw.lower()).strip(".-")
    return cleaned[:253] or "replica"


# ---- pins and local state ----------------------------------------------------------------------


def pinned_versions(config_text: str) -> tuple[int, ...]:
    """Versions pinned by a config.pbtxt (`version_policy { specific { versions: [...] } }`).

    Parsed through Triton's protobuf model config (a misspelled field is an error).
    """
    from model_sync import model_config

    try:
        cfg = model_config.parse(config_text)
    except model_config.ConfigPbtxtError as e:
        raise VersionRejected(str(e)) from None
    if cfg.version_policy.WhichOneof("policy_choice") != "specific" or not cfg.version_policy.specific.versions:
        raise VersionRejected("config.pbtxt version_policy: not 'specific'; allowed: version_policy { specific { versions: [N] } }")
    return tuple(sorted(int(v) for v in cfg.version_policy.specific.versions))


def backend_files(config_text: str) -> tuple[str, ...]:
    """The files the pinned config's backend needs in the version directory: model.py for the
    python backend, model.pt (or default_model_filename) for libtorch, ... (model_config)."""
    from model_sync import model_config

    try:
        return model_config.required_files(model_config.parse(config_text))
    except model_config.ConfigPbtxtError as e:
        raise VersionRejected(str(e)) from None


def local_versions(model_dir: Path) -> list[int]:
    if not model_dir.is_dir():
        return []
    return sorted(v for p in model_dir.iterdir() if p.is_dir() and (v := layout.version_from_dir(p.name)) is not None)


def read_local_pin(model_dir: Path) -> str | None:
    try:
        return (model_dir / layout.CONFIG_FILE).read_text()
    except FileNotFoundError:
        return None


@dataclass
class ModelState:
    """What the agent knows about one model (reported in the status file)."""

    pin_etag: str | None = None
    pin_text: str | None = None
    pinned: tuple[int, ...] = ()  # the bucket's pin
    serving: tuple[int, ...] = ()  # the local pin (what Triton is told to serve)
    state: str = PENDING
    error: str | None = None
    failed: dict[int, str] = field(default_factory=dict)  # version -> reason (never retried for this pin ETag)
    rejected_etag: str | None = None  # the pin ETag whose version failed / was rejected
    rejected_text: str | None = None  # the pin text that failed (adopted versions: the ETag may be unknown yet)
    changed_at: float = 0.0
    smoke: dict[str, Any] | None = None  # last smoke inference: {ok, version, at, detail}


# ---- Triton probe (stdlib HTTP: the agent image does not need tritonclient) -----------------------


class TritonProbe:
    """Triton's HTTP/REST API on the replica (loopback): readiness and repository index."""

    def __init__(self, url: str, headers: Iterable[tuple[str, str]] = (), timeout: float = 3.0) -> None:
        self.url = url.rstrip("/")
        self.headers = dict(headers)
        self.timeout = timeout

    def _request(self, path: str, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=self.headers)  # noqa: S310 - http(s) URL validated in AgentSettings
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read()
        except (OSError, ValueError):
            return 0, b""

    def live(self) -> bool:
        # ref: https://github.com/kserve/open-inference-protocol (GET v2/health/live)
        return self._request("/v2/health/live")[0] == 200

    def infer(self, model: str, version: int, body: bytes, header_length: int) -> tuple[int, bytes, int | None]:
        """POST a binary-tensor inference request: (status, body, JSON header length of the reply)."""
        # ref: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md
        headers = {**self.headers, "Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(header_length)}
        req = urllib.request.Request(f"{self.url}/v2/models/{model}/versions/{version}/infer", data=body, method="POST", headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(req, timeout=max(self.timeout, 30.0)) as resp:  # noqa: S310
                length = resp.headers.get("Inference-Header-Content-Length")
                return int(resp.status), resp.read(), int(length) if length else None
        except urllib.error.HTTPError as err:
            return int(err.code), err.read(), None
        except (OSError, ValueError) as err:
            return 0, str(err).encode(), None

    def version_ready(self, model: str, version: int) -> bool:
        # ref: https://github.com/kserve/open-inference-protocol (GET v2/models/{m}/versions/{v}/ready)
        return self._request(f"/v2/models/{model}/versions/{version}/ready")[0] == 200

    def index(self) -> list[dict[str, Any]] | None:
        """POST /v2/repository/index (None when unavailable, e.g. restricted without the header)."""
        # ref: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_model_repository.md
        code, body = self._request("/v2/repository/index", method="POST", body=b"{}")
        if code != 200:
            return None
        with contextlib.suppress(ValueError):
            doc = json.loads(body)
            if isinstance(doc, list):
                return doc
        return None

    def version_states(self) -> dict[tuple[str, int], tuple[str, str]] | None:
        """(model, version) -> (state, reason) for every version in the repository index, in
        one request; None when the index is unavailable."""
        entries = self.index()
        if entries is None:
            return None
        states: dict[tuple[str, int], tuple[str, str]] = {}
        for entry in entries:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                states[(str(entry["name"]), int(entry["version"]))] = (str(entry.get("state") or ""), str(entry.get("reason") or ""))
        return states


def _failure(entry: tuple[str, str] | None) -> str | None:
    """The reason of a version the index shows UNAVAILABLE after a load attempt (not merely unloaded)."""
    if entry is not None and entry[0] == "UNAVAILABLE" and entry[1] and entry[1] != "unloaded":
        return entry[1]
    return None


# ---- file operations ---------------------------------------------------------------------------


def atomic_write(target: Path, data: bytes, scratch: Path) -> None:
    """Write `data` to a temp file in `scratch` (same filesystem), fsync, rename over `target`."""
    scratch.mkdir(parents=True, exist_ok=True)
    tmp = scratch / f".{target.name}.{os.getpid()}.{random.randrange(1 << 30)}.tmp"  # noqa: S311 - a unique name, not a secret
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    _fsync_dir(target.parent)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass(frozen=True)
class _Load:
    """Versions placed and pinned locally, waiting for Triton: what to pin back if they fail."""

    versions: tuple[int, ...]
    previous_text: str | None
    previous: tuple[int, ...]
    adopted: bool = False  # placed before Triton started: the previous version is found locally
    started: float = field(default_factory=time.monotonic)


CHANGED = object()  # _pin_etags(): the model's pin-index entry changed, re-read its pin

# Serving-wise the same as an outage: keep what is loaded, back off, report (exit 5 with --once).
DENIED_KINDS = frozenset({Kind.DENIED, Kind.NO_BUCKET, Kind.CLOCK, Kind.WRONG_REGION})


def _one_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {errors.one_line(str(err))}"


# ---- the agent ---------------------------------------------------------------------------------


class RepositoryAgent:
    """Syncs pinned versions from the bucket into the local repository; see the module docstring."""

    def __init__(
        self,
        settings: AgentSettings,
        s3: Repo,
        stop: threading.Event | None = None,
        triton: TritonProbe | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.s3 = s3
        self.stop = stop or threading.Event()
        self.triton = triton if triton is not None else (TritonProbe(settings.triton_url, settings.triton_headers) if settings.triton_url else None)
        self.clock = clock
        self.models: dict[str, ModelState] = {}
        self.s3_ok: bool | None = None
        self.last_s3_ok_at: float | None = None
        self.last_error: str | None = None
        self.started_at = clock()
        self._status_body: bytes | None = None
        self._status_written_at = 0.0
        self._lock_fd: int | None = None
        self._manager: Any = None  # s3transfer manager for big files, created by the first one
        self._index: dict[str, str] = {}  # model -> ETag of its pin-index entry, as last listed
        self._listed_at: float | None = None  # monotonic time of the last full listing of repository/
        self._staged: dict[str, Path] = {}  # model -> its versions verified in staging, committed at the end of the pass
        self._loads: dict[str, _Load] = {}  # placed this pass, to be confirmed READY together (_settle_loads)

    # -- lifecycle --

    def prepare(self) -> None:
        """Create the directories, take the single-agent lock, discard leftovers of a killed run."""
        s = self.settings
        s.repository.mkdir(parents=True, exist_ok=True)
        s.staging.mkdir(parents=True, exist_ok=True)
        if os.stat(s.repository).st_dev != os.stat(s.staging).st_dev:
            raise AgentError(f"staging: {str(s.staging)!r} is on another filesystem than the repository {str(s.repository)!r}; allowed: the same filesystem (renames must be atomic)")
        self._lock_fd = os.open(s.staging, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise AgentError(f"staging: {str(s.staging)!r} is locked by another agent; allowed: one agent per repository") from None
        leftovers = list(s.staging.iterdir())
        for entry in leftovers:
            _remove(entry)
        if leftovers:
            log.warning("discarded %d leftover staging entries from an interrupted run: %s", len(leftovers), ", ".join(sorted(p.name for p in leftovers)))
        # Adopt what is already in place (restart on a persistent volume): report it, re-verify readiness.
        for model_dir in sorted(p for p in s.repository.iterdir() if p.is_dir()):
            text = read_local_pin(model_dir)
            if text is None:
                continue
            with contextlib.suppress(VersionRejected, layout.LayoutError):
                layout.check_model_name(model_dir.name)
                self.models[model_dir.name] = ModelState(pin_text=None, serving=pinned_versions(text), state=PLACED)

    def close(self) -> None:
        if self._manager is not None:
            self._manager.shutdown()
            self._manager = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def run(self, once: bool = False) -> int:
        """Loop until `stop` is set (SIGTERM): exit code 0, after deleting this replica's status
        object. Nothing else ends the loop: S3 outages, access denied and unclassified errors are
        logged, recorded as last_error and retried with backoff.

        `once` (init container): 0 when every pinned version that verified is placed and at least
        one model is (or the bucket pins none yet); rejected pins are reported FAILED in the
        status. 6 (CHECK_FAILED) when models are pinned but none could be placed. 5 (S3) when the
        bucket stayed unreachable / access denied for 5 attempts; 1 after 5 unclassified errors."""
        self.prepare()
        try:
            failures = 0
            while not self.stop.is_set():
                try:
                    self.sync_once(None if once else self.settings.interval)
                    failures = 0
                    if once:
                        return self.once_exit_code()
                    self._update_ready_file()
                    delay = self.settings.interval
                except S3Unavailable as e:
                    failures += 1
                    delay = backoff_delay(failures, self.settings.interval, self.settings.backoff_max)
                    what = "s3 access denied" if isinstance(e, S3AccessDenied) else "s3 unavailable"
                    log.warning("%s (attempt %d): %s; keeping the local repository as is, retrying in %.1fs", what, failures, e, delay)
                    if once and failures >= 5:
                        return errors.S3
                except Abandoned:
                    break
                except Exception as e:  # never crash the sidecar: Triton keeps serving what is in place
                    failures += 1
                    delay = backoff_delay(failures, self.settings.interval, self.settings.backoff_max)
                    self.last_error = f"pass failed: {_one_line(e)}"
                    log.error("%s (attempt %d); keeping the local repository as is, retrying in %.1fs", self.last_error, failures, delay)
                    self._report(force=False)
                    if once and failures >= 5:
                        return errors.UNEXPECTED
                self.stop.wait(delay)
            log.info("stop requested: exiting")
            if not once:
                self._set_ready_file(False)
                self._delete_status()
            return 0
        finally:
            _remove_children(self.settings.staging)
            self.close()

    def serving_ready(self) -> bool:
        """Triton is live and every model with a version in place is READY there. Models
        without one (a failed new model, removed) do not hold the replica back."""
        if self.triton is None or not self.triton.live():
            return False
        placed = [st for st in self.models.values() if st.serving]
        return bool(placed) and all(st.state == READY for st in placed)

    def _update_ready_file(self) -> None:
        if self.settings.ready_file is not None:
            try:
                self._set_ready_file(self.serving_ready())
            except Exception as e:  # never crash the sidecar over its readiness marker
                log.error("readiness check failed: %s", _one_line(e))
                self._set_ready_file(False)

    def _set_ready_file(self, ready: bool) -> None:
        path = self.settings.ready_file
        if path is None:
            return
        if ready and not path.exists():
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text("ready\n")
            os.replace(tmp, path)
            log.info("replica ready: every placed model is READY in Triton")
        elif not ready and path.exists():
            path.unlink(missing_ok=True)
            log.warning("replica not ready: a placed model is not READY in Triton (or Triton is not live)")

    def once_exit_code(self) -> int:
        pinned = [name for name, st in self.models.items() if st.pin_text is not None or st.pinned]
        placed = [name for name in pinned if self.models[name].serving]
        rejected = sorted(name for name in pinned if self.models[name].state == FAILED)
        if rejected:
            log.error("not placed (reported FAILED in the status): %s", ", ".join(rejected))
        if pinned and not placed:
            return errors.CHECK_FAILED
        return errors.OK

    # -- one pass --

    def sync_once(self, wait: float | None = None) -> bool:
        """One pass over every pin. True when every pinned version is in place (and READY if
        Triton is watched). Loads in flight are confirmed for up to `wait` seconds (None: until
        each is READY or failed); the sidecar waits one interval, then places new pins while
        Triton goes on loading. Raises S3Unavailable (S3AccessDenied) when the bucket cannot be
        read, PassError when a model hit an unclassified error (the other models are synced);
        readiness, smoke inferences and the status report happen either way."""
        first_error: BaseException | None = None
        all_ok = True
        try:
            etags = self._pin_etags()
            for name in sorted(set(etags) | set(self.models)):
                if self.stop.is_set():
                    raise Abandoned()
                try:
                    all_ok = self._sync_model(name, etags.get(name)) and all_ok
                except (S3Unavailable, Abandoned):
                    raise
                except Exception as e:
                    all_ok = False
                    st = self.models.setdefault(name, ModelState())
                    st.error = f"sync failed: {_one_line(e)}"
                    log.error("%s: %s", name, st.error)
                    first_error = first_error or e
            self.s3_ok, self.last_s3_ok_at = True, self.clock()
        except S3Unavailable as e:
            self.s3_ok, self.last_error = False, str(e)
            self._commit_staged()  # what verified before the outage goes live
            self._after_pass(wait)
            raise
        first_error = first_error or self._commit_staged()
        self.last_error = None if first_error is None else f"{_one_line(first_error)}"
        all_ok = self._after_pass(wait) and all_ok
        if first_error is not None:
            raise PassError(_one_line(first_error)) from first_error
        return all_ok

    def _after_pass(self, wait: float | None) -> bool:
        all_ok = self._refresh_readiness(wait)
        self._prune()
        self._report(force=False)
        return all_ok

    def _s3_call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """fn(*args, **kwargs), a Repo operation; its S3 failures sorted by s3errors' kind."""
        try:
            return fn(*args, **kwargs)
        except errors.SyncError as e:
            raise _serving_error(what, e) from None

    def _pin_etags(self) -> dict[str, str | object]:
        """model -> the ETag of its pin (from a full listing of repository/), or CHANGED (its
        pin-index entry changed: re-read the pin); a model left out is unchanged.

        Steady state: ONE ListObjectsV2 of the pin index (manifests/_pins/, one object per model,
        1,000 per page), whatever the number of versions or files. Every `resync` seconds, and
        while the bucket has no index yet (a publisher older than the index), the full listing
        of repository/ (every version's files: one request per 1,000 objects) catches a pin
        written without its index entry (a crash between the two, a writer other than
        model-sync). A pin briefly absent from a listing is treated as unchanged, never as removed.
        """
        wanted = self.settings.models
        if len(wanted) == 1:  # one model: its own prefix is small, list it every pass
            return self._list_pins(layout.model_prefix(wanted[0]))
        objects, _ = self._s3_call("list pin index", self.s3.list, layout.PIN_INDEX_PREFIX)
        index = {name: etag_of(o) or "" for o in objects if (name := layout.model_from_pin_index_key(o["Key"])) and (not wanted or name in wanted)}
        now = time.monotonic()
        if not index or self._listed_at is None or now - self._listed_at >= self.settings.resync:
            etags = self._list_pins(layout.REPOSITORY_PREFIX)
            self._listed_at, self._index = now, index
            return etags
        changed: dict[str, str | object] = {name: CHANGED for name, etag in index.items() if self._index.get(name) != etag}
        self._index = index
        return changed

    def _list_pins(self, prefix: str) -> dict[str, str | object]:
        etags: dict[str, str | object] = {}
        objects, _ = self._s3_call("list pins", self.s3.list, prefix)
        for obj in objects:
            name, _, leaf = obj["Key"][len(layout.REPOSITORY_PREFIX) :].partition("/")
            if leaf == layout.CONFIG_FILE and layout.MODEL_NAME_RE.match(name) and (not self.settings.models or name in self.settings.models):
                etags[name] = etag_of(obj) or ""
        return etags

    def _fetch_pin(self, name: str, st: ModelState, listed_etag: str | object | None) -> bool:
        """GET the pin when the listing shows a new ETag (conditional on the one we hold).
        True when it changed (st.pin_text/pin_etag updated). ETags are compared unquoted."""
        if listed_etag is None or (listed_etag is not CHANGED and listed_etag == st.pin_etag):
            return False
        found = self._s3_call(f"get pin {name}", self.s3.get_if_changed, layout.config_key(name), st.pin_etag)
        if found is NOT_MODIFIED or found is None:  # None: a model directory without a pin yet (mid-publish)
            return False
        data, etag = found  # type: ignore[misc]
        st.pin_etag, st.pin_text = etag, data.decode()
        return True

    def _sync_model(self, name: str, listed_etag: str | object | None) -> bool:
        st = self.models.setdefault(name, ModelState())
        changed = self._fetch_pin(name, st, listed_etag)
        if st.pin_text is None:
            return True
        if changed:
            try:
                st.pinned = pinned_versions(st.pin_text)
            except VersionRejected as e:
                self._reject(name, st, 0, str(e))
                return False
        if st.rejected_text is not None and st.rejected_text == st.pin_text:
            st.rejected_etag, st.rejected_text = st.pin_etag, None  # an adopted version failed before the pin was read
        if st.rejected_etag is not None and st.rejected_etag == st.pin_etag:
            return False  # this pin already failed here: keep serving the previous version until the pin changes
        model_dir = self.settings.repository / name
        if read_local_pin(model_dir) == st.pin_text and all(v in local_versions(model_dir) for v in st.pinned):
            if name not in self._loads:  # in flight: confirmed by _settle_loads
                st.serving = st.pinned
            return True
        return self._apply_pin(name, st)

    def _apply_pin(self, name: str, st: ModelState) -> bool:
        """Stage every pinned version missing locally (downloaded and verified in staging); the
        pass commits them all together afterwards (_commit_staged). False when one is rejected."""
        assert st.pin_text is not None
        model_dir = self.settings.repository / name
        # A directory without config.pbtxt is no model: a new one is assembled whole in staging.
        have = local_versions(model_dir) if read_local_pin(model_dir) is not None else []
        build = self.settings.staging / f"{name}.pin.{os.getpid()}"
        _remove(build)
        try:
            for version in st.pinned:
                if version not in have:
                    self._stage_version(name, version, st.pin_text, build / str(version))
        except VersionRejected as e:
            _remove(build)
            self._reject(name, st, version, str(e))
            return False
        except BaseException:
            _remove(build)
            raise
        self._staged[name] = build
        return True

    def _commit_staged(self) -> BaseException | None:
        """Move every version staged this pass into place and pin it locally, one model after
        another in quick succession, so that Triton's poller sees them together and loads them
        concurrently; none is confirmed before all are placed (_settle_loads). Returns the first
        error (the other models are committed)."""
        staged, self._staged = self._staged, {}
        first_error: BaseException | None = None
        for name, build in sorted(staged.items()):
            st = self.models[name]
            try:
                self._commit(name, st, build)
            except Exception as e:
                st.error = f"sync failed: {_one_line(e)}"
                log.error("%s: %s", name, st.error)
                first_error = first_error or e
            finally:
                _remove(build)
        return first_error

    def _commit(self, name: str, st: ModelState, build: Path) -> None:
        s = self.settings
        assert st.pin_text is not None
        model_dir = s.repository / name
        previous_text = read_local_pin(model_dir)
        previous = st.serving if previous_text is not None else ()
        in_flight = self._loads.pop(name, None)
        if in_flight is not None:  # pinned again while the previous pin was still being confirmed
            assert self.triton is not None
            if all(self.triton.version_ready(name, v) for v in in_flight.versions):
                previous = in_flight.versions  # it did load: it is what a failure pins back to
            else:  # still loading (or failed): on failure, back to what served before it
                previous_text, previous = in_flight.previous_text, in_flight.previous
        if read_local_pin(model_dir) is None:
            # A new model appears whole: config + verified version directories in one rename.
            build.mkdir(parents=True, exist_ok=True)
            _remove(model_dir)  # a directory without config.pbtxt (nothing Triton could load)
            (build / layout.CONFIG_FILE).write_bytes(st.pin_text.encode())
            os.rename(build, model_dir)
            _fsync_dir(s.repository)
        else:
            versions = sorted(build.iterdir()) if build.is_dir() else []
            for version_dir in versions:  # invisible to Triton until the config pins them
                os.rename(version_dir, model_dir / version_dir.name)
            if versions:
                _fsync_dir(model_dir)
            atomic_write(model_dir / layout.CONFIG_FILE, st.pin_text.encode(), s.staging)
        log.info("pinned %s to version(s) %s locally (was %s)", name, list(st.pinned), list(previous) or "none")
        st.changed_at = self.clock()
        if self.triton is None:
            st.serving, st.state, st.error = st.pinned, PLACED, None
            return
        st.state, st.error = LOADING, None
        self._loads[name] = _Load(st.pinned, previous_text, previous)

    def _settle_loads(self, wait: float | None) -> bool:
        """Confirm the loads in flight (placed by this or an earlier pass, or adopted), all at
        once, for up to `wait` seconds (None: until each is READY, failed or past
        ready_timeout): READY ones are smoke-tested, a failure pins the previous version back
        (_load_failed). The rest stay LOADING for the next pass, which meanwhile places new pins.
        True when nothing is left in flight and nothing failed."""
        if not self._loads:
            return True
        outcome = self._await_loads({name: (load.versions, load.started) for name, load in self._loads.items()}, wait)
        if self.stop.is_set():
            raise Abandoned()  # placed + pinned locally; the next start adopts and confirms them
        all_ok = len(outcome) == len(self._loads)
        loaded = [name for name, failure in sorted(outcome.items()) if failure is None]
        for name in loaded:
            load, st = self._loads.pop(name), self.models[name]
            st.serving = load.versions
            log.info("%s version(s) %s READY%s", name, list(load.versions), " (placed before Triton started)" if load.adopted else "")
            if st.rejected_etag is not None and st.rejected_etag == st.pin_etag and st.pinned != load.versions:
                continue  # the pin moved on while this loaded, and its version was refused: that stays reported
            st.state, st.error = READY, None
        if loaded:
            self._report(force=False)  # READY is reported before the smoke inferences run
        for name in loaded:
            self._smoke(name, self.models[name])
        for name, failure in sorted(outcome.items()):
            if failure is None:
                continue
            load, st = self._loads.pop(name), self.models[name]
            all_ok = False
            if load.adopted:
                self._adopted_failed(name, st, failure)
            else:
                self._load_failed(name, st, load.versions, failure, load.previous_text, load.previous)
                st.rejected_etag = st.pin_etag
        return all_ok

    def _load_failed(self, name: str, st: ModelState, versions: tuple[int, ...], failure: str, previous_text: str | None, previous: tuple[int, ...]) -> None:
        """`versions` did not load: pin the previous local version back so it keeps serving, or,
        without one, move the model out of the repository (Triton unloads it)."""
        model_dir = self.settings.repository / name
        for version in versions:
            st.failed[version] = failure
        if previous_text is not None and previous:
            atomic_write(model_dir / layout.CONFIG_FILE, previous_text.encode(), self.settings.staging)
            log.error("%s version(s) %s failed to load (%s): pinned version(s) %s back locally", name, list(versions), errors.one_line(failure), list(previous))
            st.serving = previous
            if self._await_ready(name, previous) is None:
                self._smoke(name, st)
        else:
            self._remove_model(name)
            log.error("%s version(s) %s failed to load (%s): no previous version, model removed from the repository", name, list(versions), errors.one_line(failure))
            st.serving = ()
        # `error` and the log stay one line (Triton's reasons span lines); `failed` keeps the full text.
        st.state, st.error = FAILED, f"version(s) {list(versions)} failed to load: {errors.one_line(failure)}"

    def _remove_model(self, name: str) -> None:
        """Move repository/<name> into staging (one rename: Triton sees the model or nothing), then delete it."""
        trash = self.settings.staging / f"trash.{name}.{os.getpid()}.{random.randrange(1 << 30)}"  # noqa: S311 - unique name
        with contextlib.suppress(FileNotFoundError):
            os.rename(self.settings.repository / name, trash)
            _fsync_dir(self.settings.repository)
        _remove(trash)

    def _await_ready(self, name: str, versions: tuple[int, ...]) -> str | None:
        """None when every version of `name` is READY; else Triton's failure reason (or a timeout)."""
        return self._await_loads({name: (versions, time.monotonic())}, None).get(name, "agent stopping before the version became READY")

    def _await_loads(self, waiting: Mapping[str, tuple[tuple[int, ...], float]], wait: float | None) -> dict[str, str | None]:
        """model -> None once every one of its versions is READY, else Triton's failure reason
        (or a timeout `ready_timeout` after its start); models still loading after `wait`
        seconds (None: no limit) or when stopping are left out. One repository-index request
        per tick answers for every model; the status keeps being reported (heartbeat)."""
        assert self.triton is not None
        outcome: dict[str, str | None] = {}
        give_up = None if wait is None else time.monotonic() + wait
        next_report = time.monotonic() + 1.0
        while True:
            states = self.triton.version_states()
            now = time.monotonic()
            for name, (versions, started) in waiting.items():
                if name in outcome:
                    continue
                if states is None:  # no index (restricted API without the key): readiness only, failures time out
                    if all(self.triton.version_ready(name, v) for v in versions):
                        outcome[name] = None
                elif all(states.get((name, v), ("", ""))[0] == "READY" for v in versions):
                    outcome[name] = None
                # Give Triton's poller (1 s) time to notice the new config before trusting the
                # index (it may still show an earlier attempt's state).
                elif now - started > 3.0 and (reason := next((r for v in versions if (r := _failure(states.get((name, v))))), None)):
                    outcome[name] = reason
                if name not in outcome and now >= started + self.settings.ready_timeout:
                    outcome[name] = f"not READY within {self.settings.ready_timeout:.0f}s"
            if len(outcome) == len(waiting) or (give_up is not None and now >= give_up):
                return outcome
            if now >= next_report:
                self._report(force=False)  # writes only when something changed or a heartbeat is due
                next_report = time.monotonic() + 1.0
            if self.stop.wait(0.2):
                return outcome

    def _reject(self, name: str, st: ModelState, version: int, reason: str) -> None:
        log.error("%s version %s rejected, not placed: %s", name, version or "?", reason)
        st.failed[version] = reason
        st.rejected_etag = st.pin_etag
        st.state, st.error = FAILED, f"version {version} rejected: {reason}" if version else reason

    # -- staging --

    def _stage_version(self, name: str, version: int, pin_text: str, target: Path) -> None:
        """Download + verify `name`/`version` and rename it to `target`. VersionRejected if the
        bucket's data does not match the manifest; nothing is left in staging either way."""
        s = self.settings
        mkey = s.root.key(layout.manifest_key(name, version))
        raw = self._s3_call(f"get manifest {name}/{version}", self.s3.get, layout.manifest_key(name, version))
        if raw is None:
            raise VersionRejected(f"manifest {mkey}: missing; allowed: a version published with its manifest")
        try:
            doc = manifest.read_manifest(raw, model=name, version=version)
        except manifest.RecordError as e:
            raise VersionRejected(str(e)) from None
        if doc["config_pbtxt"] != pin_text and len(pinned_versions(pin_text)) == 1:
            raise VersionRejected(f"pin {layout.config_key(name)}: differs from manifest config_pbtxt; allowed: the config text recorded in {mkey}")
        missing = [f for f in backend_files(pin_text) if f not in doc["files"]]
        if missing:  # tritonserver 2.51 would stay LOADING on it, and its repository poller with it
            raise VersionRejected(f"manifest {mkey}: lists no {', '.join(missing)}; allowed: a version with every file its backend needs (model_config.required_files)")
        work = s.staging / f"{name}.{version}.{os.getpid()}.{random.randrange(1 << 30)}"  # noqa: S311 - unique name
        work.mkdir(parents=True)
        try:
            total = 0
            for rel, expect in sorted(doc["files"].items()):
                if self.stop.is_set():
                    raise Abandoned()
                total += self._download_verified(name, version, rel, expect, work / rel)
            _precompile_python(work)
            target.parent.mkdir(parents=True, exist_ok=True)
            _fsync_dir(work)
            os.rename(work, target)  # atomic: Triton sees no version dir, or the complete one
            _fsync_dir(target.parent)
            log.info("placed %s version %d (%d files, %d bytes, verified against %s)", name, version, len(doc["files"]), total, mkey)
        finally:
            if work.exists():
                _remove(work)

    def _download_verified(self, name: str, version: int, rel: str, expect: Mapping[str, Any], dest: Path) -> int:
        """Download one file of the version into `dest`, hashed as it is written (transfer.download:
        ranged parallel GETs for big files); a size or sha256 other than the manifest's rejects it."""
        rel_key = layout.version_file_key(name, version, rel)
        key = self.settings.root.key(rel_key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(dest, "w+b") as f:  # read as well: out-of-order ranges are hashed from the file
                digest, size = transfer.download(self.s3.client, self.settings.root.bucket, key, f, int(expect["size"]), AGENT_TRANSFER, self.stop, self._transfer_manager(),
                                                 sync_every=transfer.WRITEBACK)  # fmt: skip
                f.flush()
                os.fsync(f.fileno())
        except transfer.Abandoned:
            raise Abandoned() from None
        except Exception as e:
            if isinstance(e, OSError) and not isinstance(e, ConnectionError | TimeoutError) and not type(e).__module__.startswith(("botocore", "urllib3")):
                raise  # the local disk (ENOSPC...): this pass's error, the previous version keeps serving
            err = translate(e, self.s3.env, rel_key)
            if err.s3_kind is Kind.NOT_FOUND:
                raise VersionRejected(f"file {key}: missing in the bucket; allowed: every file listed in the manifest") from None
            raise _serving_error(f"download {key}", err) from None
        if size != expect["size"] or digest != expect["sha256"]:
            raise VersionRejected(f"file {key}: sha256 {digest[:16]}.. size {size}; allowed: sha256 {expect['sha256'][:16]}.. size {expect['size']} (the manifest)")
        return size

    def _transfer_manager(self) -> Any:
        if self._manager is None:
            self._manager = transfer.manager(self.s3.client, AGENT_TRANSFER)
        return self._manager

    # -- readiness, pruning, status --

    def _refresh_readiness(self, wait: float | None) -> bool:
        """Confirm the loads in flight, and what the init container placed once Triton is live
        (_settle_loads, all together, for up to `wait` seconds), then refresh every other
        model's readiness."""
        if self.triton is None:
            return True
        adopted = [name for name, st in self.models.items() if st.serving and st.state == PLACED and name not in self._loads]
        if adopted and self.triton.live():
            for name in adopted:  # placed before Triton started (init container, restart): confirm it
                self._loads[name] = _Load(self.models[name].serving, None, (), adopted=True)
        settled = set(self._loads)
        all_ok = self._settle_loads(wait)
        for name, st in self.models.items():
            if name in settled or not st.serving or st.state == PLACED or (st.state == FAILED and st.rejected_etag == st.pin_etag):
                continue  # a failure of the current pin stays reported until the pin changes
            ready = all(self.triton.version_ready(name, v) for v in st.serving)
            st.state = READY if ready else LOADING
            if ready:
                st.error = None
                if self._smoke_due(st):
                    self._smoke(name, st)
        return all_ok

    def _adopted_failed(self, name: str, st: ModelState, failure: str) -> None:
        """A version placed before Triton started did not load: handled like any failed load, the
        newest other local version pinned back, else the model removed."""
        versions = st.serving
        model_dir = self.settings.repository / name
        failed_text = read_local_pin(model_dir)
        others = [v for v in local_versions(model_dir) if v not in versions]
        previous_text = self._config_for(name, others[-1], failed_text) if others else None
        self._load_failed(name, st, versions, failure, previous_text, (others[-1],) if previous_text else ())
        st.rejected_etag, st.rejected_text = (st.pin_etag, None) if st.pin_text == failed_text else (None, failed_text)

    def _config_for(self, name: str, version: int, fallback_text: str | None) -> str | None:
        """config.pbtxt pinning `version`: its manifest's config (S3), else the local config re-pinned."""
        from model_sync import model_config

        try:
            raw = self._s3_call(f"get manifest {name}/{version}", self.s3.get, layout.manifest_key(name, version))
            if raw is None:
                raise VersionRejected(f"manifest {layout.manifest_key(name, version)}: missing")
            return str(manifest.read_manifest(raw, model=name, version=version)["config_pbtxt"])
        except Exception as e:
            log.warning("%s: manifest of version %d unreadable (%s): re-pinning the local config", name, version, _one_line(e))
        if fallback_text is None:
            return None
        try:
            return str(model_config.pinned_text(model_config.parse(fallback_text), version, name))
        except Exception:
            return None

    # -- smoke inference (loopback) --

    def _smoke_due(self, st: ModelState) -> bool:
        if len(st.serving) != 1:
            return False  # verify checks single-version pins only
        if st.smoke is None or st.smoke.get("version") != st.serving[0]:
            return True
        return not st.smoke.get("ok") and self.clock() - float(st.smoke.get("_at", 0.0)) >= self.settings.heartbeat

    def _smoke(self, name: str, st: ModelState) -> None:
        """Smoke inference of the served version on loopback, recorded as st.smoke."""
        from model_sync import verify

        if self.triton is None or len(st.serving) != 1:
            return
        version = st.serving[0]
        text = read_local_pin(self.settings.repository / name)
        try:
            if text is None:
                raise VersionRejected("config.pbtxt: missing locally")
            problems = verify.smoke_loopback(self.triton, name, version, text)
        except Exception as e:
            problems = [f"smoke inference (agent) {name} {version}: {_one_line(e)}"]
        now = self.clock()
        st.smoke = {"ok": not problems, "version": version, "at": _iso(now), "detail": "; ".join(problems)[:500] or "ok", "_at": now}
        if problems:
            log.error("%s version %d smoke inference failed: %s", name, version, st.smoke["detail"])
        else:
            log.info("%s version %d smoke inference ok", name, version)

    def _prune(self) -> None:
        """Keep the pinned versions, plus the `keep_versions` newest others (quick local rollback)."""
        for name, st in self.models.items():
            model_dir = self.settings.repository / name
            keep = set(st.serving) | set(st.pinned)
            others = [v for v in local_versions(model_dir) if v not in keep]
            for v in others[: max(0, len(others) - self.settings.keep_versions)]:
                # Unpinned directories are invisible to Triton; move out first so deletion is atomic from its view.
                trash = self.settings.staging / f"trash.{name}.{v}.{os.getpid()}"
                with contextlib.suppress(OSError):
                    os.rename(model_dir / str(v), trash)
                    _remove(trash)
                    log.info("pruned %s version %d (unpinned)", name, v)

    def status_document(self) -> dict[str, Any]:
        s = self.settings
        models: dict[str, Any] = {}
        for name, st in sorted(self.models.items()):
            models[name] = {
                "pinned": list(st.pinned),
                "serving": list(st.serving),
                "state": st.state,
                "error": st.error,
                "failed": {str(v): reason for v, reason in sorted(st.failed.items())},
                "local_versions": local_versions(s.repository / name),
                "smoke": {k: v for k, v in st.smoke.items() if not k.startswith("_")} if st.smoke else None,
            }
        return {
            "schema": STATUS_SCHEMA,
            "env": s.env,
            "deployment": s.deployment,
            "replica": s.replica,
            "bucket_uri": s.root.uri(),
            "triton_url": s.triton_url,
            "heartbeat_seconds": s.heartbeat,
            "s3_reachable": self.s3_ok,
            "last_s3_ok_at": _iso(self.last_s3_ok_at),
            "last_error": self.last_error,
            "agent_started_at": _iso(self.started_at),
            "models": models,
        }

    def _status_key(self) -> str:
        return layout.status_key(self.settings.deployment, self.settings.replica)

    def _report(self, force: bool) -> None:
        """PUT the status when it changed or a heartbeat is due; never raises (a denied or failed
        write is logged and retried on the next call)."""
        doc = self.status_document()
        # What changed, ignoring the moving last-contact time: a steady replica writes once per heartbeat.
        body = json.dumps({k: v for k, v in doc.items() if k != "last_s3_ok_at"}, sort_keys=True).encode()
        now = self.clock()
        if not force and body == self._status_body and now - self._status_written_at < self.settings.heartbeat:
            return
        doc["reported_at"] = _iso(now)
        payload = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
        try:
            self._s3_call("put status", self.s3.put, self._status_key(), payload)
        except S3Unavailable as e:
            log.warning("status not reported (%s): %s", "access denied" if isinstance(e, S3AccessDenied) else "s3 unavailable", e)
            return
        except Exception as e:
            log.error("status not reported: %s", _one_line(e))
            return
        self._status_body, self._status_written_at = body, now

    def _delete_status(self) -> None:
        """Clean exit: remove this replica's status object (pod names change on every rollout;
        a departed replica must not leave a report behind). Best effort, one attempt."""
        try:
            self._s3_call("delete status", self.s3.delete_one, self._status_key())
            log.info("deleted status %s", self.settings.root.uri(layout.status_key(self.settings.deployment, self.settings.replica)))
        except Exception as e:
            log.warning("status not deleted (verify will list this replica as departed after --departed): %s", _one_line(e))


def _serving_error(what: str, err: errors.SyncError) -> Exception:
    """An S3 failure as the agent treats it: S3AccessDenied / S3Unavailable keep serving what is
    in place and back off; anything else is the pass's error."""
    if err.s3_kind in DENIED_KINDS:
        return S3AccessDenied(f"{what}: {err}")
    if err.s3_kind is Kind.UNAVAILABLE:
        return S3Unavailable(f"{what}: {err}")
    return err


def backoff_delay(failures: int, base: float, cap: float, rng: Callable[[float, float], float] = random.uniform) -> float:
    """Exponential backoff with jitter: uniform(half, full) of min(cap, base * 2**(failures-1))."""
    ceiling = min(cap, base * (2 ** max(0, failures - 1)))
    return rng(ceiling / 2, ceiling)


def _precompile_python(version_dir: Path) -> None:
    """Write __pycache__ for python-backend files BEFORE the version becomes visible.

    Otherwise the python backend stub writes it on first load, Triton's poller sees the model
    directory change and loads the model a second time (measured locally). Checked-hash pycs stay
    valid after the rename; a stub on another Python minor version simply writes its own.
    In Kubernetes the Triton container mounts the model volume read-only, so nothing is written.
    """
    import py_compile

    for src in version_dir.rglob("*.py"):
        with contextlib.suppress(py_compile.PyCompileError, OSError):
            py_compile.compile(str(src), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int((ts % 1) * 1e6):06d}Z"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _remove_children(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        for entry in directory.iterdir():
            _remove(entry)


def settings_replace(settings: AgentSettings, **changes: Any) -> AgentSettings:
    return dataclasses.replace(settings, **changes)
