"""Client-side failures and the short responses that answer them.

The client errors subclass ``OSError`` on purpose: frameworks already treat an
``OSError`` from ``wsgi.input`` as "the client went away or sent garbage"
(Django raises UnreadablePostError, Werkzeug ClientDisconnected), which is
exactly what these are.
"""

from __future__ import annotations

from http import HTTPStatus


class ClientError(OSError):
    """The client, not the application, broke the exchange.

    ``status`` is what to answer when no response has started yet; 0 means the
    peer is gone and nothing can be answered.
    """

    status = 0


class ClientDisconnected(ClientError):
    """The peer closed or reset the connection."""


class ClientTimeout(ClientError, TimeoutError):
    """The peer stopped sending (header_timeout / body_timeout) or reading."""

    status = 408


class SendTimeout(ClientTimeout):
    """The peer took no response bytes within send_timeout, or took them
    slower than send_min_rate: its connection is dropped, and logged."""

    status = 0


class InvalidBody(ClientError):
    """A malformed or oversized request body (bad chunk framing, limit_request_body)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def error_response(status: int, text: str = "", body: bool = True) -> bytes:
    """A complete ``Connection: close`` response with a short text body.

    ``body=False`` (HEAD requests) keeps the Content-Length but drops the body.

    Built without the native response head on purpose: it answers requests
    the parser refused, and must work whatever state the request was in.
    """
    reason = phrase(status)
    message = f"{status} {reason}\n{text}\n" if text and text != reason else f"{status} {reason}\n"
    data = message.encode("utf-8", "replace")
    return (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode("latin-1") + (data if body else b"")
