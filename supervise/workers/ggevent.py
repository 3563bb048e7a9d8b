"""The gevent worker: WSGI on greenlets, one per connection.

gevent's monkey-patching runs at the start of the worker's boot, after fork
and before the app is imported, so the app's blocking calls (sockets, sleep,
database drivers written on them) yield to other greenlets. With ``--preload``
the app is imported by the master before any worker exists: patch there too,
as the first lines of the config file (or of the app module)::

    from gevent import monkey
    monkey.patch_all()

otherwise modules that bound blocking functions at import time keep blocking
the whole worker. The worker logs a warning when it finds the master unpatched.

Each connection runs in a greenlet from a pool of ``--worker-connections``;
when the pool is full the acceptor waits and new clients wait in the backlog.
Connections use plain non-blocking sockets; when one would block, the shared
protocol code waits through ``Connection.wait``, which this worker points at
the gevent hub. Idle keep-alive connections wait on the hub with no timer of
their own: the heartbeat greenlet sweeps the ones past their deadline.

Heartbeat: a greenlet stamps it every tick. A greenlet stuck in a loop that
never yields stops the whole hub, hence the heartbeat, and the arbiter then
replaces the worker; a greenlet merely waiting on I/O does not.
"""

from __future__ import annotations

import contextlib
import importlib
import socket
from collections.abc import Callable
from time import monotonic
from typing import Any, ClassVar

import gevent
from gevent import monkey
from gevent.event import Event
from gevent.hub import Waiter, get_hub
from gevent.pool import Pool
from gevent.socket import wait_read, wait_write

from supervise.http.errors import ClientError
from supervise.http.held_connection import HOLD_AT_MOST, HeldConnection, send_now
from supervise.http.wsgi import WSGIHandler
from supervise.workers.accepting import SocketWorker
from supervise.workers.base import IDLE_GRACE_ON_STOP

# What monkey.patch_all() imports in every worker, imported once here in the master
# (fork shares it): a worker then boots in tens of milliseconds instead of hundreds.
# importlib.metadata is how gevent looks up its plugins on every patch.
_PATCH_IMPORTS = (
    "importlib.metadata",
    "gevent.builtins",
    "gevent.os",
    "gevent.select",
    "gevent.selectors",
    "gevent.signal",
    "gevent.ssl",
    "gevent.subprocess",
    "gevent.thread",
    "gevent.threading",
    "gevent.time",
)
for _name in _PATCH_IMPORTS:
    with contextlib.suppress(ImportError):
        importlib.import_module(_name)


_NEVER = float("inf")
# What an idle connection's wait returns: data arrived, or the sweep closes it.
_READY = True
_CLOSE = False
# And what it returns when the turn's end left part of a held response for it.
_SEND_HELD = 2


class _WaitTimeout(Exception):
    """Raised inside gevent's wait when the deadline passes; never leaves this module."""


def _wait_on_hub(sock: Any, write: bool, timeout: float | None) -> bool:
    """Park the greenlet until ``sock`` is ready; False when ``timeout`` passes."""
    try:
        (wait_write if write else wait_read)(sock.fileno(), timeout, _WaitTimeout)
    except _WaitTimeout:
        return False
    return True


class _TurnWrites:
    """The whole responses made while other connections' events wait in the
    same turn of the hub, written one after the other by one callback at the
    turn's end, once those connections' apps have run.

    Each write wakes its reader: a client on the same host, woken from sleep
    once per response across cores, cost the worker more than the wait
    (figures: docs/performance.md, "One poll's responses leave together").
    Before, each such response switched to the hub and back to wait for the
    turn's end; now the greenlet goes straight on to its next read, two
    greenlet switches fewer a request. A lone connection finds nothing
    pending and writes at once.
    """

    __slots__ = ("held", "loop", "scheduled")

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.held: list[GeventConnection] = []
        self.scheduled = False

    def may_hold(self) -> bool:
        return bool(self.loop.pendingcnt)

    def hold(self, conn: GeventConnection) -> None:
        conn.queued = True
        self.held.append(conn)
        if not self.scheduled:
            self.scheduled = True
            self.loop.run_callback(self.flush)

    def flush(self) -> None:
        """Runs in the hub, so it never waits: what a socket does not take at
        once is left for the connection's own greenlet (``write_held``)."""
        self.scheduled = False
        held, self.held = self.held, []
        for conn in held:
            conn.write_held(self.loop)


