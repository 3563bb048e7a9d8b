"""The sync worker's waiting room for request heads that have not fully arrived.

A sync worker runs one request at a time, so a client that trickles its head
(slowloris) would hold it for all of header_timeout, and a few hundred such
clients would keep everyone else waiting in the backlog. Instead, the worker
reads heads without waiting: a connection whose head is complete on arrival
is served at once (the usual case, and the same cost as before), the others
wait here, watched by the worker's poll, and are served as soon as their head
is complete. Past header_timeout they get a 408 (or are closed when silent).
At worker_connections waiting heads, the oldest one is closed to make room
once it has waited MAKE_ROOM_GRACE (a client that has not sent its head in
all that time is the likeliest attacker); until then the worker stops
accepting (``full``) and newcomers wait in the backlog. Closing a head that
had just connected cut requests that were on the wire: eight clients that
connect, then send, at a cap of 2, lost six.
"""

from __future__ import annotations

from collections.abc import Callable
from time import monotonic
from typing import Any

from supervise._native import ParseError
from supervise.http.connection import HEAD_PENDING, Connection
from supervise.http.errors import ClientError
from supervise.http.state import IDLE_GRACE_ON_STOP, MAKE_ROOM_GRACE


class PendingHeads:
    """Connections whose request head is still on its way, oldest first."""

    def __init__(
        self,
        *,
        handler: Any,
        watch: Callable[[int], None],
        unwatch: Callable[[int], None],
        limit: int,
        timeout: float,
    ) -> None:
        self._handler = handler
        self._parse = handler.parse
        self._watch = watch
        self._unwatch = unwatch
        self._limit = max(1, limit)
        self._timeout = timeout
        # fd -> (connection, deadline); dicts keep insertion order, and every
        # deadline is the insertion time plus the same timeout: oldest first.
        self._waiting: dict[int, tuple[Connection, float]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def __contains__(self, fd: int) -> bool:
        return fd in self._waiting

    def full(self) -> bool:
        """At the limit, with no head old enough to give its place away: accept
        no more for now."""
        return len(self._waiting) >= self._limit and self.room_at() > monotonic()

    def room_at(self) -> float:
        """When the oldest waiting head may give its place away."""
        _, deadline = next(iter(self._waiting.values()))
        return deadline - self._timeout + MAKE_ROOM_GRACE

    def offer(self, conn: Connection) -> Any:
        """A newly accepted connection: its request when the head is already
        complete, else None (the connection waits here, or was answered and
        closed)."""
        got = self._read(conn)
        if got is HEAD_PENDING:
            if len(self._waiting) >= self._limit and self.room_at() <= monotonic():
                self._drop(next(iter(self._waiting)), timed_out=False)
            fd = conn.sock.fileno()
            self._waiting[fd] = (conn, monotonic() + self._timeout)
            self._watch(fd)
            return None
        if got is None:
            conn.close()
        return got

    def readable(self, fd: int) -> tuple[Connection, Any] | None:
        """More bytes for a waiting head: (connection, request) once complete."""
        conn, _ = self._waiting[fd]
        got = self._read(conn)
        if got is HEAD_PENDING:
            return None
        del self._waiting[fd]
        self._unwatch(fd)  # before any close: epoll forgets a closed fd by itself
        if got is None:
            conn.close()
            return None
        return conn, got

    def expire(self) -> None:
        """Answer 408 to the heads past header_timeout (close the silent ones)."""
        now = monotonic()
        while self._waiting:
            fd, (_, deadline) = next(iter(self._waiting.items()))
            if deadline > now:
                return
            self._drop(fd, timed_out=True)

    def drain(
        self,
        *,
        poll: Callable[[float], list[int]],
        serve: Callable[[Connection, Any], None],
        until: float,
        quiet: float = IDLE_GRACE_ON_STOP,
    ) -> None:
        """A graceful stop began: the heads that complete are still served.

        A client may have sent its request before the stop and the worker have
        accepted the connection before the bytes arrived; closing it then loses
        a request. So a head on its way keeps its header_timeout (at most until
        ``until``), and a connection that has sent nothing is closed only after
        ``quiet`` seconds of silence, like an idle keep-alive connection in the
        other workers.
        """
        silent_until = monotonic() + quiet
        while self._waiting:
            now = monotonic()
            if now >= until:
                break
            if now >= silent_until:
                for fd in [fd for fd, (conn, _) in self._waiting.items() if not conn.buf]:
                    self._drop(fd, timed_out=False)
            self.expire()
            if not self._waiting:
                break
            next_deadline = next(iter(self._waiting.values()))[1]
            wake = min(next_deadline, until, silent_until if now < silent_until else until)
            for fd in poll(max(0.0, wake - now)):
                if fd in self._waiting:
                    ready = self.readable(fd)
                    if ready is not None:
                        serve(*ready)
        self.close_all()

    def close_all(self) -> None:
        for fd in list(self._waiting):
            self._drop(fd, timed_out=False)

    def _drop(self, fd: int, *, timed_out: bool) -> None:
        conn, _ = self._waiting.pop(fd)
        self._unwatch(fd)
        if timed_out and conn.buf:
            self._handler.refuse(conn, 408, "request head not complete within header_timeout")
        conn.close()

    def _read(self, conn: Connection) -> Any:
        """gather_head's answer; None when the connection is done with (answered
        or gone), for the caller to close."""
        try:
            got = conn.gather_head(self._parse)
        except ParseError as exc:
            self._handler.refuse(conn, exc.status, exc.reason)
            got = None
        except ClientError:
            got = None
        return got
