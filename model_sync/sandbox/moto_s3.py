"""`python -m model_sync.sandbox.moto_s3 --port PORT --state-file PATH [--owner PID] [--verbose]`: moto's
in-memory S3 on 127.0.0.1:PORT, whose listener two signals close and reopen while every bucket and
object stays in this process's memory. model_sync.sandbox.s3server.MotoS3Server runs it.

    SIGUSR1          stop listening: the listening socket is closed (connections are refused) and
                     every connection still open is cut, as when a server dies
    SIGUSR2          listen again, on the same port, with the same buckets and objects
    SIGTERM, SIGINT  exit (the buckets and objects are gone)

The state file says `serving` or `stopped` once a change is complete (written then renamed). With
--owner the process also exits when PID is no longer its parent: a stopped server never outlives
the process that started it.

Two changes to moto 5.2.5. A fix (`keep_replaced_objects_readable`): an overwrite closes the
replaced object's buffer at once, so a GET that already holds that object answered 500 "I/O
operation on closed file" (seen: 1 GET of ~10,000 racing a PUT, bench/s3/race.py). Here the buffer
is closed when the last request holding the object is done, and the GET answers the old bytes, as
AWS S3 does. A speed-up (`serialize_timestamps_without_dateutil`): the same responses, with the
timestamps moto keeps as ISO 8601 strings read without dateutil.

The server is the one moto's own ThreadedMotoServer runs (moto/moto_server/threaded_moto_server.py:
werkzeug's threaded WSGI server over DomainDispatcherApplication(create_backend_app) with
MotoRequestHandler; moto's backends are module state, so a new server sees the old buckets). Its
stop() closes the listening socket (werkzeug's serve_forever closes it on shutdown; a connect is then
refused at once) but lets requests in flight finish: this one also cuts them.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

from werkzeug.serving import ThreadedWSGIServer

from model_sync.sandbox.procs import LOOPBACK

STOP, START = signal.SIGUSR1, signal.SIGUSR2
EXIT = (signal.SIGTERM, signal.SIGINT)
SERVING, STOPPED = "serving", "stopped"
OWNER_POLL_S = 0.5  # how often the owner's presence is checked


class Listener(ThreadedWSGIServer):
    """moto's S3 app served on 127.0.0.1:`port` from a thread; `cut()` ends it and the connections it has open."""

    def __init__(self, port: int, app: Any) -> None:
        from moto.moto_server.werkzeug_app import MotoRequestHandler

        super().__init__(LOOPBACK, port, app, handler=MotoRequestHandler)
        self.open_requests: set[socket.socket] = set()
        self.requests_lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.requests_lock:
            self.open_requests.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.requests_lock:
            self.open_requests.discard(request)
        super().shutdown_request(request)

    def cut(self) -> None:
        """Close the listening socket (serve_forever closes it on its way out), then every open connection."""
        self.shutdown()
        self.thread.join()
        with self.requests_lock:
            requests = list(self.open_requests)
        for request in requests:
            with contextlib.suppress(OSError):
                request.shutdown(socket.SHUT_RDWR)


class _Untracked(list[Any]):
    """An `instances_tracked` that keeps no reference (moto's keeps every object ever written, for
    its dashboard and reset(), so none is ever freed)."""

    def append(self, item: Any) -> None:
        pass


def keep_replaced_objects_readable() -> None:
    """moto 5.2.5 disposes of an object replaced or deleted at once (moto/s3/utils.py
    _VersionedKeyStore.setlist and pop -> FakeKey.dispose() closes its buffer) while a GET of it may
    still be reading it. Here an explicit dispose() only marks the object; the buffer is closed by
    FakeKey.__del__ (dispose(garbage=True)) when nothing holds the object any more: moto's strong
    reference to every FakeKey (instances_tracked) is dropped, so that happens as soon as the last
    request holding it is done."""
    from importlib.metadata import version

    from moto.s3.models import FakeKey

    original = FakeKey.dispose
    if not isinstance(getattr(FakeKey, "instances_tracked", None), list):
        raise RuntimeError(f"moto: {version('moto')} (no FakeKey.instances_tracked list); allowed: moto 5.2.5")

    def dispose(self: Any, garbage: bool = False) -> None:
        if garbage:  # the last reference is gone: close it (moto warns only when nobody asked first)
            original(self, garbage=not getattr(self, "_dispose_asked", False))
        else:
            self._dispose_asked = True

    FakeKey.instances_tracked = _Untracked()  # type: ignore[attr-defined]
    FakeKey.dispose = dispose  # type: ignore[method-assign]


def serialize_timestamps_without_dateutil() -> None:
    """moto 5.2.5's response serializer turns every timestamp it writes (each listed key's
    LastModified) into an aware datetime with botocore's parse_to_aware_datetime, whose strings go
    through dateutil's generic parser: half of a ListObjectsV2's CPU here (17 ms for 30 keys,
    measured), and the lab's agents list the bucket every pass. The ISO 8601 strings moto keeps are
    read by datetime.fromisoformat instead, in UTC as botocore's parser returns them; any other
    value still goes to botocore's function."""
    from datetime import UTC, datetime

    import moto.core.serialize as serialize

    original = serialize.parse_to_aware_datetime

    def parse_to_aware_datetime(value: Any) -> datetime:
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                return original(value)
            return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
        return original(value)

    serialize.parse_to_aware_datetime = parse_to_aware_datetime


def write_state(path: Path, state: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(state + "\n")
    os.replace(tmp, path)


def listen(port: int, app: Any, state_file: Path) -> Listener:
    listener = Listener(port, app)
    listener.thread.start()
    write_state(state_file, SERVING)
    return listener


def serve(port: int, state_file: Path, owner: int | None) -> None:
    """Serve until SIGTERM/SIGINT (or the owner's exit), closing and reopening the listener on STOP/START."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    signals = {STOP, START, *EXIT}
    # Blocked before any thread starts, so every thread inherits the mask: only sigtimedwait below takes them.
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    keep_replaced_objects_readable()
    serialize_timestamps_without_dateutil()
    app = DomainDispatcherApplication(create_backend_app)
    listener: Listener | None = listen(port, app, state_file)
    while True:
        got = signal.sigtimedwait(signals, OWNER_POLL_S)
        if got is None:
            if owner is not None and os.getppid() != owner:
                break
        elif got.si_signo in EXIT:
            break
        elif got.si_signo == STOP and listener is not None:
            listener.cut()
            listener = None
            write_state(state_file, STOPPED)
        elif got.si_signo == START and listener is None:
            listener = listen(port, app, state_file)
    if listener is not None:
        listener.cut()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m model_sync.sandbox.moto_s3",
        description="moto's in-memory S3 on 127.0.0.1:PORT; SIGUSR1 stops listening, SIGUSR2 listens again "
        "(buckets and objects kept), SIGTERM exits.",
    )
    p.add_argument("--port", type=int, required=True, help="TCP port on 127.0.0.1")
    p.add_argument("--state-file", type=Path, required=True, help="written `serving` / `stopped` after each change")
    p.add_argument("--owner", type=int, help="exit when this pid is no longer the parent process")
    p.add_argument("--verbose", action="store_true", help="log every request (werkzeug's access log)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not 0 < args.port < 65536:
        raise SystemExit(f"moto_s3 --port: {args.port}; allowed: 1..65535")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.INFO if args.verbose else logging.WARNING)
    serve(args.port, args.state_file, args.owner)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
