"""The bucket side of the agent, on the S3 layer (model_sync.s3.bucket, transfer, model_sync.s3.failures): list the
pins cheaply (the pin index, a full listing every `resync`), fetch a pin conditionally, read a
version's manifest strictly and download its files verified (steps 1 and 2 of
docs/architecture.md#the-agents-pass). S3 failures come out as S3Unavailable / S3AccessDenied
(keep serving, back off) or as the pass's error."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from model_sync import errors
from model_sync.agent.exceptions import Rejection, S3AccessDenied, S3Unavailable, VersionRejected
from model_sync.agent.settings import AgentSettings
from model_sync.contract import layout
from model_sync.errors import Abandoned
from model_sync.records import canary_record, codec, servable
from model_sync.s3 import download, transfer
from model_sync.s3.bucket import NOT_MODIFIED, Bucket, etag_of
from model_sync.s3.failures import Kind, translate

# Files of at least 16 MiB come down in 16 MiB ranges, 16 at a time (bench/transfer).
AGENT_TRANSFER = transfer.TransferSettings()
# Serving-wise the same as an outage: keep what is loaded, back off, report (exit 5 with --once).
DENIED_KINDS = frozenset({Kind.DENIED, Kind.NO_BUCKET, Kind.CLOCK, Kind.WRONG_REGION})
log = logging.getLogger("model_sync.agent")
CHANGED = object()  # changed_pins(): the model's pin-index entry changed, re-read its pin


def serving_error(what: str, err: errors.SyncError) -> Exception:
    """An S3 failure as the agent treats it: S3AccessDenied / S3Unavailable keep serving what is
    in place and back off; anything else is the pass's error."""
    if err.s3_kind in DENIED_KINDS:
        return S3AccessDenied(f"{what}: {err}", err.s3_kind.value)
    if err.s3_kind is Kind.UNAVAILABLE:
        return S3Unavailable(f"{what}: {err}", err.s3_kind.value)
    return err


