"""One pass's staging: every pinned version missing locally downloaded and verified into a build
beside the repository, per model (step 2), then all the builds of the pass committed together,
one model after another (step 3 of docs/architecture.md#the-agents-pass)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from model_sync.agent.bucket import AgentBucket
from model_sync.agent.exceptions import VersionRejected
from model_sync.agent.loads import Loads
from model_sync.agent.metrics import AgentMetrics
from model_sync.agent.pod_disk import PodDisk
from model_sync.agent.settings import AgentSettings
from model_sync.agent.state import ModelState
from model_sync.contract import layout
from model_sync.records.codec import ReplicaState

log = logging.getLogger("model_sync.agent")


class Staging:
    """The builds of the pass in progress (`builds`, model -> its versions verified in staging)."""

    def __init__(
        self,
        settings: AgentSettings,
        models: dict[str, ModelState],
        bucket: AgentBucket,
        local: PodDisk,
        loads: Loads,
        metrics: AgentMetrics,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.models = models
        self.bucket = bucket
        self.local = local
        self.loads = loads
        self.builds: dict[str, Path] = {}

    def stage_pin(self, name: str, st: ModelState) -> bool:
        """Stage every pinned version missing locally (downloaded and verified in staging); the
        pass commits them all together afterwards (commit). False when one is rejected."""
        assert st.pin_text is not None
        # A directory without config.pbtxt is no model: a new one is assembled whole in staging.
        have = self.local.versions(name) if self.local.pin(name) is not None else []
        build = self.local.new_build(name)
        try:
            for version in st.pinned:
                if version not in have:
                    self.stage_version(name, version, st.pin_text, build / str(version))
        except VersionRejected as e:
            self.local.discard(build)
            reject(name, st, version, e, self.metrics)
            return False
        except BaseException:
            self.local.discard(build)
            raise
        self.builds[name] = build
        return True

    def stage_version(self, name: str, version: int, pin_text: str, target: Path) -> None:
        """Download + verify `name`/`version` into staging and rename it to `target`.
        VersionRejected if the bucket's data does not match the manifest."""
        doc = self.bucket.manifest_for_pin(name, version, pin_text)
        files: dict[str, Any] = doc["files"]
        started = time.monotonic()
        total = self.local.stage(
            name,
            version,
            sorted(files),
            lambda rel, dest: self.bucket.download_verified(name, version, rel, files[rel], dest),
            target,
        )
        self.metrics.downloaded(total, time.monotonic() - started)
        log.info(
            "placed %s version %d (%d files, %d bytes, verified against %s)",
            name,
            version,
            len(files),
            total,
            self.settings.root.key(layout.manifest_key(name, version)),
        )

    def commit(self, on_error: Callable[[str, Exception], None]) -> BaseException | None:
        """Move every version staged this pass into place and pin it locally, one model after
        another in quick succession, so that Triton's poller sees them together and loads them
        concurrently; none is confirmed before all are placed (loads.refresh). A model that
        fails goes to `on_error`; returns the first error (the other models are committed)."""
        builds, self.builds = self.builds, {}
        first_error: BaseException | None = None
        for name, build in sorted(builds.items()):
            try:
                self.loads.place(name, self.models[name], build)
            except Exception as e:
                on_error(name, e)
                first_error = first_error or e
            finally:
                self.local.discard(build)
        return first_error


def reject(name: str, st: ModelState, version: int, err: VersionRejected, metrics: AgentMetrics) -> None:
    """`name`'s pin is rejected (version 0: the pin itself): FAILED, not retried until the pin
    changes; counted by its reason."""
    reason = str(err)
    log.error("%s version %s rejected, not placed: %s", name, version or "?", reason)
    st.transition(
        ReplicaState.FAILED,
        failed={version: reason},
        rejected_etag=st.pin_etag,
        error=f"version {version} rejected: {reason}" if version else reason,
        reason=err.reason.value,
    )
    metrics.version_rejected(name, err.reason)
