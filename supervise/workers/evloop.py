"""What the event-loop workers (asgi, rsgi) share: the loop, signals through
it, the heartbeat tick's period, the stop future, and the clean-up.

Signals go through the loop (``loop.add_signal_handler``), so ``on_stop()``
runs on the loop and resolves ``stop_requested``; the worker's ``run()``
awaits it. The heartbeat is a loop callback: an app that blocks the loop
stops it, and the arbiter replaces the worker (SIGABRT, handled outside the
loop, logs where it was stuck).

asyncio itself is imported where a loop is made, not with this module: -k
native serves a WSGI app with no loop at all (workers/native.py), and
asyncio is about 3 MiB of a worker's memory (docs/performance.md).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from supervise.workers.base import WORKER_BOOT_ERROR, Worker

if TYPE_CHECKING:
    import asyncio

    from supervise.config import Config

T = TypeVar("T")

# The part of graceful_timeout kept for the app's own shutdown (lifespan,
# __rsgi_del__) once connections have drained; the arbiter SIGKILLs at the end.
SHUTDOWN_SHARE = 0.2


def loop_library(name: str) -> Any:
    """The module whose ``new_event_loop`` --loop asks for: uvloop, rloop, or asyncio
    (also for 'auto' without uvloop); ImportError when a named library is missing."""
    if name in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if name == "uvloop":
                raise
        else:
            return uvloop
    if name == "rloop":
        import rloop

        return rloop
    import asyncio

    return asyncio


def new_event_loop(name: str) -> asyncio.AbstractEventLoop:
    """The loop --loop asks for; ImportError when its library is missing."""
    return loop_library(name).new_event_loop()


class LoopWorker(Worker):
    """A worker whose ``run()`` is an asyncio loop created after fork."""

    loop: asyncio.AbstractEventLoop
    stop_requested: asyncio.Future[None]

    @classmethod
    def import_in_master(cls, cfg: Config) -> None:
        with contextlib.suppress(ImportError, RuntimeError):
            loop_library(cfg.loop)

    def create_loop(self) -> asyncio.AbstractEventLoop:
        """The loop (``--loop``), current, with the worker's signals routed through it."""
        import asyncio

        try:
            loop = new_event_loop(self.cfg.loop)
        except (ImportError, RuntimeError) as exc:
            self.log.error("%s", self.missing(exc))
            raise SystemExit(WORKER_BOOT_ERROR) from None
        self.loop = loop
        asyncio.set_event_loop(loop)
        self._route_signals_through(loop)
        self.stop_requested = loop.create_future()
        if not self.alive:  # TERM came while the app was importing
            self.stop_requested.set_result(None)
        return loop

    def _route_signals_through(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand the worker's signals from the plain handlers to the loop, losing none.

        Two gaps would lose a TERM (the worker then served on until SIGKILL):
        a signal that arrived but whose Python handler had not run yet would
        run the loop's no-op handler instead, its wake-up byte gone to the old
        pipe; and uvloop listens for signals only while it runs, so one that
        arrives between two runs (lifespan startup, READY, serving) goes
        nowhere. So the signals stay blocked, waiting in the kernel, except
        while ``run_loop()`` runs the loop. The Python call below first lets an
        already pending one run on the old handler.
        """
        self._loop_signals = tuple(self.signal_handlers())
        signal.pthread_sigmask(signal.SIG_BLOCK, self._loop_signals)
        _run_pending_signal_handlers()
        for sig, action in self.signal_handlers().items():
            loop.add_signal_handler(sig, action)

    def run_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """``loop.run_until_complete(coro)``, with the worker's signals deliverable."""
        return self.loop.run_until_complete(self._signals_open(coro))

    async def _signals_open(self, coro: Coroutine[Any, Any, T]) -> T:
        # Unblocked only once the loop runs, so a pending signal reaches it.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self._loop_signals)
        try:
            return await coro
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, self._loop_signals)

    def on_stop(self) -> None:
        # On the loop (TERM through loop.add_signal_handler, or the parent check in
        # notify()); before the loop exists, in a plain signal handler: then
        # create_loop() sees alive False and stops at once.
        future = getattr(self, "stop_requested", None)
        if future is not None and not future.done():
            future.set_result(None)

    @property
    def tick(self) -> float:
        """The heartbeat period: well inside ``timeout``."""
        return min(1.0, self.timeout / 4) if self.timeout > 0 else 1.0

    def missing(self, exc: Exception) -> str:
        if isinstance(exc, ImportError) and exc.name:
            return (
                f"the {self.cfg.worker_class_str} worker needs {exc.name!r}, which is not "
                f"installed: pip install {exc.name}"
            )
        return str(exc)


def _run_pending_signal_handlers() -> None:
    """Nothing: calling a Python function makes the interpreter run pending
    signal handlers on entry, which is the point."""


def cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left (apps still running at the deadline) and let it unwind."""
    import asyncio

    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        with contextlib.suppress(Exception):
            loop.run_until_complete(asyncio.wait(tasks, timeout=1.0))
