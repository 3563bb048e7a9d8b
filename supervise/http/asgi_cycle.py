"""One ASGI HTTP request: the app call, its ``receive`` and its ``send``.

``send`` is a small state machine over the response (``AsgiResponseState``):
the head is held back until the first body message, so a response whose
whole body comes in one message goes out in one write with a Content-Length,
and a streamed one gets chunked framing. Every message an app may send is
checked; a wrong one raises RuntimeError in the app (and is logged with the
request line), never leaves the client hanging.

The cycle's state, the request body's bytes, ``receive`` when the body is
there and ``send`` for the response's start and body messages are native
(``_native.AsgiCycle``, the base class): those steps ran for every request.
This subclass holds the rest: ``receive`` when it must wait, the rarer
messages (early hints, pathsend, trailers), the app call and what is logged.
"""

from __future__ import annotations

import os
import re
from typing import Any

from supervise._native import AsgiCycle
from supervise._native import AsgiResponseState as State
from supervise.http.errors import ClientDisconnected, error_response

# pathsend without sendfile: the file goes out in pieces of this size.
FILE_CHUNK = 256 * 1024

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_DISCONNECT = {"type": "http.disconnect"}


class RequestCycle(AsgiCycle):
    """The exchange of one request: body in, response out. Built as
    ``RequestCycle(proto, req, scope)``; the fields are the base class's."""

    __slots__ = ()

    # -- the request body (feed_body, from the protocol: AsgiCycle) ---------------------
    def _bad_body(self, status: int, reason: str) -> None:
        self.body_pending = False
        if self.response == State.NOT_STARTED:
            self.response = State.COMPLETE
            self.proto.transport.write(error_response(status, reason))
        self.proto.close()
        self.disconnected()

    def disconnected(self) -> None:
        self.gone = True
        self._wake()

    def sweep(self, now: float) -> None:
        """Enforce body_timeout while the app waits for body bytes that do not come."""
        timeout = self.proto.ctx.cfg.body_timeout
        if (
            self.body_pending
            and self._waiter is not None
            and timeout
            and now - self.last_read > timeout
        ):
            self._bad_body(408, "no request body data within body_timeout")

    # -- the app's receive (what needs no waiting: AsgiCycle.receive) --------------------
    async def _receive_slow(self) -> dict[str, Any]:
        """``receive`` when it must wait: for body bytes (after a 100 Continue
        if the client asked for one), or for the exchange's end."""
        if self.body_delivered:
            # Nothing more will come but the end of the exchange.
            while not self.gone and self.response != State.COMPLETE:
                await self._wait()
            return _DISCONNECT
        if self.gone or self.response == State.COMPLETE:
            return _DISCONNECT
        if not self.body and self.body_pending:
            if not self.continue_sent:
                self.continue_sent = True
                self.proto.transport.write(_CONTINUE)
            self.proto.resume_reading()
            while not self.body and self.body_pending and not self.gone:
                await self._wait()
            if self.gone:
                return _DISCONNECT
        return self._take_body()

    async def _wait(self) -> None:
        if self._waiter is None:
            self._waiter = self.proto.ctx.loop.create_future()
        await self._waiter

    # -- the app's send (the start and body messages: AsgiCycle.send) --------------------
    async def _send_slow(self, message: dict[str, Any]) -> None:
        """``send`` for what the native one does not take: any message after
        the client left, a message that is not a dict, and every message but
        the response's start and body in their order."""
        kind = message["type"]
        if self.gone:
            raise ClientDisconnected(f"the client went away ({kind} not sent)")
        if type(message) is not dict and kind in ("http.response.start", "http.response.body"):
            await self.send(dict(message))
            return
        await self._rare(kind, self.response, message)
        if self.proto.write_paused and not self.gone:
            await self.proto.drain()

    async def _rare(self, kind: str, state: State, message: dict[str, Any]) -> None:
        """Every other message, and every message out of order."""
        if state == State.NOT_STARTED:
            if kind == "http.response.early_hint":
                self._early_hint(message)
            else:
                raise RuntimeError(f"Expected ASGI message 'http.response.start', got {kind!r}")
        elif state == State.STARTED or state == State.STREAMING:
            if kind == "http.response.pathsend" and state == State.STARTED:
                await self._pathsend(message)
            else:
                raise RuntimeError(f"Expected ASGI message 'http.response.body', got {kind!r}")
        elif state == State.TRAILERS:
            if kind != "http.response.trailers":
                raise RuntimeError(f"Expected ASGI message 'http.response.trailers', got {kind!r}")
            self._trailers(message)
        else:
            raise RuntimeError(f"ASGI message {kind!r} sent after the response was complete")

    def _trailers(self, message: dict[str, Any]) -> None:
        # Each message's fields are checked as it comes, so that a bad one raises
        # on the send that carried it and leaves nothing behind; the section is
        # written once, at the last message.
        lines = b"".join(_field(name, value) for name, value in message.get("headers", ()))
        self._trailer_fields = (self._trailer_fields or b"") + lines
        if message.get("more_trailers", False):
            return
        if self._chunked:
            self.proto.transport.write(b"0\r\n" + self._trailer_fields + b"\r\n")
        self._finish()

    def _log_short_body(self) -> None:
        """The app sent fewer bytes than its Content-Length (the connection closes)."""
        self.proto.ctx.log.error(
            "Response to %s shorter than its Content-Length (%d of %d bytes)",
            request_line(self.req),
            self._sent,
            self._length,
        )

    def _early_hint(self, message: dict[str, Any]) -> None:
        if self.req.http_version != "1.1":
            return  # 1xx responses are for HTTP/1.1 clients only
        lines = b"".join(_field(b"Link", link) for link in message.get("links", ()))
        self.proto.transport.write(b"HTTP/1.1 103 Early Hints\r\n" + lines + b"\r\n")

    async def _pathsend(self, message: dict[str, Any]) -> None:
        path = message["path"]
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            head = self._head(size)
            self.response = State.STREAMING
            transport = self.proto.transport
            transport.write(head)
            count = size if self._length < 0 else min(size, self._length)
            if self._length != 0 and count:
                self._sent += count
                await self._send_file(file, count)
        self._body_done()

    async def _send_file(self, file: Any, count: int, offset: int = 0) -> None:
        proto = self.proto
        loop = proto.ctx.loop
        left = count
        file.seek(offset)
        if not self._chunked and proto.transport.get_extra_info("sslcontext") is None:
            try:
                await loop.sendfile(proto.transport, file, offset, count, fallback=False)
                return
            except (AttributeError, NotImplementedError, RuntimeError):
                # uvloop and rloop have no sendfile: what the socket takes now
                # goes by sendfile(2) all the same, the rest in pieces below.
                left -= _sendfile_what_fits(proto.transport, file, count, offset)
                file.seek(offset + count - left)
        while left > 0 and not self.gone:
            data = file.read(min(FILE_CHUNK, left))
            if not data:
                break
            left -= len(data)
            proto.transport.write(b"%x\r\n%b\r\n" % (len(data), data) if self._chunked else data)
            if proto.write_paused:
                await proto.drain()

    def static_app(self, answer: tuple[int, Any, Any]) -> Any:
        """An ASGI app that sends a --static-map answer (the native decision:
        status, headers, body) through this cycle, so that it is framed,
        paced, counted and logged as any response."""
        status, headers, body = answer
        fields = [(name.encode(), value.encode()) for name, value in headers]

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if type(body) is not tuple:
                await send({"type": "http.response.start", "status": status, "headers": fields})
                await send({"type": "http.response.body", "body": body or b""})
                return
            fd, offset, length = body
            with os.fdopen(fd, "rb") as file:
                fields.append((b"content-length", str(length).encode()))
                await send({"type": "http.response.start", "status": status, "headers": fields})
                head = self._head(length)
                self.response = State.STREAMING
                self.proto.transport.write(head)
                count = length if self._length < 0 else min(length, self._length)
                if self._length != 0 and count:
                    self._sent += count
                    await self._send_file(file, count, offset)
            self._body_done()

        return app

    # -- the request's end (AppRun runs the app: native/src/asgi/worker/run.rs) -------
    def _account(self, seconds: float) -> None:
        """The request's figures (--metrics) and its access log line."""
        ctx = self.proto.ctx
        record = ctx.record
        if record is not None:
            status = self._status or (500 if self.response == State.COMPLETE else 0)
            record(status, seconds, self._sent)
        if ctx.access_log:
            self._log_access(seconds)

    def _final_status(self) -> int | None:
        """The status the client got: a 500 sent for a failed app when none was started."""
        return self._status or (500 if self.response == State.COMPLETE else None)

    def _failed(self) -> None:
        """500 when nothing was sent yet; otherwise cut the connection off."""
        if self.gone:
            return
        if self.response == State.NOT_STARTED or self.response == State.STARTED:
            self.response = State.COMPLETE
            self.proto.transport.write(error_response(500, body=not self.is_head))
        else:
            self.response = State.COMPLETE
        self.proto.close()

    def _log_access(self, seconds: float) -> None:
        client = self.scope["client"]
        remote = client[0] if client else ""
        self.proto.ctx.log.access_request(_AccessRecord(self), self.req, remote, seconds)


