"""The sync worker: one request per connection, one connection at a time.

Like Gunicorn's sync worker, every response closes its connection. Unlike it,
a client that trickles its request head (slowloris) never holds the worker: the
heads still on their way wait in PendingHeads (sync_heads.py), watched by the
same poll as the listeners, and a connection is served only once its head is
complete; so do a PROXY header and a TLS handshake still on their way,
under the same header_timeout. A graceful stop still serves the heads that
complete after it (a connection that has sent nothing is closed after 1 s of
quiet). A slow request body or a slow reader of the response does hold the
worker (up to body_timeout between reads, send_timeout per write): put it behind
a buffering proxy (nginx) when clients are on slow networks.

The loop is the hot path of the simplest deployment. It waits on the
listeners and the signal wake-up pipe, and once a connection is accepted keeps
accepting without waiting until the backlog is empty: under load most
requests then cost an accept, one recv, the native parse, the app and one
send, with no poll in between.
"""

from __future__ import annotations

import select
from time import monotonic
from typing import Any

from supervise.http.connection import Connection
from supervise.http.wsgi import WSGIHandler
from supervise.workers.accepting import SocketWorker
from supervise.workers.sync_heads import PendingHeads


class SyncWorker(SocketWorker):
    """Serves WSGI apps one request per connection (always ``Connection: close``)."""

    interface = "wsgi"

    def run(self) -> None:
        handler = WSGIHandler(self, multithread=False)
        targets = self.listen_targets(handler.base_environ)
        poller = _Poller(list(targets), self.wakeup_fd)
        heads = PendingHeads(
            handler=handler,
            watch=poller.watch,
            unwatch=poller.unwatch,
            limit=self.max_clients,
            timeout=self.header_timeout,
            wrap=None if self.ssl_context is None else self.wrap_tls,
            proxy=self.proxy_protocol,
        )
        interval = min(1.0, self.timeout / 2) if self.timeout > 0 else 1.0
        try:
            while self.alive:
                self.notify()
                wait = _pace_accepting(heads, poller, interval)
                for fd, _ in poller.poll(wait):
                    if fd == self.wakeup_fd:
                        self.drain_wakeup()
                    elif fd in targets:
                        self._serve_backlog(handler, heads, *targets[fd])
                    elif fd in heads:
                        ready = heads.readable(fd)
                        if ready is not None:
                            self._serve_ready(handler, *ready)
                if heads:
                    heads.expire()
            if heads:
                self._drain_heads(handler, heads, poller, interval)
        finally:
            heads.close_all()

    def _drain_heads(
        self,
        handler: WSGIHandler,
        heads: PendingHeads,
        poller: _Poller,
        interval: float,
    ) -> None:
        """Stopping: no more accepting, but the heads already on their way are served."""
        poller.listen(False)

        def poll(seconds: float) -> list[int]:
            self.notify()
            ready = []
            for fd, _ in poller.poll(min(seconds, interval)):
                if fd == self.wakeup_fd:
                    self.drain_wakeup()
                else:
                    ready.append(fd)
            return ready

        heads.drain(
            poll=poll,
            serve=lambda conn, req: self._serve_ready(handler, conn, req),
            until=monotonic() + 0.8 * float(self.cfg.graceful_timeout),
        )

    def _serve_backlog(
        self, handler: WSGIHandler, heads: PendingHeads, listener: Any, base: dict
    ) -> None:
        """Serve until the backlog is empty (or a stop is asked), without waiting
        in between: under load that saves a poll per request."""
        active = False
        proxy = self.proxy_protocol
        try:
            for sock, addr in self.accepted(listener, more=lambda: self.alive and not heads.full()):
                if not active:
                    active = True
                    self.set_active(1)
                conn = handler.connection(sock, addr, base)
                if proxy is not None and proxy.expects(addr):
                    ready = heads.offer_proxied(conn, addr, base)
                    if ready is not None:
                        self._serve_ready(handler, *ready)
                else:
                    req = heads.offer(conn)
                    if req is not None:
                        self._serve_ready(handler, conn, req)
                self.notify()
        finally:
            if active:
                self.set_active(0)

    def _serve_ready(self, handler: WSGIHandler, conn: Connection, req: Any) -> None:
        """Serve a request whose head has arrived, then close its connection."""
        self.set_in_flight(1)
        try:
            handler.serve_request(conn, req)
        except Exception:  # serve_request answers every client/app error; a bug guard
            self.log.exception(
                "Error serving a connection from %s", conn.environ.get("REMOTE_ADDR")
            )
        finally:
            self.set_in_flight(0)
            conn.close()


def _pace_accepting(heads: PendingHeads, poller: _Poller, interval: float) -> float:
    """Listen only while a new head would have a place; the poll's timeout, so
    that the loop wakes when the oldest head may give its place away."""
    full = heads.full()
    poller.listen(not full)
    if not full:
        return interval
    return min(interval, max(0.0, heads.room_at() - monotonic()))


class _Poller:
    """poll(timeout_seconds) -> [(fd, events)] over the listeners, the wake-up
    pipe and the connections in PendingHeads (watch/unwatch).

    epoll with EPOLLEXCLUSIVE for the listeners where the kernel has it: with
    several workers on one listener, a new connection then wakes one worker
    instead of all.
    """

    def __init__(self, fds: list[int], wakeup_fd: int) -> None:
        self._listeners = fds
        self._listening = True
        if hasattr(select, "epoll"):
            ep = select.epoll()
            self.poll = ep.poll
            self._register, self.unwatch = ep.register, ep.unregister
            self._events, self._out = select.EPOLLIN, select.EPOLLOUT
            self._exclusive = getattr(select, "EPOLLEXCLUSIVE", 0)
        else:
            poller = select.poll()
            self.poll = lambda timeout: poller.poll(timeout * 1000.0)
            self._register, self.unwatch = poller.register, poller.unregister
            self._events, self._out = select.POLLIN, select.POLLOUT
            self._exclusive = 0
        self._watch_listeners()
        self._register(wakeup_fd, self._events)

    def _watch_listeners(self) -> None:
        for fd in self._listeners:
            try:
                self._register(fd, self._events | self._exclusive)
            except OSError:  # kernels before 4.5 refuse EPOLLEXCLUSIVE
                self._register(fd, self._events)

    def listen(self, on: bool) -> None:
        """Watch the listeners or not (a full waiting room, a stop)."""
        if on == self._listening:
            return
        self._listening = on
        if on:
            self._watch_listeners()
        else:
            for fd in self._listeners:
                self.unwatch(fd)

    def watch(self, fd: int, write: bool = False) -> None:
        """Watch a connection: for reading, or for writing (a TLS handshake
        whose next flight does not fit in the socket's send buffer)."""
        self._register(fd, self._out if write else self._events)