class GeventConnection(HeldConnection):
    """A connection that waits on the gevent hub: the greenlet parks until the
    socket is ready. Its whole responses may wait in ``held`` for the end of
    the hub's turn (_TurnWrites); anything else it sends, and any wait for the
    client, sends what is held first, so the bytes leave in order and nothing
    waits for a client that waits for them."""

    __slots__ = ("client", "queued")

    # Set by the worker at run(): one per process, as the hub is.
    turn: ClassVar[_TurnWrites | None] = None

    def __init__(
        self,
        sock: Any,
        environ: dict,
        trusted: bool,
        send_timeout: float | None,
        send_min_rate: int = 0,
    ) -> None:
        super().__init__(sock, environ, trusted, send_timeout, send_min_rate)
        self.queued = False  # in the turn's list: its end will write ``held``
        # The greenlet's state (set by the worker): write_held wakes it if idle.
        self.client: _Client | None = None

    def wait(self, sock: Any, write: bool, timeout: float | None) -> bool:  # type: ignore[override]
        if self.held:
            self.release()
        return _wait_on_hub(sock, write, timeout)

    def send_last(self, data: bytes) -> None:
        turn = self.turn
        if self.held:
            self.sendall(data)
        elif turn is not None and len(data) <= HOLD_AT_MOST and turn.may_hold():
            self.held = data
            turn.hold(self)
        else:
            send_now(self, data)

    def write_held(self, loop: Any) -> None:
        """The turn's end (in the hub): what the socket takes without waiting.
        The rest, or the error, is the greenlet's: woken now if it waits for
        its next request, else it sends the rest at its next wait or write."""
        self.queued = False
        data = self.held
        if not data:
            return  # its greenlet sent it meanwhile
        sent = self.send_what_fits(data)  # a full socket or an error: the greenlet's
        if sent == len(data):
            self.held = b""
            return
        self.held = data[sent:] if sent else data
        client = self.client
        if client is not None and client.waiter is not None:
            loop.run_callback(client.waiter.switch, _SEND_HELD)


class _Client:
    """A connection's greenlet state, as the sweep and the graceful stop see it."""

    __slots__ = ("deadline", "served", "waiter")

    def __init__(self) -> None:
        self.deadline = _NEVER
        self.served = False  # has answered a request: idle then means keep-alive idle
        self.waiter: Any = None  # set while waiting for the next request


