"""model_sync.parallel: parallel_map's order, its first failure, an interrupt's safe stop, and
Background; then both driving real requests to a moto_server, as `push` does."""

from __future__ import annotations

import pytest

from tests.support.s3_servers import S3Server


def test_background_returns_or_reraises_what_its_call_did(moto_s3: S3Server, s3_bucket: str) -> None:
    from model_sync import parallel

    client = moto_s3.client()
    client.put_object(Bucket=s3_bucket, Key="k", Body=b"v")
    assert parallel.Background(lambda: client.get_object(Bucket=s3_bucket, Key="k")["Body"].read()).result() == b"v"
    failed = parallel.Background(lambda: client.get_object(Bucket=s3_bucket, Key="missing"))
    assert type(failed.exception()).__name__ == "NoSuchKey"
    with pytest.raises(Exception, match="NoSuchKey"):
        failed.result()


def test_parallel_map_puts_every_object_once(moto_s3: S3Server, s3_bucket: str) -> None:
    from model_sync import parallel

    client = moto_s3.client()
    keys = [f"k/{i:03d}" for i in range(40)]
    assert (
        parallel.parallel_map(
            lambda k: client.put_object(Bucket=s3_bucket, Key=k, Body=k.encode())["ResponseMetadata"]["HTTPStatusCode"],
            keys,
            8,
        )
        == [200] * 40
    )
    assert moto_s3.keys(s3_bucket, "k/") == keys


def test_parallel_map_keeps_order_and_reraises_the_first_failure() -> None:
    import threading

    from model_sync import parallel

    seen: list[int] = []
    lock = threading.Lock()

    def square(i: int) -> int:
        with lock:
            seen.append(i)
        return i * i

    assert parallel.parallel_map(square, list(range(50)), 16) == [i * i for i in range(50)]
    assert sorted(seen) == list(range(50))

    def fail_on_three(i: int) -> int:
        if i == 3:
            raise ValueError("item 3")
        return i

    with pytest.raises(ValueError, match=r"^item 3$"):
        parallel.parallel_map(fail_on_three, list(range(50)), 1)  # one worker: nothing after 3 starts


def test_an_interrupt_stops_new_models_and_lets_running_ones_finish() -> None:
    """Ctrl-C while models run: no further model starts, the running ones reach a safe point
    (they see `stop`), and the interrupt reaches the caller only after they have."""
    import signal
    import threading
    import time

    from model_sync import parallel

    started: list[int] = []
    finished: list[int] = []
    stop = threading.Event()

    def work(i: int) -> int:
        started.append(i)
        if i == 0:
            signal.pthread_kill(
                threading.main_thread().ident or 0, signal.SIGINT
            )  # Ctrl-C, delivered to the main thread waiting in join
        time.sleep(1.0)  # long enough for the interrupt to land while the first wave runs, even on a loaded machine
        finished.append(i)
        return i

    # Ctrl-C raises KeyboardInterrupt only under Python's default handler: a process started in
    # the background by a non-interactive shell inherits SIGINT ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            parallel.parallel_map(work, list(range(40)), 4, stop)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stop.is_set()
    assert len(started) <= 8, started  # the first wave (and at most one more each), never all 40
    assert sorted(finished) == sorted(started)  # every started item ran to its end before the raise
