"""The agent's loop: `RepositoryAgent` keeps a replica's local Triton model repository in step
with the pins in its environment's bucket, one pass every interval (the sidecar) or one pass
(`--once`, the init container). The pass and its guarantees are docs/architecture.md#the-agents-pass;
this module orders its steps, the others do them: bucket.py (pins, manifests, verified
downloads), canaries.py (the gray releases that list this replica), staging.py (a pass's
builds, staged then committed), pod_disk.py (stage,
rename in, flip, prune), loads.py and triton.py (confirmation, fallback, smoke inference),
status.py (the report), state.py (one transition)."""

from __future__ import annotations

import contextlib
import logging
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from model_sync import errors
from model_sync.agent.bucket import AgentBucket
from model_sync.agent.canaries import Canaries
from model_sync.agent.exceptions import PassError, S3AccessDenied, S3Unavailable, VersionRejected
from model_sync.agent.loads import Loads
from model_sync.agent.metrics import AgentMetrics
from model_sync.agent.pins import pinned_versions
from model_sync.agent.pod_disk import PodDisk
from model_sync.agent.replica_record import ReadyFile, StatusReport, document
from model_sync.agent.settings import AgentSettings
from model_sync.agent.staging import Staging, reject
from model_sync.agent.state import ModelState
from model_sync.agent.triton import TritonProbe, serving_ready
from model_sync.errors import Abandoned, describe
from model_sync.records.codec import ReplicaState
from model_sync.s3.bucket import Bucket

log = logging.getLogger("model_sync.agent")


def backoff_delay(
    failures: int, base: float, cap: float, rng: Callable[[float, float], float] = random.uniform
) -> float:
    """Exponential backoff with jitter: uniform(half, full) of min(cap, base * 2**(failures-1))."""
    ceiling = min(cap, base * (2 ** max(0, failures - 1)))
    return rng(ceiling / 2, ceiling)


