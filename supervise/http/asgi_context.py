"""What every connection of one asgi worker shares, built once per worker.

Protocol objects (HTTP/1.1, WebSocket) get this small object rather than the
worker: the settings they need as plain attributes, the app, the stop flag,
the set of open connections the worker sweeps, and the lifespan state.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from supervise._native import AppCalls, AsgiHttpShared, RequestCounts, RequestParser
from supervise.http.asgi_cycle import RequestCycle
from supervise.http.asgi_engine import make_log_outcome
from supervise.http.health import HealthProbes
from supervise.http.proxy import ProxyRules
from supervise.http.state import MAKE_ROOM_GRACE, ServeState
from supervise.http.task_start import task_starter
from supervise.tls import server_certificate

_NEVER = float("inf")


class AsgiConnection(Protocol):
    """What the worker needs of every open connection (HTTP or WebSocket)."""

    def shutdown(self) -> None:
        """A graceful stop began: finish what is in flight, then close."""

    def sweep(self, now: float) -> None:
        """Called every tick with ``time.monotonic()``: enforce deadlines."""

    def waiting(self) -> tuple[float, float] | None:
        """(since, deadline) while it waits on its client for a request;
        None while in one (or a WebSocket session)."""

    def close(self) -> None:
        """Give its slot away (only one that waits on its client is asked)."""


def _nothing() -> None:
    pass


def account(scope: dict[str, Any], cycle: Any, seconds: float) -> None:
    """AppRun's ``done``: the request's figures and access log line."""
    cycle._account(seconds)


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
        request_done: Callable[[int], None],
        record: Callable[[int, float, int], None] | None,
        is_tls: bool,
        requests_due: int = sys.maxsize,
    ) -> None:
        self.app = app
        self.cfg = cfg
        self.log = log
        self.state = state
        self.loop = loop
        # Eager where the Python has it (a simple response is then written
        # before data_received returns, with no extra turn of the loop).
        self.start_task = task_starter(loop)
        # Requests are counted natively where each ends (AppRun); the
        # worker's request_done(count) gets the count at each tick
        # (take_counts), and at once when requests_due are served.
        self._count_served = request_done
        self.counts = RequestCounts(due=requests_due, on_due=self.take_counts)
        # The worker's scoreboard recorder (status, seconds, body bytes), or None
        # when no metrics are read.
        self.record = record
        self.scheme = "https" if is_tls else "http"
        self.parser = RequestParser(
            cfg.limit_request_line, cfg.limit_request_fields, cfg.limit_request_field_size
        )
        self.header_timeout = float(cfg.header_timeout) or _NEVER
        self.keepalive = float(cfg.keepalive)
        self.send_timeout = float(cfg.send_timeout)
        self.send_min_rate: int = cfg.send_min_rate
        self.limit_body: int = cfg.limit_request_body
        self.limit_concurrency: int = cfg.limit_concurrency
        self.max_connections: int = cfg.worker_connections
        self.root_path: str = cfg.root_path or ""
        # The tls extension's server_cert, read once.
        self.server_cert = server_certificate(cfg.certfile) if is_tls else None
        self.proxy = ProxyRules(cfg)
        self.access_log = log.access_enabled
        # Whether a request's time is read at all (metrics or access log).
        self.timed = record is not None or self.access_log
        # Every open connection, HTTP or WebSocket: the worker sweeps them every
        # tick and shuts them down on a graceful stop.
        self.connections: set[AsgiConnection] = set()
        # Accepted at worker_connections with no slot to give away: unread, as
        # they would wait in the backlog, until a slot frees (``leave``) or one
        # has waited on its client past MAKE_ROOM_GRACE (the tick's ``admit``).
        self.queued: deque[Any] = deque()  # HttpProtocol, before its seat()
        # Accepted, and connection_made not called yet (the event loop calls it
        # a turn later, or after the TLS handshake): HttpProtocol -> when. A
        # graceful stop waits for these too; a worker that left with one lost
        # its request (test_zero_loss, one read in 10k). Forgotten after
        # header_timeout: a handshake that failed never calls connection_made.
        self.arriving: dict[Any, float] = {}
        # What the lifespan startup left in its scope["state"]; each request
        # gets a shallow copy.
        self.lifespan_state: dict[str, Any] = {}
        # The WebSocket protocol class chosen by --ws; None answers upgrades as
        # plain HTTP requests.
        self.ws_protocol: Any = None
        self.asgi = {"version": "3.0", "spec_version": "2.4"}
        # --health-path: set by the worker; None answers every path with the app.
        self.probes: HealthProbes | None = None
        # --static-map: answered before the app, as the native server decides
        # (set by the worker).
        self.statics: Any = None
        self.health_checked: Callable[[], None] = _nothing
        self.log_probes = bool(cfg.health_access_log) and self.access_log
        # What each request's AppRun calls: the app, the log line of one it
        # left unanswered or that raised (the engine's wording), and the
        # access log and metrics.
        self.calls = AppCalls(
            app=app, log_outcome=make_log_outcome(log=log), done=account if self.timed else None
        )
        # What the HTTP/1.1 connections read per request, natively (last:
        # it reads the attributes above).
        self.http1 = AsgiHttpShared(self, RequestCycle)
        self.screened = bool(self.limit_body or self.limit_concurrency)

    @property
    def screened(self) -> bool:
        """Whether anything is decided before the app (HttpProtocol._screen),
        so that a request with nothing to decide reads one flag."""
        return self.http1.screened

    @screened.setter
    def screened(self, value: bool) -> None:
        self.http1.screened = value

    @property
    def in_flight(self) -> int:
        """Requests whose app call has started and not finished (--limit-concurrency)."""
        return self.counts.in_flight

    def take_counts(self) -> None:
        """Hands the requests served since the last call to the worker."""
        done = self.counts.take_done()
        if done:
            self._count_served(done)

    def request_done(self) -> None:
        """An exchange that ran no app call of a request cycle's (a WebSocket session)."""
        self.counts.count()

    def answer_first(self, probes: HealthProbes | None, statics: Any) -> None:
        """What is answered before the app: --health-path probes and
        --static-map files (None: nothing)."""
        self.probes = probes
        self.statics = statics
        self.screened = bool(
            probes is not None or statics is not None or self.limit_body or self.limit_concurrency
        )

    def has_slot(self, now: float) -> bool:
        """Whether a new connection can be seated, giving a slot away if needed."""
        return len(self.connections) < self.max_connections or self._make_room(now)

    def _make_room(self, now: float) -> bool:
        """At worker_connections, close the connection nearest its deadline among
        those that have waited on their client for MAKE_ROOM_GRACE (idle
        keep-alive, or a head still on its way). A slowloris holding every
        slot then loses a connection to each new client instead of locking
        everyone out; requests in progress and WebSockets keep theirs."""
        victim, nearest = None, _NEVER
        for conn in self.connections:
            waiting = conn.waiting()
            ready = waiting is not None and now - waiting[0] >= MAKE_ROOM_GRACE
            if ready and waiting[1] <= nearest:
                victim, nearest = conn, waiting[1]
        if victim is None:
            return False
        self.connections.discard(victim)  # connection_lost comes on a later loop turn
        victim.close()
        return True

    def forget_arrivals(self, now: float) -> None:
        """Drop the accepted connections whose handshake outlived header_timeout."""
        arriving = self.arriving
        while arriving:
            conn, since = next(iter(arriving.items()))
            if now - since < self.header_timeout:
                return
            del arriving[conn]

    def leave(self, conn: AsgiConnection) -> None:
        """``conn`` closed: its slot goes to the first queued connection."""
        self.connections.discard(conn)
        if self.queued and len(self.connections) < self.max_connections:
            self.queued.popleft().seat()

    def admit(self, now: float, *, everyone: bool = False) -> None:
        """Seat queued connections while there is a slot (or one to give
        away); ``everyone`` at a graceful stop, when accepted requests are
        served whatever the bound."""
        while self.queued and (everyone or self.has_slot(now)):
            self.queued.popleft().seat()