class GeventWorker(SocketWorker):
    """Serves WSGI apps on greenlets; bounded by ``--worker-connections``."""

    interface = "wsgi"

    def patch(self) -> None:
        # Runs before the app is imported and the TLS context is built.
        if self.app is not None and not monkey.is_module_patched("socket"):
            self.log.warning(
                "--preload with -k gevent: the app was imported before gevent patched the "
                "standard library; call gevent.monkey.patch_all() at the top of the config "
                "file so that its blocking calls yield"
            )
        monkey.patch_all()

    def spawn_thread(self, target: Callable[[], None], name: str) -> None:
        # Once patched, threads are greenlets: one blocked in native code (the file
        # watcher) would stop the hub. The hub's thread pool has real threads.
        get_hub().threadpool.spawn(target)

    def run(self) -> None:
        self.hub = get_hub()
        # Greenlets run requests concurrently in one process: say so, as threads would.
        self.handler = WSGIHandler(self, multithread=True)
        self.handler.connection_class = GeventConnection
        GeventConnection.turn = _TurnWrites(self.hub.loop)
        self.clients: set[_Client] = set()
        self.busy = 0  # requests being served (greenlets never switch inside += 1)
        self.pool = Pool(self.max_clients)
        self.stopped = Event()
        acceptors = [
            gevent.spawn(self._accept_loop, listener.sock, self.handler.base_environ(listener))
            for listener in self.listeners
        ]
        ticker = gevent.spawn(self._tick)
        watcher = gevent.spawn(self._watch_signals)
        try:
            self.stopped.wait()
            gevent.killall(acceptors)
            self._close_idle()
            self.pool.join()
        finally:
            watcher.kill()
            ticker.kill()

    # -- background greenlets --------------------------------------------------------
    def _watch_signals(self) -> None:
        """Wake on any signal (the base class's wake-up pipe); note a stop request."""
        while self.alive:
            wait_read(self.wakeup_fd)
            self.drain_wakeup()
        self.stopped.set()

    def _tick(self) -> None:
        """Heartbeat, parent check and the keep-alive sweep, every tick."""
        tick = self.tick
        while True:
            self.notify()
            if not self.alive:
                self.stopped.set()
            now = monotonic()
            for client in list(self.clients):
                if client.waiter is not None and client.deadline < now:
                    self._wake(client, _CLOSE)
            if not self.alive:
                self._close_idle()
            self.set_active(len(self.clients))
            self.set_in_flight(self.busy)
            gevent.sleep(tick)

    def _wake(self, client: _Client, value: bool) -> None:
        # A Waiter is switched to from the hub only; if the connection woke for data
        # first, the late switch finds no greenlet waiting and is ignored.
        self.hub.loop.run_callback(client.waiter.switch, value)

    def _close_idle(self) -> None:
        """On a graceful stop: close keep-alive connections waiting for their next request.

        A connection that has not sent its first request yet is kept: its
        request is answered (with ``Connection: close``) unless header_timeout
        runs out first.
        """
        now = monotonic()
        for client in list(self.clients):
            idle = now - (client.deadline - self.keepalive)
            if client.waiter is not None and client.served and idle >= IDLE_GRACE_ON_STOP:
                self._wake(client, _CLOSE)

    # -- accepting -------------------------------------------------------------------
    def _accept_loop(self, listener: Any, base: dict[str, Any]) -> None:
        spawn = self.pool.spawn
        fileno = listener.fileno()
        listener.setblocking(False)
        while self.alive:
            wait_read(fileno)
            for sock, addr in self.accepted(listener, more=lambda: self.alive):
                # Blocks while worker_connections greenlets are busy: the rest wait
                # in the backlog.
                spawn(self._serve, sock, addr, base)

    # -- one connection ----------------------------------------------------------------
    def _serve(self, sock: socket.socket, addr: Any, base: dict[str, Any]) -> None:
        if self.proxy_protocol is not None and self.owes_header(addr):
            # Waits on the hub; the tick's sweep does not see this greenlet yet,
            # header_timeout bounds it.
            opened = self.after_header(sock, addr, self.handler.header_timeout, _wait_on_hub)
            if opened is None:
                return
            sock, addr = opened
        conn = self.handler.connection(sock, addr, base)
        client = _Client()
        conn.client = client
        self.clients.add(client)
        io = self.hub.loop.io(sock.fileno(), 1)
        try:
            if self.ssl_context is not None:
                try:
                    conn.handshake(self.handler.header_timeout)
                except (OSError, ValueError) as exc:
                    self.log.debug("TLS handshake with %s failed: %s", addr, exc)
                    return
            self._requests(conn, client, io)
        except Exception:  # handle() answers every client/app error; this is a bug guard
            self.log.exception("Error serving a connection from %s", addr)
        finally:
            io.close()
            self.clients.discard(client)
            conn.close()

    def _requests(self, conn: GeventConnection, client: _Client, io: Any) -> None:
        """Serve requests on ``conn`` until it closes or the worker stops."""
        handle = self.handler.handle
        tls = self.ssl_context is not None
        while True:
            if not conn.buf and not (tls and conn.sock.pending()):  # type: ignore[attr-defined]
                if conn.held and not conn.queued:
                    # The turn's end has been (the app's close() waited on the
                    # hub) and left part of the response: it goes before the wait.
                    try:
                        conn.release()
                    except ClientError:
                        return
                # Idle: wait for the next request on the hub, without a timer; the
                # tick closes the connection once its deadline passes.
                client.deadline = monotonic() + (
                    self.keepalive if client.served else self.header_timeout
                )
                client.waiter = waiter = Waiter(self.hub)
                io.start(waiter.switch, _READY)
                try:
                    ready = waiter.get()
                finally:
                    io.stop()
                    client.waiter = None
                if ready is _SEND_HELD:
                    try:
                        conn.release()
                    except ClientError:
                        return
                    continue
                # Told to close (stopping, or idle past keep-alive): unless the
                # next request is already here, then it is answered first.
                if ready is not _READY and not conn.has_input():
                    return
            keep_alive = self.may_keep_alive(len(self.clients))
            # A response that promised keep-alive before a stop began is followed
            # by the grace for idle connections, not by a close under the
            # client's next request.
            self.busy += 1
            try:
                keep = handle(conn, keep_alive)
            finally:
                self.busy -= 1
            if not keep:
                return
            client.served = True
