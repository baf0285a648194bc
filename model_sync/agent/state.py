"""What the agent knows about one model (`ModelState`, reported in the status), and the one
transition every change of it goes through (docs/architecture.md#the-agents-pass)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from model_sync.records.codec import ReplicaState

_KEEP: Any = object()  # transition(): leave this field as it is (None is a value)


@dataclass
class ModelState:
    """One model on this replica. Change it only through `transition`."""

    # The pin this replica follows: the bucket's pin (`bucket_pin`), or during a gray release that
    # lists this replica the canary version's config (ETag "canary-<id>-<N>", model_sync.records.canary_record).
    pin_etag: str | None = None  # the ETag of the pin we follow
    pin_text: str | None = None  # its config.pbtxt text
    pinned: tuple[int, ...] = ()  # the versions it names
    bucket_pin: tuple[str, str] | None = None  # (ETag, text) of the bucket's pin, as last read
    serving: tuple[int, ...] = ()  # the local pin (what Triton is told to serve)
    state: ReplicaState = ReplicaState.PENDING
    error: str | None = None  # one line
    # Why the pin is not served here while FAILED (exceptions.Rejection's value: bounded, the
    # agent's metrics label it); set with FAILED, meaningless in any other state.
    reason: str | None = None
    failed: dict[int, str] = field(default_factory=dict)  # version -> reason (never retried for this pin ETag)
    rejected_etag: str | None = None  # the pin ETag whose version failed / was rejected
    rejected_text: str | None = None  # the pin text that failed (adopted versions: the ETag may be unknown yet)
    changed_at: float = 0.0  # when the local pin last changed (the agent's clock)
    smoke: dict[str, Any] | None = None  # last smoke inference: {ok, version, at, detail, _at}

    def transition(
        self,
        state: ReplicaState | None = None,
        *,
        error: str | None = _KEEP,
        reason: str | None = None,
        pin: tuple[str, str] | None = None,
        bucket_pin: tuple[str, str] | None = None,
        pinned: tuple[int, ...] | None = None,
        serving: tuple[int, ...] | None = None,
        failed: Mapping[int, str] | None = None,
        rejected_etag: str | None = _KEEP,
        rejected_text: str | None = _KEEP,
        changed_at: float | None = None,
        smoke: dict[str, Any] | None = None,
    ) -> None:
        """The one way a model's state changes. Arguments left out keep their field as it is;
        `pin` is (etag, text) of the pin to follow, `bucket_pin` of a newly read bucket pin;
        `failed` adds version -> reason entries."""
        if bucket_pin is not None:
            self.bucket_pin = bucket_pin
        if pin is not None:
            self.pin_etag, self.pin_text = pin
        if pinned is not None:
            self.pinned = pinned
        if serving is not None:
            self.serving = serving
        if failed:
            self.failed.update(failed)
        if rejected_etag is not _KEEP:
            self.rejected_etag = rejected_etag
        if rejected_text is not _KEEP:
            self.rejected_text = rejected_text
        if changed_at is not None:
            self.changed_at = changed_at
        if smoke is not None:
            self.smoke = smoke
        if state is not None:
            self.state = ReplicaState(state)
        if error is not _KEEP:
            self.error = error
        if reason is not None:
            self.reason = reason
