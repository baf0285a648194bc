"""What the replica reports: its status record status/<deployment>/<replica>.json
(model_sync.records.codec's replica-status record, read by `verify`), written when something changes
and every heartbeat, deleted on a clean exit; and the readiness file the pod's probe checks
(docs/architecture.md#the-agents-pass, step 6)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from model_sync.agent.bucket import AgentBucket
from model_sync.agent.exceptions import S3AccessDenied, S3Unavailable
from model_sync.agent.settings import AgentSettings
from model_sync.agent.state import ModelState
from model_sync.contract import layout
from model_sync.errors import describe
from model_sync.records import codec

log = logging.getLogger("model_sync.agent")

STATUS_SCHEMA = codec.REPLICA_STATUS


def _time(ts: float | None) -> str | None:
    return None if ts is None else codec.format_time(ts)


def document(
    settings: AgentSettings,
    models: Mapping[str, ModelState],
    local_versions: Callable[[str], list[int]],
    *,
    s3_reachable: bool | None,
    last_s3_ok_at: float | None,
    last_error: str | None,
    started_at: float,
) -> dict[str, Any]:
    """The replica status record, without its `reported_at` (added when it is written)."""
    entries: dict[str, Any] = {}
    for name, st in sorted(models.items()):
        entries[name] = {
            "pinned": list(st.pinned),
            "serving": list(st.serving),
            "state": codec.ReplicaState(st.state).value,
            "error": st.error,
            "failed": {str(v): reason for v, reason in sorted(st.failed.items())},
            "local_versions": local_versions(name),
            "smoke": {k: v for k, v in st.smoke.items() if not k.startswith("_")} if st.smoke else None,
        }
    return {
        "schema": STATUS_SCHEMA,
        "env": settings.env,
        "deployment": settings.deployment,
        "replica": settings.replica,
        "bucket_uri": settings.root.uri(),
        "triton_url": settings.triton_url,
        "heartbeat_seconds": settings.heartbeat,
        "s3_reachable": s3_reachable,
        "last_s3_ok_at": _time(last_s3_ok_at),
        "last_error": last_error,
        "agent_started_at": _time(started_at),
        "models": entries,
    }


class StatusReport:
    """The one writer of this replica's status object."""

    def __init__(self, settings: AgentSettings, bucket: AgentBucket, clock: Callable[[], float]) -> None:
        self.settings = settings
        self.bucket = bucket
        self.clock = clock
        self.key = layout.status_key(settings.deployment, settings.replica)
        self._body: bytes | None = None  # what was last written, without the moving last-contact time
        self._written_at = 0.0

    def report(self, doc: dict[str, Any], force: bool) -> None:
        """PUT `doc` when it changed or a heartbeat is due; never raises (a denied or failed
        write is logged and retried on the next call)."""
        # What changed, ignoring the moving last-contact time: a steady replica writes once per heartbeat.
        body = json.dumps({k: v for k, v in doc.items() if k != "last_s3_ok_at"}, sort_keys=True).encode()
        now = self.clock()
        if not force and body == self._body and now - self._written_at < self.settings.heartbeat:
            return
        doc["reported_at"] = codec.format_time(now)
        payload = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
        try:
            self.bucket.call("put status", self.bucket.s3.put, self.key, payload)
        except S3Unavailable as e:
            log.warning(
                "status not reported (%s): %s",
                "access denied" if isinstance(e, S3AccessDenied) else "s3 unavailable",
                e,
            )
            return
        except Exception as e:
            log.error("status not reported: %s", describe(e))
            return
        self._body, self._written_at = body, now

    def delete(self) -> None:
        """Clean exit: remove this replica's status object (pod names change on every rollout;
        a departed replica must not leave a report behind). Best effort, one attempt."""
        try:
            self.bucket.call("delete status", self.bucket.s3.delete_one, self.key)
            log.info("deleted status %s", self.settings.root.uri(self.key))
        except Exception as e:
            log.warning(
                "status not deleted (verify will list this replica as departed after --departed): %s", describe(e)
            )


class ReadyFile:
    """A file that exists exactly while the replica serves every model it has in place (the
    pod's readiness probe checks it; AgentSettings.ready_file). No path: nothing is written."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def update(self, ready: Callable[[], bool]) -> None:
        """Create or delete the file after `ready()`; deleted when the check itself fails."""
        if self.path is None:
            return
        try:
            self.set(ready())
        except Exception as e:  # never crash the sidecar over its readiness marker
            log.error("readiness check failed: %s", describe(e))
            self.set(False)

    def set(self, ready: bool) -> None:
        path = self.path
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
