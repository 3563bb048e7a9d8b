"""A wrk-like HTTP/1.1 load generator for the zero-loss tests: one thread, raw sockets.

Like wrk, each connection has one request in flight and sends the next once
the response is complete; a ``Connection: close`` response makes it reconnect.
Unlike wrk it needs nothing installed, stops after a number of requests, and
says which connection failed and how.
"""

from __future__ import annotations

import errno
import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def request_for(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: loadgen\r\n\r\n".encode()


# A connection without progress for this long is an error (wrk --timeout 5s).
STALL_SECONDS = 5.0


@dataclass(frozen=True)
class Failure:
    """One failed connection, for a caller that must say which worker it was on."""

    port: int  # the client's port: the server side sees it as the peer's
    opened: float  # time.monotonic() of connect()
    failed: float
    responses: int  # complete responses on this connection before it failed
    kind: str


@dataclass
class LoadResult:
    requests: int = 0  # complete responses
    non_2xx: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # "connect"/"read"/"write"/... -> count
    samples: list[str] = field(default_factory=list)  # the first few errors, in words
    failures: list[Failure] = field(default_factory=list)  # every failed connection

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def error(self, kind: str, detail: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1
        if len(self.samples) < 10:
            self.samples.append(f"{kind}: {detail}")


class _Conn:
    __slots__ = ("buf", "connected", "opened", "port", "responses", "sock", "touched")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.connected = False
        self.port = sock.getsockname()[1]  # bound by connect(), before the handshake ends
        self.opened = self.touched = time.monotonic()
        self.responses = 0


def parse_response(buf: bytes) -> tuple[int, int, bool] | None:
    """(status, length, keep-alive) once a whole response is in ``buf``, else None.

    Only Content-Length framing: the test apps always send one.
    """
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = buf[:end].split(b"\r\n")
    version, status = lines[0].split(b" ", 2)[:2]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip().lower()
    total = end + 4 + int(headers[b"content-length"])
    if len(buf) < total:
        return None
    keep = version == b"HTTP/1.1" and headers.get(b"connection") != b"close"
    return int(status), total, keep


class _Load:
    def __init__(
        self,
        address: tuple[str, int],
        requests: int,
        deadline: float,
        progress: Callable[[int], None] | None,
        stop: Callable[[], bool] | None = None,
        path: str = "/",
        stall: float = STALL_SECONDS,
    ) -> None:
        self.request = request_for(path)
        self.stall = stall
        self.address = address
        self.stop = stop
        self.requests = requests
        self.deadline = deadline
        self.progress = progress
        self.sent = 0
        self.result = LoadResult()
        self.sel = selectors.DefaultSelector()

    def wanted(self) -> bool:
        if self.stop is not None and self.stop():
            return False
        return self.sent < self.requests and time.monotonic() < self.deadline

    def open(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex(self.address)
        if code not in (0, errno.EINPROGRESS):
            self.result.error("connect", errno.errorcode.get(code, str(code)))
            sock.close()
            return
        self.sel.register(sock, selectors.EVENT_WRITE, _Conn(sock))

    def fail(self, conn: _Conn, kind: str, detail: str) -> None:
        self.result.error(kind, f"{detail} (client port {conn.port})")
        failure = Failure(conn.port, conn.opened, time.monotonic(), conn.responses, kind)
        self.result.failures.append(failure)
        self.close(conn, reopen=True)

    def close(self, conn: _Conn, reopen: bool) -> None:
        self.sel.unregister(conn.sock)
        conn.sock.close()
        if reopen and self.wanted():
            self.open()

    def send(self, conn: _Conn) -> None:
        try:
            conn.sock.send(self.request)  # a few bytes into an empty send buffer: never partial
        except OSError as exc:
            self.fail(conn, "write", str(exc))
            return
        self.sent += 1
        self.sel.modify(conn.sock, selectors.EVENT_READ, conn)

    def on_connected(self, conn: _Conn) -> None:
        code = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self.fail(conn, "connect", errno.errorcode.get(code, str(code)))
            return
        conn.connected = True
        if self.wanted():
            self.send(conn)
        else:
            self.close(conn, reopen=False)

    def on_readable(self, conn: _Conn) -> None:
        result = self.result
        try:
            data = conn.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError as exc:
            self.fail(conn, "read", f"{exc} after {len(conn.buf)} bytes")
            return
        if not data:
            self.fail(conn, "read", f"closed after {len(conn.buf)} bytes")
            return
        conn.buf += data
        try:
            done = parse_response(conn.buf)
        except (ValueError, KeyError, IndexError) as exc:
            self.fail(conn, "parse", f"{exc!r} in {conn.buf[:200]!r}")
            return
        if done is None:
            return
        status, size, keep = done
        if size != len(conn.buf):
            result.error("parse", f"bytes after the response: {conn.buf[size:][:100]!r}")
        conn.buf = b""
        conn.responses += 1
        result.requests += 1
        if not 200 <= status < 300:
            result.non_2xx += 1
        if self.progress is not None:
            self.progress(result.requests)
        if keep and self.wanted():
            self.send(conn)
        else:
            self.close(conn, reopen=True)

    def run(self, connections: int) -> LoadResult:
        for _ in range(connections):
            self.open()
        sel = self.sel
        while sel.get_map():
            now = time.monotonic()
            for key, _ in sel.select(0.5):
                conn = key.data
                conn.touched = now
                if conn.connected:
                    self.on_readable(conn)
                else:
                    self.on_connected(conn)
            for key in list(sel.get_map().values()):
                conn = key.data
                if now - conn.touched > self.stall:
                    stage = "waiting for a response" if conn.connected else "connecting"
                    self.fail(conn, "timeout", stage)
        sel.close()
        return self.result


def run_load(
    host: str,
    port: int,
    *,
    connections: int,
    requests: int,
    time_limit: float,
    progress: Callable[[int], None] | None = None,
    stop: Callable[[], bool] | None = None,
    path: str = "/",
    stall: float = STALL_SECONDS,
) -> LoadResult:
    """Send about ``requests`` GETs over ``connections`` keep-alive connections.

    A connection closed or reset before a complete response, a failed
    connect, a failed send and a stall are counted as errors, as wrk counts
    them. Sending stops after ``requests`` requests or ``time_limit`` seconds;
    the requests then in flight are finished, not dropped. ``progress`` is
    called with the number of responses after each one; sending also stops
    once ``stop()`` returns True. ``result.failures`` says which connection
    failed when, for a caller that must tell a killed worker's losses apart.
    """
    deadline = time.monotonic() + time_limit
    load = _Load((host, port), requests, deadline, progress, stop, path, stall)
    return load.run(connections)
