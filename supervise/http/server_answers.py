"""Access lines for the requests a worker answers itself, without the app
(health probes, static files): they have no WSGI environ or ASGI scope, so
the few keys the access log's atoms read are made here."""

from __future__ import annotations

from typing import Any

from supervise.http.health import ProbeAnswer


class AnsweredRecord:
    """A response the worker answered itself (a probe under
    ``--health-access-log``, a static file), as the access log reads it."""

    __slots__ = ("headers", "sent", "status", "status_code")

    def __init__(
        self, status_code: int, status: str, sent: int, headers: list[tuple[str, str]]
    ) -> None:
        self.status_code = status_code
        self.status = status
        self.sent = sent
        self.headers = headers

    @classmethod
    def of_probe(cls, answer: ProbeAnswer, sent: int) -> AnsweredRecord:
        return cls(answer.status, answer.status_line, sent, list(answer.headers))


def probe_environ(
    method: str, target: str, path: str, protocol: str, client: str
) -> dict[str, str]:
    """What the access log's atoms read of a probe, in WSGI's names (for the
    classes whose requests have no WSGI environ)."""
    _, _, query = target.partition("?")
    return {
        "REQUEST_METHOD": method,
        "RAW_URI": target,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_PROTOCOL": protocol,
        "REMOTE_ADDR": client,
    }


def log_answered(
    log: Any,
    client: str,
    method: str,
    target: str,
    protocol: str,
    status: int,
    sent: int,
    seconds: float,
    referer: str | None = None,
    user_agent: str | None = None,
) -> None:
    """One access line for a request the native server answered itself (a
    static file, a logged probe); its tick collects them. ``client`` is
    ``addr:port``, empty on a unix socket."""
    host = client.rpartition(":")[0].strip("[]") if ":" in client else client
    path = target.partition("?")[0]
    environ = probe_environ(method, target, path, protocol, host)
    if referer is not None:
        environ["HTTP_REFERER"] = referer
    if user_agent is not None:
        environ["HTTP_USER_AGENT"] = user_agent
    log.access(AnsweredRecord(status, str(status), sent, []), None, environ, seconds)
