"""The rsgi worker: RSGI apps (Granian's interface) on the native server.

The network side is Rust (native/src/server: tokio + hyper 1) on the
listeners this worker inherited; only the app runs in Python, on an asyncio
loop (``--loop``) on the worker's main thread. Requests reach the loop
through one queue and a wake-up socket the loop watches (native/src/bridge,
"The bridge" in docs/internals.md).

Everything with threads is created here, after fork: the loop in
``startup()``, then the tokio runtime(s) (``--runtime-threads``,
``--runtime-mode``), which start accepting at once. The heartbeat is a loop
callback, so an app that blocks the loop makes the worker look stuck, as it
is; requests are counted from Rust in batches at each tick.

HTTP/1.1 and HTTP/2 (``--http``), in clear or over TLS: rustls, built in
Rust from the TLS settings by ``create_tls()`` (``workers/rsgi_tls.py``).

Graceful stop (TERM): the native server stops accepting and closes idle
connections; busy HTTP/1.1 ones get ``Connection: close`` on their response,
HTTP/2 ones a GOAWAY at once (their open streams finish). The loop
keeps running the apps until every exchange is over or 80% of
``graceful_timeout`` has passed; then the runtimes are shut down (what is
left is cut) and ``__rsgi_del__(loop)`` runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import sys
from time import monotonic
from typing import Any

from supervise import _native
from supervise.http.proxy import ProxyRules
from supervise.http.rsgi_call import app_callable, make_done, make_log_outcome
from supervise.settings_rsgi import backpressure
from supervise.workers.base import APP_LOAD_ERROR, WORKER_BOOT_ERROR
from supervise.workers.evloop import SHUTDOWN_SHARE, LoopWorker, cancel_remaining
from supervise.workers.rsgi_tls import native_tls


def prefer_batches() -> None:
    """SCHED_BATCH for the loop thread, as for the runtime threads (why:
    native/src/server/sched.rs). Best effort."""
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_BATCH"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


def proxy_allow(cfg: Any) -> list[str] | None:
    """--proxy-protocol for the native server: the peers that must send a header,
    written as ipaddress writes networks (``10.0.0.0/8``) so that Rust reads
    every form the setting accepts; None when the setting is off."""
    if not cfg.proxy_protocol:
        return None
    return [
        item if item == "*" else str(ipaddress.ip_network(item, strict=False))
        for item in cfg.proxy_allow_ips or []
    ]


def http_options(cfg: Any) -> dict[str, Any]:
    """``--http`` and the HTTP/2 settings, as ``NativeServer`` takes them."""
    return {
        "http": cfg.http,
        "http2_max_concurrent_streams": cfg.http2_max_concurrent_streams,
        "http2_initial_stream_window_size": cfg.http2_initial_stream_window_size,
        "http2_initial_connection_window_size": cfg.http2_initial_connection_window_size,
        "http2_max_frame_size": cfg.http2_max_frame_size,
        "http2_max_headers_size": cfg.http2_max_headers_size,
        "http2_max_send_buffer_size": cfg.http2_max_send_buffer_size,
        "http2_keep_alive_interval": float(cfg.http2_keep_alive_interval or 0),
        "http2_keep_alive_timeout": float(cfg.http2_keep_alive_timeout),
    }


class RsgiWorker(LoopWorker):
    """Serves RSGI apps over HTTP/1.1 and HTTP/2, in clear or over TLS (rustls),
    with the native (tokio + hyper) server."""

    interface = "rsgi"

    def create_tls(self) -> Any:
        """rustls from the TLS settings (never an ``ssl.SSLContext``), checked before
        the worker is ready: a bad certificate is one line and a boot error."""
        if not self.cfg.is_ssl:
            return None
        try:
            return native_tls(self.cfg)
        except ValueError as exc:
            self.log.error("%s", exc)
            raise SystemExit(WORKER_BOOT_ERROR) from None

    def startup(self) -> None:
        cfg = self.cfg
        prefer_batches()
        loop = self.create_loop()
        init = getattr(self.app, "__rsgi_init__", None)
        if init is not None:
            try:
                init(loop)
            except Exception:
                self.log.exception("The application's __rsgi_init__ failed")
                raise SystemExit(APP_LOAD_ERROR) from None
        calls = _native.AppCalls(
            app=app_callable(self.app),
            log_outcome=make_log_outcome(log=self.log),
            done=make_done(log=self.log, access_log=self.log.access_enabled, record=self.record),
        )
        self.start_server(
            rsgi=calls,
            event_loop=loop,
            threads=cfg.runtime_threads,
            mode=cfg.runtime_mode,
            ws=cfg.ws != "off",
            proxy=ProxyRules(cfg).native(),
        )
        loop.add_reader(self.server.fileno(), self.server.drain)

    def start_server(self, **interface: Any) -> None:
        """The native server on the inherited listeners, with the settings every
        interface shares plus ``interface``'s (the app side, threads, ws, proxy)."""
        cfg = self.cfg
        try:
            self.server = _native.NativeServer(
                fds=[(listener.sock.fileno(), listener.is_unix) for listener in self.listeners],
                header_timeout=float(cfg.header_timeout),
                send_timeout=float(cfg.send_timeout),
                keepalive=float(cfg.keepalive),
                limit_request_line=cfg.limit_request_line,
                limit_request_fields=cfg.limit_request_fields,
                limit_request_field_size=cfg.limit_request_field_size,
                limit_request_body=cfg.limit_request_body,
                limit_concurrency=cfg.limit_concurrency,
                backpressure=backpressure(cfg),
                worker_connections=cfg.worker_connections,
                # This worker's number (jitter applied): the response that
                # reaches it says Connection: close.
                max_requests=self.max_requests if self.max_requests < sys.maxsize else 0,
                date_header=cfg.date_header,
                server_header="supervise" if cfg.server_header else None,
                tls=self.ssl_context,
                **http_options(cfg),
                ws_max_size=cfg.ws_max_size,
                ws_ping_interval=float(cfg.ws_ping_interval),
                ws_ping_timeout=float(cfg.ws_ping_timeout),
                proxy_allow=proxy_allow(cfg),
                **interface,
            )
        except OSError as exc:
            self.log.error("%s", exc)
            raise SystemExit(WORKER_BOOT_ERROR) from None

    def run(self) -> None:
        loop = self.loop
        loop.call_soon(self._tick)
        try:
            self.run_loop(self._serve())
        finally:
            # Before close(): a closed server counts nothing, and the requests
            # of the last tick would be lost.
            self._count_requests()
            self.server.close()
            cancel_remaining(loop)
            loop.close()

    def _count_requests(self) -> None:
        done = self.server.take_requests()
        if done:
            self.request_done(done)

    @property
    def tick(self) -> float:
        # Requests are counted at each tick: often enough that max_requests
        # retires the worker near its number, cheap enough not to matter.
        return min(0.1, super().tick)

    def _tick(self) -> None:
        """Heartbeat, request count, connections; a blocked loop stops it, which is
        the point. A WSGI app (-k native) runs beside the loop: the stamp goes
        back to when one of its threads was last free, so one request running
        past --timeout gets the worker replaced, as with the sync worker."""
        self.notify(busy_for=self.server.stuck_for())
        # Without this word for a second the server stops accepting, so a
        # blocked loop leaves new clients to the other workers.
        self.server.beat()
        self._count_requests()
        self.set_active(self.server.connections())
        self.set_in_flight(self.server.in_flight())
        self.loop.call_later(self.tick, self._tick)

    async def _serve(self) -> None:
        await self.stop_requested
        server = self.server
        server.stop()
        budget = float(self.cfg.graceful_timeout)
        deadline = monotonic() + budget * (1 - SHUTDOWN_SHARE)
        ours = {asyncio.current_task(), *self.background_tasks()}
        while monotonic() < deadline:
            apps = [t for t in asyncio.all_tasks() if t not in ours and not t.done()]
            if server.drained() and not apps:
                break
            await asyncio.sleep(0.05)
        self._count_requests()
        server.close()
        await self.after_serving(max(deadline - monotonic(), 0) + budget * SHUTDOWN_SHARE)

    def background_tasks(self) -> list[asyncio.Task[Any]]:
        """Tasks that live as long as the worker, which a graceful stop does not
        wait for (the engine's lifespan task)."""
        return []

    async def after_serving(self, budget: float) -> None:
        """Once the server is closed, with ``budget`` seconds left: the app's own
        shutdown (RSGI: ``__rsgi_del__``; the engine's ASGI apps: lifespan)."""
        delete = getattr(self.app, "__rsgi_del__", None)
        if delete is not None:
            try:
                delete(self.loop)
            except Exception:
                self.log.exception("The application's __rsgi_del__ failed")
