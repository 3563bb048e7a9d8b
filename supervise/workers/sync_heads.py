"""The sync worker's waiting room for connections whose request head has not
fully arrived.

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

What a connection owes before its head waits here the same way, under the
same header_timeout counted from the accept: a PROXY header
(``--proxy-protocol``) and a TLS handshake. Read blocking, either one let ten
silent TCP connections hold the worker for header_timeout each, in turn (1
probe of 8 answered over 40 s on a TLS port).

A refused head (400, 408, 431...) is answered, then the connection lingers
here rather than in a blocking read: the client must get to read the answer
before a close with unread bytes resets it, but a client that neither sends
nor closes after it held the worker for up to a second per connection (ten
heads timing out together: ten seconds with no one served).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Callable
from time import monotonic
from typing import Any

from supervise._native import ParseError
from supervise.http.connection import (
    BODY_RECV_SIZE,
    HEAD_PENDING,
    HEAD_RECV_SIZE,
    LINGER_BYTES,
    LINGER_SECONDS,
    Connection,
)
from supervise.http.errors import ClientError
from supervise.http.proxy_protocol import (
    HeaderReader,
    ProxyProtocol,
    ProxyRejected,
    log_rejected,
)
from supervise.http.state import IDLE_GRACE_ON_STOP, MAKE_ROOM_GRACE
from supervise.tls import WANTS_WRITE, handshake_step

# _advance's answer once the PROXY header or the handshake is done: go on.
_DONE = object()


class _Arriving:
    """One connection on its way to a complete head."""

    __slots__ = ("conn", "handshaking", "header", "heard", "since", "watching", "write")

    def __init__(
        self,
        conn: Connection,
        since: float,
        header: tuple[HeaderReader, Any, dict] | None,
        handshaking: bool,
    ) -> None:
        self.conn = conn
        self.since = since  # the accept: every deadline counts from it
        # (reader, the socket's peer, base environ) while a PROXY header is owed.
        self.header = header
        self.handshaking = handshaking
        # Whether the poll ever reported the client: a graceful stop closes
        # the ones that never sent a byte sooner than the others.
        self.heard = False
        # The step under way waits for the socket to be writable (TLS may).
        self.write = False
        # How the socket is registered with the poll: None when not yet, else
        # the ``write`` it was registered with.
        self.watching: bool | None = None

    def silent(self) -> bool:
        return not (self.heard or self.conn.buf)


class PendingHeads:
    """Connections whose request head is still on its way, oldest first, and
    the refused ones lingering until their client has read the answer."""

    def __init__(
        self,
        *,
        handler: Any,
        watch: Callable[[int, bool], None],
        unwatch: Callable[[int], None],
        limit: int,
        timeout: float,
        wrap: Callable[[Any, Any], Any] | None = None,
        proxy: ProxyProtocol | None = None,
    ) -> None:
        """``watch(fd, write)`` registers a socket with the worker's poll for
        reading (or writing); ``wrap(sock, addr)`` is the worker's TLS
        wrapping (None without TLS), for a socket whose PROXY header comes
        first; ``proxy`` the worker's --proxy-protocol rules."""
        self._handler = handler
        self._parse = handler.parse
        self._log = handler.log
        self._watch = watch
        self._unwatch = unwatch
        self._limit = max(1, limit)
        self._timeout = timeout
        self._wrap = wrap
        self._proxy = proxy
        # fd -> connection; dicts keep insertion order, and every deadline is
        # the accept plus the same timeout: oldest first is soonest due first.
        self._waiting: dict[int, _Arriving] = {}
        # fd -> (connection, deadline, bytes it may still send): refused heads
        # whose answer is on its way, in the same order for the same reason.
        self._closing: dict[int, tuple[Connection, float, int]] = {}

    def __len__(self) -> int:
        return len(self._waiting) + len(self._closing)

    def __contains__(self, fd: int) -> bool:
        return fd in self._waiting or fd in self._closing

    def full(self) -> bool:
        """At the limit, with no head old enough to give its place away: accept
        no more for now."""
        return len(self._waiting) >= self._limit and self.room_at() > monotonic()

    def room_at(self) -> float:
        """When the oldest waiting head may give its place away."""
        return next(iter(self._waiting.values())).since + MAKE_ROOM_GRACE

    def offer(self, conn: Connection) -> Any:
        """A newly accepted connection: its request when the head is already
        complete, else None (the connection waits here, or was answered and
        closed)."""
        if self._wrap is None:
            # Plain HTTP: one read, and nothing built unless the head is incomplete.
            got = self._read(conn)
            if got is HEAD_PENDING:
                self._wait(_Arriving(conn, monotonic(), None, False))
                return None
            if got is None:
                self._finish(conn, None)
            return got
        # accept() wrapped it: the TLS handshake comes first.
        return self._open(_Arriving(conn, monotonic(), None, True))

    def offer_proxied(
        self, conn: Connection, addr: Any, base: dict
    ) -> tuple[Connection, Any] | None:
        """``offer`` for a peer that owes a PROXY header: ``conn`` is its plain
        socket as accepted from ``addr``; once complete, (the connection as
        the address the header names, TLS-wrapped when serving TLS, request)."""
        entry = _Arriving(conn, monotonic(), (HeaderReader(), addr, base), False)
        got = self._open(entry)
        return None if got is None else (entry.conn, got)

    def _open(self, entry: _Arriving) -> Any:
        got = self._advance(entry)
        if got is HEAD_PENDING:
            self._wait(entry)
            return None
        if got is None:
            self._finish(entry.conn, entry.watching)
        return got

    def readable(self, fd: int) -> tuple[Connection, Any] | None:
        """The poll reported ``fd``: (connection, request) once its head is complete."""
        if fd in self._closing:
            self._linger(fd)
            return None
        entry = self._waiting[fd]
        entry.heard = True
        got = self._advance(entry)
        if got is HEAD_PENDING:
            if entry.write is not entry.watching:
                self._unwatch(fd)
                self._watch(fd, entry.write)
                entry.watching = entry.write
            return None
        del self._waiting[fd]
        if got is None:
            self._finish(entry.conn, entry.watching)
            return None
        if entry.watching is not None:
            self._unwatch(fd)  # before any close: epoll forgets a closed fd by itself
        return entry.conn, got

    def expire(self) -> None:
        """Answer 408 to the heads past header_timeout (close the silent ones,
        and those still on their PROXY header or handshake), and close the
        refused ones whose client has had its time to read the answer."""
        now = monotonic()
        while self._closing:
            fd, (conn, deadline, _) = next(iter(self._closing.items()))
            if deadline > now:
                break
            del self._closing[fd]
            self._unwatch(fd)
            conn.close()
        cutoff = now - self._timeout
        while self._waiting:
            fd, entry = next(iter(self._waiting.items()))
            if entry.since > cutoff:
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
        while self:
            now = monotonic()
            if now >= until:
                break
            if now >= silent_until:
                for fd in [fd for fd, entry in self._waiting.items() if entry.silent()]:
                    self._drop(fd, timed_out=False)
            self.expire()
            if not self:
                break
            wake = min(self._next_due(), until)
            if now < silent_until:
                wake = min(wake, silent_until)
            for fd in poll(max(0.0, wake - now)):
                if fd in self:
                    ready = self.readable(fd)
                    if ready is not None:
                        serve(*ready)
        self.close_all()

    def close_all(self) -> None:
        for fd in list(self._waiting):
            self._drop(fd, timed_out=False)
        for fd, (conn, _, _) in list(self._closing.items()):
            del self._closing[fd]
            self._unwatch(fd)
            conn.close()

    def _next_due(self) -> float:
        due = float("inf")
        if self._waiting:
            due = next(iter(self._waiting.values())).since + self._timeout
        if self._closing:
            due = min(due, next(iter(self._closing.values()))[1])
        return due

    def _wait(self, entry: _Arriving) -> None:
        if len(self._waiting) >= self._limit and self.room_at() <= monotonic():
            self._drop(next(iter(self._waiting)), timed_out=False)
        fd = entry.conn.sock.fileno()
        self._waiting[fd] = entry
        self._watch(fd, entry.write)
        entry.watching = entry.write

    def _drop(self, fd: int, *, timed_out: bool) -> None:
        entry = self._waiting.pop(fd)
        conn = entry.conn
        if timed_out:
            if entry.header is not None:
                reason = ProxyRejected("no complete PROXY header within header_timeout")
                log_rejected(self._log, entry.header[1], reason)
            elif entry.handshaking:
                self._log.debug(
                    "TLS handshake with %s not complete within header_timeout",
                    conn.environ.get("REMOTE_ADDR"),
                )
            elif conn.buf:
                self._handler.refuse(conn, 408, "request head not complete within header_timeout")
        self._finish(conn, entry.watching)

    def _finish(self, conn: Connection, watching: bool | None) -> None:
        """Close a connection done with: at once, or, when an error answer was
        just written (``conn.linger``), once the client has read it, without
        waiting here for that."""
        sock = conn.sock
        fd = sock.fileno()
        left = 0
        if conn.linger:
            conn.linger = False
            # Half-close first: the client sees the end of the answer while
            # what it still sends is swallowed, so the close carries no RST.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
                left = _swallow(sock, LINGER_BYTES)
        if not left:
            if watching is not None:
                self._unwatch(fd)
            conn.close()
            return
        if len(self._closing) >= self._limit:
            old, (oldest, _, _) = next(iter(self._closing.items()))
            del self._closing[old]
            self._unwatch(old)
            oldest.close()
        if watching is not False:
            if watching is not None:
                self._unwatch(fd)
            self._watch(fd, False)
        self._closing[fd] = (conn, monotonic() + LINGER_SECONDS, left)

    def _linger(self, fd: int) -> None:
        conn, deadline, left = self._closing[fd]
        left = _swallow(conn.sock, left)
        if left:
            self._closing[fd] = (conn, deadline, left)
            return
        del self._closing[fd]
        self._unwatch(fd)
        conn.close()

    def _advance(self, entry: _Arriving) -> Any:
        """As far as the client's bytes go: the request once the head is
        complete, HEAD_PENDING while something is still on its way, None when
        the connection is done with (answered or gone), for the caller to close."""
        if entry.header is not None:
            got = self._proxy_header(entry)
            if got is not _DONE:
                return got
        if entry.handshaking:
            got = self._handshake(entry)
            if got is not _DONE:
                return got
        if self._wrap is None:
            return self._read(entry.conn)
        return self._read_tls(entry)

    def _proxy_header(self, entry: _Arriving) -> Any:
        assert entry.header is not None and self._proxy is not None
        reader, addr, base = entry.header
        sock = entry.conn.sock
        try:
            header = reader.step(sock)
        except ProxyRejected as exc:
            log_rejected(self._log, addr, exc)
            return None
        if header is None:
            return HEAD_PENDING
        entry.header = None
        addr = self._proxy.client(header, addr)
        if self._wrap is not None:
            if entry.watching is not None:
                # A failed wrap closes the socket, and an epoll set cannot
                # forget a closed descriptor: let go of it first.
                self._unwatch(sock.fileno())
            sock = self._wrap(sock, addr)
            if sock is None:
                entry.watching = None
                return None
            if entry.watching is not None:
                self._watch(sock.fileno(), entry.watching)
            entry.handshaking = True
        entry.conn = self._handler.connection(sock, addr, base)
        return _DONE

    def _handshake(self, entry: _Arriving) -> Any:
        step = handshake_step(entry.conn.sock, self._log, entry.conn.environ.get("REMOTE_ADDR"))
        if step is False:
            return None
        entry.write = step == WANTS_WRITE
        if step is True:
            entry.handshaking = False
            return _DONE
        return HEAD_PENDING

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

    def _read_tls(self, entry: _Arriving) -> Any:
        """``_read`` over TLS, where a socket with nothing to read raises
        SSLWantReadError rather than BlockingIOError (gather_head takes that
        for a lost connection), and decrypted bytes may wait inside the TLS
        object, where the poll cannot see them."""
        conn = entry.conn
        sock: Any = conn.sock
        buf: Any = conn.buf
        while True:
            try:
                data = sock.recv(HEAD_RECV_SIZE)
            except ssl.SSLWantReadError:
                entry.write = False
                return HEAD_PENDING
            except ssl.SSLWantWriteError:
                entry.write = True
                return HEAD_PENDING
            except OSError:
                return None  # gone (mid-head or not): nothing to answer
            if not data:
                return None
            if buf:
                if type(buf) is bytes:
                    buf = bytearray(buf)
                buf += data  # in place: a head trickled in pieces costs no quadratic copying
            else:
                buf = data
            conn.buf = buf
            try:
                found = self._parse(buf)
            except ParseError as exc:
                self._handler.refuse(conn, exc.status, exc.reason)
                return None
            if found is not None:
                return conn.take_head(found)
            if not sock.pending():
                entry.write = False
                return HEAD_PENDING


def _swallow(sock: Any, left: int) -> int:
    """Read and drop what has arrived, at most ``left`` bytes: what may still
    come, 0 once the client closed (or the budget is spent)."""
    while left > 0:
        try:
            data = sock.recv(min(left, BODY_RECV_SIZE))
        except (BlockingIOError, InterruptedError):
            return left
        except OSError:
            return 0
        if not data:
            return 0
        left -= len(data)
    return 0
