"""WebSocket sessions (RFC 6455) of the asgi worker: the I/O, shared by both libraries.

The HTTP/1.1 protocol hands an upgrade request over to a class from
``protocol_class()``; from then on that object owns the transport. The ASGI
rules (handshake, denial response, open, closing, what receive returns) are
``asgi_ws_machine.WebSocketMachine``'s, shared with the engine; when reading
pauses and how much is parsed per turn is ``asgi_ws_read_flow.ReadFlow``'s.
This module carries out what the machine asks for on the transport, and
keeps the receive waiter, write flow control and the deadlines: the app has
``HANDSHAKE_TIMEOUT`` seconds to accept or deny, then 503. The frame codec and
the handshake validation come from a sans-I/O library, in one small subclass
per library (``asgi_ws_wsproto``, ``asgi_ws_websockets``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from importlib.util import find_spec
from typing import Any

from supervise._native import asgi_response_head
from supervise.http.asgi_ws_machine import (
    CLOSED,
    CLOSING,
    HANDSHAKE,
    OPEN,
    Accept,
    Action,
    Close,
    Deny,
    Refuse,
    WebSocketMachine,
)
from supervise.http.asgi_ws_read_flow import FEED_SLICE as FEED_SLICE  # re-exported (tests)
from supervise.http.asgi_ws_read_flow import WRITE_FULL, ReadFlow
from supervise.http.errors import ClientDisconnected, error_response
from supervise.http.send_pace import peer_name
from supervise.http.write_stall import WriteStall

# The app's time to answer the handshake (accept, close or deny) before 503.
HANDSHAKE_TIMEOUT = 60.0
# How long we wait for the peer to end the TCP connection once our close
# frame is out, and for a final response or close frame to drain; then abort.
CLOSE_TIMEOUT = 5.0

_NEVER = float("inf")


class WebSocketProtocol(asyncio.Protocol):
    """One WebSocket session's I/O: the machine's actions, write flow control, deadlines.

    A library subclass provides the codec: ``_handshake``, ``_accept_response``,
    ``_feed``, ``_frame_message``, ``_frame_close`` and ``_frame_ping``; its
    ``_feed`` reports what it parsed with ``_message``, ``_session_over`` and
    ``_pong``.
    """

    def __init__(self, *, ctx: Any, info: Any, scope: dict[str, Any], head: bytes) -> None:
        self.ctx = ctx
        self.info = info
        self.scope = scope
        self.head = head
        self.transport: Any = None
        self.machine = WebSocketMachine()
        cfg = ctx.cfg
        self.max_size: int = cfg.ws_max_size
        self.per_message_deflate = bool(cfg.ws_per_message_deflate)
        self.ping_interval = float(cfg.ws_ping_interval) or _NEVER
        self.ping_timeout = float(cfg.ws_ping_timeout) or _NEVER
        # A receive waiting for the machine to have something.
        self._waiter: asyncio.Future[None] | None = None
        # Set with the transport (connection_made).
        self.reading: ReadFlow
        # Write flow control (the transport's high-water mark), and how long
        # the peer has taken none of what waits for it (--send-timeout).
        self._writing_paused = False
        self._write_stall = WriteStall(ctx.send_timeout, ctx.send_min_rate)
        self._drained: asyncio.Future[None] | None = None
        # Whether the denial response's body goes out in chunks.
        self._chunked = False
        # Deadlines (time.monotonic()), checked by sweep().
        self._deadline = _NEVER
        self._next_ping = _NEVER
        self._pong_due = _NEVER
        self._task: asyncio.Task | None = None

    # -- asyncio.Protocol ------------------------------------------------------

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        self.transport = transport
        self.reading = ReadFlow(transport, self.ctx.loop, self._feed, self.max_size)
        self.ctx.connections.add(self)
        rejection = self._rejection()
        if rejection is not None:
            # An invalid handshake never reaches the app.
            self.machine.closed()
            transport.write(rejection)
            self._close_transport()
            self.ctx.request_done()
            return
        self._deadline = time.monotonic() + HANDSHAKE_TIMEOUT
        self._task = self.ctx.loop.create_task(self._run())

    def _rejection(self) -> bytes | None:
        """The response to an upgrade the app is not to see; None to go on."""
        if self.ctx.state.stopping:
            # Upgraded while the worker stops (a kept-alive connection): a new
            # session would only be closed with 1012 at once.
            return error_response(503, "The server is restarting")
        return _check_handshake(self.scope["headers"]) or self._handshake(self.head)

    def data_received(self, data: bytes) -> None:
        state = self.machine.state
        if state is OPEN or state is CLOSING:
            self.reading.received(data)
        elif state is HANDSHAKE:
            self.reading.early(data)
        # DENYING / CLOSED: the peer has nothing left to say that we would read.

    def eof_received(self) -> bool | None:
        # A half-close without a close frame ends the session (1006 unless a
        # close frame came first); closing our side too is what RFC 6455 wants.
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.machine.closed()
        self.ctx.leave(self)
        self._wake_receiver()
        self.reading.lost()
        self._writing_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        # A peer that does not read must not make us queue what its frames ask
        # for (pongs, a close echo), nor the app's answers: stop reading too.
        self._writing_paused = True
        self._write_stall.paused(self.transport, time.monotonic())
        self.reading.hold(WRITE_FULL)

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._write_stall.resumed(self.transport, time.monotonic())
        self.reading.release(WRITE_FULL)
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # -- what the worker calls -------------------------------------------------

    def shutdown(self) -> None:
        """A graceful stop: close 1012; a handshake not yet answered gets 503."""
        action = self.machine.stopping()
        if action is not None:
            self._carry_out(action)

    def waiting(self) -> None:
        """A session keeps its slot (asgi_context.py)."""
        return None

    def sweep(self, now: float) -> None:
        """Enforce the deadlines: send_timeout, handshake, close, keep-alive pings."""
        why = self._writing_paused and self._write_stall.expired(self.transport, now)
        if why:
            # Reading stopped with writing: a peer that takes nothing would
            # otherwise hold its connection (and what waits for it) for good.
            self.ctx.log.info(
                "WebSocket %s: dropped %s, %s",
                self.scope["path"],
                peer_name(self.scope.get("client")),
                why,
            )
            self.transport.abort()
            return
        if now >= self._deadline:
            self._deadline = _NEVER
            self._deadline_passed()
            return
        if self.machine.state is not OPEN:
            return
        if now >= self._pong_due:
            close = self.machine.server_closes(1011, "keepalive ping timeout")
            if close is not None:
                self._close(close)
        elif now >= self._next_ping:
            self._next_ping = now + self.ping_interval
            if self._pong_due == _NEVER:
                self._pong_due = now + self.ping_timeout
            self.transport.write(self._frame_ping(b"supervise"))

    def _deadline_passed(self) -> None:
        """The handshake went unanswered (503), or a closing connection did not drain."""
        refusal = self.machine.server_refuses(503)
        if refusal is not None:
            self.ctx.log.warning(
                "WebSocket %s: the app did not answer the handshake in %ss",
                self.scope["path"],
                HANDSHAKE_TIMEOUT,
            )
            self._refuse(refusal)
        elif self.transport is not None:
            self.transport.abort()

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
            if not self.machine.over:
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
        action = self.machine.app_ended(failed=failed)
        if action is not None:
            self._carry_out(action)

    async def receive(self) -> dict[str, Any]:
        """ASGI receive: connect, then messages, then websocket.disconnect (again and again)."""
        machine = self.machine
        while (event := machine.next_event()) is None:
            self._waiter = self.ctx.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        self.reading.message_taken(machine.queued)
        return event

    async def send(self, message: dict[str, Any]) -> None:
        """ASGI send: the machine checks the event; this carries it out."""
        if (
            self._writing_paused
            and self.machine.state is OPEN
            and message.get("type") == "websocket.send"
        ):
            # Each sender waits before writing too: tasks sending at once
            # would otherwise each add a message past the high-water mark.
            await self._drain()
        answer = self.machine.app_sent(message)
        if isinstance(answer, (str, bytes)):
            self.transport.write(self._frame_message(answer))
        elif answer is not None:
            self._carry_out(answer)
        if self._writing_paused:
            await self._drain()

    async def _drain(self) -> None:
        if self.transport.is_closing() and self.machine.state is CLOSED:
            return
        if self._drained is None or self._drained.done():
            self._drained = self.ctx.loop.create_future()
        await self._drained

    # -- what the machine asks for ----------------------------------------------

    def _carry_out(self, action: Action) -> None:
        if isinstance(action, Close):
            self._close(action)
        elif isinstance(action, Accept):
            self._accept(action)
        elif isinstance(action, Deny):
            self._deny(action)
        elif isinstance(action, Refuse):
            self._refuse(action)
        else:  # Abort: a denial response cut short cannot be completed
            self.transport.abort()

    def _accept(self, accept: Accept) -> None:
        try:
            response = self._accept_response(accept.subprotocol, accept.headers)
        except BaseException:
            self.machine.accept_failed()
            raise
        self.transport.write(response)
        self._deadline = _NEVER
        self._next_ping = time.monotonic() + self.ping_interval
        early = self.reading.take_early()
        if early:
            self.reading.received(early)

    def _deny(self, part: Deny) -> None:
        try:
            data = self._denial_bytes(part)
        except BaseException:
            self.machine.denial_failed()
            raise
        self.transport.write(data)
        if part.last:
            self._wake_receiver()
            self._close_transport()

    def _denial_bytes(self, part: Deny) -> bytes:
        """The bytes of one part of the denial response: its head with the first."""
        out = []
        if part.first:
            try:
                head, _, self._chunked, _ = asgi_response_head(
                    part.status,
                    part.headers,
                    "1.1",
                    False,
                    False,
                    len(part.body) if part.last else -1,
                )
            except (TypeError, ValueError) as exc:
                raise RuntimeError(f"Invalid denial response: {exc}") from None
            out.append(head)
        if self._chunked:
            if part.body:
                out += (b"%x\r\n" % len(part.body), part.body, b"\r\n")
            if part.last:
                out.append(b"0\r\n\r\n")
        else:
            out.append(part.body)
        return b"".join(out)

    def _close(self, close: Close) -> None:
        """Send our close frame and tell the app; the peer's echo ends the session."""
        self.transport.write(self._frame_close(close.code, close.reason))
        self._deadline = time.monotonic() + CLOSE_TIMEOUT
        self.machine.ended(close.code, close.reason)
        self._wake_receiver()

    def _refuse(self, refusal: Refuse) -> None:
        """Answer the handshake with a plain HTTP error; the session is over."""
        self._wake_receiver()
        self.transport.write(error_response(refusal.status))
        self._close_transport()

    # -- what the codec reports ------------------------------------------------

    def _message(self, data: str | bytes) -> None:
        """A complete message from the peer."""
        machine = self.machine
        if machine.state is not OPEN:
            return  # after our close frame, data frames are read and dropped
        queued = machine.received(data)
        self._wake_receiver()
        self.reading.message_queued(queued)

    def _session_over(self, code: int, reason: str) -> None:
        """The peer's close frame came (the codec has queued our echo if one
        is due), or the peer broke the protocol (the codec has queued our
        close frame): the session ended with ``code``."""
        self.machine.closed(code, reason)
        self._wake_receiver()
        # RFC 6455 7.1.1: the server closes the TCP connection first.
        self._close_transport()

    def _pong(self) -> None:
        self._pong_due = _NEVER

    # -- helpers ---------------------------------------------------------------

    def _close_transport(self) -> None:
        # close() flushes the write buffer first; the deadline aborts a peer
        # that stops reading meanwhile.
        self._deadline = time.monotonic() + CLOSE_TIMEOUT
        self.reading.stop()
        self.transport.close()

    def _wake_receiver(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

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
