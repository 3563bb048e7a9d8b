"""The asgi worker: ASGI 3 apps on an asyncio event loop (uvloop by default).

One loop per worker process, created after fork in ``startup()``, which also
runs the app's lifespan startup: the worker is READY only once that
succeeded, so a failing startup is caught by the canary rule like an import
error. The loop accepts on the inherited listeners (``create_server(sock=)``);
every connection is an ``HttpProtocol`` (supervise/http/asgi_http.py) that may
hand itself over to the WebSocket protocol on an upgrade.

Signals go through the loop (workers/evloop.py, shared with rsgi), so a
graceful stop runs as a coroutine on the loop: stop accepting, let requests in flight finish
(their responses say ``Connection: close``), close idle keep-alive
connections and websockets (1012), then run the lifespan shutdown. The
heartbeat is a loop callback: an app that blocks the loop stops it, and the
arbiter replaces the worker (SIGABRT, handled outside the loop, logs where it
was stuck).

The loop does not use EPOLLEXCLUSIVE: every idle worker wakes for a new
connection and one accept()s it. Nothing waits unseen in the backlog, so the
EPOLLEXCLUSIVE rule of the other workers has no counterpart here.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from time import monotonic
from typing import TYPE_CHECKING, Any

from supervise.http.asgi_context import AsgiContext
from supervise.http.asgi_http import HttpProtocol
from supervise.http.asgi_lifespan import Lifespan
from supervise.http.health import HealthProbes
from supervise.http.proxy_protocol import ProxyProtocol
from supervise.workers.asgi_proxy import ProxyAcceptor
from supervise.workers.base import APP_LOAD_ERROR, WORKER_BOOT_ERROR
from supervise.workers.evloop import SHUTDOWN_SHARE, LoopWorker, cancel_remaining

if TYPE_CHECKING:
    from supervise.config import Config


def ws_protocol_class(setting: str) -> Any:
    """The WebSocket protocol class for --ws, or None for off."""
    from supervise.http import asgi_ws  # imports a WebSocket library: only when asked

    return asgi_ws.protocol_class(setting)


class AsgiWorker(LoopWorker):
    """Serves ASGI apps (HTTP/1.1, WebSocket, lifespan) on an event loop."""

    interface = "asgi"
    # Set when --proxy-protocol is on: the worker then accepts itself (asgi_proxy.py).
    acceptor: ProxyAcceptor | None = None

    @classmethod
    def import_in_master(cls, cfg: Config) -> None:
        super().import_in_master(cfg)
        with contextlib.suppress(ImportError, RuntimeError):
            ws_protocol_class(cfg.ws)

    def startup(self) -> None:
        cfg = self.cfg
        loop = self.create_loop()
        if cfg.loop == "rloop":
            # Measured with rloop 0.5: transport.close() takes the socket out of
            # the loop's poll set but leaves its descriptor open until the
            # transport is garbage-collected, which a connection's reference
            # cycles put off; the client of a Connection: close sees no end.
            self.log.warning(
                "--loop rloop: connections this worker closes stay open until Python's "
                "garbage collector frees them (rloop 0.5); use uvloop to serve clients"
            )
        try:
            ws_protocol = ws_protocol_class(cfg.ws)
        except (ImportError, RuntimeError) as exc:
            self.log.error("%s", self.missing(exc))
            raise SystemExit(WORKER_BOOT_ERROR) from None
        self.ctx = ctx = AsgiContext(
            app=self.app,
            cfg=cfg,
            log=self.log,
            state=self.state,
            loop=loop,
            request_done=self.request_done,
            record=self.record,
            is_tls=self.ssl_context is not None,
            requests_due=self.max_requests - self.nr,
        )
        ctx.ws_protocol = ws_protocol
        ctx.answer_first(HealthProbes.for_worker(self), self.statics)
        ctx.health_checked = self.health_checked
        self.lifespan = Lifespan(
            app=self.app, mode=cfg.lifespan, log=self.log, state=ctx.lifespan_state, asgi=ctx.asgi
        )
        if not self.run_loop(self.lifespan.startup()):
            raise SystemExit(APP_LOAD_ERROR)
        self.servers = self.run_loop(self._listen())

    async def _listen(self) -> list[asyncio.AbstractServer]:
        def factory() -> HttpProtocol:
            return HttpProtocol(self.ctx)

        self.acceptor = None
        proxy = ProxyProtocol.from_config(self.cfg)
        if proxy is not None or self.ssl_context is not None:
            self.acceptor = ProxyAcceptor(
                loop=self.loop,
                proxy=proxy,
                factory=lambda peer: HttpProtocol(self.ctx, peer),
                ssl=self.ssl_context,
                header_timeout=self.ctx.header_timeout,
                log=self.log,
                limit=self.ctx.max_connections,
            )
            for listener in self.listeners:
                self.acceptor.start(listener.sock)
            return []
        servers = []
        for listener in self.listeners:
            sock = listener.sock
            options: dict[str, Any] = {"sock": sock, "backlog": self.cfg.backlog}
            if sock.family == socket.AF_UNIX:
                server = await self.loop.create_unix_server(factory, **options)
            else:
                server = await self.loop.create_server(factory, **options)
            servers.append(server)
        return servers

    def run(self) -> None:
        loop = self.loop
        loop.call_soon(self._tick)
        try:
            self.run_loop(self._serve())
        finally:
            cancel_remaining(loop)
            # The requests of the last tick, the cancelled ones too.
            self.ctx.take_counts()
            loop.close()

    def _tick(self) -> None:
        """Heartbeat and deadlines; a blocked loop stops it, which is the point."""
        self.notify()
        now = monotonic()
        connections = self.ctx.connections
        for conn in list(connections):
            conn.sweep(now)
        self.ctx.admit(now)
        self.ctx.forget_arrivals(now)
        if self.acceptor is not None:
            self.acceptor.sweep(now)
        self.ctx.take_counts()
        self.set_active(len(connections))
        self.set_in_flight(self.ctx.in_flight)
        self.loop.call_later(self.tick, self._tick)

    async def _serve(self) -> None:
        await self.stop_requested
        for server in self.servers:
            server.close()
        acceptor = self.acceptor
        if acceptor is not None:
            acceptor.close()
        connections = self.ctx.connections
        self.ctx.admit(monotonic(), everyone=True)  # accepted: served, with Connection: close
        for conn in list(connections):
            conn.shutdown()
        budget = float(self.cfg.graceful_timeout)
        deadline = monotonic() + budget * (1 - SHUTDOWN_SHARE)
        ctx = self.ctx
        while (
            connections or ctx.arriving or ctx.in_flight or (acceptor is not None and acceptor.busy)
        ) and monotonic() < deadline:
            await asyncio.sleep(0.05)
        if acceptor is not None:
            acceptor.abort()
        for conn in list(connections):
            with contextlib.suppress(Exception):
                conn.transport.abort()  # type: ignore[attr-defined]
        await self.lifespan.shutdown(max(deadline - monotonic(), 0) + budget * SHUTDOWN_SHARE)
