"""The rsgi worker: RSGI apps (Granian's interface) on the native server
(``workers/native_server.py``: what every native-server worker shares).
"""

from __future__ import annotations

from supervise import _native
from supervise.http.proxy import ProxyRules
from supervise.http.rsgi_call import app_callable, make_done, make_log_outcome
from supervise.workers.base import APP_LOAD_ERROR
from supervise.workers.native_server import NativeServerWorker, prefer_batches


def start_rsgi(worker: NativeServerWorker) -> None:
    """``worker.app`` (RSGI) on the native server: ``__rsgi_init__(loop)`` first,
    then the server, its requests handed to the loop."""
    cfg = worker.cfg
    prefer_batches()
    loop = worker.create_loop()
    init = getattr(worker.app, "__rsgi_init__", None)
    if init is not None:
        try:
            init(loop)
        except Exception:
            worker.log.exception("The application's __rsgi_init__ failed")
            raise SystemExit(APP_LOAD_ERROR) from None
    # Text lines are written natively; other formats through done().
    access = worker.log.native_access()
    in_python = worker.log.access_enabled and access is None
    calls = _native.AppCalls(
        app=app_callable(worker.app),
        log_outcome=make_log_outcome(log=worker.log),
        done=make_done(log=worker.log, access_log=in_python, record=worker.record),
        access=access,
    )
    worker.start_server(
        calls,
        threads=cfg.runtime_threads,
        mode=cfg.runtime_mode,
        ws=cfg.ws != "off",
        event_loop=loop,
        proxy=ProxyRules(cfg).native(),
    )
    loop.add_reader(worker.server.fileno(), worker.server.drain)


def delete_rsgi(worker: NativeServerWorker) -> None:
    """The app's ``__rsgi_del__(loop)``, once the server is closed."""
    delete = getattr(worker.app, "__rsgi_del__", None)
    if delete is not None:
        try:
            delete(worker.loop)
        except Exception:
            worker.log.exception("The application's __rsgi_del__ failed")


class RsgiWorker(NativeServerWorker):
    """Serves RSGI apps over HTTP/1.1 and HTTP/2, in clear or over TLS (rustls),
    with the native (tokio + hyper) server."""

    interface = "rsgi"

    def startup(self) -> None:
        start_rsgi(self)

    async def after_serving(self, budget: float) -> None:
        delete_rsgi(self)
