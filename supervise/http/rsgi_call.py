"""What the worker does when an RSGI request or WebSocket session ends: the
log line of an app that raised or returned without answering (the engine
already sent the 500, cut the connection, refused the upgrade or closed with
1011), and the access log and metrics. The engine runs the app itself
(``_native.AppRun``: native/src/bridge/app_run.rs) and calls these only when
there is something to log or record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from supervise._native import Finish, rsgi_access_environ
from supervise.logs import AccessResponse, Logger
from supervise.rsgi import RSGIProtocolClosed


def app_callable(app: Any) -> Callable[[Any, Any], Any]:
    """``__rsgi__`` when the app has it (RSGI prefers it over ``__call__``)."""
    return getattr(app, "__rsgi__", app)


def request_line(scope: Any) -> str:
    query = scope.query_string
    target = f"{scope.path}?{query}" if query else scope.path
    return f"{scope.method} {target} HTTP/{scope.http_version}"


def make_log_outcome(*, log: Logger) -> Callable[[Finish, Any, BaseException | None], None]:
    """``log_outcome(finish, scope, exc)``: the line for an exchange whose app
    raised ``exc`` (a cancellation too) or returned without answering."""

    def log_outcome(finish: Finish, scope: Any, exc: BaseException | None) -> None:
        if isinstance(exc, RSGIProtocolClosed):
            # The client left (or sent a broken body, answered 400 already):
            # not the app's fault, no traceback.
            if finish == Finish.CUT_OFF:
                log.debug("Client gone during %s", request_line(scope))
        elif finish == Finish.NO_RESPONSE:
            log.error("Application returned without a response: %s", request_line(scope))
        elif finish == Finish.ERROR_BEFORE_RESPONSE:
            log.exception("Error handling request %s", request_line(scope), exc_info=exc)
        elif finish == Finish.CUT_OFF:
            what = "WebSocket closed with 1011" if scope.proto == "ws" else "response cut off"
            log.exception("Error handling request %s (%s)", request_line(scope), what, exc_info=exc)
        elif finish == Finish.SERVER_ANSWERED:
            # The server refused the request's body (400, 413) and said so;
            # the app's read of it raised, as it must.
            log.debug("Request body refused during %s: %s", request_line(scope), exc)
        elif isinstance(exc, Exception):
            # Raised once the whole response had gone: the client has its
            # answer, but the app's error must not vanish.
            log.exception(
                "Error handling request %s (after the response)", request_line(scope), exc_info=exc
            )

    return log_outcome


def make_done(
    *, log: Logger, access_log: bool, record: Callable[[int, float, int], None] | None
) -> Callable[[Any, Any, float], None] | None:
    """``done(scope, protocol, seconds)`` after every exchange, for the access
    log and ``record(status, seconds, body_bytes)`` (the worker's scoreboard
    when metrics are on); None when neither is on, so the engine times
    nothing. The bytes are those the app handed to the server (a file's
    size, a stream's chunks as they were queued)."""
    if not access_log and record is None:
        return None

    def done(scope: Any, proto: Any, elapsed: float) -> None:
        # A WebSocket session (the 101 has no body) reports its status only.
        status, sent = proto._status, getattr(proto, "_sent", 0)
        if record is not None:
            record(status, elapsed, sent)
        if access_log:
            answer = AccessResponse(
                status, sent if status else None, getattr(proto, "_headers", None)
            )
            log.access(answer, None, rsgi_access_environ(scope), elapsed)

    return done
