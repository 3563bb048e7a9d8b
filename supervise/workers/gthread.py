"""The gthread worker: WSGI on ``--threads`` threads, with keep-alive and pipelining.

Leader/follower: one thread at a time, the leader, waits in epoll and serves
what it gets itself: it accepts, reads a request head without blocking and,
once the head is complete, runs the request on the spot, then re-arms the
connection (EPOLLONESHOT) and polls again. Nothing is handed from thread to
thread on that path, so with threads free to run on several cores the GIL
does not cross cores with every request. The other threads wait, without the
GIL, in a native ``Relay``. When the leader's request has run longer than
``SWITCH_AFTER`` and the leader then lets go of the GIL (an app waiting on
I/O does), a waiting thread takes the lead and polls while the old leader
finishes; so slow requests still run ``--threads`` at a time. Idle keep-alive
and trickling connections wait in epoll and cost no thread; a slowloris
cannot take one. Where there is no epoll (macOS, the BSDs) poll() does the
same job, a little slower.

The main thread owns no connection: it handles signals, stamps the heartbeat,
closes connections past their deadlines and resumes accepting when there is
room. It stamps the heartbeat whatever the serving threads do, except when
every thread has been inside the same request for longer than ``timeout``: the
worker can serve nothing any more, so it stops beating and the arbiter
replaces it, as it would a stuck sync worker.

Why: the old design read heads on the main thread and queued each complete
one to a pool thread. With the threads free to run on two cores every
hand-off moved the GIL between cores, and ``--threads 4`` served 2.3x less
than this design does (figures: docs/performance.md, "gthread: leader and follower").
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import ssl
import threading
from collections import deque
from time import monotonic
from typing import Any, ClassVar

from supervise._native import ParseError, Relay
from supervise.http.connection import HEAD_RECV_SIZE, Connection
from supervise.http.errors import ClientError, error_response
from supervise.http.proxy_protocol import HeaderReader, ProxyRejected, log_rejected
from supervise.http.wsgi import WSGIHandler
from supervise.tls import WANTS_WRITE, handshake_step
from supervise.workers.accepting import SocketWorker
from supervise.workers.base import IDLE_GRACE_ON_STOP
from supervise.workers.gthread_held import HoldingConnection
from supervise.workers.gthread_pollers import POLL_BATCH, _Epoll, _Poll

# How long the leader may spend on one request before a waiting thread may take
# the lead (when the leader next lets go of the GIL). Shorter hands over sooner
# for apps that wait on I/O; the waiting thread wakes about this often while
# requests keep coming, so it costs CPU. Chosen by measurement: docs/performance.md.
SWITCH_AFTER = 0.001


# The base class's function, as a global: called once a request, and
# `Class.function` is an attribute load of a class that CPython 3.11 does not
# specialise (a global is).
_count_finished = SocketWorker.request_finished


class _BadHead:
    """A head the parser refused: served by ``handle()``, which answers the error."""


class _Client:
    """A connection and who owns it: nobody while it waits in the poller
    (``parked``), else the thread that claimed it."""

    __slots__ = ("conn", "deadline", "fd", "handshaking", "parked", "proxy", "served")

    def __init__(self, conn: Connection, fd: int, deadline: float, handshaking: bool) -> None:
        self.conn = conn
        # Set while the PROXY header the peer owes is being read (--proxy-protocol).
        self.proxy: tuple[HeaderReader, Any, dict[str, Any]] | None = None
        self.fd = fd
        # When the worker gives up waiting: for the next request (keep-alive),
        # the rest of a head (header_timeout) or a TLS handshake.
        self.deadline = deadline
        self.parked = True
        self.served = False  # has answered a request: idle means keep-alive idle
        self.handshaking = handshaking


class ThreadWorker(SocketWorker):
    """Serves WSGI apps on ``--threads`` threads, one of them polling at a time."""

    interface = "wsgi"
    # epoll where the platform has it; poll() elsewhere, for development machines.
    poller_class: ClassVar[type[_Epoll] | type[_Poll]] = (
        _Epoll if hasattr(select, "epoll") else _Poll
    )

    def run(self) -> None:
        cfg = self.cfg
        self.handler = handler = WSGIHandler(self, multithread=cfg.threads > 1)
        handler.connection_class = HoldingConnection
        self.parse = handler.parse
        self.clients: dict[int, _Client] = {}
        # Reported by the poller and not handled yet. Only the leader takes from
        # it; a thread that takes the lead over goes on where the last one stopped.
        self.ready: deque[tuple[int, int]] = deque()
        # When each thread started its current request (0: none).
        self.started = [0.0] * cfg.threads
        self.stopping = False
        self.finished = False
        self.accept_paused = True
        # Whoever turns ``parked`` off owns the connection: the leader that
        # claims a reported one, or the main thread closing one past its deadline.
        # These three are taken five times a request, by acquire() and release()
        # rather than `with`: on 3.11 a `with` on a C lock looks up and binds
        # __enter__ and __exit__ each time, 75 ns a use (docs/performance.md,
        # "What CPython 3.11 does not specialise").
        self.park_lock = threading.Lock()
        self.count_lock = threading.Lock()
        # Connections served from the current poll whose response is held back:
        # sent, then parked, by the leader before its next poll, or by a thread
        # that stops leading. Shared, so that a leader that lost the lead to a
        # slow request does not keep the earlier answers waiting behind it.
        self.holding: list[_Client] = []
        self.hold_lock = threading.Lock()
        self.listen_lock = threading.Lock()
        # Stopping, the leader unregisters the listeners itself, between two polls:
        # see _unlisten. Then, once every event polled before is handled, it sets
        # ``listeners_gone``: nothing is accepted after that.
        self.unlistened = False
        self.listeners_gone = False
        # Other threads wake the main thread here: a closed connection makes room
        # to accept again, or was the last one of a stop.
        self._room_r, self._room_w = _pipe()
        # And the leader here: the poll set changed (poll()), or the worker is done.
        self._wake_r, self._wake_w = _pipe()
        self.poller = self.poller_class(self._wake_w)
        self.poller.watch(self._wake_r)
        self.targets = self.listen_targets(handler.base_environ)
        self._listen(True)
        self.relay = Relay(switch_after=SWITCH_AFTER)
        threads = [
            threading.Thread(target=self._work, args=(i,), name=f"gthread-{i}", daemon=True)
            for i in range(cfg.threads)
        ]
        for thread in threads:
            thread.start()
        try:
            self._housekeep()
        finally:
            # After a graceful stop every thread is idle and leaves at once; after a
            # fast one (QUIT) nobody waits for them: they are daemon threads.
            self.finished = True
            self.relay.stop()
            _wake(self._wake_w)
            if not self.clients:
                for thread in threads:
                    thread.join(1.0)

    def request_finished(self, status: int, seconds: float, sent: int) -> None:
        # Threads finish requests concurrently: the lock keeps max_requests and
        # the scoreboard's counters exact (an increment is a read and a store).
        lock = self.count_lock
        lock.acquire()
        try:
            _count_finished(self, status, seconds, sent)
        finally:
            lock.release()

    # -- the main thread ---------------------------------------------------------
    def _housekeep(self) -> None:
        clients = self.clients
        selector = selectors.DefaultSelector()
        selector.register(self.wakeup_fd, selectors.EVENT_READ)
        selector.register(self._room_r, selectors.EVENT_READ)
        tick = self.tick
        next_tick = 0.0
        while True:
            for key, _ in selector.select(tick):
                if key.fd == self.wakeup_fd:
                    self.drain_wakeup()
                else:
                    _drain(self._room_r)
            now = monotonic()
            if not self.alive and not self.stopping:
                self._begin_stop()
            if self.stopping:
                if self.listeners_gone and not clients:
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

    def _sweep(self, now: float) -> None:
        """Close parked connections past their deadline (keep-alive, header_timeout),
        and once stopping, the idle keep-alive ones."""
        stopping = self.stopping
        for client in list(self.clients.values()):
            if not client.parked:
                continue
            conn = client.conn
            if client.deadline < now:
                # Part of a head, then silence: say why before closing.
                late_head = bool(conn.buf) and not client.handshaking
                self._close_parked(client, late_head)
            elif (
                stopping
                and client.served
                and not conn.has_input()
                and now - (client.deadline - self.keepalive) >= IDLE_GRACE_ON_STOP
            ):
                self._close_parked(client, False)

    def _close_parked(self, client: _Client, late_head: bool) -> None:
        if not self._claim(client):
            return  # a thread took it meanwhile: it has something to read
        if late_head:
            with contextlib.suppress(OSError):
                client.conn.sock.send(
                    error_response(408, "request head not complete within header_timeout")
                )
        self.poller.forget(client.fd)
        self._close(client)

    def _begin_stop(self) -> None:
        """Stop accepting and close idle keep-alive connections; requests in flight finish.

        A connection that has not sent its first request yet is kept: it may be
        the one this worker was woken to accept, and its request is answered
        (with ``Connection: close``) unless header_timeout runs out first.
        """
        self.stopping = True
        _wake(self._wake_w)  # the leader unregisters the listeners: _unlisten
        self._sweep(monotonic())

    # -- the serving threads --------------------------------------------------------
    def _work(self, index: int) -> None:
        relay = self.relay
        while relay.lead():
            try:
                self._lead(index)
            except Exception:  # every client/app error is answered below; a bug guard
                self.log.exception("Error in a gthread serving thread")

    def _lead(self, index: int) -> None:
        """Poll and serve until another thread takes the lead or the worker is done."""
        # What is held goes out when this thread stops leading, or unwinds.
        try:
            self._lead_serving(index)
        finally:
            self._release()

    def _lead_serving(self, index: int) -> None:
        ready = self.ready
        clients = self.clients
        targets = self.targets
        wake_r = self._wake_r
        poll = self.poller.poll
        relay = self.relay
        tick = self.tick
        # Bound once: with more attributes than a shared-key dict holds, the
        # worker's `self.method()` loads did not specialise in this loop.
        claim, readable, serve = self._claim, self._readable, self._serve
        while not self.finished:
            if not ready:
                if self.holding and self._release() and not relay.keep_lead():
                    return  # another thread polls now: this one waited on a slow reader
                if self.unlistened and not self.listeners_gone:
                    self._listeners_gone()  # what was polled with them is handled
                events = poll(0)
                if self.stopping and not self.unlistened and len(events) < POLL_BATCH:
                    self._unlisten()
                    if not events:
                        self._listeners_gone()
                if not events:
                    relay.idle()  # nothing to time while blocked here
                    events = poll(tick)
                ready.extend(events)
                continue
            fd, _ = ready.popleft()
            client = clients.get(fd)
            if client is not None:
                if not claim(client):
                    continue
                head = readable(client)
                if head is None:
                    continue
                relay.serve()
                serve(client, index, head)
                if not relay.keep_lead():
                    return
            elif fd in targets:
                self._accept(*targets[fd])
            elif fd == wake_r:
                _drain(wake_r)

    def _unlisten(self) -> None:
        """Unregister the listeners for good (stopping), right after a poll that
        emptied the kernel's ready list.

        With EPOLLEXCLUSIVE the kernel wakes one worker for a new connection, and
        no other notices it until the next one arrives. A connection this worker
        was woken for is then in the events just polled, and is accepted; and with
        no thread of this worker waiting in epoll now, a connection arriving from
        here on wakes another worker too. Unregistering from the main thread
        while the leader waits could drop the connection it was just woken for.
        """
        self._listen(False)
        self.unlistened = True

    def _listeners_gone(self) -> None:
        self.listeners_gone = True
        _wake(self._room_w)  # the main thread may find nothing left to wait for

    def _claim(self, client: _Client) -> bool:
        """Take a parked connection over; False if another thread (or the main
        thread's sweep) has it, or it is gone: a stale report, nothing to do."""
        lock = self.park_lock
        lock.acquire()
        try:
            if not client.parked or self.clients.get(client.fd) is not client:
                return False
            client.parked = False
            return True
        finally:
            lock.release()

    def _listen(self, on: bool) -> None:
        """(Un)register the listeners: off while at worker_connections or stopping."""
        with self.listen_lock:
            if on == self.accept_paused:
                for fd in self.targets:
                    self.poller.listen(fd, on)
                self.accept_paused = not on

    def _accept(self, listener: Any, base: dict[str, Any]) -> None:
        """Accept what waits (at least one: the EPOLLEXCLUSIVE rule) and park it."""
        clients = self.clients
        for sock, addr in self.accepted(
            listener, more=lambda: len(clients) < self.max_clients and not self.stopping
        ):
            self._add(sock, addr, base)
        if len(clients) >= self.max_clients and not self.stopping:
            self._listen(False)

    def _add(self, sock: Any, addr: Any, base: dict[str, Any]) -> None:
        """Park a new connection: it is served once its first head is complete."""
        fd = sock.fileno()
        # The header, then TLS on the plain socket (accepted() left it unwrapped).
        owes = self.proxy_protocol is not None and self.owes_header(addr)
        client = _Client(
            self.handler.connection(sock, addr, base),
            fd,
            monotonic() + self.header_timeout,
            self.ssl_context is not None and not owes,
        )
        if owes:
            client.proxy = (HeaderReader(), addr, base)
        self.clients[fd] = client
        self.poller.add(fd)

    def _readable(self, client: _Client) -> Any:
        """Read what a claimed connection has: the head once it is complete (see
        ``_head``; the caller serves it), else None, the connection parked
        again or closed."""
        if client.proxy is not None and not self._proxy_header(client):
            return None
        conn = client.conn
        if client.handshaking and not self._handshake(client):
            return None
        buf = conn.buf
        sock = conn.sock
        while True:
            try:
                data = sock.recv(HEAD_RECV_SIZE)
            except (BlockingIOError, ssl.SSLWantReadError):
                self._park(client, False)
                return None
            except ssl.SSLWantWriteError:
                self._park(client, True)
                return None
            except OSError:
                self._close(client)
                return None
            if not data:
                self._close(client)
                return None
            if not buf:
                buf = data
                # The head must be complete within header_timeout of its first byte.
                client.deadline = monotonic() + self.header_timeout
            else:
                buf += data
            conn.buf = buf
            head = self._head(buf)
            if head is not None:
                return head
            if self.ssl_context is None or not sock.pending():  # type: ignore[attr-defined]
                self._park(client, False)
                return None
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
        step = handshake_step(client.conn.sock, self.log, client.conn.environ)
        if step is True:
            client.handshaking = False
            return True
        if step:
            self._park(client, step == WANTS_WRITE)
        else:
            self._close(client)
        return False

    def _head(self, buf: bytes) -> Any:
        """The parser's (request, head length) once ``buf`` holds a whole head,
        ``_BadHead`` for one to refuse, None while it is incomplete."""
        parse = self.parse  # see _run_app: a callable attribute is loaded, then called
        try:
            return parse(buf)
        except ParseError:
            return _BadHead  # handle() parses it again and answers the error

    def _serve(self, client: _Client, index: int, head: Any) -> None:
        """Serve ``head``, then the requests buffered behind it, then park the
        connection, or leave it in ``holding`` when its response is held."""
        conn: Any = client.conn
        handler = self.handler
        started = self.started
        relay = self.relay
        try:
            while True:
                # Held answers must not wait behind an app that turns out slow:
                # hold only while a waiting thread would take the lead from it
                # (SWITCH_AFTER) and send them before its next poll.
                watched = relay.has_watcher()
                if not watched and self.holding:
                    self._release()
                conn.may_hold = watched and bool(self.ready)
                keep_alive = self.may_keep_alive(len(self.clients))
                started[index] = monotonic()
                # A response that promised keep-alive before a stop began is followed
                # by the grace for idle connections, not by a close under the
                # client's next request (the sweep closes it once idle).
                if head is _BadHead:
                    go_on = handler.handle(conn, keep_alive)
                else:
                    go_on = handler.serve_request(conn, conn.take_head(head), keep_alive)
                if not go_on:
                    self._close(client)
                    return
                client.served = True
                buf = conn.buf
                head = self._head(buf) if buf else None
                if head is not None:
                    continue  # a pipelined request: answered in order, on this thread
                if self.ssl_context is not None and conn.sock.pending():
                    # Decrypted bytes wait inside the TLS object, where epoll cannot see them.
                    try:
                        conn.release()  # _readable may park it
                    except ClientError:
                        self._close(client)
                        return
                    head = self._readable(client)
                    if head is not None:
                        continue
                    return
                client.deadline = monotonic() + (self.header_timeout if buf else self.keepalive)
                if conn.held:
                    lock = self.hold_lock
                    lock.acquire()
                    self.holding.append(client)
                    lock.release()
                else:
                    self._park(client, False)
                return
        except Exception:  # handle() answers every client/app error; this is a bug guard
            self.log.exception("Error serving a connection")
            self._close(client)
        finally:
            started[index] = 0.0

    def _release(self) -> bool:
        """Send the held responses, in the order they were made, and park
        their connections; one whose client is gone is closed. True if this
        thread had to wait for a client, and may have lost the lead meanwhile.

        A socket that does not take its answer at once gets the rest after
        every other held answer went: a client that reads slowly delays its
        own answers, not the poll's."""
        lock = self.hold_lock
        lock.acquire()
        holding, self.holding = self.holding, []
        lock.release()
        behind = []
        for client in holding:
            if client.conn.release_what_fits():  # type: ignore[attr-defined]
                self._park(client, False)
            else:
                behind.append(client)
        if not behind:
            return False
        # Waiting on a slow reader, as a slow app would: a waiting thread takes
        # the lead after SWITCH_AFTER, and polls for the others meanwhile.
        self.relay.serve()
        for client in behind:
            try:
                client.conn.release()  # type: ignore[attr-defined]
            except ClientError:  # gone, or stopped reading: nobody to answer
                self._close(client)
            else:
                self._park(client, False)
        return True

    # -- any thread ------------------------------------------------------------------
    def _park(self, client: _Client, write: bool) -> None:
        """Hand the connection back to the poller, to report when it is readable."""
        lock = self.park_lock
        lock.acquire()
        try:
            client.parked = True
            self.poller.arm(client.fd, write)
        except OSError:  # already closed under us: nothing to wait for
            client.parked = False
            self._close(client)
        finally:
            lock.release()

    def _close(self, client: _Client) -> None:
        # Forget the descriptor before closing it: once closed, its number can be
        # reused by the next accepted connection.
        if self.clients.get(client.fd) is not client:
            return
        del self.clients[client.fd]
        client.conn.close()
        if self.accept_paused or self.stopping:
            # Wake the main thread: it may accept again, or exit once the last is gone.
            _wake(self._room_w)


def _pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    return r, w


def _wake(fd: int) -> None:
    with contextlib.suppress(OSError):  # full: the reader will wake anyway
        os.write(fd, b".")


def _drain(fd: int) -> None:
    with contextlib.suppress(OSError):
        while os.read(fd, 4096):
            pass
