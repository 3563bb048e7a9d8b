"""The asgi worker: ASGI 3 apps on an asyncio event loop (uvloop by default).

One loop per worker process, created after fork in ``startup()``, which also
runs the app's lifespan startup: the worker is READY only once that
succeeded, so a failing startup is caught by the canary rule like an import
error. The loop accepts on the inherited listeners (``create_server(sock=)``);
every connection is an ``HttpProtocol`` (supervise/http/asgi_http.py) that may
hand itself over to the WebSocket protocol on an upgrade.

Signals go through the loop (``loop.add_signal_handler``), so a graceful stop
runs as a coroutine on the loop: stop accepting, let requests in flight finish
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
from typing import Any

from supervise.http.asgi_context import AsgiContext
from supervise.http.asgi_http import HttpProtocol
from supervise.http.asgi_lifespan import Lifespan
from supervise.workers.base import APP_LOAD_ERROR, WORKER_BOOT_ERROR, Worker

# The part of graceful_timeout left for the lifespan shutdown once
# connections have drained (the arbiter SIGKILLs at graceful_timeout).
SHUTDOWN_SHARE = 0.2


def new_event_loop(name: str) -> asyncio.AbstractEventLoop:
    """The loop --loop asks for; ImportError when its library is missing."""
    if name in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if name == "uvloop":
                raise
        else:
            return uvloop.new_event_loop()
    if name == "rloop":
        import rloop

        return rloop.new_event_loop()
    return asyncio.new_event_loop()


def ws_protocol_class(setting: str) -> Any:
    """The WebSocket protocol class for --ws, or None (off, or not available)."""
    if setting == "off":
        return None
    try:
        from supervise.http import asgi_ws
    except ModuleNotFoundError as exc:
        if exc.name != "supervise.http.asgi_ws":
            raise
        return None  # a build of supervise without WebSocket support

    return asgi_ws.protocol_class(setting)


class AsgiWorker(Worker):
    """Serves ASGI apps (HTTP/1.1, WebSocket, lifespan) on an event loop."""

    interface = "asgi"

    def startup(self) -> None:
        cfg = self.cfg
        try:
            self.loop = loop = new_event_loop(cfg.loop)
            ws_protocol = ws_protocol_class(cfg.ws)
        except (ImportError, RuntimeError) as exc:
            self.log.error("%s", _missing(exc))
            raise SystemExit(WORKER_BOOT_ERROR) from None
        asyncio.set_event_loop(loop)
        self.stop_requested: asyncio.Future[None] = loop.create_future()
        if not self.alive:  # TERM came while the app was importing
            self.stop_requested.set_result(None)
        for sig, action in self.signal_handlers().items():
            loop.add_signal_handler(sig, action)
        self.ctx = ctx = AsgiContext(
            app=self.app,
            cfg=cfg,
            log=self.log,
            state=self.state,
            loop=loop,
            request_done=self.request_done,
            is_tls=self.ssl_context is not None,
        )
        ctx.ws_protocol = ws_protocol
        self.lifespan = Lifespan(
            app=self.app, mode=cfg.lifespan, log=self.log, state=ctx.lifespan_state, asgi=ctx.asgi
        )
        if not loop.run_until_complete(self.lifespan.startup()):
            raise SystemExit(APP_LOAD_ERROR)
        self.servers = loop.run_until_complete(self._listen())

    async def _listen(self) -> list[asyncio.AbstractServer]:
        def factory() -> HttpProtocol:
            return HttpProtocol(self.ctx)

        servers = []
        for listener in self.listeners:
            sock = listener.sock
            options: dict[str, Any] = {"sock": sock, "backlog": self.cfg.backlog}
            if self.ssl_context is not None:
                options["ssl"] = self.ssl_context
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
            loop.run_until_complete(self._serve())
        finally:
            _cancel_remaining(loop)
            loop.close()

    def on_stop(self) -> None:
        # On the loop (TERM through loop.add_signal_handler, or the parent check in
        # notify()); before the loop exists, a plain signal handler: startup() then
        # sees alive False and stops at once.
        future = getattr(self, "stop_requested", None)
        if future is not None and not future.done():
            future.set_result(None)

    def _tick(self) -> None:
        """Heartbeat and deadlines; a blocked loop stops it, which is the point."""
        self.notify()
        now = monotonic()
        connections = self.ctx.connections
        for conn in list(connections):
            conn.sweep(now)
        self.set_active(len(connections))
        self.loop.call_later(self.tick, self._tick)

    @property
    def tick(self) -> float:
        return min(1.0, self.timeout / 4) if self.timeout > 0 else 1.0

    async def _serve(self) -> None:
        await self.stop_requested
        for server in self.servers:
            server.close()
        connections = self.ctx.connections
        for conn in list(connections):
            conn.shutdown()
        budget = float(self.cfg.graceful_timeout)
        deadline = monotonic() + budget * (1 - SHUTDOWN_SHARE)
        while (connections or self.ctx.in_flight) and monotonic() < deadline:
            await asyncio.sleep(0.05)
        for conn in list(connections):
            with contextlib.suppress(Exception):
                conn.transport.abort()  # type: ignore[attr-defined]
        await self.lifespan.shutdown(max(deadline - monotonic(), 0) + budget * SHUTDOWN_SHARE)


def _cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left (apps still running at the deadline) and let it unwind."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        with contextlib.suppress(Exception):
            loop.run_until_complete(asyncio.wait(tasks, timeout=1.0))


def _missing(exc: Exception) -> str:
    if isinstance(exc, ImportError) and exc.name:
        return f"the asgi worker needs {exc.name!r}, which is not installed: pip install {exc.name}"
    return str(exc)
