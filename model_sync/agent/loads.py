"""From placed to confirmed: a staged pin placed and pinned locally (remembering what a failure
falls back to), the loads in flight confirmed all together through Triton's repository index,
smoke-tested once READY, and a failure handled (the previous version pinned back, or a new
model removed); steps 3 to 5 of docs/architecture.md#the-agents-pass."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from model_sync import errors
from model_sync.agent import triton
from model_sync.agent.bucket import AgentBucket
from model_sync.agent.exceptions import Rejection, VersionRejected
from model_sync.agent.metrics import AgentMetrics
from model_sync.agent.pod_disk import PodDisk
from model_sync.agent.settings import AgentSettings
from model_sync.agent.state import ModelState
from model_sync.contract import layout
from model_sync.errors import Abandoned, describe
from model_sync.records.codec import ReplicaState

log = logging.getLogger("model_sync.agent")


@dataclass(frozen=True)
class Load:
    """Versions placed and pinned locally, waiting for Triton: what to pin back if they fail."""

    versions: tuple[int, ...]
    previous_text: str | None
    previous: tuple[int, ...]
    adopted: bool = False  # placed before Triton started: the previous version is found locally
    started: float = field(default_factory=time.monotonic)


class Loads:
    """The loads in flight of one agent (`in_flight`, model -> Load): placed, confirmed, fallen back."""

    def __init__(
        self,
        settings: AgentSettings,
        models: dict[str, ModelState],
        probe: triton.TritonProbe | None,
        local: PodDisk,
        bucket: AgentBucket,
        report: Callable[[], None],
        clock: Callable[[], float],
        stop: threading.Event,
        metrics: AgentMetrics,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.models = models
        self.probe = probe
        self.local = local
        self.bucket = bucket
        self.report = report  # the status report (written when something changed or a heartbeat is due)
        self.clock = clock
        self.stop = stop
        self.in_flight: dict[str, Load] = {}

    def __contains__(self, name: object) -> bool:
        return name in self.in_flight

    def place(self, name: str, st: ModelState, build: Path) -> None:
        """Move `name`'s versions staged in `build` into the repository and pin them locally
        (PodDisk.place); with Triton watched, a load begins, remembering what a failure
        pins back: the version served before, or, when the pin changes again while a load is
        still in flight, what served before that load (or the load itself, if it did load)."""
        assert st.pin_text is not None
        previous_text = self.local.pin(name)
        previous = st.serving if previous_text is not None else ()
        in_flight = self.in_flight.pop(name, None)
        if in_flight is not None:  # pinned again while the previous pin was still being confirmed
            assert self.probe is not None
            if all(self.probe.version_ready(name, v) for v in in_flight.versions):
                previous = in_flight.versions  # it did load: it is what a failure pins back to
            else:  # still loading (or failed): on failure, back to what served before it
                previous_text, previous = in_flight.previous_text, in_flight.previous
        self.local.place(name, st.pin_text, build)
        log.info("pinned %s to version(s) %s locally (was %s)", name, list(st.pinned), list(previous) or "none")
        if self.probe is None:
            st.transition(ReplicaState.PLACED, serving=st.pinned, error=None, changed_at=self.clock())
            return
        st.transition(ReplicaState.LOADING, error=None, changed_at=self.clock())
        self.in_flight[name] = Load(st.pinned, previous_text, previous)

    def refresh(self, wait: float | None) -> bool:
        """Confirm the loads in flight, and what the init container placed once Triton is live
        (all together, for up to `wait` seconds), then refresh every other model's readiness."""
        if self.probe is None:
            return True
        adopted = [
            name
            for name, st in self.models.items()
            if st.serving and st.state == ReplicaState.PLACED and name not in self.in_flight
        ]
        if adopted and self.probe.live():
            for name in adopted:  # placed before Triton started (init container, restart): confirm it
                self.in_flight[name] = Load(self.models[name].serving, None, (), adopted=True)
        settled = set(self.in_flight)
        all_ok = self._settle(wait)
        for name, st in self.models.items():
            if (
                name in settled
                or not st.serving
                or st.state == ReplicaState.PLACED
                or (st.state == ReplicaState.FAILED and st.rejected_etag == st.pin_etag)
            ):
                continue  # a failure of the current pin stays reported until the pin changes
            if not all(self.probe.version_ready(name, v) for v in st.serving):
                st.transition(ReplicaState.LOADING)
                continue
            st.transition(ReplicaState.READY, error=None)
            if triton.smoke_due(st, self.clock(), self.settings.heartbeat):
                self._smoke(name, st)
        return all_ok

    def _settle(self, wait: float | None) -> bool:
        """Confirm the loads in flight (placed by this or an earlier pass, or adopted), all at
        once, for up to `wait` seconds (None: until each is READY, failed or past
        ready_timeout): READY ones are smoke-tested, a failure pins the previous version back
        (_load_failed). The rest stay LOADING for the next pass, which meanwhile places new pins.
        True when nothing is left in flight and nothing failed."""
        if not self.in_flight:
            return True
        outcome = self._await({name: (load.versions, load.started) for name, load in self.in_flight.items()}, wait)
        if self.stop.is_set():
            raise Abandoned()  # placed + pinned locally; the next start adopts and confirms them
        all_ok = len(outcome) == len(self.in_flight)
        loaded = [name for name, failure in sorted(outcome.items()) if failure is None]
        for name in loaded:
            load, st = self.in_flight.pop(name), self.models[name]
            self.metrics.loaded(time.monotonic() - load.started, "ready")
            log.info(
                "%s version(s) %s READY%s",
                name,
                list(load.versions),
                " (placed before Triton started)" if load.adopted else "",
            )
            if st.rejected_etag is not None and st.rejected_etag == st.pin_etag and st.pinned != load.versions:
                st.transition(
                    serving=load.versions
                )  # the pin moved on while this loaded, and its version was refused: that stays reported
            else:
                st.transition(ReplicaState.READY, serving=load.versions, error=None)
        if loaded:
            self.report()  # READY is reported before the smoke inferences run
        for name in loaded:
            self._smoke(name, self.models[name])
        for name, failure in sorted(outcome.items()):
            if failure is None:
                continue
            load, st = self.in_flight.pop(name), self.models[name]
            all_ok = False
            timed_out = failure.startswith(triton.TIMED_OUT)
            self.metrics.loaded(time.monotonic() - load.started, "timeout" if timed_out else "failed")
            if load.adopted:
                self._adopted_failed(name, st, failure)
            else:
                self._load_failed(name, st, load.versions, failure, load.previous_text, load.previous)
                st.transition(rejected_etag=st.pin_etag)
        return all_ok

    def _load_failed(
        self,
        name: str,
        st: ModelState,
        versions: tuple[int, ...],
        failure: str,
        previous_text: str | None,
        previous: tuple[int, ...],
    ) -> None:
        """`versions` did not load: pin the previous local version back so it keeps serving, or,
        without one, move the model out of the repository (Triton unloads it)."""
        st.transition(failed=dict.fromkeys(versions, failure))
        if previous_text is not None and previous:
            self.local.flip(name, previous_text)
            log.error(
                "%s version(s) %s failed to load (%s): pinned version(s) %s back locally",
                name,
                list(versions),
                errors.one_line(failure),
                list(previous),
            )
            st.transition(serving=previous)
            if self._await_ready(name, previous) is None:
                self._smoke(name, st)
        else:
            self.local.remove_model(name)
            log.error(
                "%s version(s) %s failed to load (%s): no previous version, model removed from the repository",
                name,
                list(versions),
                errors.one_line(failure),
            )
            st.transition(serving=())
        # `error` and the log stay one line (Triton's reasons span lines); `failed` keeps the full text.
        timed_out = failure.startswith(triton.TIMED_OUT)
        st.transition(
            ReplicaState.FAILED,
            error=f"version(s) {list(versions)} failed to load: {errors.one_line(failure)}",
            reason=(Rejection.LOAD_TIMEOUT if timed_out else Rejection.LOAD_FAILED).value,
        )

    def _adopted_failed(self, name: str, st: ModelState, failure: str) -> None:
        """A version placed before Triton started did not load: handled like any failed load, the
        newest other local version pinned back, else the model removed."""
        versions = st.serving
        failed_text = self.local.pin(name)
        others = [v for v in self.local.versions(name) if v not in versions]
        previous_text = self._config_for(name, others[-1], failed_text) if others else None
        self._load_failed(name, st, versions, failure, previous_text, (others[-1],) if previous_text else ())
        if st.pin_text == failed_text:
            st.transition(rejected_etag=st.pin_etag, rejected_text=None)
        else:
            st.transition(rejected_etag=None, rejected_text=failed_text)

    def _config_for(self, name: str, version: int, fallback_text: str | None) -> str | None:
        """config.pbtxt pinning `version`: its manifest's config (S3), else the local config re-pinned."""

        from model_sync.triton_model import model_config  # protobuf's text_format: loaded only when a config is parsed

        try:
            doc = self.bucket.read_manifest(name, version)
            if doc is None:
                raise VersionRejected(f"manifest {layout.manifest_key(name, version)}: missing")
            return str(doc["config_pbtxt"])
        except Exception as e:
            log.warning(
                "%s: manifest of version %d unreadable (%s): re-pinning the local config", name, version, describe(e)
            )
        if fallback_text is None:
            return None
        try:
            return str(model_config.pinned_text(model_config.parse(fallback_text), version, name))
        except Exception:
            return None

    def _await_ready(self, name: str, versions: tuple[int, ...]) -> str | None:
        """None when every version of `name` is READY; else Triton's failure reason (or a timeout)."""
        return self._await({name: (versions, time.monotonic())}, None).get(
            name, "agent stopping before the version became READY"
        )

    def _await(self, waiting: dict[str, tuple[tuple[int, ...], float]], wait: float | None) -> dict[str, str | None]:
        assert self.probe is not None
        return triton.await_loads(self.probe, waiting, wait, self.settings.ready_timeout, self.stop, self.report)

    def _smoke(self, name: str, st: ModelState) -> None:
        """Smoke inference of the served version on loopback, recorded as st.smoke."""
        if self.probe is None or len(st.serving) != 1:
            return
        started = time.monotonic()
        record = triton.smoke(self.probe, name, st.serving[0], self.local.pin(name), self.clock)
        self.metrics.smoked(time.monotonic() - started, bool(record["ok"]))
        st.transition(smoke=record)
