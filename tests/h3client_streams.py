"""The parts of tests/h3client.py below the client: its errors, its
responses, one request stream (`Exchange`) and the aioquic glue (`H3Protocol`).

Two things aioquic (1.7) does that this client works around:

* `H3Connection` parses GOAWAY frames and drops them, with no event; the
  client watches the server's control stream itself (`_ControlStreamWatcher`).
* `H3Connection` checks a response's content-length against its body and
  closes the whole connection when they differ, which is wrong for HEAD, 204
  and 304 responses; `_ClientH3` turns that check off and `Exchange` makes it
  with the request method and status known.

aioquic does validate the response headers it receives (RFC 9114 section
4.2): a malformed response (say, with a `connection` field) closes the whole
connection with H3_MESSAGE_ERROR, seen here as `H3ConnectionClosed(0x10e)`
with aioquic's reason.

`raw_headers` goes through `H3Connection.send_headers` unchanged: aioquic does
not validate headers it sends (only those it receives), so a request without
:path, with uppercase names, with a pseudo-header after a regular one, etc.
reaches the server as given.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.buffer import Buffer, BufferReadError
from aioquic.h3.connection import ErrorCode, H3Connection, H3Stream
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.events import (
    ConnectionTerminated,
    HandshakeCompleted,
    QuicEvent,
    StreamDataReceived,
    StreamReset,
)

CHUNK = 16 * 1024  # bytes of request body per DATA frame
HIGH_WATER = 256 * 1024  # unacknowledged body bytes on a stream before pausing
CONTROL_STREAM_TYPE = 0x00
GOAWAY_FRAME = 0x07
CLOSE_GRACE = 3.0  # seconds to wait for a connection to finish closing
Header = tuple["str | bytes", "str | bytes"]


# --- errors ------------------------------------------------------------------


class H3Error(Exception):
    """Base class of this client's errors."""


class H3StreamReset(H3Error):
    def __init__(self, code: int, stream_id: int = -1) -> None:
        super().__init__(f"stream {stream_id} reset by the server, code 0x{code:x}")
        self.code = code
        self.stream_id = stream_id


class H3ConnectionClosed(H3Error):
    def __init__(self, code: int, reason: str = "") -> None:
        super().__init__(f"connection closed, code 0x{code:x}, reason {reason!r}")
        self.code = code
        self.reason = reason


class H3Rejected(H3Error):
    """The server did not process the request; retrying it is safe.

    `goaway_id` is set when a GOAWAY covered the stream, `code` when the
    stream was reset with H3_REQUEST_REJECTED (0x10b).
    """

    def __init__(
        self,
        stream_id: int,
        connection: int,
        *,
        goaway_id: int | None = None,
        code: int | None = None,
    ) -> None:
        why = f"GOAWAY id {goaway_id}" if goaway_id is not None else f"reset 0x{code or 0:x}"
        super().__init__(f"stream {stream_id} on connection {connection} rejected ({why})")
        self.stream_id = stream_id
        self.connection = connection
        self.goaway_id = goaway_id
        self.code = code


class H3MessageError(H3Error):
    """A malformed response; the parsed response is in `.response`."""

    def __init__(self, message: str, response: H3Response) -> None:
        super().__init__(message)
        self.response = response


# --- responses -----------------------------------------------------------------


@dataclass
class H3Response:
    status: int
    headers: list[tuple[str, str]]  # lower-case names, no pseudo-headers
    body: bytes = b""
    trailers: list[tuple[str, str]] = field(default_factory=list)
    interim: list[int] = field(default_factory=list)  # 1xx statuses, in order
    stream_id: int = -1
    connection: int = 0  # which connection of the client carried it, from 1

    def header(self, name: str) -> str | None:
        """The first value of header `name` (any case), or None."""
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)


def _text(pairs: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """Header names and values as str (latin-1, so every byte survives)."""
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in pairs]


def _bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("latin-1")


@dataclass
class Spec:
    """One request, as given to `request` or as a dict in `gather`."""

    method: str = "GET"
    path: str = "/"
    body: bytes = b""
    headers: Sequence[Header] = ()
    timeout: float = 10
    authority: str | None = None
    extra_pseudo: list[tuple[bytes, bytes]] | None = None
    raw_headers: list[tuple[bytes, bytes]] | None = None
    retry_rejected: bool = True

    def header_list(self, default_authority: str) -> list[tuple[bytes, bytes]]:
        if self.raw_headers is not None:
            return list(self.raw_headers)
        fields = [
            (b":method", self.method.encode()),
            (b":scheme", b"https"),
            (b":authority", (self.authority or default_authority).encode()),
            (b":path", self.path.encode()),
            *(self.extra_pseudo or ()),
        ]
        fields += [(_bytes(k).lower(), _bytes(v)) for k, v in self.headers]
        if self.body and not any(k == b"content-length" for k, _ in fields):
            fields.append((b"content-length", str(len(self.body)).encode()))
        return fields


