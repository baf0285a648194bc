"""TCP endpoints that misbehave on purpose, in front of (or instead of) a real S3 server process:
what a flaky network does to model_sync's botocore client, reproduced on 127.0.0.1."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any


class _Listener:
    """A 127.0.0.1 listener on a free port whose thread hands each accepted connection to
    `_accepted`, counting them (one per request attempt)."""

    def __init__(self) -> None:
        self.accepted = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True)]
        self._threads[0].start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            self._accepted(conn)

    def _accepted(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        self.sock.close()


class DroppingListener(_Listener):
    """Accepts each connection and closes it at once."""

    def _accepted(self, conn: socket.socket) -> None:
        conn.close()


class Relay(_Listener):
    """A relay in front of a real server: every connection passed through untouched until `cut()`,
    which closes the connections open and every later one on accept (the server gone for this
    client only: one replica's path to S3 cut, its peers' intact)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.cut_off = False
        self._sockets: list[socket.socket] = []
        super().__init__()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accepted(self, conn: socket.socket) -> None:
        if self.cut_off:
            conn.close()
            return
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        self._sockets += [conn, upstream]
        self._spawn(self._pump, conn, upstream)
        self._spawn(self._pump, upstream, conn)

    def cut(self) -> None:
        self.cut_off = True
        self._close_sockets()

    def _spawn(self, target: Any, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self._threads.append(t)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (src, dst):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def _close_sockets(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._close_sockets()
        super().close()


class LostResponseRelay(Relay):
    """A relay in front of a real server that loses the first response: the first request is
    delivered whole, the server answers (so it HAS applied it), and the client sees the connection
    closed instead. Later connections are relayed untouched."""

    def __init__(self, target_port: int) -> None:
        self.lost = b""
        super().__init__(target_port)

    def _accepted(self, conn: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        self._sockets += [conn, upstream]
        self._spawn(self._pump, conn, upstream)
        if self.accepted == 1:
            self._spawn(self._lose, conn, upstream)
        else:
            self._spawn(self._pump, upstream, conn)

    def _lose(self, conn: socket.socket, upstream: socket.socket) -> None:
        upstream.settimeout(10)
        pending = b""
        with contextlib.suppress(OSError):
            while not self.lost and (chunk := upstream.recv(65536)):
                pending += chunk
                while not self.lost and b"\r\n\r\n" in pending:
                    head, _, pending = pending.partition(b"\r\n\r\n")
                    if head.startswith(b"HTTP/1.1 100"):  # an interim answer (Expect: 100-continue): passed on
                        conn.sendall(head + b"\r\n\r\n")
                    else:
                        self.lost = head + b"\r\n\r\n" + pending
        for sock in (conn, upstream):  # the client gets the connection closed instead of the answer
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class NotFoundEverywhere(_Listener):
    """An HTTP server that is not S3: every request gets `404 Not Found` with an HTML body (a
    wrong --endpoint-url pointing at a web server)."""

    def _accepted(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.settimeout(2)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            body = b"<html><body>Not Found</body></html>"
            conn.sendall(
                (
                    b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nConnection: close\r\nContent-Length: "
                    b"%d\r\n\r\n%s"
                )
                % (len(body), body)
            )
