"""The Triton side of the agent: `TritonProbe` (Triton's HTTP/REST API on loopback, stdlib only:
the agent image has no tritonclient HTTP extras), load confirmation through the repository index
(`await_loads`) and the smoke inference of a served version (`smoke`); steps 4 and 5 of
docs/architecture.md#the-agents-pass."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from model_sync.agent.exceptions import VersionRejected
from model_sync.agent.state import ModelState
from model_sync.errors import describe
from model_sync.observation import smoke as smoke_inference
from model_sync.records.codec import ReplicaState, format_time

log = logging.getLogger("model_sync.agent")
TIMED_OUT = "not READY within"  # how await_loads' reason for a load past --ready-timeout begins


class TritonProbe:
    """Triton's HTTP/REST API on the replica (loopback): readiness and repository index."""

    def __init__(self, url: str, headers: Iterable[tuple[str, str]] = (), timeout: float = 3.0) -> None:
        self.url = url.rstrip("/")
        self.headers = dict(headers)
        self.timeout = timeout

    def _request(self, path: str, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=self.headers)  # noqa: S310 - http(s) URL validated in AgentSettings
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read()
        except (OSError, ValueError):
            return 0, b""

    def live(self) -> bool:
        # ref: https://github.com/kserve/open-inference-protocol (GET v2/health/live)
        return self._request("/v2/health/live")[0] == 200

    def infer(self, model: str, version: int, body: bytes, header_length: int) -> tuple[int, bytes, int | None]:
        """POST a binary-tensor inference request: (status, body, JSON header length of the reply)."""
        # ref: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md
        headers = {
            **self.headers,
            "Content-Type": "application/octet-stream",
            "Inference-Header-Content-Length": str(header_length),
        }
        req = urllib.request.Request(  # noqa: S310
            f"{self.url}/v2/models/{model}/versions/{version}/infer", data=body, method="POST", headers=headers
        )
        try:
            with urllib.request.urlopen(req, timeout=max(self.timeout, 30.0)) as resp:  # noqa: S310
                length = resp.headers.get("Inference-Header-Content-Length")
                return int(resp.status), resp.read(), int(length) if length else None
        except urllib.error.HTTPError as err:
            return int(err.code), err.read(), None
        except (OSError, ValueError) as err:
            return 0, str(err).encode(), None

    def version_ready(self, model: str, version: int) -> bool:
        # ref: https://github.com/kserve/open-inference-protocol (GET v2/models/{m}/versions/{v}/ready)
        return self._request(f"/v2/models/{model}/versions/{version}/ready")[0] == 200

    def index(self) -> list[dict[str, Any]] | None:
        """POST /v2/repository/index (None when unavailable, e.g. restricted without the header)."""
        # ref: https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_model_repository.md
        code, body = self._request("/v2/repository/index", method="POST", body=b"{}")
        if code != 200:
            return None
        with contextlib.suppress(ValueError):
            doc = json.loads(body)
            if isinstance(doc, list):
                return doc
        return None

    def version_states(self) -> dict[tuple[str, int], tuple[str, str]] | None:
        """(model, version) -> (state, reason) for every version in the repository index, in
        one request; None when the index is unavailable."""
        entries = self.index()
        if entries is None:
            return None
        states: dict[tuple[str, int], tuple[str, str]] = {}
        for entry in entries:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                states[(str(entry["name"]), int(entry["version"]))] = (
                    str(entry.get("state") or ""),
                    str(entry.get("reason") or ""),
                )
        return states


def failure_reason(entry: tuple[str, str] | None) -> str | None:
    """The reason of a version the index shows UNAVAILABLE after a load attempt (not merely unloaded)."""
    if entry is not None and entry[0] == "UNAVAILABLE" and entry[1] and entry[1] != "unloaded":
        return entry[1]
    return None


def await_loads(
    probe: TritonProbe,
    waiting: Mapping[str, tuple[tuple[int, ...], float]],
    wait: float | None,
    ready_timeout: float,
    stop: threading.Event,
    heartbeat: Callable[[], None],
) -> dict[str, str | None]:
    """model -> None once every one of its versions is READY, else Triton's failure reason (or a
    timeout `ready_timeout` after its start, monotonic); models still loading after `wait` seconds
    (None: no limit) or when stopping are left out. One repository-index request per tick answers
    for every model; `heartbeat` (the status report) is called every second meanwhile."""
    outcome: dict[str, str | None] = {}
    give_up = None if wait is None else time.monotonic() + wait
    next_report = time.monotonic() + 1.0
    while True:
        states = probe.version_states()
        now = time.monotonic()
        for name, (versions, started) in waiting.items():
            if name in outcome:
                continue
            if states is None:  # no index (restricted API without the key): readiness only, failures time out
                if all(probe.version_ready(name, v) for v in versions):
                    outcome[name] = None
            elif all(states.get((name, v), ("", ""))[0] == "READY" for v in versions):
                outcome[name] = None
            # Give Triton's poller (1 s) time to notice the new config before trusting the
            # index (it may still show an earlier attempt's state).
            elif now - started > 3.0 and (
                reason := next((r for v in versions if (r := failure_reason(states.get((name, v))))), None)
            ):
                outcome[name] = reason
            if name not in outcome and now >= started + ready_timeout:
                outcome[name] = f"{TIMED_OUT} {ready_timeout:.0f}s"
        if len(outcome) == len(waiting) or (give_up is not None and now >= give_up):
            return outcome
        if now >= next_report:
            heartbeat()  # writes only when something changed or a heartbeat is due
            next_report = time.monotonic() + 1.0
        if stop.wait(0.2):
            return outcome


def serving_ready(probe: TritonProbe | None, models: Mapping[str, ModelState]) -> bool:
    """Triton is live and every model with a version in place is READY there. Models without
    one (a failed new model, removed) do not hold the replica back."""
    if probe is None or not probe.live():
        return False
    placed = [st for st in models.values() if st.serving]
    return bool(placed) and all(st.state == ReplicaState.READY for st in placed)


def smoke_due(st: ModelState, now: float, heartbeat: float) -> bool:
    """A served single-version pin not smoke-tested yet, or whose last smoke failed a heartbeat ago."""
    if len(st.serving) != 1:
        return False  # verify checks single-version pins only
    if st.smoke is None or st.smoke.get("version") != st.serving[0]:
        return True
    return not st.smoke.get("ok") and now - float(st.smoke.get("_at", 0.0)) >= heartbeat


def smoke(
    probe: TritonProbe, name: str, version: int, config_text: str | None, clock: Callable[[], float]
) -> dict[str, Any]:
    """Smoke inference of `name`/`version` on loopback, inputs from the pinned config
    (model_sync.observation.smoke): the record kept as ModelState.smoke (`_at`: not reported)."""

    try:
        if config_text is None:
            raise VersionRejected("config.pbtxt: missing locally")
        problems = smoke_inference.smoke_loopback(probe, name, version, config_text)
    except Exception as e:
        problems = [f"smoke inference (agent) {name} {version}: {describe(e)}"]
    now = clock()
    record = {
        "ok": not problems,
        "version": version,
        "at": format_time(now),
        "detail": "; ".join(problems)[:500] or "ok",
        "_at": now,
    }
    if problems:
        log.error("%s version %d smoke inference failed: %s", name, version, record["detail"])
    else:
        log.info("%s version %d smoke inference ok", name, version)
    return record