class _AccessRecord:
    """The response as the access log reads it (Gunicorn's atoms)."""

    __slots__ = ("_headers", "sent", "status", "status_code")

    def __init__(self, cycle: RequestCycle) -> None:
        self.status_code = cycle._final_status()
        self.status = str(self.status_code)
        self.sent = cycle._sent
        self._headers = cycle._headers

    @property
    def headers(self) -> list[tuple[str, str]]:
        return [(n.decode("latin-1"), v.decode("latin-1")) for n, v in self._headers]


def _field(name: bytes, value: bytes) -> bytes:
    """One header field line; the checks response heads get natively."""
    if type(name) is not bytes or type(value) is not bytes:
        raise TypeError("header names and values must be byte strings")
    if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
        raise ValueError(f"invalid header field {name!r}: {value!r}")
    return name + b": " + value + b"\r\n"


_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\r\n\x00]")


def request_line(req: Any) -> str:
    return f"{req.method} {req.target} HTTP/{req.http_version}"


def _sendfile_what_fits(transport: Any, file: Any, count: int, offset: int = 0) -> int:
    """Sends the start of ``file`` straight from the page cache with
    sendfile(2), as far as the socket takes it without waiting; the bytes
    sent. Only with the transport's buffer empty (the head already in the
    socket), so nothing can overtake what the transport still holds; a loop
    without sendfile cannot wait for writability on a transport's socket,
    so the transport's writes carry what did not fit."""
    if transport.get_write_buffer_size():
        return 0
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    out, source, sent = sock.fileno(), file.fileno(), 0
    while sent < count:
        try:
            n = os.sendfile(out, source, offset + sent, count - sent)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            break  # the client is gone: the transport's next write finds out
        if n == 0:
            break
        sent += n
    return sent
