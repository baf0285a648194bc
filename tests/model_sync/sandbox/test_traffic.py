"""model_sync/sandbox/traffic.py: the round-robin client traffic and its summaries. Summaries are
checked on records written out by hand (what the threads record); the threads on loopback ports
where nothing listens (every request refused: failure records, never an exception). Traffic over
real tritonservers: tests/model_sync/sandbox/test_fleet.py (two replicas) and
tests/model_sync/sandbox/test_canary_models.py (each canary model kind)."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from model_sync.sandbox.procs import free_port
from model_sync.sandbox.traffic import Failures, Records, Request, RoundRobinTraffic


def ok(seq: int, replica: int, sent: float, version: int, latency: float = 0.01) -> Request:
    return Request(seq, replica, sent, latency, version, None)


def failed(seq: int, replica: int, sent: float, error: str = "InferenceServerException: [500] x") -> Request:
    return Request(seq, replica, sent, 0.01, None, error)


# Two replicas: 0 serves the stable version 1 throughout; 1 serves 1, then the canary 2 from t=10.
CANARY_RUN = Records(
    [
        ok(0, 0, 0.0, 1),
        ok(1, 1, 0.0, 1),
        ok(2, 0, 5.0, 1),
        failed(3, 1, 5.0),  # replica 1 still answers with version 1 around t=5
        ok(4, 0, 10.0, 1),
        ok(5, 1, 10.0, 2, latency=0.03),
        failed(6, 1, 12.0),  # nearest answer of replica 1: the canary's
        ok(7, 0, 15.0, 1),
        ok(8, 1, 15.0, 2, latency=0.05),
        failed(9, 0, 16.0),  # replica 0 serves version 1
    ]
)


def test_version_counts_and_replica_counts() -> None:
    assert CANARY_RUN.version_counts() == {1: 5, 2: 2}
    assert CANARY_RUN.replica_counts() == {0: 5, 1: 5}
    assert [r.seq for r in CANARY_RUN.failed()] == [3, 6, 9]
    assert CANARY_RUN.errors() == {"InferenceServerException: [500] x": 3}


def test_failures_are_split_by_the_version_their_replica_was_answering_with() -> None:
    assert CANARY_RUN.failures(stable=1, canary=2) == Failures(stable=2, canary=1, other=0)
    assert CANARY_RUN.attributed_version(CANARY_RUN[6]) == 2
    assert CANARY_RUN.attributed_version(CANARY_RUN[3]) == 1
    # A replica that never answered (refused from the start), and a third version: neither track.
    never = Records([*CANARY_RUN, failed(10, 2, 1.0), ok(11, 3, 1.0, 7), failed(12, 3, 2.0)])
    assert never.failures(stable=1, canary=2) == Failures(stable=2, canary=1, other=2)
    assert never.failures(stable=1, canary=2).total == 5


def test_a_failure_whose_error_names_its_version_is_attributed_to_that_version() -> None:
    # Replica 1 switches back from the canary 2 to 1 at t=20; a canary failure answered just after the
    # switch is nearest in time to a stable answer, and only the version its error names says otherwise.
    def named(error: str) -> int | None:
        return int(error.rsplit(" ", 1)[1]) if error.startswith("refused by version ") else None

    switch = Records(
        [
            ok(0, 1, 10.0, 2),
            failed(1, 1, 20.0, "refused by version 2"),
            ok(2, 1, 20.0, 1),
            failed(3, 1, 30.0),  # names nothing: the replica's nearest answer (version 1)
        ]
    )
    assert switch.failures(stable=1, canary=2) == Failures(stable=2, canary=0, other=0)
    assert switch.failures(stable=1, canary=2, named=named) == Failures(stable=1, canary=1, other=0)
    assert switch.attributed_version(switch[1], named) == 2
    assert switch.attributed_version(switch[3], named) == 1


def test_fraction_of_a_version_over_a_window_counts_successful_answers_by_answer_time() -> None:
    assert CANARY_RUN.fraction(2) == pytest.approx(2 / 7)
    assert CANARY_RUN.fraction(2, start=10.0) == pytest.approx(2 / 4)
    assert CANARY_RUN.fraction(2, end=10.0) == 0.0
    assert CANARY_RUN.fraction(1, start=10.0, end=15.02) == pytest.approx(2 / 3)  # seq 8 answered at 15.05: out
    assert CANARY_RUN.fraction(1, start=10.02, end=15.0) == 0.0  # seq 4 answered at 10.01: out
    assert CANARY_RUN.fraction(1, start=100.0) is None


def test_last_answered_by_and_latency_quantiles() -> None:
    assert CANARY_RUN.last_answered_by(1) == pytest.approx(15.01)
    assert CANARY_RUN.last_answered_by(2) == pytest.approx(15.05)
    assert CANARY_RUN.last_answered_by(3) is None
    assert CANARY_RUN.latency_quantile(1.0) == pytest.approx(0.05)
    assert CANARY_RUN.latency_quantile(0.5, version=2) == pytest.approx(0.03)
    assert CANARY_RUN.latency_quantile(0.5, version=1) == pytest.approx(0.01)
    assert CANARY_RUN.latency_quantile(0.99, version=9) is None
    with pytest.raises(ValueError, match=r"quantile: 0; allowed: 0 < q <= 1"):
        CANARY_RUN.latency_quantile(0)


def test_records_are_in_send_order_whatever_order_they_were_appended_in() -> None:
    records = Records([ok(2, 0, 1.0, 1), ok(0, 0, 0.0, 1), failed(1, 1, 0.5)])
    assert [r.seq for r in records] == [0, 1, 2]
    assert records[1].answered == pytest.approx(0.51)
    assert not records[1].ok


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"urls": []}, r"urls: \[\]; allowed: at least one Triton HTTP URL"),
        ({"urls": ["127.0.0.1:8000"]}, r"url: '127.0.0.1:8000'; allowed: http\(s\)://host:port"),
        ({"concurrency": 0}, r"concurrency: 0; allowed: >= 1"),
        ({"rate": 0}, r"rate: 0; allowed: > 0 requests per second, or None"),
        ({"limit": 0}, r"limit: 0; allowed: >= 1 requests, or None"),
        ({"timeout": 0}, r"timeout: 0; allowed: > 0 seconds"),
    ],
)
def test_traffic_rejects_bad_settings(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"urls": ["http://127.0.0.1:1"], "model": "m", "inputs_factory": lambda seq: {}}
    with pytest.raises(ValueError, match=message):
        RoundRobinTraffic(**{**args, **kwargs})


def _inputs(seq: int) -> dict[str, np.ndarray]:
    return {"INPUT0": np.full(4, seq, dtype=np.float32)}


def test_refused_connections_and_a_failing_inputs_factory_are_failure_records_not_exceptions() -> None:
    urls = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]

    def factory(seq: int) -> dict[str, np.ndarray]:
        if seq == 3:
            raise ValueError("no input for 3")
        return _inputs(seq)

    crashed: list[Any] = []
    previous = threading.excepthook
    threading.excepthook = crashed.append
    try:
        traffic = RoundRobinTraffic(urls, "m", factory, concurrency=2, limit=30).start()
        assert traffic.wait(20)
    finally:
        threading.excepthook = previous
    assert crashed == []
    records = traffic.records()
    assert [r.seq for r in records] == list(range(30))
    assert [r.replica for r in records] == [seq % 2 for seq in range(30)]
    assert not records.ok()
    assert records.errors() == {
        "ConnectionRefusedError: [Errno 111] Connection refused": 29,
        "ValueError: no input for 3": 1,
    }
    assert records.failures(stable=1, canary=2) == Failures(stable=0, canary=0, other=30)


def test_rate_paces_the_requests_over_all_threads_and_stop_ends_them() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    traffic = RoundRobinTraffic([url], "m", _inputs, concurrency=3, rate=40).start()
    time.sleep(1.0)
    assert traffic.running
    records = traffic.stop()
    assert not traffic.running
    assert 30 <= len(records) <= 45, len(records)  # 40/s for ~1 s
    sent = [r.sent - records[0].sent for r in records]
    assert all(t >= seq / 40 - 0.02 for seq, t in enumerate(sent)), sent  # never ahead of its schedule


def test_a_removed_url_leaves_the_round_robin_and_an_added_one_joins_it() -> None:
    """What a Service does when a pod dies or the deployment scales: requests stop going to the
    removed endpoint and start going to the added one, in round-robin order over those served."""
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(3)]
    traffic = RoundRobinTraffic(urls[:2], "m", _inputs, concurrency=1, rate=200).start()
    wait = time.monotonic() + 5
    while len(traffic.records()) < 10 and time.monotonic() < wait:
        time.sleep(0.01)
    traffic.remove(urls[0])
    cut = len(traffic.records()) + 1  # the one in flight may still go to urls[0]
    assert traffic.add(urls[2]) == 2
    time.sleep(0.3)
    records = traffic.stop()
    assert {r.replica for r in records[:10]} == {0, 1}
    later = [r.replica for r in records[cut + 1 :]]
    assert later, records
    assert 0 not in later
    assert set(later) == {1, 2}
    traffic = RoundRobinTraffic(urls[:1], "m", _inputs)
    traffic.remove(urls[0])  # the last one stays: a round robin over nothing sends nothing
    assert traffic.urls == urls[:1]
    with pytest.raises(ValueError, match=r"url: 'ftp://x'; allowed: http\(s\)://host:port"):
        traffic.add("ftp://x")
