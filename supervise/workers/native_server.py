"""The workers that serve on the native server (tokio + hyper, native/src):
``-k rsgi`` and ``-k native``. What they share is here; each subclass only
says how its app is called.

The network side is Rust on the listeners the worker inherited; the app
runs in Python, on an asyncio loop (``--loop``) on the worker's main thread
(RSGI, ASGI), or on the runtime threads themselves (WSGI on ``-k native``).
Requests reach the loop through one queue and a wake-up socket the loop
watches (native/src/bridge).

Everything with threads is created in ``startup()``, after fork: the loop,
then the tokio runtime(s), which start accepting at once. The heartbeat is a
loop callback, so an app that blocks the loop makes the worker look stuck,
as it is; requests are counted from Rust in batches at each tick. A server
whose app needs no loop (WSGI) is started without one: the main thread then
only keeps house, waking at each tick or signal (``run_without_loop``).

HTTP/1.1 and HTTP/2 (``--http``), in clear or over TLS: rustls, built in
Rust from the TLS settings by ``create_tls()`` (``workers/rsgi_tls.py``).

Graceful stop (TERM): the native server stops accepting and closes idle
connections; busy HTTP/1.1 ones get ``Connection: close`` on their response,
HTTP/2 ones a GOAWAY at once (their open streams finish). The loop
keeps running the apps until every exchange is over or 80% of
``graceful_timeout`` has passed; then the runtimes are shut down (what is
left is cut) and ``after_serving`` runs the app's own shutdown.
"""

from __future__ import annotations

import contextlib
import os
import select
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING, Any

from supervise import _native
from supervise.http.server_answers import log_answered
from supervise.workers.base import WORKER_BOOT_ERROR
from supervise.workers.evloop import SHUTDOWN_SHARE, LoopWorker, cancel_remaining
from supervise.workers.native_settings import native_settings
from supervise.workers.rsgi_tls import native_tls

if TYPE_CHECKING:
    import asyncio

# How often a graceful stop looks whether the server has drained.
DRAIN_POLL = 0.05


def prefer_batches() -> None:
    """SCHED_BATCH for the loop thread, as for the runtime threads (why:
    native/src/server/sched.rs). Best effort."""
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_BATCH"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


