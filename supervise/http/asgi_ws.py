"""WebSocket sessions (RFC 6455) of the asgi worker: the ASGI side, shared by both libraries.

The HTTP/1.1 protocol hands an upgrade request over to a class from
``protocol_class()``; from then on that object owns the transport. This module
keeps the ASGI state machine (handshake, denial response, open, closing), the
receive queue, flow control both ways and the deadlines; the frame codec and
the handshake validation come from a sans-I/O library, in one small subclass
per library (``asgi_ws_wsproto``, ``asgi_ws_websockets``).

Choices where the ASGI spec leaves room (Uvicorn answers some of them
differently):

- an app that returns without accepting gets 403, as a ``websocket.close``
  before accept does (Uvicorn: 403 too, 500 only when the app raised);
- an app that raises before accepting gets 500, after accepting a close 1011;
- an app that returns after accepting without closing: close 1000;
- every ``send`` once our close frame went out, or the peer is gone, raises
  ``ClientDisconnected`` (an ``OSError``), as the spec asks;
- the app has ``HANDSHAKE_TIMEOUT`` seconds to accept or deny; then 503.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
import time
from collections import deque
from importlib.util import find_spec
from typing import Any

from supervise._native import asgi_response_head
from supervise.http.errors import ClientDisconnected, error_response
from supervise.http.write_stall import WriteStall

# The app's time to answer the handshake (accept, close or deny) before 503.
HANDSHAKE_TIMEOUT = 60.0
# How long we wait for the peer to end the TCP connection once our close
# frame is out, and for a final response or close frame to drain; then abort.
CLOSE_TIMEOUT = 5.0
# Received messages queued for the app: reading pauses at HIGH and resumes at LOW.
QUEUE_HIGH = 16
QUEUE_LOW = 4
# Received bytes go to the codec FEED_SLICE at a time; once a turn of the loop
# has parsed FRAMES_PER_TURN frames, the rest of the read waits for the next
# turn, reading paused. A read is up to 256 KiB: in frames of one byte that is
# ~37,000 frames, a fifth of a second of parsing (a second with wsproto) that
# other connections would wait behind; a slice is at most ~2,300 frames. A big
# frame costs a few microseconds more per slice, and is parsed in one turn.
# With ten clients flooding pings, 1024 frames a turn let a probe wait 1.4 s
# on wsproto, 256 0.3 s; messages stop a turn sooner anyway (QUEUE_HIGH).
FEED_SLICE = 16 * 1024
FRAMES_PER_TURN = 256

# Why reading is paused: bits of WebSocketProtocol._holds; it resumes when none is left.
_QUEUE_FULL = 1  # the app has not taken QUEUE_HIGH messages
_WRITE_FULL = 2  # the transport's write buffer is over its high-water mark
_BACKLOG = 4  # bytes already read wait for the next turn (FRAMES_PER_TURN)
_EARLY = 8  # before the accept, more early bytes than a message may have

_NEVER = float("inf")


class _StateMeta(type):
    def __repr__(cls) -> str:
        return cls.__name__


class _State(metaclass=_StateMeta):
    """A state of the session; the classes themselves are the values."""


class HANDSHAKE(_State):
    """The app has not answered the upgrade request yet."""


class DENYING(_State):
    """The app is sending an HTTP denial response (websocket.http.response.*)."""


class OPEN(_State):
    """Accepted: messages flow both ways."""


class CLOSING(_State):
    """Our close frame is out (app close, shutdown, failure); the peer's is due."""


class CLOSED(_State):
    """No more frames either way; the transport is closed or closing."""


def _disconnect(code: int, reason: str = "") -> dict[str, Any]:
    # int(): the libraries hand out IntEnum members; the app gets a plain int.
    return {"type": "websocket.disconnect", "code": int(code), "reason": reason}


