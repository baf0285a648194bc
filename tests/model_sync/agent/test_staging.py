"""A pass's staging: a rejected version leaves nothing behind and fails the pin; the builds of a
pass are committed together, a model that fails to commit does not stop the others."""

from __future__ import annotations

import threading
from pathlib import Path

from model_sync.agent.exceptions import Rejection, VersionRejected
from model_sync.agent.metrics import AgentMetrics, state_of
from model_sync.agent.pod_disk import PodDisk
from model_sync.agent.settings import AgentSettings
from model_sync.agent.staging import Staging, reject
from model_sync.agent.state import ModelState
from model_sync.contract import layout
from model_sync.records.codec import ReplicaState


class RejectingBucket:
    def manifest_for_pin(self, name: str, version: int, pin_text: str) -> dict[str, object]:
        raise VersionRejected(f"manifest of {name} version {version}: sha256 mismatch", Rejection.CHECKSUM_MISMATCH)


class FailingLoads:
    def __init__(self, failing: str) -> None:
        self.failing = failing
        self.placed: list[tuple[str, bool]] = []

    def place(self, name: str, st: ModelState, build: Path) -> None:
        self.placed.append((name, build.is_dir()))
        if name == self.failing:
            raise OSError(28, "No space left on device")


def _staging(tmp_path: Path, models: dict[str, ModelState], bucket: object, loads: object) -> Staging:
    settings = AgentSettings(
        root=layout.Root("models-test"),
        repository=tmp_path / "models",
        staging=tmp_path / ".staging",
        deployment="default",
        replica="replica-0",
    )
    local = PodDisk(settings.repository, settings.staging, threading.Event())
    local.lock()
    return Staging(settings, models, bucket, local, loads, AgentMetrics())  # type: ignore[arg-type]


def test_a_rejected_version_fails_the_pin_and_leaves_no_build(tmp_path: Path) -> None:
    st = ModelState(pin_etag="e1", pin_text="config", pinned=(2,))
    staging = _staging(tmp_path, {"m": st}, RejectingBucket(), FailingLoads(""))
    assert staging.stage_pin("m", st) is False
    assert (st.state, st.rejected_etag, list(st.failed)) == (ReplicaState.FAILED, "e1", [2])
    assert st.error == "version 2 rejected: manifest of m version 2: sha256 mismatch"
    assert state_of(st) == ("REJECTED", "checksum_mismatch")
    assert staging.metrics.rejected.labels("m", "checksum_mismatch")._value.get() == 1
    assert staging.builds == {}
    assert list(staging.local.staging.iterdir()) == []


def test_commit_places_every_build_and_reports_the_one_that_fails(tmp_path: Path) -> None:
    models = {"a": ModelState(pin_text="a"), "b": ModelState(pin_text="b"), "c": ModelState(pin_text="c")}
    loads = FailingLoads("b")
    staging = _staging(tmp_path, models, RejectingBucket(), loads)
    for name in models:
        staging.builds[name] = staging.local.new_build(name)
        (staging.builds[name] / "1").mkdir(parents=True)
    errors: list[tuple[str, str]] = []
    first = staging.commit(lambda name, e: errors.append((name, str(e))))
    assert loads.placed == [("a", True), ("b", True), ("c", True)]
    assert errors == [("b", "[Errno 28] No space left on device")]
    assert isinstance(first, OSError)
    assert staging.builds == {}
    assert list(staging.local.staging.iterdir()) == []  # every build discarded, committed or not


def test_a_rejected_pin_names_no_version() -> None:
    st = ModelState(pin_etag="e3")
    reject("m", st, 0, VersionRejected("config.pbtxt: no version_policy", Rejection.PIN_INVALID), AgentMetrics())
    assert (st.state, st.error, st.rejected_etag, st.failed) == (
        ReplicaState.FAILED,
        "config.pbtxt: no version_policy",
        "e3",
        {0: "config.pbtxt: no version_policy"},
    )
