"""What every connection of one asgi worker shares, built once per worker.

Protocol objects (HTTP/1.1, WebSocket) get this small object rather than the
worker: the settings they need as plain attributes, the app, the stop flag,
the set of open connections the worker sweeps, and the lifespan state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from supervise._native import RequestParser
from supervise.http.proxy import ProxyRules
from supervise.http.state import ServeState
from supervise.tls import server_certificate

_NEVER = float("inf")


class AsgiConnection(Protocol):
    """What the worker needs of every open connection (HTTP or WebSocket)."""

    def shutdown(self) -> None:
        """A graceful stop began: finish what is in flight, then close."""

    def sweep(self, now: float) -> None:
        """Called every tick with ``time.monotonic()``: enforce deadlines."""


class AsgiContext:
    """Per-worker state and settings shared by the protocol objects."""

    def __init__(
        self,
        *,
        app: Any,
        cfg: Any,
        log: Any,
        state: ServeState,
        loop: asyncio.AbstractEventLoop,
        request_done: Callable[[], None],
        record: Callable[[int, float, int], None] | None,
        is_tls: bool,
    ) -> None:
        self.app = app
        self.cfg = cfg
        self.log = log
        self.state = state
        self.loop = loop
        self.request_done = request_done
        # The worker's scoreboard recorder (status, seconds, body bytes), or None
        # when no metrics are read.
        self.record = record
        self.scheme = "https" if is_tls else "http"
        self.parse = RequestParser(
            cfg.limit_request_line, cfg.limit_request_fields, cfg.limit_request_field_size
        ).parse
        self.header_timeout = float(cfg.header_timeout) or _NEVER
        self.keepalive = float(cfg.keepalive)
        self.limit_body: int = cfg.limit_request_body
        self.limit_concurrency: int = cfg.limit_concurrency
        self.max_connections: int = cfg.worker_connections
        self.root_path: str = cfg.root_path or ""
        # The tls extension's server_cert, read once.
        self.server_cert = server_certificate(cfg.certfile) if is_tls else None
        self.proxy = ProxyRules(cfg)
        self.access_log = log.access_enabled
        # Every open connection, HTTP or WebSocket: the worker sweeps them every
        # tick and shuts them down on a graceful stop.
        self.connections: set[AsgiConnection] = set()
        # Requests whose app call has started and not finished (--limit-concurrency).
        self.in_flight = 0
        # What the lifespan startup left in its scope["state"]; each request
        # gets a shallow copy.
        self.lifespan_state: dict[str, Any] = {}
        # The WebSocket protocol class chosen by --ws; None answers upgrades as
        # plain HTTP requests.
        self.ws_protocol: Any = None
        self.asgi = {"version": "3.0", "spec_version": "2.4"}
