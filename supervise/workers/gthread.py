"""The gthread worker: WSGI on a thread pool, with keep-alive and pipelining.

The main thread owns every connection that is not running a request: it
accepts, reads request heads without blocking and parks idle keep-alive
connections in an epoll set, so an idle or trickling client costs no thread
and a slowloris cannot take the pool. Only a connection whose head is
complete goes to the pool (``--threads``), where the shared ``WSGIHandler``
reads the body, runs the app and sends the response. The pool thread then
serves any request already buffered behind it (pipelining, in order) and
re-arms the connection in epoll itself (EPOLLONESHOT), so a keep-alive request
costs one hand-over from the main thread to the pool and none back. Where
there is no epoll (macOS, the BSDs) poll() does the same job, a little slower.

Heartbeat: the main thread stamps it while it runs, whatever the pool does.
The one exception is a worker whose every thread has been inside the same
request for longer than ``timeout``: it can serve nothing any more, so it
stops beating and the arbiter replaces it, as it would a stuck sync worker.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import ssl
import threading
from time import monotonic
from typing import Any, ClassVar

from supervise._native import ParseError
from supervise.http.connection import HEAD_RECV_SIZE, Connection
from supervise.http.errors import error_response
from supervise.http.proxy_protocol import HeaderReader, ProxyRejected, log_rejected
from supervise.http.wsgi import WSGIHandler
from supervise.workers.accepting import SocketWorker
from supervise.workers.base import IDLE_GRACE_ON_STOP


class _Epoll:
    """Readiness for the main thread on epoll (Linux).

    Connections are armed one-shot: the kernel disarms one as it reports it,
    so a pool thread that re-arms a connection hands it back without waking
    the main thread.
    """

    def __init__(self, wake_w: int) -> None:
        self._ep = select.epoll()
        self._exclusive = getattr(select, "EPOLLEXCLUSIVE", 0)

    def listen(self, fd: int, on: bool) -> None:
        if not on:
            with contextlib.suppress(OSError):
                self._ep.unregister(fd)
            return
        try:
            # With several workers on one listener, a connection wakes one of them.
            self._ep.register(fd, select.EPOLLIN | self._exclusive)
        except OSError:  # kernels before 4.5 refuse EPOLLEXCLUSIVE
            self._ep.register(fd, select.EPOLLIN)

    def watch(self, fd: int) -> None:
        self._ep.register(fd, select.EPOLLIN)

    def add(self, fd: int) -> None:
        self._ep.register(fd, select.EPOLLIN | select.EPOLLONESHOT)

    def arm(self, fd: int, write: bool) -> None:
        """Any thread: report ``fd`` once when readable (or writable). OSError if gone."""
        events = select.EPOLLOUT if write else select.EPOLLIN
        self._ep.modify(fd, events | select.EPOLLONESHOT)

    def forget(self, fd: int) -> None:
        """Before the main thread closes a connection it holds (closing unregisters)."""

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        return self._ep.poll(timeout)


class _Poll:
    """The same on poll(), where there is no epoll (macOS, the BSDs).

    The main thread unregisters a connection as it reports it (one-shot by
    hand); other threads queue their re-arming and wake it through ``wake_w``.
    """

    def __init__(self, wake_w: int) -> None:
        self._poll = select.poll()
        self._wake_w = wake_w
        self._main = threading.get_ident()
        self._oneshot: set[int] = set()
        self._pending: dict[int, bool] = {}  # fd -> write, armed by other threads
        self._lock = threading.Lock()

    def listen(self, fd: int, on: bool) -> None:
        if on:
            self._poll.register(fd, select.POLLIN)
        else:
            with contextlib.suppress(KeyError):
                self._poll.unregister(fd)

    def watch(self, fd: int) -> None:
        self._poll.register(fd, select.POLLIN)

    def add(self, fd: int) -> None:
        self._oneshot.add(fd)
        self._poll.register(fd, select.POLLIN)

    def arm(self, fd: int, write: bool) -> None:
        if threading.get_ident() == self._main:
            self._oneshot.add(fd)
            self._poll.register(fd, select.POLLOUT if write else select.POLLIN)
            return
        with self._lock:
            self._pending[fd] = write
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b".")

    def forget(self, fd: int) -> None:
        with self._lock:
            self._pending.pop(fd, None)
        self._oneshot.discard(fd)
        with contextlib.suppress(KeyError):
            self._poll.unregister(fd)

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        if self._pending:
            with self._lock:
                pending, self._pending = self._pending, {}
            for fd, write in pending.items():
                self.arm(fd, write)
        events = self._poll.poll(timeout * 1000.0)
        for fd, _ in events:
            if fd in self._oneshot:
                self._oneshot.discard(fd)
                self._poll.unregister(fd)
        return events


class _Client:
    """A connection and who owns it: the main thread (``parked``) or a pool thread."""

    __slots__ = ("conn", "deadline", "fd", "handshaking", "parked", "proxy", "served")

    def __init__(self, conn: Connection, fd: int, deadline: float, handshaking: bool) -> None:
        self.conn = conn
        # Set while the PROXY header the peer owes is being read (--proxy-protocol).
        self.proxy: tuple[HeaderReader, Any, dict[str, Any]] | None = None
        self.fd = fd
        # When the main thread gives up waiting: for the next request (keep-alive),
        # the rest of a head (header_timeout) or a TLS handshake.
        self.deadline = deadline
        self.parked = True
        self.served = False  # has answered a request: idle means keep-alive idle
        self.handshaking = handshaking


class ThreadWorker(SocketWorker):
    """Serves WSGI apps on ``--threads`` threads; keep-alive connections wait in epoll."""

    interface = "wsgi"
    # epoll where the platform has it; poll() elsewhere, for development machines.
    poller_class: ClassVar[type[_Epoll] | type[_Poll]] = (
        _Epoll if hasattr(select, "epoll") else _Poll
    )

    def run(self) -> None:
        cfg = self.cfg
        self.handler = handler = WSGIHandler(self, multithread=cfg.threads > 1)
        self.parse = handler.parse
        self.clients: dict[int, _Client] = {}
        self.jobs: queue.SimpleQueue[_Client | None] = queue.SimpleQueue()
        # When each pool thread started its current request (0: idle).
        self.started = [0.0] * cfg.threads
        self.stopping = False
        self.accept_paused = False
        # Held while a connection is handed to the main thread (parked, then armed)
        # and while the main thread closes a parked one, so that it never closes a
        # descriptor a pool thread is about to arm: the number could be reused by then.
        self.park_lock = threading.Lock()
        self.count_lock = threading.Lock()
        # Other threads write here to wake the main thread: a closed connection makes
        # room to accept again, or (poll) a connection was handed back.
        self._room_r, self._room_w = os.pipe()
        os.set_blocking(self._room_r, False)
        os.set_blocking(self._room_w, False)
        self.poller = self.poller_class(self._room_w)
        self.targets = self.listen_targets(handler.base_environ)
        self._listen(True)
        self.poller.watch(self.wakeup_fd)
        self.poller.watch(self._room_r)
        threads = [
            threading.Thread(target=self._work, args=(i,), name=f"gthread-{i}", daemon=True)
            for i in range(cfg.threads)
        ]
        for thread in threads:
            thread.start()
        try:
            self._loop()
        finally:
            # After a graceful stop every thread is idle and leaves at once; after a
            # fast one (QUIT) nobody waits for them: they are daemon threads.
            for _ in threads:
                self.jobs.put(None)
            if not self.clients:
                for thread in threads:
                    thread.join(1.0)

    def request_finished(self, status: int, seconds: float, sent: int) -> None:
        # Pool threads finish requests concurrently: the lock keeps max_requests
        # and the scoreboard's counters exact (an increment is a read and a store).
        with self.count_lock:
            super().request_finished(status, seconds, sent)

    # -- the main thread ---------------------------------------------------------
    def _listen(self, on: bool) -> None:
        """(Un)register the listeners: off while at worker_connections or stopping."""
        for fd in self.targets:
            self.poller.listen(fd, on)
        self.accept_paused = not on

    def _loop(self) -> None:
        clients = self.clients
        targets = self.targets
        wakeup_fd = self.wakeup_fd
        room_r = self._room_r
        poll = self.poller.poll
        readable = self._readable
        tick = self.tick
        next_tick = 0.0
        while True:
            for fd, _ in poll(tick):
                client = clients.get(fd)
                if client is not None:
                    readable(client)
                elif fd in targets:
                    self._accept(*targets[fd])
                elif fd == wakeup_fd:
                    self.drain_wakeup()
                elif fd == room_r:
                    with contextlib.suppress(OSError):
                        os.read(room_r, 4096)
            now = monotonic()
            if not self.alive and not self.stopping:
                self._begin_stop()
            if self.stopping:
                if not clients:
                    return
            elif self.accept_paused and len(clients) < self.max_clients:
                self._listen(True)
            if now >= next_tick:
                next_tick = now + tick
                self._sweep(now)
                self.set_active(len(clients))
                self.set_in_flight(sum(1 for began in self.started if began))
                if not self._stuck(now):
                    self.notify()

    def _stuck(self, now: float) -> bool:
        """Every thread has been in its current request for longer than timeout."""
        newest = max(self.started)
        return self.timeout > 0 and all(self.started) and now - newest > self.timeout

    def _accept(self, listener: Any, base: dict[str, Any]) -> None:
        """Accept what waits (at least one: the EPOLLEXCLUSIVE rule) and park it."""
        clients = self.clients
        handler = self.handler
        tls = self.ssl_context is not None
        for sock, addr in self.accepted(
            listener, more=lambda: len(clients) < self.max_clients and not self.stopping
        ):
            fd = sock.fileno()
            # The header, then TLS on the plain socket (accepted() left it unwrapped).
            owes = self.proxy_protocol is not None and self.owes_header(addr)
            client = _Client(
                handler.connection(sock, addr, base),
                fd,
                monotonic() + self.header_timeout,
                tls and not owes,
            )
            if owes:
                client.proxy = (HeaderReader(), addr, base)
            clients[fd] = client
            self.poller.add(fd)
        if len(clients) >= self.max_clients and not self.accept_paused and not self.stopping:
            self._listen(False)

    def _readable(self, client: _Client) -> None:
        """A parked connection has data: read what is there; a complete head goes to the pool."""
        client.parked = False
        if client.proxy is not None and not self._proxy_header(client):
            return
        conn = client.conn
        if client.handshaking and not self._handshake(client):
            return
        buf = conn.buf
        sock = conn.sock
        while True:
            try:
                data = sock.recv(HEAD_RECV_SIZE)
            except (BlockingIOError, ssl.SSLWantReadError):
                self._park(client, False)
                return
            except ssl.SSLWantWriteError:
                self._park(client, True)
                return
            except OSError:
                self._close(client)
                return
            if not data:
                self._close(client)
                return
            if not buf:
                buf = data
                # The head must be complete within header_timeout of its first byte.
                client.deadline = monotonic() + self.header_timeout
            else:
                buf += data
            conn.buf = buf
            if self._head_ready(buf):
                self.jobs.put(client)
                return
            if self.ssl_context is None or not sock.pending():  # type: ignore[attr-defined]
                self._park(client, False)
                return
            # More decrypted bytes wait inside the TLS object, where epoll cannot see them.

    def _proxy_header(self, client: _Client) -> bool:
        """Advance the PROXY header without blocking; True once it is read (the
        connection then serves as the address it gave, TLS wrapped)."""
        assert client.proxy is not None and self.proxy_protocol is not None
        reader, addr, base = client.proxy
        sock = client.conn.sock
        try:
            header = reader.step(sock)
        except ProxyRejected as exc:
            log_rejected(self.log, addr, exc)
            self._close(client)
            return False
        if header is None:
            self._park(client, False)
            return False
        client.proxy = None
        addr = self.proxy_protocol.client(header, addr)
        if self.ssl_context is not None:
            # Same descriptor, so its epoll registration carries over.
            sock = self.wrap_tls(sock, addr)
            if sock is None:
                self._close(client)
                return False
            client.handshaking = True
        client.conn = self.handler.connection(sock, addr, base)
        return True

    def _handshake(self, client: _Client) -> bool:
        """Advance a TLS handshake without blocking; True once it is done."""
        sock: Any = client.conn.sock
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._park(client, False)
            return False
        except ssl.SSLWantWriteError:
            self._park(client, True)
            return False
        except (OSError, ValueError) as exc:
            # Port scanners, plain HTTP on the TLS port, expired client certs...
            self.log.debug("TLS handshake with %s failed: %s", client.conn.environ, exc)
            self._close(client)
            return False
        client.handshaking = False
        return True

    def _head_ready(self, buf: bytes) -> bool:
        """Whether a pool thread can take the request: a whole head, or one to refuse."""
        try:
            return self.parse(buf) is not None
        except ParseError:
            return True  # the pool thread parses it again and answers the error

    def _sweep(self, now: float) -> None:
        """Close parked connections past their deadline (keep-alive, header_timeout),
        and once stopping, the idle keep-alive ones."""
        stopping = self.stopping
        for client in list(self.clients.values()):
            if not client.parked:
                continue
            conn = client.conn
            if client.deadline < now:
                if conn.buf and not client.handshaking:
                    # Part of a head, then silence: say why before closing.
                    with contextlib.suppress(OSError):
                        conn.sock.send(
                            error_response(408, "request head not complete within header_timeout")
                        )
                self._close_parked(client)
            elif (
                stopping
                and client.served
                and not conn.has_input()
                and now - (client.deadline - self.keepalive) >= IDLE_GRACE_ON_STOP
            ):
                self._close_parked(client)

    def _close_parked(self, client: _Client) -> None:
        with self.park_lock:
            if client.parked:
                self.poller.forget(client.fd)
                self._close(client)

    def _begin_stop(self) -> None:
        """Stop accepting and close idle keep-alive connections; requests in flight finish.

        A connection that has not sent its first request yet is kept: it may be
        the one this worker was woken to accept, and its request is answered
        (with ``Connection: close``) unless header_timeout runs out first.
        """
        self.stopping = True
        if not self.accept_paused:
            self._listen(False)
        self._sweep(monotonic())

    # -- both sides ------------------------------------------------------------------
    def _park(self, client: _Client, write: bool) -> None:
        """Hand the connection (back) to the main thread, to report when it is readable."""
        with self.park_lock:
            client.parked = True
            try:
                self.poller.arm(client.fd, write)
            except OSError:  # already closed under us: nothing to wait for
                self._close(client)

    def _close(self, client: _Client) -> None:
        # Forget the descriptor before closing it: once closed, its number can be
        # reused by the next accepted connection.
        if self.clients.pop(client.fd, None) is None:
            return
        client.conn.close()
        if self.accept_paused or self.stopping:
            # Wake the main thread: it may accept again, or exit once the last is gone.
            with contextlib.suppress(OSError):
                os.write(self._room_w, b".")

    # -- the pool threads ---------------------------------------------------------------
    def _work(self, index: int) -> None:
        get = self.jobs.get
        started = self.started
        while True:
            client = get()
            if client is None:
                return
            try:
                self._serve(client, index)
            except Exception:  # handle() answers every client/app error; this is a bug guard
                self.log.exception("Error serving a connection")
                self._close(client)
            finally:
                started[index] = 0.0

    def _serve(self, client: _Client, index: int) -> None:
        """Serve requests on ``client`` while they are already buffered, then park it."""
        conn = client.conn
        handle = self.handler.handle
        started = self.started
        while True:
            keep_alive = self.may_keep_alive(len(self.clients))
            started[index] = monotonic()
            # A response that promised keep-alive before a stop began is followed
            # by the grace for idle connections, not by a close under the
            # client's next request (the sweep closes it once idle).
            if not handle(conn, keep_alive):
                self._close(client)
                return
            client.served = True
            buf = conn.buf
            if buf and self._head_ready(buf):
                continue  # a pipelined request: answered in order, on this thread
            if self.ssl_context is not None and conn.sock.pending():  # type: ignore[attr-defined]
                # Decrypted bytes wait inside the TLS object, where epoll cannot see them.
                self._readable(client)
                return
            client.deadline = monotonic() + (self.header_timeout if buf else self.keepalive)
            self._park(client, False)
            return
