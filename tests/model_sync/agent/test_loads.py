"""model_sync.agent.loads against the real tritonserver (tests/support/triton.py's `serving`):
placed versions confirmed together through Triton's repository index, READY ones smoke-tested, a
failed load pinned back to the version that served (or a new model removed) and reported with
Triton's reason; versions adopted from disk confirmed the same way once Triton is live."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import botocore.session
import pytest

from model_sync import environments
from model_sync.agent.bucket import AgentBucket
from model_sync.agent.loads import Loads
from model_sync.agent.metrics import AgentMetrics
from model_sync.agent.pod_disk import PodDisk
from model_sync.agent.settings import AgentSettings
from model_sync.agent.state import ModelState
from model_sync.agent.triton import TritonProbe
from model_sync.contract import layout
from model_sync.records.codec import ReplicaState
from model_sync.s3 import clients
from model_sync.s3.bucket import Bucket
from tests.support.triton import BUCKET, DEPLOYMENT, REPLICA, Serving, add_model_files, pinned_config, served_version
from tests.support.triton import serving as serving_fixture
from tests.support.triton import triton_runtime as triton_runtime_fixture

serving = serving_fixture
triton_runtime = triton_runtime_fixture

REASON = "initialize failed on purpose (test model)"


def _files(version: int, fail: bool = False):
    files = add_model_files(version, fail)

    def download(rel: str, dest: Path) -> int:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(files[rel])
        return len(files[rel])

    return list(files), download


def _loads(
    repository: Path, staging: Path, models: dict[str, ModelState], triton_url: str | None, bucket: AgentBucket | None
) -> Loads:
    settings = AgentSettings(
        root=layout.Root(BUCKET),
        repository=repository,
        staging=staging,
        deployment=DEPLOYMENT,
        replica=REPLICA,
        triton_url=triton_url,
        ready_timeout=60.0,
        heartbeat=5.0,
    )
    stop = threading.Event()
    local = PodDisk(repository, staging, stop)
    local.lock()
    probe = TritonProbe(triton_url) if triton_url else None
    return Loads(settings, models, probe, local, bucket, lambda: None, time.time, stop, AgentMetrics())  # type: ignore[arg-type]


def _place(loads: Loads, name: str, version: int, etag: str, fail: bool = False) -> ModelState:
    st = loads.models.setdefault(name, ModelState())
    st.transition(pin=(etag, pinned_config(name, version)), pinned=(version,))
    build = loads.local.new_build(name)
    files, download = _files(version, fail)
    loads.local.stage(name, version, files, download, build / str(version))
    loads.place(name, st, build)
    loads.local.discard(build)
    return st


def _bucket(stack: Serving) -> AgentBucket:
    session = clients.share_data_loader(botocore.session.get_session())
    session.set_credentials(stack.s3.access_key, stack.s3.secret_key)
    env = environments.Environment("test", layout.Root(BUCKET), stack.s3.endpoint_url, stack.s3.region)
    settings = AgentSettings(
        root=layout.Root(BUCKET),
        repository=stack.repository,
        staging=stack.staging,
        deployment=DEPLOYMENT,
        replica=REPLICA,
    )
    return AgentBucket(Bucket(env, clients.AGENT, session=session), settings, threading.Event())


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_loads_are_confirmed_together_and_failures_fall_back_with_tritons_reason(serving: Serving) -> None:
    stack = serving
    url = stack.triton.http_url
    models: dict[str, ModelState] = {}
    loads = _loads(stack.repository, stack.staging, models, url, _bucket(stack))
    # Adopted: placed before Triton started (the init container), its pinned version 2 fails to load.
    build = loads.local.new_build("adopted")
    for version, fail in ((1, False), (2, True)):
        files, download = _files(version, fail)
        loads.local.stage("adopted", version, files, download, build / str(version))
    (build / layout.CONFIG_FILE).write_text(pinned_config("adopted", 2))
    os.rename(build, stack.repository / "adopted")
    models["adopted"] = ModelState(
        pin_text=pinned_config("adopted", 2), pinned=(2,), serving=(2,), state=ReplicaState.PLACED
    )

    add = _place(loads, "add", 1, "e1")
    bad = _place(loads, "newbad", 1, "n1", fail=True)
    assert (add.state, bad.state) == (ReplicaState.LOADING, ReplicaState.LOADING)
    assert set(loads.in_flight) == {"add", "newbad"}
    assert "add" in loads
    assert loads.refresh(None) is False  # every load settled at once; two failed

    assert (add.state, add.serving, add.error) == (ReplicaState.READY, (1,), None)
    assert add.smoke is not None
    assert (add.smoke["ok"], add.smoke["version"]) == (True, 1), add.smoke
    assert served_version(url, "add") == 1
    # A new model that fails is moved out of the repository (Triton stops retrying it).
    assert (bad.state, bad.serving, bad.rejected_etag) == (ReplicaState.FAILED, (), "n1")
    assert bad.error is not None
    assert bad.error.startswith("version(s) [1] failed to load: ")
    assert REASON in bad.error
    assert "\n" not in bad.error
    assert REASON in bad.failed[1]
    assert not (stack.repository / "newbad").exists()
    # The adopted failure: the newest other local version pinned back (no manifest in the bucket:
    # the local config re-pinned), and it serves.
    adopted = models["adopted"]
    assert (adopted.state, adopted.serving) == (ReplicaState.FAILED, (1,))
    assert REASON in adopted.failed[2]
    assert (stack.repository / "adopted" / layout.CONFIG_FILE).read_text() == pinned_config("adopted", 1)
    assert served_version(url, "adopted") == 1
    assert loads.in_flight == {}

    # The served model's next version fails: version 1 is pinned back and keeps answering.
    add = _place(loads, "add", 2, "e2", fail=True)
    assert (stack.repository / "add" / "2").is_dir()
    assert loads.in_flight["add"].previous == (1,)
    assert loads.refresh(None) is False
    assert (add.state, add.pinned, add.serving, add.rejected_etag) == (ReplicaState.FAILED, (2,), (1,), "e2")
    assert add.error is not None
    assert REASON in add.error
    assert "\n" not in add.error
    assert REASON in add.failed[2]
    assert (stack.repository / "add" / layout.CONFIG_FILE).read_text() == pinned_config("add", 1)
    assert served_version(url, "add") == 1
    assert add.smoke is not None
    assert (add.smoke["ok"], add.smoke["version"]) == (True, 1)
    # The failure stays reported until the pin changes; a later refresh leaves it alone.
    assert loads.refresh(0.0) is True
    assert add.state == ReplicaState.FAILED


def test_without_triton_a_placed_version_is_placed_not_loading(tmp_path: Path) -> None:
    loads = _loads(tmp_path / "models", tmp_path / ".models.staging", {}, None, None)
    st = _place(loads, "add", 4, "e4")
    assert (st.state, st.serving, st.error) == (ReplicaState.PLACED, (4,), None)
    assert loads.in_flight == {}
    assert loads.refresh(None) is True
    assert (tmp_path / "models" / "add" / layout.CONFIG_FILE).read_text() == pinned_config("add", 4)
    assert (tmp_path / "models" / "add" / "4" / "model.py").is_file()
