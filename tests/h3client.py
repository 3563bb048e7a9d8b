"""A small HTTP/3 client for the test suite, built on aioquic's asyncio API.

The HTTP/3 tests talk to the real server over real UDP sockets with a real
HTTP/3 client, so that what they check is what a browser or curl would see:
QUIC handshakes, QPACK, flow control, stream resets, GOAWAY. The tests are
synchronous, so `H3Client` runs its own asyncio event loop in a background
thread and every public method blocks until its result is there.

One QUIC connection is kept open across requests. A new one is opened only
when asked (`reconnect()`), when the current one was closed, or after the
server sent GOAWAY on it (as browsers do: no new request goes on a connection
that is going away; the old one is closed once its requests are done).

    with H3Client("127.0.0.1", port) as client:
        r = client.request("GET", "/")
        assert r.status == 200 and client.connections_opened == 1
        rs = client.gather([{"method": "GET", "path": f"/{i}"} for i in range(10)])

Errors: `H3StreamReset` (the server reset the stream), `H3ConnectionClosed`
(the connection ended before the response did), `H3Rejected` (the server did
not process the request: its stream id is at or above the GOAWAY id, or it was
reset with H3_REQUEST_REJECTED; safe to retry per RFC 9114 sections 4.1.1 and
5.2, which `request(retry_rejected=True)` does once, on a new connection),
`H3MessageError` (a malformed response: content-length does not match the
body) and `TimeoutError`.

Two things aioquic (1.7) does that this client works around:

* `H3Connection` parses GOAWAY frames and drops them, with no event; the
  client watches the server's control stream itself (`_ControlStreamWatcher`).
* `H3Connection` checks a response's content-length against its body and
  closes the whole connection when they differ, which is wrong for HEAD, 204
  and 304 responses; `_ClientH3` turns that check off and `_Exchange` makes it
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
import concurrent.futures
import contextlib
import ssl
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.buffer import Buffer, BufferReadError
from aioquic.h3.connection import H3_ALPN, ErrorCode, H3Connection, H3Stream
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
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
class _Spec:
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


class _Exchange:
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


class _H3Protocol(QuicConnectionProtocol):
    """One QUIC connection carrying HTTP/3 requests."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = _ClientH3(self._quic)
        self.number = 0
        self.exchanges: dict[int, _Exchange] = {}
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

    def start(self, spec: _Spec, authority: str) -> _Exchange:
        """Open a stream and send the request on it (the body in the background)."""
        stream_id = self._quic.get_next_available_stream_id()
        exchange = _Exchange(stream_id, self.number, spec.method.upper() == "HEAD")
        self.exchanges[stream_id] = exchange
        self._idle.clear()
        self.h3.send_headers(stream_id, spec.header_list(authority), end_stream=not spec.body)
        self.transmit()
        if spec.body:
            exchange.sender = asyncio.ensure_future(self._send_body(exchange, spec.body))
        return exchange

    def cancel(self, exchange: _Exchange, exc: BaseException) -> None:
        """Give up on a request: fail it and reset both directions of its stream."""
        exchange.fail(exc)
        code = ErrorCode.H3_REQUEST_CANCELLED
        with contextlib.suppress(Exception):
            self._quic.reset_stream(exchange.stream_id, code)
        with contextlib.suppress(Exception):
            self._quic.stop_stream(exchange.stream_id, code)
        self._forget(exchange.stream_id)
        self.transmit()

    async def _send_body(self, exchange: _Exchange, body: bytes) -> None:
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
class _Connection:
    protocol: _H3Protocol
    stack: contextlib.AsyncExitStack


# --- the client ----------------------------------------------------------------


