"""The gray releases that list this replica (docs/architecture.md#gray-release): which pin each
model follows, the bucket's or its canary version's. Read once per pass (AgentBucket.canaries, from the
listing the pins came with); the canary version's config comes from its manifest, read once per
release."""

from __future__ import annotations

import logging

from model_sync.agent.bucket import AgentBucket
from model_sync.agent.exceptions import VersionRejected
from model_sync.agent.state import ModelState

log = logging.getLogger("model_sync.agent")


class Canaries:
    def __init__(self, bucket: AgentBucket) -> None:
        self.bucket = bucket
        self.listed: dict[str, tuple[str, int]] = {}  # model -> (canary id, version) this replica serves
        self._texts: dict[str, tuple[str, str]] = {}  # model -> (canary pin ETag, its config text)

    def refresh(self) -> None:
        self.listed = self.bucket.canaries()
        self._texts = {name: held for name, held in self._texts.items() if name in self.listed}

    def pin_to_follow(self, name: str, st: ModelState) -> tuple[str, str] | None:
        """The bucket's pin, or the canary version's config (ETag "canary-<id>-<N>") while a gray
        release lists this replica. A canary whose manifest does not read is reported failed and
        the bucket's pin kept: the gray release aborts on it."""
        canary = self.listed.get(name)
        if canary is None:
            return st.bucket_pin
        canary_id, version = canary
        etag = f"canary-{canary_id}-{version}"
        held = self._texts.get(name)
        if held is None or held[0] != etag:
            try:
                doc = self.bucket.manifest_for_canary(name, version)
            except VersionRejected as e:
                if version not in st.failed:
                    log.error("%s canary version %d not followed: %s", name, version, e)
                    st.transition(failed={version: str(e)})
                return st.bucket_pin
            held = self._texts[name] = (etag, doc["config_pbtxt"])
        return held