class NativeServerWorker(LoopWorker):
    """A worker whose connections the native server owns. Subclasses start it
    in ``startup()`` with ``start_server`` and may add ``after_serving``."""

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

    def start_server(
        self,
        app: Any,
        *,
        threads: int,
        mode: str,
        ws: bool,
        event_loop: asyncio.AbstractEventLoop | None,
        proxy: Any = None,
        start_task: Callable[[Any], Any] | None = None,
    ) -> None:
        """The native server on the inherited listeners, serving ``app`` (an
        ``AppCalls``, ``AsgiApp`` or ``WsgiApp``) with ``threads`` runtime threads
        in ``mode``; ``event_loop``: where the app runs (None for a ``WsgiApp``);
        ``proxy``: the proxy-header rules (``ProxyRules.native()``)."""
        settings = native_settings(
            self.cfg,
            threads=threads,
            mode=mode,
            ws=ws,
            max_requests=self.max_requests,
            tls=self.ssl_context,
            log_answered=self.log.access_enabled or self.figures is not None,
            quic=self.quic,
        )
        try:
            self.server = _native.NativeServer(
                app,
                event_loop=event_loop,
                fds=[(listener.sock.fileno(), listener.is_unix) for listener in self.listeners],
                settings=settings,
                proxy=proxy,
                start_task=start_task,
            )
        except OSError as exc:
            self.log.error("%s", exc)
            raise SystemExit(WORKER_BOOT_ERROR) from None
        if self.cfg.health_path:
            # Every worker of a master turns 503 at the moment it drains,
            # not each at its next tick.
            self.server.watch_master_drain(self.slot.master_draining_address())

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

    def run_without_loop(self) -> None:
        """``run()`` for a server started without a loop: the main thread keeps
        house at each tick and wakes at once for a signal (the base class's
        handlers write ``wakeup_fd``); TERM drains the server as ``_serve`` does."""
        # poll, not select: the wake-up pipe's fd may be past FD_SETSIZE.
        signals = select.poll()
        signals.register(self.wakeup_fd, select.POLLIN)
        try:
            while self.alive:
                self._keep_house()
                self._wait(signals, self.tick)
            server = self.server
            server.stop()
            deadline = self._drain_deadline()
            while not server.drained() and monotonic() < deadline:
                self._wait(signals, DRAIN_POLL)
                self._keep_house()
        finally:
            self._last_counts()
            self.server.close()

    def _wait(self, signals: select.poll, seconds: float) -> None:
        """Sleep up to ``seconds``, or until a signal's handler has run."""
        if signals.poll(seconds * 1000):
            self.drain_wakeup()

    def _drain_deadline(self) -> float:
        """When a graceful stop stops waiting for the server to drain: what is left
        of ``graceful_timeout`` after it is the app's own shutdown's."""
        return monotonic() + float(self.cfg.graceful_timeout) * (1 - SHUTDOWN_SHARE)

    def _last_counts(self) -> None:
        """What came since the last tick, before the server closes (a closed one
        counts nothing)."""
        self._count_requests()
        if self.cfg.static_map or self.cfg.health_access_log:
            self._answered_tick()

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
        """The housekeeping, on the loop: a blocked loop stops it, which is the point."""
        self._keep_house()
        self.loop.call_later(self.tick, self._tick)

    def _keep_house(self) -> None:
        """Heartbeat, request count, connections. A WSGI app (-k native) runs on
        the runtime threads: the stamp goes back to when one of them was last
        free, so one request running past --timeout gets the worker replaced,
        as with the sync worker."""
        self.notify(busy_for=self.server.stuck_for())
        # Without this word for a second the server stops accepting, so a
        # blocked loop leaves new clients to the other workers.
        self.server.beat()
        self._count_requests()
        self.set_active(self.server.connections())
        self.set_in_flight(self.server.in_flight())
        if self.cfg.health_path:
            self._health_tick()
        if self.cfg.static_map or self.cfg.health_access_log:
            self._answered_tick()
        self._dropped_tick()

    def _dropped_tick(self) -> None:
        """The clients the server gave up on for not reading: one line each."""
        gone, lost = self.server.take_dropped()
        for client, why in gone:
            self.log.info("Dropped %s: %s", client, why)
        if lost:
            self.log.info("Dropped %d more clients that did not read", lost)

    def _health_tick(self) -> None:
        """The probes the server answered (in Rust, reading the master's
        drain flag itself) into the metrics."""
        answered = self.server.take_health_checks()
        if answered and self.figures is not None:
            self.figures.health_checks += answered

    def _answered_tick(self) -> None:
        """What the server answered itself (static files, logged probes):
        into the access log and the request metrics, as the app's requests."""
        records, dropped = self.server.take_answered()
        access = self.log.access_enabled
        record = self.record
        for client, method, target, protocol, status, sent, seconds, ref, agent, probe in records:
            if record is not None and not probe:
                record(status, seconds, sent)
            if access:
                log_answered(
                    self.log, client, method, target, protocol, status, sent, seconds, ref, agent
                )
        if dropped:
            self.log.warning(
                "%d requests the server answered itself were not logged (the queue was full)",
                dropped,
            )

    async def _serve(self) -> None:
        import asyncio

        await self.stop_requested
        server = self.server
        server.stop()
        budget = float(self.cfg.graceful_timeout)
        deadline = self._drain_deadline()
        ours = {asyncio.current_task(), *self.background_tasks()}
        while monotonic() < deadline:
            apps = [t for t in asyncio.all_tasks() if t not in ours and not t.done()]
            if server.drained() and not apps:
                break
            await asyncio.sleep(DRAIN_POLL)
        self._last_counts()
        server.close()
        await self.after_serving(max(deadline - monotonic(), 0) + budget * SHUTDOWN_SHARE)

    def background_tasks(self) -> list[asyncio.Task[Any]]:
        """Tasks that live as long as the worker, which a graceful stop does not
        wait for (the engine's lifespan task)."""
        return []

    async def after_serving(self, budget: float) -> None:
        """Once the server is closed, with ``budget`` seconds left: the app's own
        shutdown (RSGI: ``__rsgi_del__``; the engine's ASGI apps: lifespan)."""
