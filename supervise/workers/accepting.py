"""The middle base class of the Python workers that accept connections themselves.

sync, gthread and gevent differ in how they wait and how many requests they
run at once; what they share lives here once: the listeners made
non-blocking with their base environs, the accept loop (its error handling,
its backoff, the EPOLLEXCLUSIVE rule, TLS wrapping), the keep-alive decision
and the tick of the heartbeat.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

from supervise.http.proxy_protocol import (
    ProxyProtocol,
    ProxyRejected,
    log_rejected,
    read_header,
)
from supervise.workers.base import Worker

# accept() failures that concern one connection only: go on with the next one.
ACCEPT_RETRY = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR})
# Out of descriptors or memory: stop accepting for a moment instead of spinning.
ACCEPT_BACKOFF = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
ACCEPT_PAUSE = 0.1

# The standard library's socket class, bound now (in the master, before any
# worker could monkey-patch the module): accepted sockets are plain
# non-blocking sockets in every worker class, and the protocol code waits on
# them through Connection.wait.
_SOCKET = socket.socket

_NEVER = float("inf")


class SocketWorker(Worker):
    """A worker that accepts on the listeners and serves with the shared protocol code."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        cfg = self.cfg
        self.keepalive = float(cfg.keepalive)
        self.header_timeout = float(cfg.header_timeout) or _NEVER
        self.max_clients = cfg.worker_connections
        # How often the loop stamps the heartbeat and sweeps idle connections.
        self.tick = min(1.0, self.timeout / 4) if self.timeout > 0 else 1.0
        # None when --proxy-protocol is off: then the only cost is this check per connection.
        self.proxy_protocol = ProxyProtocol.from_config(cfg)

    def listen_targets(self, base_environ: Callable[[Any], dict]) -> dict[int, tuple[Any, dict]]:
        """fd -> (listening socket, its base environ), the sockets made non-blocking."""
        targets = {}
        for listener in self.listeners:
            listener.sock.setblocking(False)
            targets[listener.sock.fileno()] = (listener.sock, base_environ(listener))
        return targets

    def accepted(self, listener: Any, *, more: Callable[[], bool]) -> Iterator[tuple[Any, Any]]:
        """Accept until the backlog is empty or ``more()`` turns False; yields
        (non-blocking socket, peer address), TLS-wrapped when serving TLS,
        except for a peer that owes a PROXY header (``owes_header``): its
        header comes first, on the plain socket, and the caller wraps after it.

        The first accept always happens, even when stopping: with
        EPOLLEXCLUSIVE the kernel woke only this worker for the connection,
        and nobody else would notice it until the next one arrives.
        """
        accept = listener._accept  # (fd, addr): no socket object built by a patched module
        family, kind = listener.family, listener.type
        tls = self.ssl_context is not None
        proxy = self.proxy_protocol
        first = True
        while first or more():
            first = False
            try:
                fd, addr = accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if self.accept_failed(exc):
                    continue
                time.sleep(ACCEPT_PAUSE)  # gevent's worker has patched this to yield
                return
            sock = _SOCKET(family, kind, 0, fd)
            sock.setblocking(False)
            if tls and (proxy is None or not proxy.expects(addr)):
                sock = self.wrap_tls(sock, addr)
                if sock is None:
                    continue
            yield sock, addr

    def owes_header(self, addr: Any) -> bool:
        """Whether the peer must open with a PROXY header (--proxy-protocol)."""
        return self.proxy_protocol is not None and self.proxy_protocol.expects(addr)

    def after_header(self, sock: Any, addr: Any, timeout: float | None, wait: Any) -> Any:
        """For the gevent worker (``wait`` is its Connection's, which
        yields to the hub): read the PROXY header a peer owes, then wrap TLS.
        (socket, the address to serve it as), or None once closed."""
        assert self.proxy_protocol is not None
        try:
            header = read_header(sock, wait, timeout)
        except ProxyRejected as exc:
            log_rejected(self.log, addr, exc)
            sock.close()
            return None
        addr = self.proxy_protocol.client(header, addr)
        if self.ssl_context is not None:
            sock = self.wrap_tls(sock, addr)
            if sock is None:
                return None
        return sock, addr

    def accept_failed(self, exc: OSError) -> bool:
        """Judge an accept() error: True means try the next connection, False
        means pause accepting for a moment (logged); anything else is a bug and
        is raised."""
        if exc.errno in ACCEPT_RETRY:
            return True
        if exc.errno in ACCEPT_BACKOFF:
            self.log.error("accept() failed: %s; pausing for a moment", exc)
            return False
        raise exc

    def wrap_tls(self, sock: Any, addr: Any) -> Any:
        """The accepted socket wrapped for TLS (handshake left to the caller), or
        None when wrapping failed; the socket is then closed."""
        assert self.ssl_context is not None
        try:
            return self.ssl_context.wrap_socket(
                sock,
                server_side=True,
                do_handshake_on_connect=False,
                suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
            )
        except (OSError, ValueError) as exc:
            self.log.debug("TLS setup for %s failed: %s", addr, exc)
            sock.close()
            return None

    def may_keep_alive(self, open_connections: int) -> bool:
        """Whether the response about to start may invite another request."""
        return (
            self.keepalive > 0
            and self.alive
            and self.nr + 1 < self.max_requests
            # At worker_connections, keep-alive would keep new clients waiting.
            and open_connections < self.max_clients
        )