class AgentBucket:
    """The environment's bucket as one agent reads it (and writes its status object)."""

    def __init__(self, s3: Bucket, settings: AgentSettings, stop: threading.Event) -> None:
        self.s3 = s3
        self.settings = settings
        self.stop = stop
        self.listed_at: float | None = None  # monotonic time of the last full listing of repository/
        self._index: dict[str, str] = {}  # model -> ETag of its pin-index entry, as last listed
        self._manager: Any = None  # s3transfer manager for big files, created by the first one
        self._listed_canaries: list[dict[str, Any]] | None = (
            None  # manifests/_canary/ objects, as changed_pins() listed
        )
        self._canaries: dict[str, tuple[str, dict[str, Any] | None]] = {}  # model -> (ETag, record) as last read

    def close(self) -> None:
        if self._manager is not None:
            self._manager.shutdown()
            self._manager = None

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """fn(*args, **kwargs), a Bucket operation; its S3 failures sorted by model_sync.s3.failures' kind."""
        try:
            return fn(*args, **kwargs)
        except errors.SyncError as e:
            raise serving_error(what, e) from None

    # -- pins --

    def changed_pins(self) -> dict[str, str | object]:
        """model -> the ETag of its pin (from a full listing of repository/), or CHANGED (its
        pin-index entry changed: re-read the pin); a model left out is unchanged.

        Steady state: ONE ListObjectsV2 of the pin index (manifests/_pins/, one object per model,
        1,000 per page; with manifests/_canary/, the same listing), whatever the number of versions or files. Every `resync` seconds, and
        while the bucket has no index yet (a publisher older than the index), the full listing
        of repository/ (every version's files: one request per 1,000 objects) catches a pin
        written without its index entry (a crash between the two, a writer other than
        model-sync). A pin briefly absent from a listing is treated as unchanged, never as removed.
        """
        wanted = self.settings.models
        if len(wanted) == 1:  # one model: its own prefix is small, list it every pass
            return self._list_pins(layout.model_prefix(wanted[0]))
        # manifests/_ holds exactly the pin index (_pins/) and the gray releases (_canary/): no
        # model name starts with `_`, so one listing answers both (canaries() reads its share).
        objects, _ = self.call("list pin index", self.s3.list, layout.SIGNALS_PREFIX)
        self._listed_canaries = [o for o in objects if layout.model_from_canary_key(o["Key"])]
        index = {
            name: etag_of(o) or ""
            for o in objects
            if (name := layout.model_from_pin_index_key(o["Key"])) and (not wanted or name in wanted)
        }
        now = time.monotonic()
        if not index or self.listed_at is None or now - self.listed_at >= self.settings.resync:
            etags = self._list_pins(layout.REPOSITORY_PREFIX)
            self.listed_at, self._index = now, index
            return etags
        changed: dict[str, str | object] = {
            name: CHANGED for name, etag in index.items() if self._index.get(name) != etag
        }
        self._index = index
        return changed

    def _list_pins(self, prefix: str) -> dict[str, str | object]:
        etags: dict[str, str | object] = {}
        objects, _ = self.call("list pins", self.s3.list, prefix)
        for obj in objects:
            name, _, leaf = obj["Key"][len(layout.REPOSITORY_PREFIX) :].partition("/")
            if (
                leaf == layout.CONFIG_FILE
                and layout.MODEL_NAME_RE.match(name)
                and (not self.settings.models or name in self.settings.models)
            ):
                etags[name] = etag_of(obj) or ""
        return etags

    def canaries(self) -> dict[str, tuple[str, int]]:
        """model -> (canary id, version) of every running gray release that lists this replica
        (model_sync.records.canary_record.serving_canary), from the listing changed_pins() made (a
        single-model agent lists manifests/_canary/), a GET only of a record whose ETag changed. A record that does not read is logged and
        ignored: the replica keeps the stable pin."""
        objects, self._listed_canaries = self._listed_canaries, None
        if objects is None:  # changed_pins() listed a single model's prefix instead
            objects, _ = self.call("list canaries", self.s3.list, layout.CANARY_PREFIX)
        wanted, seen = self.settings.models, {}
        for obj in objects:
            name = layout.model_from_canary_key(obj["Key"])
            if name is None or (wanted and name not in wanted):
                continue
            etag = etag_of(obj) or ""
            held = self._canaries.get(name)
            if held is None or held[0] != etag:
                raw = self.call(f"get canary {name}", self.s3.get, layout.canary_key(name))
                try:
                    held = (etag, None if raw is None else codec.read(raw, canary_record.CANARY, model=name))
                except codec.RecordError as e:
                    log.error("canary record of %s ignored (serving the stable pin): %s", name, e)
                    held = (etag, None)
            seen[name] = held
        self._canaries = seen
        mine = {
            name: (doc["id"], version)
            for name, (_, doc) in seen.items()
            if doc is not None
            and (version := canary_record.serving_canary(doc, self.settings.deployment, self.settings.replica))
        }
        return mine

    def fetch_pin(self, name: str, listed_etag: str | object | None, held_etag: str | None) -> tuple[str, str] | None:
        """(etag, text) of `name`'s pin when the listing shows an ETag other than the one held
        (a GET conditional on it); None when unchanged. ETags are compared unquoted."""
        if listed_etag is None or (listed_etag is not CHANGED and listed_etag == held_etag):
            return None
        found = self.call(f"get pin {name}", self.s3.get_if_changed, layout.config_key(name), held_etag)
        if found is NOT_MODIFIED or found is None:  # None: a model directory without a pin yet (mid-publish)
            return None
        data, etag = found
        return etag, data.decode()

    # -- versions --

    def read_manifest(self, name: str, version: int) -> dict[str, Any] | None:
        """The version's manifest, read strictly (manifest.RecordError); None when it is missing."""
        raw = self.call(f"get manifest {name}/{version}", self.s3.get, layout.manifest_key(name, version))
        return None if raw is None else codec.read_manifest(raw, model=name, version=version)

    def manifest_for_pin(self, name: str, version: int, pin_text: str) -> dict[str, Any]:
        """The manifest of a pinned version, checked against the pin before anything is
        downloaded: VersionRejected when missing, invalid, for another config, or without a
        file the config's backend needs."""
        mkey = self.settings.root.key(layout.manifest_key(name, version))
        try:
            doc = self.read_manifest(name, version)
        except codec.RecordError as e:
            raise VersionRejected(str(e), Rejection.MANIFEST_INVALID) from None
        if doc is None:
            raise VersionRejected(
                f"manifest {mkey}: missing; allowed: a version published with its manifest", Rejection.MANIFEST_MISSING
            )
        # The rule every command that pins applies too (model_sync.versions.pinnable).
        problem = servable.unservable(doc, pin_text, mkey, layout.config_key(name))
        if problem is not None:
            raise VersionRejected(str(problem), Rejection(problem.reason))
        return doc

    def manifest_for_canary(self, name: str, version: int) -> dict[str, Any]:
        """The canary version's manifest (its config_pbtxt is the pin the canary replicas follow);
        VersionRejected when missing or invalid."""
        mkey = self.settings.root.key(layout.manifest_key(name, version))
        try:
            doc = self.read_manifest(name, version)
        except codec.RecordError as e:
            raise VersionRejected(str(e), Rejection.MANIFEST_INVALID) from None
        if doc is None:
            raise VersionRejected(
                f"manifest {mkey}: missing; allowed: a canary version published with its manifest",
                Rejection.MANIFEST_MISSING,
            )
        return doc

    def download_verified(self, name: str, version: int, rel: str, expect: Mapping[str, Any], dest: Path) -> int:
        """Download one file of the version into `dest`, hashed as it is written (download.download:
        ranged parallel GETs for big files); a size or sha256 other than the manifest's rejects it."""
        rel_key = layout.version_file_key(name, version, rel)
        key = self.settings.root.key(rel_key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(dest, "w+b") as f:  # read as well: out-of-order ranges are hashed from the file
                digest, size = download.download(self.s3.client, self.settings.root.bucket, key, f,
                                                 int(expect["size"]), AGENT_TRANSFER, self.stop,
                                                 self._transfer_manager(),
                                                 sync_every=download.WRITEBACK)  # fmt: skip
                f.flush()
                os.fsync(f.fileno())
        except Abandoned:
            raise  # the stop event, not a failed download
        except Exception as e:
            if (
                isinstance(e, OSError)
                and not isinstance(e, ConnectionError | TimeoutError)
                and not type(e).__module__.startswith(("botocore", "urllib3"))
            ):
                raise  # the local disk (ENOSPC...): this pass's error, the previous version keeps serving
            err = translate(e, self.s3.env, rel_key)
            if err.s3_kind is Kind.NOT_FOUND:
                raise VersionRejected(
                    f"file {key}: missing in the bucket; allowed: every file listed in the manifest",
                    Rejection.FILE_MISSING,
                ) from None
            raise serving_error(f"download {key}", err) from None
        if size != expect["size"] or digest != expect["sha256"]:
            raise VersionRejected(
                f"file {key}: sha256 {digest[:16]}.. size {size}; allowed: sha256 {expect['sha256'][:16]}.. size "
                f"{expect['size']} (the manifest)",
                Rejection.CHECKSUM_MISMATCH,
            )
        return size

    def _transfer_manager(self) -> Any:
        if self._manager is None:
            self._manager = transfer.manager(self.s3.client, AGENT_TRANSFER)
        return self._manager
