"""The coroutine run for every ASGI request on the engine (``-k native``):
the app call with the native ``receive``/``send`` (native/src/asgi), and what
happens when the app raises or returns without answering (Rust sends the 500
or cuts the connection; this logs it with the request line, as the asgi
worker words it)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from time import perf_counter
from typing import Any

from supervise.logs import Logger

# What HttpCycle._finish() reports.
_ANSWERED, _NOT_STARTED, _ERROR_BEFORE, _CUT_OFF, _INCOMPLETE, _CLIENT_GONE = range(6)

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


def make_handler(
    *,
    app: Any,
    log: Logger,
    access_log: bool,
    record: Callable[[int, float, int], None] | None = None,
) -> Callable[[dict[str, Any], Any], Coroutine[Any, Any, None]]:
    """``handler(scope, cycle)``: the coroutine the native server starts per request.

    ``record(status, seconds, body_bytes)`` is the worker's scoreboard recorder
    when metrics are on.
    """
    measured = access_log or record is not None

    def done(scope: dict[str, Any], cycle: Any, elapsed: float) -> None:
        status, sent = cycle._status, cycle._sent
        if record is not None:
            record(status, elapsed, sent)
        if access_log:
            log.access(_AccessRecord(status, sent), None, access_environ(scope), elapsed)

    async def handle(scope: dict[str, Any], cycle: Any) -> None:
        started = perf_counter() if measured else 0.0
        try:
            await app(scope, cycle.receive, cycle.send)
        except Exception as exc:
            if cycle._finish(True) == _CLIENT_GONE and isinstance(exc, OSError):
                log.debug("Client gone during %s", request_line(scope))
            else:
                log.exception("Error handling request %s", request_line(scope))
        except BaseException:
            cycle._finish(True)  # cancelled at exit: cut, nothing to report
            raise
        else:
            outcome = cycle._finish(False)
            if outcome == _NOT_STARTED:
                log.error(
                    "ASGI app returned without starting a response to %s", request_line(scope)
                )
            elif outcome == _INCOMPLETE:
                log.error(
                    "ASGI app returned without completing its response to %s",
                    request_line(scope),
                )
        finally:
            if measured:
                done(scope, cycle, perf_counter() - started)

    return handle


def access_environ(scope: dict[str, Any]) -> dict[str, str]:
    """What the access log atoms read, in WSGI's names."""
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
        key = "HTTP_" + name.decode("latin-1").upper().replace("-", "_")
        text = value.decode("latin-1")
        environ[key] = f"{environ[key]},{text}" if key in environ else text
    return environ


class _AccessRecord:
    """The response as the access log reads it (Gunicorn's atoms)."""

    __slots__ = ("headers", "sent", "status", "status_code")

    def __init__(self, status: int, sent: int) -> None:
        self.status_code = status or None
        self.status = str(status) if status else "-"
        self.sent = sent
        self.headers: list[tuple[str, str]] = []