# --- one request stream --------------------------------------------------------


class Exchange:
    """The response side of one request stream, completed into a future."""

    def __init__(self, stream_id: int, connection: int, head: bool) -> None:
        self.stream_id = stream_id
        self.connection = connection
        self.head = head
        self.future: asyncio.Future[H3Response] = asyncio.get_running_loop().create_future()
        self.status: int | None = None
        self.headers: list[tuple[str, str]] = []
        self.trailers: list[tuple[str, str]] = []
        self.interim: list[int] = []
        self.body = bytearray()
        self.sender: asyncio.Task[None] | None = None

    @property
    def done(self) -> bool:
        return self.future.done()

    def on_headers(self, fields: list[tuple[bytes, bytes]], ended: bool) -> None:
        pseudo = dict(kv for kv in fields if kv[0].startswith(b":"))
        regular = _text(kv for kv in fields if not kv[0].startswith(b":"))
        if self.status is not None:
            self.trailers = regular
        elif (status := int(pseudo.get(b":status", b"0"))) < 200:
            self.interim.append(status)
        else:
            self.status, self.headers = status, regular
        if ended:
            self.finish()

    def on_data(self, data: bytes, ended: bool) -> None:
        self.body += data
        if ended:
            self.finish()

    def finish(self) -> None:
        if self.done:
            return
        response = H3Response(
            status=self.status or 0,
            headers=self.headers,
            body=bytes(self.body),
            trailers=self.trailers,
            interim=self.interim,
            stream_id=self.stream_id,
            connection=self.connection,
        )
        problem = self._problem(response)
        if problem:
            self.future.set_exception(H3MessageError(problem, response))
        else:
            self.future.set_result(response)

    def _problem(self, response: H3Response) -> str | None:
        if self.status is None:
            return "the stream ended without a final response"
        length = response.header("content-length")
        if length is None or self.head or self.status in (204, 304):
            return None
        if not length.isdigit() or int(length) != len(response.body):
            return f"content-length {length} but {len(response.body)} bytes of body"
        return None

    def fail(self, exc: BaseException) -> None:
        if not self.done:
            self.future.set_exception(exc)
            self.future.exception()  # retrieved: no "never retrieved" warning
        if self.sender is not None:
            self.sender.cancel()


# --- aioquic glue ----------------------------------------------------------------


class _ClientH3(H3Connection):
    """H3Connection without its content-length check (see the module docstring)."""

    def _check_content_length(self, stream: H3Stream) -> None:
        return None


class _ControlStreamWatcher:
    """Finds GOAWAY frames on the server's control stream (aioquic drops them)."""

    def __init__(self) -> None:
        self._buffers: dict[int, bytearray] = {}
        self._ignored: set[int] = set()
        self._control: int | None = None

    def feed(self, stream_id: int, data: bytes) -> list[int]:
        """Take data of a server unidirectional stream; return GOAWAY ids found."""
        if stream_id in self._ignored:
            return []
        buf = self._buffers.setdefault(stream_id, bytearray())
        buf += data
        if self._control != stream_id and not self._read_type(stream_id, buf):
            return []
        return self._read_frames(buf)

    def _read_type(self, stream_id: int, buf: bytearray) -> bool:
        reader = Buffer(data=bytes(buf))
        try:
            stream_type = reader.pull_uint_var()
        except BufferReadError:
            return False
        if stream_type != CONTROL_STREAM_TYPE:
            self._ignored.add(stream_id)
            del self._buffers[stream_id]
            return False
        self._control = stream_id
        del buf[: reader.tell()]
        return True

    @staticmethod
    def _read_frames(buf: bytearray) -> list[int]:
        ids: list[int] = []
        while True:
            reader = Buffer(data=bytes(buf))
            try:
                frame_type, length = reader.pull_uint_var(), reader.pull_uint_var()
                payload = reader.pull_bytes(length)
            except BufferReadError:
                return ids
            del buf[: reader.tell()]
            if frame_type == GOAWAY_FRAME:
                ids.append(Buffer(data=payload).pull_uint_var())