class H3Client:
    """A blocking HTTP/3 client keeping one QUIC connection open across requests.

    Use it as a context manager; `close()` ends it (it cannot be restarted).
    `verify=False` accepts any server certificate; `cafile` is the CA bundle
    for `verify=True`; `certfile`/`keyfile` present a TLS client certificate;
    `server_name` is the SNI (default: `host`).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        verify: bool = False,
        cafile: str | None = None,
        certfile: str | None = None,
        keyfile: str | None = None,
        server_name: str | None = None,
        idle_timeout: float = 30.0,
    ) -> None:
        self.host, self.port = host, port
        self.verify, self.cafile = verify, cafile
        self.certfile, self.keyfile = certfile, keyfile
        self.server_name = server_name
        self.idle_timeout = idle_timeout
        self.connections_opened = 0
        self.retries = 0
        self._current: _Connection | None = None
        self._retired: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()  # binds to the client's loop on first use
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def __enter__(self) -> H3Client:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the event loop thread (done by `with`)."""
        if self._loop is not None:
            return
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="h3client", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Close every connection, then stop the event loop thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._close_all(), CLOSE_GRACE * 2)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = None

    # state of the current connection

    @property
    def goaway_received(self) -> bool:
        """Whether the server sent GOAWAY on the current connection."""
        return self.goaway_id is not None

    @property
    def goaway_id(self) -> int | None:
        current = self._current
        return current.protocol.goaway_id if current else None

    @property
    def connected(self) -> bool:
        """Whether the current connection is open (not closed; it may have got GOAWAY)."""
        current = self._current
        return bool(current and current.protocol.closed_by is None)

    @property
    def handshake_retried(self) -> bool:
        """Whether the server sent Retry before the current connection (it
        made the client prove its address, RFC 9000 8.1.2)."""
        current = self._current
        return bool(current and getattr(current.protocol._quic, "_retry_count", 0))

    @property
    def closed_by(self) -> tuple[int, str] | None:
        """(error code, reason) that closed the current connection, if it is closed."""
        current = self._current
        return current.protocol.closed_by if current else None

    def wait_goaway(self, timeout: float = 5) -> bool:
        """Wait until the current connection got GOAWAY or closed; True on GOAWAY."""
        self._call(self._wait_goaway(timeout), timeout)
        return self.goaway_received

    # requests

    def reconnect(self, timeout: float = 10) -> None:
        """Close the current connection (if any) and open a new one now."""
        self._call(self._reconnect(timeout), timeout + CLOSE_GRACE)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: Sequence[Header] = (),
        timeout: float = 10,
        authority: str | None = None,
        extra_pseudo: list[tuple[bytes, bytes]] | None = None,
        raw_headers: list[tuple[bytes, bytes]] | None = None,
        retry_rejected: bool = True,
    ) -> H3Response:
        """Send one request and return its complete response.

        `headers` names are lower-cased; content-length is added for a
        non-empty body unless given. `extra_pseudo` is appended after the
        four usual pseudo-headers. `raw_headers` replaces the whole header
        list, pseudo-headers included, and is sent exactly as given.
        `timeout` covers opening a connection and the whole response.
        """
        spec = _Spec(
            method,
            path,
            body,
            headers,
            timeout,
            authority,
            extra_pseudo,
            raw_headers,
            retry_rejected,
        )
        return self._call(self._request(spec), self._budget(spec))

    def gather(self, requests: list[dict[str, Any]]) -> list[H3Response | Exception]:
        """Send requests concurrently on one connection (one stream each).

        Each dict holds `request`'s arguments (method defaults to GET, path to
        /). The result is in the same order: a response or the exception.
        """
        specs = [_Spec(**r) for r in requests]
        budget = max((self._budget(s) for s in specs), default=1)
        return self._call(self._gather(specs), budget)

    # the loop side

    def _call(self, coro: Any, timeout: float) -> Any:
        if self._loop is None:
            coro.close()
            raise RuntimeError("H3Client is not started (use it as a context manager)")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout + 5)
        except concurrent.futures.TimeoutError:  # also the builtin one, on Python 3.11+
            if future.done():  # the request's own TimeoutError, or just in time
                return future.result()
            future.cancel()
            raise TimeoutError(f"no answer from the client loop in {timeout + 5} s") from None

    @staticmethod
    def _budget(spec: _Spec) -> float:
        return spec.timeout * (2 if spec.retry_rejected else 1) + CLOSE_GRACE

    async def _gather(self, specs: list[_Spec]) -> list[H3Response | Exception]:
        results = await asyncio.gather(*(self._request(s) for s in specs), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
        return list(results)

    async def _request(self, spec: _Spec) -> H3Response:
        try:
            return await self._attempt(spec)
        except H3Rejected as rejected:
            if not spec.retry_rejected:
                raise
            self.retries += 1
            return await self._attempt(spec, avoid=rejected.connection)

    async def _attempt(self, spec: _Spec, avoid: int | None = None) -> H3Response:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + spec.timeout
        protocol = await self._usable(spec.timeout, avoid)
        exchange = protocol.start(spec, self._authority())
        try:
            left = max(deadline - loop.time(), 0)
            return await asyncio.wait_for(asyncio.shield(exchange.future), left)
        except asyncio.TimeoutError:
            error = TimeoutError(f"no complete response in {spec.timeout} s")
            protocol.cancel(exchange, error)
            raise error from None

    def _authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    async def _usable(self, timeout: float, avoid: int | None = None) -> _H3Protocol:
        """The current connection, or a new one if it is gone, going away or `avoid`."""
        async with self._lock:
            current = self._current
            if current and current.protocol.usable and current.protocol.number != avoid:
                return current.protocol
            if current:
                self._retire(current)
            self._current = await self._open(timeout)
            return self._current.protocol

    async def _reconnect(self, timeout: float) -> None:
        async with self._lock:
            if self._current:
                await self._shutdown(self._current)
                self._current = None
            self._current = await self._open(timeout)

    async def _wait_goaway(self, timeout: float) -> None:
        current = self._current
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while current and current.protocol.goaway_id is None and loop.time() < deadline:
            if current.protocol.closed_by is not None:
                return
            await asyncio.sleep(0.01)

    def _configuration(self) -> QuicConfiguration:
        config = QuicConfiguration(
            is_client=True,
            alpn_protocols=H3_ALPN,
            idle_timeout=self.idle_timeout,
            server_name=self.server_name or self.host,
            verify_mode=ssl.CERT_REQUIRED if self.verify else ssl.CERT_NONE,
        )
        if self.cafile:
            config.load_verify_locations(self.cafile)
        if self.certfile:
            config.load_cert_chain(self.certfile, self.keyfile)
        return config

    async def _open(self, timeout: float) -> _Connection:
        """Open a connection and wait for its QUIC handshake.

        `connect(wait_connected=False)` and our own handshake event: aioquic's
        `wait_connected`, cancelled by a timeout, leaves a future whose
        ConnectionError nobody retrieves.
        """
        stack = contextlib.AsyncExitStack()
        opening = connect(
            self.host,
            self.port,
            configuration=self._configuration(),
            create_protocol=_H3Protocol,
            wait_connected=False,
        )
        protocol = await stack.enter_async_context(opening)
        connection = _Connection(protocol, stack)
        protocol.transmit()
        try:
            await asyncio.wait_for(protocol.handshake_ended.wait(), timeout)
        except asyncio.TimeoutError:
            await self._shutdown(connection, grace=0.2)  # no peer to say goodbye to
            raise TimeoutError(
                f"no QUIC handshake with {self._authority()} in {timeout} s"
            ) from None
        if protocol.closed_by is not None:
            await self._shutdown(connection)
            raise H3ConnectionClosed(*protocol.closed_by)
        self.connections_opened += 1
        protocol.number = self.connections_opened
        return connection

    def _retire(self, connection: _Connection) -> None:
        """Let a connection finish its requests in the background, then close it."""
        connection.protocol.retiring = True

        async def retire() -> None:
            try:
                await connection.protocol.wait_idle()
            finally:  # also when `close()` cancels the wait
                await self._shutdown(connection)

        task = asyncio.ensure_future(retire())
        self._retired.add(task)
        task.add_done_callback(self._retired.discard)

    async def _shutdown(self, connection: _Connection, grace: float = CLOSE_GRACE) -> None:
        """Close a connection (CONNECTION_CLOSE H3_NO_ERROR), waiting `grace` at most."""
        protocol = connection.protocol
        protocol.close(error_code=ErrorCode.H3_NO_ERROR)
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(connection.stack.aclose(), grace)
        if protocol._transport is not None:
            protocol._transport.close()

    async def _close_all(self) -> None:
        retired = list(self._retired)
        for task in retired:
            task.cancel()
        closing = [self._shutdown(self._current)] if self._current else []
        self._current = None
        await asyncio.gather(*retired, *closing, return_exceptions=True)
        await asyncio.get_running_loop().shutdown_default_executor()  # getaddrinfo's thread
