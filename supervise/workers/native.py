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

A WSGI app's worker has no event loop: its main thread only keeps house
(signals, the tick; ``NativeServerWorker.run_without_loop``), and neither
asyncio nor the ASGI and RSGI adapters are imported, in the worker or, under
``--interface wsgi``, in the master (about 3 MiB; docs/performance.md). The
heartbeat stops while every app thread has been in one call for longer than
a tick, so ``--timeout`` replaces a worker whose app is stuck.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from supervise import _native, loading
from supervise.http.proxy import ProxyRules
from supervise.http.wsgi_engine import wsgi_app
from supervise.tls import server_certificate
from supervise.workers.base import APP_LOAD_ERROR
from supervise.workers.native_server import NativeServerWorker, prefer_batches

if TYPE_CHECKING:
    import asyncio

    from supervise.http.asgi_lifespan import Lifespan

# What the engine serves.
SERVED = ("wsgi", "asgi", "rsgi")

# What an ASGI or RSGI app's worker imports besides its loop library: in the
# master when the app may be one (import_in_master), so every worker shares
# their pages; never for a WSGI app, which runs without a loop.
LOOP_APP_MODULES = (
    "supervise.http.asgi_engine",
    "supervise.http.asgi_engine_ws",
    "supervise.http.asgi_lifespan",
    "supervise.http.task_start",
    "supervise.workers.rsgi",
)


class NativeWorker(NativeServerWorker):
    """WSGI, ASGI or RSGI apps (``--interface``) on the native server."""

    interface = "wsgi"
    served: str  # the interface the app is served with (startup)
    lifespan: Lifespan | None = None

    @classmethod
    def import_in_master(cls, cfg: Any) -> None:
        # With --interface auto the app is not known yet (it loads in the
        # workers), so what an ASGI or RSGI app needs is imported here too.
        if cfg.interface != "wsgi":
            super().import_in_master(cfg)
            for name in LOOP_APP_MODULES:
                importlib.import_module(name)

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
        self.served = self.interface_for(self.app, self.cfg)
        if self.served == "rsgi":
            from supervise.workers.rsgi import start_rsgi

            start_rsgi(self)
            return
        if self.served == "asgi":
            self._start_asgi()
            return
        prefer_batches()
        threads = self.cfg.threads
        self.start_server(
            wsgi_app(self, multithread=threads > 1),
            threads=threads,
            mode="st" if threads == 1 else "mt",
            ws=False,
            event_loop=None,
        )

    def run(self) -> None:
        if self.served == "wsgi":
            self.run_without_loop()
        else:
            super().run()

    def _start_asgi(self) -> None:
        from supervise.http import asgi_engine, asgi_engine_ws
        from supervise.http.asgi_lifespan import Lifespan
        from supervise.http.task_start import task_starter

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
            event_loop=loop,
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
            from supervise.workers.rsgi import delete_rsgi

            delete_rsgi(self)
