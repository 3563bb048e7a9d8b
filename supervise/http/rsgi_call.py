"""The coroutine run for every RSGI request and WebSocket session: the app
call, and what happens when the app raises or returns without answering
(Rust sends the 500 or cuts the connection, and for a WebSocket refuses the
upgrade or closes with 1011; this logs it with the request line). Both
protocol objects report the same outcomes through ``_finish()``."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from time import perf_counter
from typing import Any

from supervise.logs import Logger
from supervise.rsgi import RSGIProtocolClosed

# What HTTPProtocol._finish() reports.
_ANSWERED, _NO_RESPONSE, _ERROR_BEFORE, _CUT_OFF = range(4)


def app_callable(app: Any) -> Callable[[Any, Any], Any]:
    """``__rsgi__`` when the app has it (RSGI prefers it over ``__call__``)."""
    return getattr(app, "__rsgi__", app)


def request_line(scope: Any) -> str:
    query = scope.query_string
    target = f"{scope.path}?{query}" if query else scope.path
    return f"{scope.method} {target} HTTP/{scope.http_version}"


def make_handler(
    *,
    app: Any,
    log: Logger,
    access_log: bool,
    record: Callable[[int, float, int], None] | None = None,
) -> Callable[[Any, Any], Coroutine[Any, Any, None]]:
    """``handler(scope, protocol)``: the coroutine the native server starts as a Task.

    ``record(status, seconds, body_bytes)`` is the worker's scoreboard recorder
    when metrics are on. The body goes out in Rust, which does not report its
    size yet: bytes are recorded as 0 until the server writes the slot itself.
    """
    call = app_callable(app)

    def report(scope: Any, outcome: int) -> None:
        if outcome == _NO_RESPONSE:
            log.error("Application returned without a response: %s", request_line(scope))
        elif outcome == _ERROR_BEFORE:
            log.exception("Error handling request %s", request_line(scope))
        elif outcome == _CUT_OFF:
            what = "WebSocket closed with 1011" if scope.proto == "ws" else "response cut off"
            log.exception("Error handling request %s (%s)", request_line(scope), what)

    # Timed in the one coroutine: a wrapping one cost a frame per request.
    measured = access_log or record is not None

    def done(scope: Any, proto: Any, elapsed: float) -> None:
        if record is not None:
            record(proto._status, elapsed, 0)
        if access_log:
            log.access(_AccessRecord(proto._status), None, _environ(scope), elapsed)

    async def handle(scope: Any, proto: Any) -> None:
        started = perf_counter() if measured else 0.0
        try:
            await call(scope, proto)
        except RSGIProtocolClosed:
            # The client left (or sent a broken body, answered 400 already):
            # not the app's fault, no traceback.
            if proto._finish(True) == _CUT_OFF:
                log.debug("Client gone during %s", request_line(scope))
        except BaseException as exc:
            report(scope, proto._finish(True))
            if not isinstance(exc, Exception):
                raise
        else:
            outcome = proto._finish(False)
            if outcome:
                report(scope, outcome)
        finally:
            if measured:
                done(scope, proto, perf_counter() - started)

    return handle


def _environ(scope: Any) -> dict[str, str]:
    """What the access log atoms read, in WSGI's names."""
    query = scope.query_string
    environ = {
        "REQUEST_METHOD": scope.method,
        "RAW_URI": f"{scope.path}?{query}" if query else scope.path,
        "PATH_INFO": scope.path,
        "QUERY_STRING": query,
        "SERVER_PROTOCOL": f"HTTP/{scope.http_version}",
        "REMOTE_ADDR": scope.client.rpartition(":")[0],
    }
    for name, value in scope.headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    return environ


class _AccessRecord:
    """The response as the access log reads it (Gunicorn's atoms)."""

    __slots__ = ("headers", "sent", "status", "status_code")

    def __init__(self, status: int) -> None:
        self.status_code = status or None
        self.status = str(status) if status else "-"
        self.sent = "-"  # the body goes out in Rust; its size is not reported back
        self.headers: list[tuple[str, str]] = []