class WebSocketProtocol(asyncio.Protocol):
    """One WebSocket session: the ASGI events, flow control and deadlines.

    A library subclass provides the codec: ``_handshake``, ``_accept_response``,
    ``_feed``, ``_frame_message``, ``_frame_close`` and ``_frame_ping``; its
    ``_feed`` reports what it parsed with ``_message``, ``_peer_closed``,
    ``_peer_failed`` and ``_pong``.
    """

    def __init__(self, *, ctx: Any, info: Any, scope: dict[str, Any], head: bytes) -> None:
        self.ctx = ctx
        self.info = info
        self.scope = scope
        self.head = head
        self.transport: Any = None
        self.state: type[_State] = HANDSHAKE
        cfg = ctx.cfg
        self.max_size: int = cfg.ws_max_size
        self.per_message_deflate = bool(cfg.ws_per_message_deflate)
        self.ping_interval = float(cfg.ws_ping_interval) or _NEVER
        self.ping_timeout = float(cfg.ws_ping_timeout) or _NEVER
        # The ASGI receive side: queued events, then the final disconnect.
        self._inbox: deque[dict[str, Any]] = deque([{"type": "websocket.connect"}])
        self._final: dict[str, Any] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._holds = 0  # the reasons reading is paused (_QUEUE_FULL, ...)
        # Bytes that arrived before the app accepted (a client may not send
        # frames before the 101, but a fast one may pipeline them).
        self._early = bytearray()
        # Bytes read but not parsed yet (FRAMES_PER_TURN), and whether a turn
        # of the loop is already asked to parse them.
        self._backlog = b""
        self._parse_soon = False
        # Write flow control (the transport's high-water mark), and how long
        # the peer has taken none of what waits for it (--send-timeout).
        self._writing_paused = False
        self._write_stall = WriteStall(ctx.send_timeout)
        self._drained: asyncio.Future[None] | None = None
        # The denial response in progress: (status, headers) until its head is out.
        self._denial: tuple[int, list] | None = None
        self._chunked = False
        # Deadlines (time.monotonic()), checked by sweep().
        self._deadline = _NEVER
        self._next_ping = _NEVER
        self._pong_due = _NEVER
        self._task: asyncio.Task | None = None

    # -- asyncio.Protocol ------------------------------------------------------

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        self.transport = transport
        self.ctx.connections.add(self)
        if self.ctx.state.stopping:
            # Upgraded while the worker stops (a kept-alive connection): a new
            # session would only be closed with 1012 at once.
            rejection: bytes | None = error_response(503, "The server is restarting")
        else:
            rejection = _check_handshake(self.scope["headers"]) or self._handshake(self.head)
        if rejection is not None:
            # An invalid handshake never reaches the app.
            self.state = CLOSED
            self._final = _disconnect(1006)
            transport.write(rejection)
            self._close_transport()
            self.ctx.request_done()
            return
        self._deadline = time.monotonic() + HANDSHAKE_TIMEOUT
        self._task = self.ctx.loop.create_task(self._run())

    def data_received(self, data: bytes) -> None:
        if self.state is OPEN or self.state is CLOSING:
            # Held reading is paused, but a transport may still hand over what
            # it had already read: that waits in the backlog too.
            self._backlog = self._backlog + data if self._backlog else data
            if not self._holds & ~_BACKLOG:
                self._parse()
            else:
                self._hold(_BACKLOG)
        elif self.state is HANDSHAKE:
            self._early += data
            if len(self._early) > self.max_size:
                self._hold(_EARLY)
        # DENYING / CLOSED: the peer has nothing left to say that we would read.

    def eof_received(self) -> bool | None:
        # A half-close without a close frame ends the session (1006 unless a
        # close frame came first); closing our side too is what RFC 6455 wants.
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.state = CLOSED
        self.ctx.leave(self)
        if self._final is None:
            self._final = _disconnect(1006)
        self._wake_receiver()
        self._backlog = b""
        self._writing_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        # A peer that does not read must not make us queue what its frames ask
        # for (pongs, a close echo), nor the app's answers: stop reading too.
        self._writing_paused = True
        self._write_stall.paused(self.transport, time.monotonic())
        self._hold(_WRITE_FULL)

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._write_stall.resumed()
        self._release(_WRITE_FULL)
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # -- what the worker calls -------------------------------------------------

    def shutdown(self) -> None:
        """A graceful stop: close 1012; a handshake not yet answered gets 503."""
        if self.state is HANDSHAKE:
            self._final = _disconnect(1012, "service restart")
            self._respond(503)
            self._wake_receiver()
        elif self.state is OPEN:
            self._close(1012, "service restart")

    def waiting(self) -> None:
        """A session keeps its slot (asgi_context.py)."""
        return None

    def sweep(self, now: float) -> None:
        """Enforce the deadlines: send_timeout, handshake, close, keep-alive pings."""
        if self._writing_paused and self._write_stall.expired(self.transport, now):
            # Reading stopped with writing: a peer that takes nothing would
            # otherwise hold its connection (and what waits for it) for good.
            self.ctx.log.info(
                "WebSocket %s: dropped %s, it took no bytes within send_timeout",
                self.scope["path"],
                self.scope.get("client"),
            )
            self.transport.abort()
            return
        if now >= self._deadline:
            self._deadline = _NEVER
            if self.state is HANDSHAKE:
                self.ctx.log.warning(
                    "WebSocket %s: the app did not answer the handshake in %ss",
                    self.scope["path"],
                    HANDSHAKE_TIMEOUT,
                )
                self._respond(503)
            elif self.transport is not None:
                self.transport.abort()
            return
        if self.state is not OPEN:
            return
        if now >= self._pong_due:
            self._close(1011, "keepalive ping timeout")
        elif now >= self._next_ping:
            self._next_ping = now + self.ping_interval
            if self._pong_due == _NEVER:
                self._pong_due = now + self.ping_timeout
            self.transport.write(self._frame_ping(b"supervise"))

    # -- the app ---------------------------------------------------------------

    async def _run(self) -> None:
        try:
            await self.ctx.app(self.scope, self.receive, self.send)
        except asyncio.CancelledError:
            self._end(failed=True)
            raise
        except ClientDisconnected:
            # Our own "the peer is gone" from send(), let through by the app:
            # the normal end of a naive echo loop, not worth a traceback.
            if self.state is not CLOSED and self.state is not CLOSING:
                self.ctx.log.exception(
                    "Exception in ASGI application for WebSocket %s", self.scope["path"]
                )
            self._end(failed=True)
        except Exception:
            self.ctx.log.exception(
                "Exception in ASGI application for WebSocket %s", self.scope["path"]
            )
            self._end(failed=True)
        else:
            self._end(failed=False)
        finally:
            self.ctx.request_done()

    def _end(self, *, failed: bool) -> None:
        """The app returned (or raised): finish what it left open."""
        if self.state is HANDSHAKE:
            self._respond(500 if failed else 403)
        elif self.state is DENYING:
            # A denial response cut short cannot be completed: drop the connection.
            self.state = CLOSED
            self.transport.abort()
        elif self.state is OPEN:
            self._close(1011 if failed else 1000, "")

    async def receive(self) -> dict[str, Any]:
        """ASGI receive: connect, then messages, then websocket.disconnect (again and again)."""
        while not self._inbox:
            if self._final is not None:
                return self._final
            self._waiter = self.ctx.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        message = self._inbox.popleft()
        if self._holds & _QUEUE_FULL and len(self._inbox) <= QUEUE_LOW:
            self._release(_QUEUE_FULL)
        return message

    async def send(self, message: dict[str, Any]) -> None:
        """ASGI send: the event must fit the state of the session."""
        kind = message.get("type")
        if self._writing_paused and self.state is OPEN and kind == "websocket.send":
            # Each sender waits before writing too: tasks sending at once
            # would otherwise each add a message past the high-water mark.
            await self._drain()
        if self.state is OPEN:
            if kind == "websocket.send":
                data = send_payload(message)
                self.transport.write(self._frame_message(data))
            elif kind == "websocket.close":
                code, reason = close_args(message)
                self._close(code, reason)
            else:
                raise RuntimeError(f"Expected 'websocket.send' or 'websocket.close', got {kind!r}")
        elif self.state is HANDSHAKE:
            self._send_handshake(kind, message)
        elif self.state is DENYING:
            self._send_denial_body(kind, message)
        else:
            if kind not in _KNOWN_EVENTS:
                raise RuntimeError(f"Unexpected ASGI message {kind!r} on a WebSocket")
            raise ClientDisconnected("the WebSocket connection is closed")
        if self._writing_paused:
            await self._drain()

    def _send_handshake(self, kind: Any, message: dict[str, Any]) -> None:
        if kind == "websocket.accept":
            subprotocol, headers = accept_fields(message)
            self.transport.write(self._accept_response(subprotocol, headers))
            self.state = OPEN
            self._deadline = _NEVER
            self._next_ping = time.monotonic() + self.ping_interval
            if self._early:
                early, self._early = bytes(self._early), bytearray()
                self._release(_EARLY)
                self.data_received(early)
        elif kind == "websocket.close":
            # Before the handshake a close is a refusal (ASGI: HTTP 403).
            self._respond(403)
        elif kind == "websocket.http.response.start":
            self._denial = (int(message["status"]), list(message.get("headers") or ()))
            self.state = DENYING
        else:
            raise RuntimeError(
                "Expected 'websocket.accept', 'websocket.close' or "
                f"'websocket.http.response.start' before the handshake, got {kind!r}"
            )

    def _send_denial_body(self, kind: Any, message: dict[str, Any]) -> None:
        if kind != "websocket.http.response.body":
            raise RuntimeError(f"Expected 'websocket.http.response.body', got {kind!r}")
        body = bytes(message.get("body") or b"")
        more = bool(message.get("more_body", False))
        out = []
        if self._denial is not None:
            status, headers = self._denial
            self._denial = None
            try:
                head, _, self._chunked, _ = asgi_response_head(
                    status, headers, "1.1", False, False, -1 if more else len(body)
                )
            except (TypeError, ValueError) as exc:
                raise RuntimeError(f"Invalid denial response: {exc}") from None
            out.append(head)
        if self._chunked:
            if body:
                out += (b"%x\r\n" % len(body), body, b"\r\n")
            if not more:
                out.append(b"0\r\n\r\n")
        else:
            out.append(body)
        self.transport.write(b"".join(out))
        if not more:
            self.state = CLOSED
            self._final = _disconnect(1006)
            self._close_transport()

    async def _drain(self) -> None:
        if self.transport.is_closing() and self.state is CLOSED:
            return
        if self._drained is None or self._drained.done():
            self._drained = self.ctx.loop.create_future()
        await self._drained

    # -- what the codec reports ------------------------------------------------

    def _message(self, data: str | bytes) -> None:
        """A complete message from the peer."""
        if self.state is not OPEN:
            return  # after our close frame, data frames are read and dropped
        key = "text" if isinstance(data, str) else "bytes"
        self._inbox.append({"type": "websocket.receive", key: data})
        self._wake_receiver()
        if len(self._inbox) >= QUEUE_HIGH:
            self._hold(_QUEUE_FULL)

    def _peer_closed(self, code: int, reason: str) -> None:
        """The peer's close frame arrived; the codec has queued our echo if one is due."""
        if self._final is None:
            self._final = _disconnect(code, reason)
            self._wake_receiver()
        self.state = CLOSED
        # RFC 6455 7.1.1: the server closes the TCP connection first.
        self._close_transport()

    def _peer_failed(self, code: int, reason: str) -> None:
        """The peer broke the protocol; the codec has queued our close frame."""
        if self._final is None:
            self._final = _disconnect(code, reason)
            self._wake_receiver()
        self.state = CLOSED
        self._close_transport()

    def _pong(self) -> None:
        self._pong_due = _NEVER

    # -- helpers ---------------------------------------------------------------

    def _close(self, code: int, reason: str) -> None:
        """Send our close frame and tell the app; the peer's echo ends the session."""
        self.transport.write(self._frame_close(code, reason))
        self.state = CLOSING
        self._deadline = time.monotonic() + CLOSE_TIMEOUT
        if self._final is None:
            self._final = _disconnect(code, reason)
            self._wake_receiver()

    def _respond(self, status: int) -> None:
        """Answer the handshake with a plain HTTP error and end the session."""
        self.state = CLOSED
        if self._final is None:
            self._final = _disconnect(1006)
            self._wake_receiver()
        self.transport.write(error_response(status))
        self._close_transport()

    def _close_transport(self) -> None:
        # close() flushes the write buffer first; the deadline aborts a peer
        # that stops reading meanwhile.
        self._deadline = time.monotonic() + CLOSE_TIMEOUT
        self._backlog = b""
        self._holds = 0
        if self._reading_paused:
            self._reading_paused = False
            if not self.transport.is_closing():
                self.transport.resume_reading()
        self.transport.close()

    def _wake_receiver(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _parse(self) -> None:
        """Give the backlog to the codec, a slice at a time, while nothing holds
        reading and this turn has parsed fewer than FRAMES_PER_TURN frames."""
        self._parse_soon = False
        data, self._backlog = self._backlog, b""
        size = len(data)
        if self.state is not OPEN and self.state is not CLOSING:
            return  # closed since this turn was asked for
        if 0 < size <= FEED_SLICE and not self._holds & ~_BACKLOG:
            self._feed(data)
            at = size
        else:
            view = memoryview(data)  # slices without copies
            at = frames = 0
            while (
                at < size
                and not self._holds & ~_BACKLOG
                and frames < FRAMES_PER_TURN
                and (self.state is OPEN or self.state is CLOSING)
            ):
                frames += self._feed(view[at : at + FEED_SLICE])
                at += FEED_SLICE
        if self.state is not OPEN and self.state is not CLOSING:
            return  # closed: the rest of the read is dropped
        if at < size:
            self._backlog = data[at:]
            self._hold(_BACKLOG)
            if not self._holds & ~_BACKLOG:
                self._parse_later()
        else:
            self._release(_BACKLOG)

    def _parse_later(self) -> None:
        if not self._parse_soon:
            self._parse_soon = True
            self.ctx.loop.call_soon(self._parse)

    def _hold(self, why: int) -> None:
        """Pause reading for ``why`` (a _QUEUE_FULL... bit) until ``_release(why)``."""
        self._holds |= why
        if not self._reading_paused and not self.transport.is_closing():
            self._reading_paused = True
            self.transport.pause_reading()

    def _release(self, why: int) -> None:
        """``why`` holds no longer; once nothing does, the backlog is parsed
        (in a turn of its own), then reading resumes."""
        if not self._holds & why:
            return
        self._holds &= ~why
        if self._holds & ~_BACKLOG:
            return
        if self._backlog:
            self._parse_later()
        elif self._reading_paused:
            self._holds = 0
            self._reading_paused = False
            if not self.transport.is_closing():
                self.transport.resume_reading()

    # -- the codec (one subclass per library) ------------------------------------

    def _handshake(self, head: bytes) -> bytes | None:
        """Parse and check the upgrade request: None if valid, else the response to send."""
        raise NotImplementedError

    def _accept_response(self, subprotocol: str | None, headers: list) -> bytes:
        """The 101 response (negotiating extensions); frames are parsed from now on."""
        raise NotImplementedError

    def _feed(self, data: bytes) -> int:
        """Parse received bytes, write any automatic answer, report what came;
        the number of frames (or parts of frames) parsed.

        Every ping is answered, in one write per call: a peer that does not
        read its pongs fills the write buffer, and pause_writing then stops
        reading. (Answering only the most recent ping, as RFC 6455 5.5.3
        allows, was tried: the pongs no longer held such a peer back, and the
        worker went on parsing its pings at full speed.)"""
        raise NotImplementedError

    def _frame_message(self, data: str | bytes) -> bytes:
        raise NotImplementedError

    def _frame_close(self, code: int, reason: str) -> bytes:
        raise NotImplementedError

    def _frame_ping(self, payload: bytes) -> bytes:
        raise NotImplementedError


_KNOWN_EVENTS = frozenset(
    {
        "websocket.accept",
        "websocket.send",
        "websocket.close",
        "websocket.http.response.start",
        "websocket.http.response.body",
    }
)


def send_payload(message: dict[str, Any]) -> str | bytes:
    """The one payload of a websocket.send event."""
    text = message.get("text")
    data = message.get("bytes")
    if text is not None and data is None:
        if not isinstance(text, str):
            raise TypeError(f"websocket.send 'text' must be str, not {type(text).__name__}")
        return text
    if data is not None and text is None:
        return bytes(data)
    raise RuntimeError("websocket.send needs exactly one of 'bytes' and 'text'")


def _check_handshake(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """400 unless the request has one valid Sec-WebSocket-Key and Sec-WebSocket-Version 13.

    Checked here for both libraries: wsproto takes any key.
    """
    keys = [v for n, v in headers if n == b"sec-websocket-key"]
    versions = [v for n, v in headers if n == b"sec-websocket-version"]
    if versions != [b"13"]:
        return error_response(400, "Sec-WebSocket-Version must be 13")
    try:
        valid = len(keys) == 1 and len(base64.b64decode(keys[0].strip(), validate=True)) == 16
    except binascii.Error:
        valid = False
    return None if valid else error_response(400, "Invalid Sec-WebSocket-Key")


def close_args(message: dict[str, Any]) -> tuple[int, str]:
    """The code and reason of an app's websocket.close, checked as RFC 6455 7.4 wants."""
    code = message.get("code")
    code = 1000 if code is None else code
    reason = message.get("reason") or ""
    if not (isinstance(code, int) and (code in _SENDABLE_CODES or 3000 <= code <= 4999)):
        raise RuntimeError(f"websocket.close: {code!r} is not a close code an endpoint may send")
    if len(reason.encode()) > 123:
        raise RuntimeError("websocket.close: the reason is over 123 bytes in UTF-8")
    return code, reason


# RFC 6455 7.4.1 + IANA: the codes below 3000 an endpoint may put in a close frame.
_SENDABLE_CODES = frozenset(
    {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014}
)
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\x00\r\n]")


def accept_fields(message: dict[str, Any]) -> tuple[str | None, list[tuple[bytes, bytes]]]:
    """The subprotocol and the extra headers of a websocket.accept, checked
    (the asgi worker and the engine answer the handshake with these)."""
    checked = []
    for name, value in message.get("headers") or ():
        name, value = bytes(name), bytes(value)
        if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
            raise RuntimeError(f"websocket.accept: invalid header {name!r}: {value!r}")
        checked.append((name, value))
    subprotocol = message.get("subprotocol")
    if subprotocol is not None and any(n.lower() == b"sec-websocket-protocol" for n, _ in checked):
        raise RuntimeError(
            "websocket.accept: give the subprotocol in 'subprotocol' or in 'headers', not both"
        )
    return subprotocol, checked


# --ws names -> (module, class, the distribution that provides the library)
_IMPLEMENTATIONS = {
    "websockets": ("supervise.http.asgi_ws_websockets", "WebsocketsProtocol", "websockets"),
    "wsproto": ("supervise.http.asgi_ws_wsproto", "WsprotoProtocol", "wsproto"),
}
# 'auto' tries these in order: the faster first (measured, see the module docs).
_AUTO_ORDER = ("websockets", "wsproto")


def protocol_class(setting: str) -> type | None:
    """The WebSocket protocol class for --ws ('auto' | 'wsproto' | 'websockets' | 'off').

    None for 'off', and for 'auto' when neither library is installed.
    A named library that is not installed raises RuntimeError.
    """
    if setting == "off":
        return None
    if setting == "auto":
        for name in _AUTO_ORDER:
            if find_spec(_IMPLEMENTATIONS[name][2]) is not None:
                return protocol_class(name)
        return None
    try:
        module_name, attr, dist = _IMPLEMENTATIONS[setting]
    except KeyError:
        raise RuntimeError(f"--ws {setting!r}: use auto, wsproto, websockets or off") from None
    if find_spec(dist) is None:
        raise RuntimeError(f"--ws {setting} needs the {dist} library: pip install {dist}")
    import importlib

    return getattr(importlib.import_module(module_name), attr)
