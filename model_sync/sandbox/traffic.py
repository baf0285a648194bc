"""Client traffic for the local gray release: what a Kubernetes Service in front of a deployment's
replicas would send them, without the Service. `RoundRobinTraffic` runs `concurrency` threads that
send unversioned inference requests (`POST /v2/models/<m>/infer`, tritonclient.http, one client
per thread and replica) round-robin over the replicas' HTTP URLs (`remove`/`add` change them as a
Service's endpoints change when a pod dies or the deployment scales), and records every request: when
it was sent (time.monotonic()), to which replica, the `model_version` Triton says answered it, ok
or the error's one line, and its latency. A refused connection, a timeout or an error response is
a failure record; nothing a request does raises out of a thread.

`Records` (what `records()` and `stop()` return) summarises them: successes per version, failures
split between a stable and a canary version, the fraction of a version over a time window, when
a version last answered, latency quantiles.

    traffic = RoundRobinTraffic(fleet.http_urls, "m", lambda seq: {"INPUT0": np.full(4, seq, np.float32)})
    with traffic:
        ...
    print(traffic.records().version_counts())
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from model_sync import errors

# The request's inputs, by name, from its sequence number (0, 1, 2, ... in the order requests are
# sent): deterministic inputs let a test predict which requests a model fails.
InputsFactory = Callable[[int], Mapping[str, Any]]
# Reads the version a failure's error line names, if it names one (Records.attributed_version).
VersionNamer = Callable[[str], int | None]

DEFAULT_TIMEOUT_S = 10.0  # per request: connect and network timeout of each tritonclient
FAILURE_PAUSE_S = 0.01  # a thread pauses this long after a failure: a fleet that is down is not spun on


@dataclass(frozen=True)
class Request:
    """One request as the client saw it."""

    seq: int  # send order over all threads; the replica is the (seq % n)th of the n urls served then
    replica: int  # index into the traffic's urls
    sent: float  # time.monotonic() just before the request was sent
    latency: float  # seconds until the answer or the failure
    version: int | None  # the model_version Triton reported; None for a failure
    error: str | None  # one line; None when the request succeeded

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def answered(self) -> float:
        """time.monotonic() of the answer (or of the failure)."""
        return self.sent + self.latency


@dataclass(frozen=True)
class Failures:
    """Failed requests, by the version their replica was serving (`Records.failures`)."""

    stable: int
    canary: int
    other: int  # attributed to neither (a third version, or a replica that never answered)

    @property
    def total(self) -> int:
        return self.stable + self.canary + self.other


class Records(Sequence[Request]):
    """An immutable list of Request, in send order, with the summaries a gray release needs."""

    def __init__(self, requests: Sequence[Request]) -> None:
        self._requests = tuple(sorted(requests, key=lambda r: r.seq))

    def __len__(self) -> int:
        return len(self._requests)

    def __getitem__(self, index: Any) -> Any:
        return self._requests[index]

    def __iter__(self) -> Iterator[Request]:
        return iter(self._requests)

    def __repr__(self) -> str:
        return f"Records({len(self)} requests, {self.version_counts()}, {len(self.failed())} failed)"

    def ok(self) -> list[Request]:
        return [r for r in self._requests if r.ok]

    def failed(self) -> list[Request]:
        return [r for r in self._requests if not r.ok]

    def version_counts(self) -> dict[int, int]:
        """Successful requests per version that answered them."""
        return dict(sorted(Counter(r.version for r in self.ok() if r.version is not None).items()))

    def replica_counts(self) -> dict[int, int]:
        """Requests (ok or not) per replica index."""
        return dict(sorted(Counter(r.replica for r in self._requests).items()))

    def errors(self) -> Counter[str]:
        """Failure lines and how often each occurred."""
        return Counter(r.error for r in self.failed() if r.error is not None)

    def attributed_version(self, request: Request, named: VersionNamer | None = None) -> int | None:
        """The version that failed `request`: the one its error line names when `named` reads one
        from it (a model that says which version refused), otherwise the version its replica was
        serving, that of the replica's successful answer nearest in time (Triton's error responses
        do not name a version); None when neither is known."""
        if named is not None and request.error is not None:
            version = named(request.error)
            if version is not None:
                return version
        answers = self._answers_by_replica().get(request.replica)
        if not answers:
            return None
        times = [t for t, _ in answers]
        i = bisect.bisect_left(times, request.answered)
        candidates = [answers[j] for j in (i - 1, i) if 0 <= j < len(answers)]
        return min(candidates, key=lambda tv: abs(tv[0] - request.answered))[1]

    def failures(self, stable: int, canary: int, named: VersionNamer | None = None) -> Failures:
        """Failed requests split between the `stable` and the `canary` version (attributed_version)."""
        counts = Counter(self.attributed_version(r, named) for r in self.failed())
        return Failures(
            stable=counts[stable],
            canary=counts[canary],
            other=sum(n for v, n in counts.items() if v not in (stable, canary)),
        )

    def fraction(self, version: int, start: float | None = None, end: float | None = None) -> float | None:
        """Share of the successful answers in [start, end) (time.monotonic(), by answer time) that
        `version` gave; None when nothing was answered in the window."""
        window = [
            r
            for r in self.ok()
            if (start is None or r.answered >= start) and (end is None or r.answered < end) and r.version is not None
        ]
        if not window:
            return None
        return sum(1 for r in window if r.version == version) / len(window)

    def last_answered_by(self, version: int) -> float | None:
        """time.monotonic() of the last successful answer `version` gave; None if it never answered."""
        times = [r.answered for r in self.ok() if r.version == version]
        return max(times) if times else None

    def latency_quantile(self, q: float, version: int | None = None) -> float | None:
        """The q-quantile (0 < q <= 1, nearest rank) of the successful requests' latency in seconds,
        of `version` only when given; None when there are none."""
        if not 0 < q <= 1:
            raise ValueError(f"quantile: {q!r}; allowed: 0 < q <= 1")
        latencies = sorted(r.latency for r in self.ok() if version is None or r.version == version)
        if not latencies:
            return None
        return latencies[max(0, math.ceil(q * len(latencies)) - 1)]

    def _answers_by_replica(self) -> dict[int, list[tuple[float, int]]]:
        out: dict[int, list[tuple[float, int]]] = {}
        for r in self.ok():
            if r.version is not None:
                out.setdefault(r.replica, []).append((r.answered, r.version))
        for answers in out.values():
            answers.sort()
        return out


class RoundRobinTraffic:
    """Background inference traffic over `urls` (Triton HTTP endpoints, `http://host:port`).

    concurrency  threads, each sending one request after another (default 2)
    rate         requests per second over all threads (None: as fast as the replicas answer);
                 request n is due at start + n / rate
    limit        send this many requests in all, then the threads end (`wait()`); None: until stop()
    timeout      seconds: each client's connection and network timeout
    """

    def __init__(
        self,
        urls: Sequence[str],
        model: str,
        inputs_factory: InputsFactory,
        concurrency: int = 2,
        rate: float | None = None,
        limit: int | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if not urls:
            raise ValueError("urls: []; allowed: at least one Triton HTTP URL")
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"url: {url!r}; allowed: http(s)://host:port")
        if concurrency < 1:
            raise ValueError(f"concurrency: {concurrency!r}; allowed: >= 1")
        if rate is not None and not rate > 0:
            raise ValueError(f"rate: {rate!r}; allowed: > 0 requests per second, or None")
        if limit is not None and limit < 1:
            raise ValueError(f"limit: {limit!r}; allowed: >= 1 requests, or None")
        if not timeout > 0:
            raise ValueError(f"timeout: {timeout!r}; allowed: > 0 seconds")
        self.urls = list(urls)
        self.model = model
        self.inputs_factory = inputs_factory
        self.concurrency = concurrency
        self.rate = rate
        self.limit = limit
        self.timeout = timeout
        self._lock = threading.Lock()
        self._serving = list(range(len(self.urls)))  # indexes of the urls the round robin goes over
        self._seq = itertools.count()
        self._records: list[Request] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started_at = 0.0

    def start(self) -> RoundRobinTraffic:
        if self._threads:
            raise RuntimeError("traffic already started")
        import tritonclient.http  # noqa: F401 - imported here (~0.5 s), not inside the first request's latency

        self._started_at = time.monotonic()
        self._threads = [
            threading.Thread(target=self._run, name=f"traffic-{i}", daemon=True) for i in range(self.concurrency)
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: float | None = None) -> Records:
        """Stop sending, wait for the requests in flight (at most `timeout`, default the request
        timeout + 5 s), and return every record."""
        self._stop.set()
        deadline = time.monotonic() + (self.timeout + 5 if timeout is None else timeout)
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return self.records()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the threads to end (with `limit`: every request sent
        and answered); True when they have."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not self.running

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def remove(self, url: str) -> None:
        """Stop sending to `url` (its pod is gone from the Service's endpoints); requests in flight
        to it finish as they do."""
        with self._lock:
            index = self.urls.index(url)
            if index in self._serving and len(self._serving) > 1:
                self._serving.remove(index)

    def add(self, url: str) -> int:
        """Send to `url` too (a new or returning pod); its index in `urls`."""
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url: {url!r}; allowed: http(s)://host:port")
        with self._lock:
            if url not in self.urls:
                self.urls.append(url)
            index = self.urls.index(url)
            if index not in self._serving:
                self._serving.append(index)
            return index

    def records(self) -> Records:
        """A snapshot of every request recorded so far."""
        with self._lock:
            return Records(list(self._records))

    def __enter__(self) -> RoundRobinTraffic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self) -> tuple[int, int]:
        """The next request's sequence number and replica (an index into urls)."""
        with self._lock:
            seq = next(self._seq)
            return seq, self._serving[seq % len(self._serving)]

    def _run(self) -> None:
        clients: dict[int, Any] = {}
        try:
            while not self._stop.is_set():
                seq, replica = self._next()
                if self.limit is not None and seq >= self.limit:
                    return
                if self.rate is not None:
                    delay = self._started_at + seq / self.rate - time.monotonic()
                    if delay > 0 and self._stop.wait(delay):
                        return
                record = self._send(clients, seq, replica)
                with self._lock:
                    self._records.append(record)
                if not record.ok:
                    self._stop.wait(FAILURE_PAUSE_S)
        finally:
            for client in clients.values():
                _close(client)

    def _send(self, clients: dict[int, Any], seq: int, replica: int) -> Request:
        sent = time.monotonic()
        version: int | None = None
        error: str | None = None
        try:
            client = clients.get(replica)
            if client is None:
                client = clients[replica] = self._client(self.urls[replica])
            result = client.infer(self.model, self._inputs(seq))
            reported = result.get_response().get("model_version")
            if reported is None:
                error = "response: no model_version"
            else:
                version = int(reported)
        except BaseException as e:  # a thread never dies of a request: every failure is a record
            error = errors.describe(e)
            broken = clients.pop(replica, None)
            if broken is not None:
                _close(broken)  # a fresh connection next time (the server may have restarted)
        return Request(seq, replica, sent, time.monotonic() - sent, version, error)

    def _client(self, url: str) -> Any:
        import tritonclient.http as httpclient

        scheme, _, address = url.partition("://")
        return httpclient.InferenceServerClient(
            address.rstrip("/"),
            ssl=scheme == "https",
            connection_timeout=self.timeout,
            network_timeout=self.timeout,
        )

    def _inputs(self, seq: int) -> list[Any]:
        import numpy as np
        import tritonclient.http as httpclient
        from tritonclient.utils import np_to_triton_dtype

        tensors = []
        for name, value in self.inputs_factory(seq).items():
            array = np.ascontiguousarray(value)
            tensor = httpclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        return tensors


def _close(client: Any) -> None:
    try:
        client.close()
    except Exception:  # noqa: S110 - closing a client that already failed
        pass