class RepositoryAgent:
    """Syncs pinned versions from the bucket into the local repository (docs/architecture.md#the-agents-pass)."""

    def __init__(
        self,
        settings: AgentSettings,
        s3: Bucket,
        stop: threading.Event | None = None,
        triton: TritonProbe | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.stop = stop or threading.Event()
        self.triton = (
            triton
            if triton is not None
            else (TritonProbe(settings.triton_url, settings.triton_headers) if settings.triton_url else None)
        )
        self.clock = clock
        self.models: dict[str, ModelState] = {}
        self.s3_ok: bool | None = None
        self.last_s3_ok_at: float | None = None
        self.last_error: str | None = None
        self.started_at = clock()
        self.bucket = AgentBucket(s3, settings, self.stop)
        self.local = PodDisk(settings.repository, settings.staging, self.stop)
        self.status = StatusReport(settings, self.bucket, clock)
        self.ready_file = ReadyFile(settings.ready_file)
        self.metrics = AgentMetrics()
        self.loads = Loads(settings, self.models, self.triton, self.local, self.bucket, self._report, clock, self.stop,
                           self.metrics)  # fmt: skip
        self.staging = Staging(settings, self.models, self.bucket, self.local, self.loads, self.metrics)
        self.canaries = Canaries(self.bucket)

    @property
    def s3(self) -> Bucket:
        return self.bucket.s3

    @s3.setter
    def s3(self, repo: Bucket) -> None:
        self.bucket.s3 = repo

    @property
    def _listed_at(self) -> float | None:  # the last full listing of repository/ (tests and bench force a resync)
        return self.bucket.listed_at

    @_listed_at.setter
    def _listed_at(self, value: float | None) -> None:
        self.bucket.listed_at = value

    @property
    def _stage_version(self) -> Callable[[str, int, str, Path], None]:  # tests stub the download of one version
        return self.staging.stage_version

    @_stage_version.setter
    def _stage_version(self, stage: Callable[[str, int, str, Path], None]) -> None:
        self.staging.stage_version = stage  # type: ignore[method-assign,assignment]

    # -- lifecycle --

    def prepare(self) -> None:
        """Lock the staging area (leftovers of a killed run discarded), serve /metrics (with a
        metrics port), and adopt what is in place (restart on a persistent volume): reported
        PLACED, confirmed once Triton is live."""
        self.local.lock()
        if self.settings.metrics_port is not None:
            self.metrics.serve(self.settings.metrics_port, self.settings.metrics_address)
        for name, text in self.local.in_place().items():
            with contextlib.suppress(VersionRejected):
                self.models[name] = ModelState(serving=pinned_versions(text), state=ReplicaState.PLACED)

    def close(self) -> None:
        self.bucket.close()
        self.metrics.close()
        self.local.unlock()

    def run(self, once: bool = False) -> int:
        """Loop until `stop` is set (SIGTERM): exit code 0, after deleting this replica's status
        object. Nothing else ends the loop: S3 outages, access denied and unclassified errors are
        logged, recorded as last_error, counted in the metrics and retried with backoff. `once`
        (init container): one pass, and the exit codes of docs/agent.md (once_exit_code; 5 or 1
        after `max_failures` failed passes in a row)."""
        self.prepare()
        try:
            failures = 0
            while not self.stop.is_set():
                try:
                    self.sync_once(None if once else self.settings.interval)
                    self.metrics.passed(self.clock())
                    failures = 0
                    if once:
                        return self.once_exit_code()
                    self.ready_file.update(lambda: serving_ready(self.triton, self.models))
                    delay = self.settings.interval
                except Abandoned:
                    break
                except Exception as e:  # never crash the sidecar: Triton keeps serving what is in place
                    failures += 1
                    self.metrics.failed(e.kind if isinstance(e, S3Unavailable) else "other")
                    delay = backoff_delay(failures, self.settings.interval, self.settings.backoff_max)
                    if once and failures >= self.settings.max_failures:
                        return self._give_up(e, failures)
                    if isinstance(e, S3Unavailable):
                        what = "s3 access denied" if isinstance(e, S3AccessDenied) else "s3 unavailable"
                        log.warning(
                            "%s (attempt %d): %s; keeping the local repository as is, retrying in %.1fs",
                            what,
                            failures,
                            e,
                            delay,
                        )
                    else:
                        self.last_error = f"pass failed: {describe(e)}"
                        log.error(
                            "%s (attempt %d); keeping the local repository as is, retrying in %.1fs",
                            self.last_error,
                            failures,
                            delay,
                        )
                        self._report(force=False)
                self.stop.wait(delay)
            log.info("stop requested: exiting")
            if not once:
                self.ready_file.set(False)
                self.status.delete()
            return 0
        finally:
            self.local.clear_staging()
            self.close()

    def _give_up(self, e: Exception, failures: int) -> int:
        """`--once` after --max-failures failed passes in a row: the last failure is recorded, and
        one last line says that it gave up, why and the exit code (5: S3's, else 1)."""
        code = errors.S3 if isinstance(e, S3Unavailable) else errors.UNEXPECTED
        if isinstance(e, S3Unavailable):
            why = f"{'s3 access denied' if isinstance(e, S3AccessDenied) else 's3 unavailable'}: {e}"
        else:
            self.last_error = f"pass failed: {describe(e)}"
            why = self.last_error
            self._report(force=False)
        log.error(
            "gave up after %d failed passes in a row (--max-failures %d), the last: %s; the local repository "
            "is as it was; exit %d",
            failures,
            self.settings.max_failures,
            why,
            code,
        )
        return code

    def once_exit_code(self) -> int:
        pinned = [name for name, st in self.models.items() if st.pin_text is not None or st.pinned]
        placed = [name for name in pinned if self.models[name].serving]
        rejected = sorted(name for name in pinned if self.models[name].state == ReplicaState.FAILED)
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
            etags = self.bucket.changed_pins()  # 1. read the pins, and the gray releases that list this replica
            self.canaries.refresh()
            for name in sorted(set(etags) | set(self.models)):
                if self.stop.is_set():
                    raise Abandoned()
                try:
                    all_ok = self._sync_model(name, etags.get(name)) and all_ok  # 2. stage and verify
                except (S3Unavailable, Abandoned):
                    raise
                except Exception as e:
                    all_ok = False
                    self._model_error(name, e)
                    first_error = first_error or e
            self.s3_ok, self.last_s3_ok_at = True, self.clock()
        except S3Unavailable as e:
            self.s3_ok, self.last_error = False, str(e)
            self.staging.commit(self._model_error)  # 3. what verified before the outage goes live
            self._after_pass(wait)
            raise
        first_error = first_error or self.staging.commit(self._model_error)  # 3. place and flip locally
        self.last_error = None if first_error is None else f"{describe(first_error)}"
        all_ok = self._after_pass(wait) and all_ok
        if first_error is not None:
            raise PassError(describe(first_error)) from first_error
        return all_ok

    def _after_pass(self, wait: float | None) -> bool:
        all_ok = self.loads.refresh(wait)  # 4. confirm, 5. smoke-test
        for name, st in self.models.items():  # 6. prune and report
            self.local.prune(name, set(st.serving) | set(st.pinned), self.settings.keep_versions)
        self._report(force=False)
        return all_ok

    def _model_error(self, name: str, err: Exception) -> None:
        st = self.models.setdefault(name, ModelState())
        st.transition(error=f"sync failed: {describe(err)}")
        log.error("%s: %s", name, st.error)

    def _sync_model(self, name: str, listed_etag: str | object | None) -> bool:
        st = self.models.setdefault(name, ModelState())
        read = self.bucket.fetch_pin(name, listed_etag, st.bucket_pin[0] if st.bucket_pin else None)
        if read is not None:
            st.transition(bucket_pin=read)
        pin = self.canaries.pin_to_follow(name, st)
        pin = None if pin == (st.pin_etag, st.pin_text) else pin
        if pin is not None:
            st.transition(pin=pin)
        if st.pin_text is None:
            return True
        if pin is not None:
            try:
                st.transition(pinned=pinned_versions(st.pin_text))
            except VersionRejected as e:
                reject(name, st, 0, e, self.metrics)
                return False
        if st.rejected_text is not None and st.rejected_text == st.pin_text:
            st.transition(
                rejected_etag=st.pin_etag, rejected_text=None
            )  # an adopted version failed before the pin was read
        if st.rejected_etag is not None and st.rejected_etag == st.pin_etag:
            return False  # this pin already failed here: keep serving the previous version until the pin changes
        if self.local.pin(name) == st.pin_text and all(v in self.local.versions(name) for v in st.pinned):
            if name not in self.loads:  # in flight: confirmed by loads.refresh
                st.transition(serving=st.pinned)
            return True
        return self.staging.stage_pin(name, st)

    # -- status --

    def status_document(self) -> dict[str, Any]:
        return document(self.settings, self.models, self.local.versions, s3_reachable=self.s3_ok,
                        last_s3_ok_at=self.last_s3_ok_at,
                        last_error=self.last_error, started_at=self.started_at)  # fmt: skip

    def _report(self, force: bool = False) -> None:
        self.metrics.observe(self.models)
        self.status.report(self.status_document(), force)


def command(settings: AgentSettings, repo: Bucket, once: bool) -> int:
    """`model-sync agent`: run the agent until SIGTERM/SIGINT (or one pass with `once`); the exit code."""
    stop = threading.Event()

    def _on_signal(signum: int, _frame: object) -> None:
        log.info("signal %s received: finishing", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    agent = RepositoryAgent(settings, repo, stop=stop)
    log.info(
        "agent starting: env=%s bucket=%s repository=%s staging=%s triton=%s replica=%s/%s interval=%.1fs",
        settings.env, repo.env.uri, settings.repository, settings.staging, settings.triton_url, settings.deployment,
        settings.replica, settings.interval,
    )  # fmt: skip
    return agent.run(once=once)
