"""The ASGI lifespan protocol: the app's startup before a worker serves, its
shutdown after the worker stopped serving.

The app's lifespan call runs as one task for the whole life of the worker.
``--lifespan auto`` treats an app that raises before answering the startup
event as one without lifespan support (a plain ASGI callable asserting
``scope["type"] == "http"``), as Uvicorn does; ``on`` treats it as a failed
startup.
"""

from __future__ import annotations

import asyncio
from typing import Any


class _Waiting:
    """The app has not answered yet."""


class _Complete:
    """The app answered ...complete."""


class _Failed:
    """The app answered ...failed, or raised."""


class _Unsupported:
    """The app raised before answering startup, under --lifespan auto."""


class Lifespan:
    """Drives the app's lifespan call; one per worker."""

    def __init__(self, *, app: Any, mode: str, log: Any, state: dict[str, Any], asgi: dict) -> None:
        self.app = app
        self.mode = mode
        self.log = log
        self.scope = {"type": "lifespan", "asgi": asgi, "state": state}
        self.startup_state: type = _Waiting
        self.shutdown_state: type = _Waiting
        self._events: asyncio.Queue[dict[str, Any]] | None = None
        self._answered: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.message = ""

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The app's lifespan call, running until the worker ends."""
        return self._task

    async def startup(self) -> bool:
        """Run the app's startup; False when it failed (the worker must not serve)."""
        if self.mode == "off":
            return True
        self._events = asyncio.Queue()
        self._answered = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._main())
        await self._events.put({"type": "lifespan.startup"})
        await self._answered.wait()
        if self.startup_state is _Failed:
            detail = f": {self.message}" if self.message else " (see the error above)"
            self.log.error("Application startup failed%s", detail)
            return False
        if self.startup_state is _Complete:
            self.log.info("Application startup complete")
        return True

    async def shutdown(self, timeout: float) -> None:
        """Run the app's shutdown, for at most ``timeout`` seconds."""
        if self._task is None or self.startup_state is not _Complete:
            return
        assert self._events is not None and self._answered is not None
        self._answered.clear()
        await self._events.put({"type": "lifespan.shutdown"})
        try:
            await asyncio.wait_for(self._answered.wait(), timeout or None)
        except asyncio.TimeoutError:
            self.log.error("Application shutdown did not complete within %ss", timeout)
            self._task.cancel()
            return
        if self.shutdown_state is _Failed:
            detail = f": {self.message}" if self.message else " (see the error above)"
            self.log.error("Application shutdown failed%s", detail)
        elif self.shutdown_state is _Complete:
            self.log.info("Application shutdown complete")

    async def _main(self) -> None:
        assert self._answered is not None
        try:
            await self.app(self.scope, self._receive, self._send)
        except asyncio.CancelledError:
            raise  # the worker is exiting at once (QUIT): nothing to report
        except BaseException as exc:
            if self.startup_state is _Waiting and self.mode == "auto":
                self.startup_state = _Unsupported
                self.log.info("ASGI 'lifespan' protocol appears unsupported (%s)", exc)
            else:
                self.log.exception("Exception in the ASGI 'lifespan' protocol")
                if self.startup_state is _Waiting:
                    self.startup_state = _Failed
                else:
                    self.shutdown_state = _Failed
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            self._answered.set()

    async def _receive(self) -> dict[str, Any]:
        assert self._events is not None
        return await self._events.get()

    async def _send(self, message: dict[str, Any]) -> None:
        assert self._answered is not None
        kind = message["type"]
        phase = "startup" if self.startup_state is _Waiting else "shutdown"
        if kind not in (f"lifespan.{phase}.complete", f"lifespan.{phase}.failed"):
            raise RuntimeError(f"Unexpected ASGI lifespan message {kind!r} during {phase}")
        outcome = _Complete if kind.endswith(".complete") else _Failed
        if outcome is _Failed:
            self.message = str(message.get("message", ""))
        if phase == "startup":
            self.startup_state = outcome
        else:
            self.shutdown_state = outcome
        self._answered.set()
