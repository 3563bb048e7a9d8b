"""``--log-format json``: one JSON object per line, for log collectors that
parse JSON (Loki, Elasticsearch, CloudWatch, ...).

Access lines carry the access atoms as named fields, always the same keys (a
value the request lacks is null), plus ``request_id`` when the request has an
``X-Request-ID`` header. Error-log lines carry time, level, logger, message,
pid and, for an exception, its traceback. Values are request data: json.dumps
escapes quotes and control characters, so a request cannot forge a line.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

_dumps = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode

_second: tuple[int, str, str] = (0, "", "")


def iso_time(now: float) -> str:
    """ISO 8601 local time with milliseconds and offset: ``2026-11-22T10:00:00.123+01:00``.
    The text of the second is cached (one strftime a second), as the text format's."""
    global _second
    sec = int(now)
    cached = _second
    if cached[0] != sec:
        local = time.localtime(sec)
        offset = time.strftime("%z", local)
        cached = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", local), f"{offset[:3]}:{offset[3:]}")
        _second = cached
    return f"{cached[1]}.{int((now - sec) * 1000):03d}{cached[2]}"


def _value(environ: Mapping[str, Any], key: str) -> Any:
    return environ.get(key) or None


def access_line(
    resp: Any,
    environ: Mapping[str, Any],
    request_time: float,
    *,
    status: int | str,
    user: str | None,
) -> str:
    """One access line as a JSON object (no newline); ``status`` and ``user`` as the
    text format's atoms find them."""
    sent = getattr(resp, "sent", None)
    fields: dict[str, Any] = {
        "time": iso_time(time.time()),
        "remote_addr": _value(environ, "REMOTE_ADDR"),
        "user": user,
        "method": _value(environ, "REQUEST_METHOD"),
        "path": _value(environ, "PATH_INFO"),
        "query": environ.get("QUERY_STRING") or "",
        "protocol": _value(environ, "SERVER_PROTOCOL"),
        "status": status if isinstance(status, int) else None,
        # The body bytes sent (rsgi, native: those the app handed to Rust); none known: 0.
        "bytes": sent if isinstance(sent, int) else (0 if sent is None else None),
        "duration": round(request_time, 6),
        "referer": _value(environ, "HTTP_REFERER"),
        "user_agent": _value(environ, "HTTP_USER_AGENT"),
        "pid": os.getpid(),
    }
    request_id = environ.get("HTTP_X_REQUEST_ID")
    if request_id:
        fields["request_id"] = request_id
    return _dumps(fields)


class JSONFormatter(logging.Formatter):
    """The error log as JSON lines."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "time": iso_time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            fields["exception"] = record.exc_text
        if record.stack_info:
            fields["stack"] = self.formatStack(record.stack_info)
        return _dumps(fields)
