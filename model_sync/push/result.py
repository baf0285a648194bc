"""What `push` did for one model (`PushResult`): the action, the version, what it uploaded and copied, or
its failure. Written by model_sync.push.publish and model_sync.push.uploads, printed by the command."""

from __future__ import annotations

from dataclasses import dataclass, field

from model_sync import errors


@dataclass
class PushResult:
    model: str
    # "up-to-date" | "pushed" | "dry-run" | "failed" | "skipped" (not started: another model's S3 failure,
    # `error`)
    action: str
    version: int | None = None
    uploaded: list[str] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)
    error: errors.SyncError | None = None
