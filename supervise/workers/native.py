"""-k native: WSGI and RSGI apps on the native server (tokio + hyper).

The engine is the rsgi worker's server (HTTP/1.1 with the native parser's
strictness, HTTP/2, TLS, limits, graceful stop); what differs is how the app
is called. RSGI apps run exactly as under ``-k rsgi``. WSGI apps are called
by the runtime threads themselves (native/src/wsgi): the thread that read a
request takes the GIL, builds the environ in Rust and calls the app, so no
request crosses to another thread. ``--threads`` is the number of those
threads: one single-threaded runtime for 1 (the bjoern model: a blocking app
holds up the worker, as with the sync worker), one work-stealing runtime for
more, so an idle thread takes over the connections of a held-up one.

The worker's main thread runs an idle asyncio loop for the housekeeping
every loop worker has (signals, the tick); its heartbeat stops while every
app thread has been in one call for longer than a tick, so ``--timeout``
replaces a worker whose app is stuck.
"""

from __future__ import annotations

from typing import Any

from supervise import loading
from supervise.http.wsgi_engine import wsgi_app
from supervise.workers.rsgi import RsgiWorker, prefer_batches

# What the engine serves; ASGI is to come (issue 13).
SERVED = ("wsgi", "rsgi")


class NativeWorker(RsgiWorker):
    """WSGI or RSGI apps (``--interface``) on the native server."""

    interface = "wsgi"

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
        loading.check_interface(app, uri, wanted, cfg.worker_class_str)
        return wanted

    def startup(self) -> None:
        if self.interface_for(self.app, self.cfg) == "rsgi":
            super().startup()
            return
        cfg = self.cfg
        prefer_batches()
        loop = self.create_loop()
        threads = cfg.threads
        self.start_server(
            wsgi=wsgi_app(self, multithread=threads > 1),
            event_loop=loop,
            threads=threads,
            mode="st" if threads == 1 else "mt",
            ws=False,
        )
