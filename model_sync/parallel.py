"""The threads model_sync runs work on: `Background` (one call on its own thread: push's hashing,
while pins are read) and `parallel_map` (push's models in parallel, interruptible at each model's
safe points; the GPU plan's manifest reads)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Background:
    """fn(*args) on its own thread, started now; result() waits and returns or re-raises."""

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str = "model-sync-background") -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, *args), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            self._value = fn(*args)
        except BaseException as e:  # handed to whoever waits
            self._error = e

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self) -> BaseException | None:
        self._thread.join()
        return self._error


def parallel_map(
    fn: Callable[[Any], Any], items: list[Any], workers: int, stop: threading.Event | None = None
) -> list[Any]:
    """[fn(item) ...] on `workers` threads, results in order. Every thread is started (and parked
    on an Event) before any runs: a thread started while others hold the GIL waits up to the
    switch interval to announce itself, which made ThreadPoolExecutor's start-as-you-submit cost
    ~2 ms per thread in a no-op push (cProfile). An exception in `fn` is re-raised here.
    Interrupted (KeyboardInterrupt while waiting): `stop` is set, no item is started any more, the
    ones running finish (fn checks `stop` at its own safe points), then the interrupt is re-raised."""
    results: list[Any] = [None] * len(items)
    failures: list[BaseException] = []
    stop = stop or threading.Event()
    go = threading.Event()
    position = iter(range(len(items)))
    lock = threading.Lock()

    count = max(1, min(workers, len(items)))
    done = [threading.Event() for _ in range(count)]

    def worker(n: int) -> None:
        try:
            go.wait()
            while True:
                with lock:
                    i = next(position, None)
                if i is None or failures or stop.is_set():
                    return
                try:
                    results[i] = fn(items[i])
                except BaseException as e:  # re-raised in the caller
                    failures.append(e)
                    return
        finally:
            done[n].set()

    for n in range(count):
        threading.Thread(target=worker, args=(n,), name=f"model-sync-model-{n}", daemon=True).start()
    go.set()
    # Waited on Events, not Thread.join(): a KeyboardInterrupt inside join() marks the joined
    # thread as stopped although it still runs (CPython's bpo-45274 handling), and a second
    # join() would then return at once, before that model reached its safe point. The 0.1 s
    # timeout lets a SIGINT that arrived just before the wait blocked be acted on (measured: a
    # plain wait() sometimes noticed it only when every model was done).
    try:
        for event in done:
            while not event.wait(0.1):
                pass
    except BaseException:
        stop.set()
        for event in done:
            event.wait()
        raise
    if failures:
        raise failures[0]
    return results
