"""The Python half of WSGI on the native engine (``-k native``, native/src/wsgi).

Rust reads the request, builds the environ, calls the app on the thread that
did the I/O and sends the response; what stays in Python is what belongs to
the worker: logging an app's failure with its request line, the access log,
metrics, the pre/post_request hooks and the proxy-header rules. Each is given
to Rust only when it has something to do, so a plain deployment makes no
Python call per request besides the app itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from supervise import _native, hooks
from supervise.http.proxy import ProxyRules
from supervise.http.wsgi import WSGIHandler

if TYPE_CHECKING:
    from supervise.workers.base import Worker


def request_line(environ: dict[str, Any]) -> str:
    return f"{environ['REQUEST_METHOD']} {environ['RAW_URI']} {environ['SERVER_PROTOCOL']}"


class EnvironRequest:
    """The ``req`` the pre_request and post_request hooks get (what Gunicorn's
    hooks read of a request), taken from the environ."""

    __slots__ = ("environ",)

    def __init__(self, environ: dict[str, Any]) -> None:
        self.environ = environ

    method = property(lambda self: self.environ["REQUEST_METHOD"])
    path = property(lambda self: self.environ["PATH_INFO"])
    query = property(lambda self: self.environ["QUERY_STRING"])
    uri = target = property(lambda self: self.environ["RAW_URI"])
    http_version = property(lambda self: self.environ["SERVER_PROTOCOL"].partition("/")[2])

    @property
    def headers(self) -> list[tuple[str, str]]:
        return [
            (key[5:].replace("_", "-").title(), value)
            for key, value in self.environ.items()
            if key.startswith("HTTP_")
        ]


class Finished:
    """The response as the access log and post_request read it."""

    __slots__ = ("headers", "sent", "status", "status_code")

    def __init__(self, status: int, headers: Any, sent: int) -> None:
        self.status_code = status
        self.status = str(status)
        self.headers = headers or []
        self.sent = sent


def wsgi_app(worker: Worker, *, multithread: bool) -> _native.WsgiApp:
    """What ``NativeServer(wsgi=...)`` takes for ``worker.app``."""
    cfg, log = worker.cfg, worker.log
    handler = WSGIHandler(worker, multithread=multithread)
    base = handler.base_environ(worker.listeners[0])

    def on_error(environ: dict[str, Any], exc: BaseException, what: str) -> None:
        suffix = f" ({what})" if what else ""
        log.exception(
            "Error handling request %s%s",
            request_line(environ),
            suffix,
            exc_info=(type(exc), exc, exc.__traceback__),
        )

    rules = ProxyRules(cfg)
    return _native.WsgiApp(
        app=_with_pre_request(worker, worker.app, cfg.pre_request),
        base=base,
        on_error=on_error,
        finished=_finished(worker),
        proxy=_proxy(rules),
        proxy_headers=rules.header_list(),
        body_timeout=float(cfg.body_timeout or 0),
        sendfile=bool(cfg.sendfile),
    )


def _with_pre_request(worker: Worker, app: Any, hook: Any) -> Any:
    if hook is hooks.pre_request and worker.cfg.loglevel != "debug":
        return app  # the default only logs at debug level

    def call(environ: dict[str, Any], start_response: Any) -> Any:
        hook(worker, EnvironRequest(environ))
        return app(environ, start_response)

    return call


def _finished(worker: Worker) -> Callable[..., None] | None:
    log, record = worker.log, worker.record
    access = log.access_enabled
    post = worker.cfg.post_request
    if post is hooks.post_request:
        post = None
    if not access and record is None and post is None:
        return None

    def finished(environ: dict[str, Any], status: int, headers: Any, sent: int, t: float) -> None:
        resp = Finished(status, headers, sent)
        if post is not None:
            try:
                post(worker, EnvironRequest(environ), environ, resp)
            except Exception:
                log.exception("post_request hook failed for %s", request_line(environ))
        if access:
            log.access(resp, None, environ, t)
        if record is not None:
            record(status, t, sent)

    return finished


def _proxy(rules: ProxyRules) -> Callable[[dict[str, Any]], None] | None:
    if not rules.enabled:
        return None

    def proxy(environ: dict[str, Any]) -> None:
        host = environ["REMOTE_ADDR"]
        # Unix-socket peers ("") are trusted, as by the other workers.
        if not host or rules.trusts(host):
            rules.apply(environ)

    return proxy
