"""The asgi worker's accepting under ``--proxy-protocol`` or TLS.

Plain HTTP without the setting: the worker hands its listeners to
``loop.create_server`` and nothing here runs. With TLS, the worker accepts
itself so that handshakes in progress stay under ``worker_connections``:
``create_server`` runs every handshake before the worker sees the
connection, and 1,900 stalled ones were held at a cap of 1,000. At the
limit the listeners are unwatched, and newcomers wait in the backlog until a
handshake ends (the tick looks again). With the PROXY protocol on, a peer
that owes a PROXY header (http/proxy_protocol.py) is read while its socket is
still plain and ours: the header is consumed exactly, and only then does
``loop.connect_accepted_socket`` give the socket to asyncio, TLS included,
with the address the header named. That is how the header can come before a
TLS handshake, which asyncio's own servers cannot do (bytes read past the
header would be lost to the TLS layer).

Pending headers wait on the loop (``add_reader``), cost no task, and are
closed past header_timeout by the worker's tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import Callable
from time import monotonic
from typing import Any

from supervise.http.proxy_protocol import HeaderReader, ProxyProtocol, ProxyRejected, log_rejected

# accept() failures that concern one connection only: go on with the next one.
_ACCEPT_RETRY = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR})
# Connections accepted per wake-up, so one busy listener cannot starve the loop.
_ACCEPT_BATCH = 64
# Out of descriptors or memory: stop accepting for this long instead of spinning.
_ACCEPT_PAUSE = 0.1


def handshake_options(ssl: Any, header_timeout: float) -> dict[str, Any]:
    """The loop's TLS options: the handshake is bounded by header_timeout
    (the loop's own default, 60 s, let 1,000 stalled handshakes sit that
    long); none without TLS, where the loop refuses a handshake timeout."""
    if ssl is None:
        return {}
    options: dict[str, Any] = {"ssl": ssl}
    if header_timeout != float("inf"):
        options["ssl_handshake_timeout"] = header_timeout
    return options


class _Pending:
    """A connection whose PROXY header is on its way."""

    __slots__ = ("acceptor", "addr", "deadline", "reader", "sock", "watching")

    def __init__(self, acceptor: ProxyAcceptor, sock: socket.socket, addr: Any) -> None:
        self.acceptor = acceptor
        self.sock = sock
        self.addr = addr
        self.reader = HeaderReader()
        self.deadline = monotonic() + acceptor.header_timeout
        self.watching = False

    def step(self) -> None:
        acceptor = self.acceptor
        try:
            header = self.reader.step(self.sock)
        except ProxyRejected as exc:
            log_rejected(acceptor.log, self.addr, exc)
            self.close()
            return
        if header is None:
            if not self.watching:
                self.watching = True
                acceptor.loop.add_reader(self.sock.fileno(), self.step)
            return
        self._forget()
        acceptor.hand_over(self.sock, acceptor.proxy.client(header, self.addr))

    def expire(self) -> None:
        log_rejected(
            self.acceptor.log,
            self.addr,
            ProxyRejected("no complete PROXY header within header_timeout"),
        )
        self.close()

    def close(self) -> None:
        self._forget()
        with contextlib.suppress(OSError):
            self.sock.close()

    def _forget(self) -> None:
        if self.watching:
            self.watching = False
            self.acceptor.loop.remove_reader(self.sock.fileno())
        self.acceptor.pending.discard(self)


class ProxyAcceptor:
    """Accepts on the listeners and hands connections to asyncio after their header."""

    def __init__(
        self,
        *,
        loop: asyncio.AbstractEventLoop,
        proxy: ProxyProtocol | None,
        factory: Callable[[Any], asyncio.Protocol],
        ssl: Any,
        header_timeout: float,
        log: Any,
        limit: int,
    ) -> None:
        self.loop = loop
        self.proxy = proxy
        # Connections on their way (a header or a handshake) at once, at most.
        self.limit = limit or float("inf")
        self.paused = False
        self.factory = factory  # peer (None: the socket's own) -> protocol
        self.ssl = ssl
        self.header_timeout = header_timeout
        self.log = log
        self.pending: set[_Pending] = set()
        self.listeners: list[socket.socket] = []
        self.tasks: set[asyncio.Task[Any]] = set()

    def start(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.listeners.append(sock)
        self.loop.add_reader(sock.fileno(), self._accept, sock)

    def close(self) -> None:
        """Stop accepting; headers already on their way may still arrive."""
        for sock in self.listeners:
            self.loop.remove_reader(sock.fileno())
        self.listeners = []

    @property
    def busy(self) -> bool:
        """Connections still on their way to asyncio (header or TLS handshake)."""
        return bool(self.pending or self.tasks)

    def abort(self) -> None:
        for pending in list(self.pending):
            pending.close()

    def sweep(self, now: float) -> None:
        for pending in list(self.pending):
            if pending.deadline < now:
                pending.expire()
        if self.paused and self._has_room():
            self.paused = False
            for sock in self.listeners:
                self.loop.add_reader(sock.fileno(), self._accept, sock)

    def _has_room(self) -> bool:
        return len(self.pending) + len(self.tasks) < self.limit

    def _pause(self) -> None:
        self.paused = True
        for sock in self.listeners:
            self.loop.remove_reader(sock.fileno())

    def _accept(self, listener: socket.socket) -> None:
        for _ in range(_ACCEPT_BATCH):
            if not self._has_room():
                self._pause()
                return
            try:
                sock, addr = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _ACCEPT_RETRY:
                    continue
                # Out of descriptors or memory: the listener stays readable, so
                # stop watching it for a moment instead of spinning.
                self.log.error("accept() failed: %s; pausing for a moment", exc)
                self.loop.remove_reader(listener.fileno())
                self.loop.call_later(_ACCEPT_PAUSE, self._resume, listener)
                return
            sock.setblocking(False)
            if self.proxy is None or not self.proxy.expects(addr):
                self.hand_over(sock, None)
                continue
            pending = _Pending(self, sock, addr)
            self.pending.add(pending)
            pending.step()  # the header often came with the connection

    def _resume(self, listener: socket.socket) -> None:
        if listener in self.listeners and not self.paused:  # not closed meanwhile (a stop)
            self.loop.add_reader(listener.fileno(), self._accept, listener)

    def hand_over(self, sock: socket.socket, peer: Any) -> None:
        """Give the socket to asyncio (TLS handshake included) as ``peer``."""
        client = peer if type(peer) is tuple else None
        task = self.loop.create_task(self._connect(sock, client))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _connect(self, sock: socket.socket, peer: tuple[str, int] | None) -> None:
        try:
            options = handshake_options(self.ssl, self.header_timeout)
            await self.loop.connect_accepted_socket(lambda: self.factory(peer), sock, **options)
        except (OSError, ValueError, asyncio.TimeoutError) as exc:
            # Port scanners, plain HTTP on the TLS port, expired client certs...
            self.log.debug("TLS handshake with %s failed: %s", peer, exc)
            with contextlib.suppress(OSError):
                sock.close()
