"""The sync worker: one request per connection, one connection at a time.

Like Gunicorn's sync worker, every response closes its connection, so a slow
or idle client can hold the worker only as long as header_timeout allows; put
it behind a buffering proxy (nginx) when clients are on slow networks.

The loop is the hot path of the simplest deployment. It waits on the
listeners and the signal wake-up pipe, and once a connection is accepted keeps
accepting without waiting until the backlog is empty: under load most
requests then cost an accept, one recv, the native parse, the app and one
send, with no poll in between.
"""

from __future__ import annotations

import select
from typing import Any

from supervise.http.wsgi import WSGIHandler
from supervise.workers.accepting import SocketWorker


class SyncWorker(SocketWorker):
    """Serves WSGI apps one request per connection (always ``Connection: close``)."""

    interface = "wsgi"

    def run(self) -> None:
        handler = WSGIHandler(self, multithread=False)
        targets = self.listen_targets(handler.base_environ)
        poll = _listener_poll(list(targets), self.wakeup_fd)
        interval = min(1.0, self.timeout / 2) if self.timeout > 0 else 1.0
        while self.alive:
            self.notify()
            for fd, _ in poll(interval):
                if fd == self.wakeup_fd:
                    self.drain_wakeup()
                    continue
                self._serve_backlog(handler, *targets[fd])

    def _serve_backlog(self, handler: WSGIHandler, listener: Any, base: dict) -> None:
        """Serve until the backlog is empty (or a stop is asked), without waiting
        in between: under load that saves a poll per request."""
        active = False
        try:
            for sock, addr in self.accepted(listener, more=lambda: self.alive):
                if not active:
                    active = True
                    self.set_active(1)
                self._serve(handler, sock, addr, base)
                self.notify()
        finally:
            if active:
                self.set_active(0)

    def _serve(self, handler: WSGIHandler, sock: Any, addr: Any, base: dict) -> None:
        if self.proxy_protocol is not None and self.owes_header(addr):
            opened = self.after_header(
                sock, addr, handler.header_timeout, handler.connection_class.wait
            )
            if opened is None:
                return
            sock, addr = opened
        conn = handler.connection(sock, addr, base)
        try:
            if self.ssl_context is not None:
                conn.handshake(handler.header_timeout)
        except (OSError, ValueError) as exc:
            # Port scanners, plain HTTP on the TLS port, expired client certs...
            self.log.debug("TLS handshake with %s failed: %s", addr, exc)
            conn.close()
            return
        self.set_in_flight(1)
        try:
            handler.handle(conn)
        except Exception:  # handle() answers every client/app error; this is a bug guard
            self.log.exception("Error serving a connection from %s", addr)
        finally:
            self.set_in_flight(0)
            conn.close()


def _listener_poll(fds: list[int], wakeup_fd: int) -> Any:
    """A poll(timeout_seconds) -> [(fd, events)] over the listeners and the wake-up pipe.

    epoll with EPOLLEXCLUSIVE where the kernel has it: with several workers on
    one listener, a new connection then wakes one worker instead of all.
    """
    if hasattr(select, "epoll"):
        ep = select.epoll()
        exclusive = getattr(select, "EPOLLEXCLUSIVE", 0)
        for fd in fds:
            try:
                ep.register(fd, select.EPOLLIN | exclusive)
            except OSError:  # kernels before 4.5 refuse EPOLLEXCLUSIVE
                ep.register(fd, select.EPOLLIN)
        ep.register(wakeup_fd, select.EPOLLIN)
        return ep.poll
    poller = select.poll()
    for fd in [*fds, wakeup_fd]:
        poller.register(fd, select.POLLIN)
    return lambda timeout: poller.poll(timeout * 1000.0)
