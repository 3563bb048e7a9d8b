"""What the worker does when an ASGI request on the engine (``-k native``)
ends: the log line of an app that raised or left its response unanswered
(the engine already sent the 500 or cut the connection), the asgi worker's
too (``make_log_outcome``, the same ``AppRun`` runs its requests), and the
access log and metrics. The engine runs the app
itself (``_native.AppRun``: native/src/bridge/app_run.rs) and calls these only
when there is something to log or record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from supervise._native import Finish, asgi_access_environ
from supervise.logs import AccessResponse, Logger

# The extensions the engine implements; the scope of every request has them
# (and http.response.early_hint where the connection can write a 103: HTTP/1.1
# requests that hyper does not serve).
EXTENSIONS: dict[str, dict[str, Any]] = {"http.response.pathsend": {}, "http.response.trailers": {}}


def request_line(scope: dict[str, Any]) -> str:
    query = scope["query_string"]
    target = scope["raw_path"].decode("latin-1")
    if query:
        target += "?" + query.decode("latin-1")
    return f"{scope['method']} {target} HTTP/{scope['http_version']}"


def make_log_outcome(*, log: Logger) -> Callable[[Finish, dict[str, Any], Any], None]:
    """``log_outcome(finish, scope, exc)``: the line for a request whose app
    raised ``exc`` or (``exc`` None) returned without finishing its response.
    A cancellation (the worker stopping) is no error of the app's."""

    def log_outcome(finish: Finish, scope: dict[str, Any], exc: BaseException | None) -> None:
        line = request_line(scope)
        if exc is not None and not isinstance(exc, Exception):
            return
        if exc is not None:
            if finish == Finish.CLIENT_GONE and isinstance(exc, OSError):
                log.debug("Client gone during %s", line)
            else:
                log.exception("Error handling request %s", line, exc_info=exc)
        elif finish == Finish.NO_RESPONSE:
            log.error("ASGI app returned without starting a response to %s", line)
        elif finish == Finish.INCOMPLETE:
            log.error("ASGI app returned without completing its response to %s", line)

    return log_outcome


def make_done(
    *, log: Logger, access_log: bool, record: Callable[[int, float, int], None] | None
) -> Callable[[dict[str, Any], Any, float], None] | None:
    """``done(scope, cycle, seconds)`` after every request, for the access log
    and ``record(status, seconds, body_bytes)`` (the worker's scoreboard when
    metrics are on); None when neither is on, so the engine times nothing."""
    if not access_log and record is None:
        return None

    def done(scope: dict[str, Any], cycle: Any, elapsed: float) -> None:
        status, sent = cycle._status, cycle._sent
        if record is not None:
            record(status, elapsed, sent)
        if access_log:
            log.access(
                AccessResponse(status, sent, None), None, asgi_access_environ(cycle), elapsed
            )

    return done


def access_environ(scope: dict[str, Any]) -> dict[str, str]:
    """What the access log atoms read of a scope whose head is gone (a WebSocket
    session's), in WSGI's names: those `environ::fill` gives a request's head."""
    query = scope["query_string"].decode("latin-1")
    path = scope["raw_path"].decode("latin-1")
    client = scope["client"]
    environ = {
        "REQUEST_METHOD": scope["method"],
        "RAW_URI": f"{path}?{query}" if query else path,
        "PATH_INFO": scope["path"],
        "QUERY_STRING": query,
        "SERVER_PROTOCOL": f"HTTP/{scope['http_version']}",
        "REMOTE_ADDR": client[0] if client else "",
    }
    for name, value in scope["headers"]:
        key = name.decode("latin-1").upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            key = "HTTP_" + key
        text = value.decode("latin-1")
        environ[key] = f"{environ[key]},{text}" if key in environ else text
    return environ
