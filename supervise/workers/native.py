"""-k native: WSGI, ASGI and RSGI apps on the native server (tokio + hyper).

The engine is the rsgi worker's server (``workers/native_server.py``:
HTTP/1.1 with the native parser's strictness, HTTP/2, TLS, limits, graceful
stop); what differs is how the app is called. RSGI apps run exactly as
under ``-k rsgi``. ASGI apps run on the worker's asyncio loop as RSGI apps
do, with the scope built in Rust and ``receive``/``send`` native
(native/src/asgi); the lifespan startup runs before the server starts, its
shutdown after the server closed. WSGI apps are called by the runtime
threads themselves (native/src/wsgi): the thread that read a request takes
the GIL, builds the environ in Rust and calls the app, so no request
crosses to another thread. ``--threads`` is the number of those threads:
one single-threaded runtime for 1 (the bjoern model: a blocking app holds
up the worker, as with the sync worker), one work-stealing runtime for
more, so an idle thread takes over the connections of a held-up one.

The worker's main thread runs an idle asyncio loop for the housekeeping
every loop worker has (signals, the tick): the standard library's unless
``--loop`` names another, since uvloop would only add memory. Its heartbeat
stops while every app thread has been in one call for longer than a tick,
so ``--timeout`` replaces a worker whose app is stuck.
"""

from __future__ import annotations

import asyncio
from typing import Any

from supervise import _native, loading
from supervise.http import asgi_engine, asgi_engine_ws
from supervise.http.asgi_lifespan import Lifespan
from supervise.http.proxy import ProxyRules
from supervise.http.task_start import task_starter
from supervise.http.wsgi_engine import wsgi_app
from supervise.tls import server_certificate
from supervise.workers.base import APP_LOAD_ERROR
from supervise.workers.native_server import NativeServerWorker, prefer_batches
from supervise.workers.rsgi import delete_rsgi, start_rsgi

# What the engine serves.
SERVED = ("wsgi", "asgi", "rsgi")


class NativeWorker(NativeServerWorker):
    """WSGI, ASGI or RSGI apps (``--interface``) on the native server."""

    interface = "wsgi"
    lifespan: Lifespan | None = None

    @classmethod
    def import_in_master(cls, cfg: Any) -> None:
        # A WSGI app's loop under --loop auto is the standard library's
        # (create_loop): uvloop would be pages no worker uses. With --interface
        # auto the app is not known yet (it loads in the workers), so the loop
        # library is imported, for the workers that serve ASGI or RSGI.
        if cfg.interface != "wsgi" or cfg.loop != "auto":
            super().import_in_master(cfg)

    @classmethod
    def interface_for(cls, app: Any, cfg: Any) -> str:
        uri = cfg.app_uri or "app"
        wanted = cfg.interface
        if wanted == "auto":
            found = loading.detect_interface(app)
            if found is None or found in SERVED:
                return found or "wsgi"
            raise loading.AppLoadError(
                f"{uri!r} is an {found.upper()} application, which -k native does not "
                f"serve yet; use -k {found}"
            )
        found = loading.detect_interface(app)
        if found is not None and found != wanted:
            raise loading.AppLoadError(
                f"{uri!r} is {'a' if found == 'wsgi' else 'an'} {found.upper()} application, "
                f"not {wanted.upper()}: use --interface {found} (or auto)"
            )
        return wanted

    def startup(self) -> None:
        served = self.interface_for(self.app, self.cfg)
        if served == "rsgi":
            start_rsgi(self)
            return
        if served == "asgi":
            self._start_asgi()
            return
        prefer_batches()
        self.create_loop(housekeeping_only=True)
        threads = self.cfg.threads
        self.start_server(
            wsgi_app(self, multithread=threads > 1),
            threads=threads,
            mode="st" if threads == 1 else "mt",
            ws=False,
        )

    def _start_asgi(self) -> None:
        cfg = self.cfg
        prefer_batches()
        loop = self.create_loop()
        state: dict[str, Any] = {}
        version = {"version": "3.0", "spec_version": "2.4"}
        self.lifespan = Lifespan(
            app=self.app, mode=cfg.lifespan, log=self.log, state=state, asgi=version
        )
        if not self.run_loop(self.lifespan.startup()):
            raise SystemExit(APP_LOAD_ERROR)
        calls = {"app": self.app, "log": self.log, "record": self.record}
        access = self.log.access_enabled
        # Text lines are written natively; other formats through done().
        native_access = self.log.native_access()
        in_python = access and native_access is None
        app = _native.AsgiApp(
            app=self.app,
            log_outcome=asgi_engine.make_log_outcome(log=self.log),
            done=asgi_engine.make_done(log=self.log, access_log=in_python, record=self.record),
            ws_handler=asgi_engine_ws.make_ws_handler(**calls, access_log=access),
            root_path=cfg.root_path or "",
            asgi=version,
            state=state,
            extensions=asgi_engine.EXTENSIONS,
            server_cert=server_certificate(cfg.certfile) if cfg.is_ssl else None,
            access=native_access,
        )
        self.start_server(
            app,
            threads=cfg.runtime_threads,
            mode=cfg.runtime_mode,
            ws=cfg.ws != "off",
            proxy=ProxyRules(cfg).native(),
            start_task=task_starter(loop),
        )
        loop.add_reader(self.server.fileno(), self.server.drain)

    def background_tasks(self) -> list[asyncio.Task[Any]]:
        task = self.lifespan.task if self.lifespan is not None else None
        return [task] if task is not None else []

    async def after_serving(self, budget: float) -> None:
        if self.lifespan is not None:
            await self.lifespan.shutdown(budget)
        else:
            delete_rsgi(self)