class H3Protocol(QuicConnectionProtocol):
    """One QUIC connection carrying HTTP/3 requests."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = _ClientH3(self._quic)
        self.number = 0
        self.exchanges: dict[int, Exchange] = {}
        self.goaway_id: int | None = None
        self.closed_by: tuple[int, str] | None = None
        self.retiring = False
        self._watcher = _ControlStreamWatcher()
        self._progress = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.handshake_ended = asyncio.Event()  # completed, or failed

    @property
    def usable(self) -> bool:
        return self.closed_by is None and self.goaway_id is None and not self.retiring

    # requests

    def start(self, spec: Spec, authority: str) -> Exchange:
        """Open a stream and send the request on it (the body in the background)."""
        stream_id = self._quic.get_next_available_stream_id()
        exchange = Exchange(stream_id, self.number, spec.method.upper() == "HEAD")
        self.exchanges[stream_id] = exchange
        self._idle.clear()
        self.h3.send_headers(stream_id, spec.header_list(authority), end_stream=not spec.body)
        self.transmit()
        if spec.body:
            exchange.sender = asyncio.ensure_future(self._send_body(exchange, spec.body))
        return exchange

    def cancel(self, exchange: Exchange, exc: BaseException) -> None:
        """Give up on a request: fail it and reset both directions of its stream."""
        exchange.fail(exc)
        code = ErrorCode.H3_REQUEST_CANCELLED
        with contextlib.suppress(Exception):
            self._quic.reset_stream(exchange.stream_id, code)
        with contextlib.suppress(Exception):
            self._quic.stop_stream(exchange.stream_id, code)
        self._forget(exchange.stream_id)
        self.transmit()

    async def _send_body(self, exchange: Exchange, body: bytes) -> None:
        view = memoryview(body)
        for offset in range(0, len(body), CHUNK):
            if self.closed_by is not None:  # a failed request cancels this task itself
                return
            last = offset + CHUNK >= len(body)
            try:
                self.h3.send_data(exchange.stream_id, bytes(view[offset : offset + CHUNK]), last)
            except Exception:  # the server stopped the stream: nothing more to send
                return
            self.transmit()
            await self._drain(exchange.stream_id)

    async def _drain(self, stream_id: int) -> None:
        """Wait while too much of the stream's data is unacknowledged."""
        while self._backlog(stream_id) > HIGH_WATER and self.closed_by is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._progress.wait(), 0.05)

    def _backlog(self, stream_id: int) -> int:
        stream = getattr(self._quic, "_streams", {}).get(stream_id)
        sender = getattr(stream, "sender", None)
        start, stop = getattr(sender, "_buffer_start", 0), getattr(sender, "_buffer_stop", 0)
        return stop - start

    async def wait_idle(self) -> None:
        await self._idle.wait()

    # events

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        super().datagram_received(data, addr)
        self._progress.set()
        self._progress = asyncio.Event()

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamDataReceived) and event.stream_id % 4 == 3:
            for goaway_id in self._watcher.feed(event.stream_id, event.data):
                self._on_goaway(goaway_id)
        elif isinstance(event, StreamReset):
            self._on_reset(event.stream_id, event.error_code)
        elif isinstance(event, ConnectionTerminated):
            self._on_terminated(event.error_code, event.reason_phrase)
        elif isinstance(event, HandshakeCompleted):
            self.handshake_ended.set()
        for h3_event in self.h3.handle_event(event):
            self._on_h3_event(h3_event)

    def _on_h3_event(self, event: H3Event) -> None:
        if not isinstance(event, (HeadersReceived, DataReceived)):
            return
        exchange = self.exchanges.get(event.stream_id)
        if exchange is None:
            return
        if isinstance(event, HeadersReceived):
            exchange.on_headers(event.headers, event.stream_ended)
        else:
            exchange.on_data(event.data, event.stream_ended)
        if exchange.done:
            self._forget(event.stream_id)

    def _on_goaway(self, goaway_id: int) -> None:
        self.goaway_id = goaway_id if self.goaway_id is None else min(self.goaway_id, goaway_id)
        for stream_id, exchange in list(self.exchanges.items()):
            if stream_id >= self.goaway_id:
                rejected = H3Rejected(stream_id, self.number, goaway_id=self.goaway_id)
                self.cancel(exchange, rejected)

    def _on_reset(self, stream_id: int, code: int) -> None:
        exchange = self.exchanges.get(stream_id)
        if exchange is None:
            return
        if code == ErrorCode.H3_REQUEST_REJECTED:
            exchange.fail(H3Rejected(stream_id, self.number, code=code))
        else:
            exchange.fail(H3StreamReset(code, stream_id))
        self._forget(stream_id)

    def _on_terminated(self, code: int, reason: str) -> None:
        self.closed_by = (code, reason)
        for stream_id, exchange in list(self.exchanges.items()):
            if self.goaway_id is not None and stream_id >= self.goaway_id:
                exchange.fail(H3Rejected(stream_id, self.number, goaway_id=self.goaway_id))
            else:
                exchange.fail(H3ConnectionClosed(code, reason))
            self._forget(stream_id)
        self._progress.set()
        self.handshake_ended.set()

    def _forget(self, stream_id: int) -> None:
        self.exchanges.pop(stream_id, None)
        if not self.exchanges:
            self._idle.set()


@dataclass
class QuicLink:
    protocol: H3Protocol
    stack: contextlib.AsyncExitStack
