"""ASGI WebSockets on the engine (``-k native``): the asgi worker's session
rules (http/asgi_ws.py) over the engine's native WebSocket objects, the
ones RSGI apps get (native/src/rsgi/ws_protocol.rs, ws_transport.rs): frames,
flow control, pings, the close handshake and the graceful stop (1012) run in
Rust; this class only turns them into ASGI events.

States are the asgi worker's: the handshake (connect given, no answer yet),
a denial response being sent, open, closed. ``receive`` gives
``websocket.connect`` first, then the messages, then ``websocket.disconnect``
with the close code again and again; every ``send`` once the session is
over raises ``ClientDisconnected`` (an OSError).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from time import perf_counter
from typing import Any

from supervise.http.asgi_engine import access_environ
from supervise.http.asgi_ws import accept_fields, close_args, send_payload
from supervise.http.errors import ClientDisconnected
from supervise.logs import Logger
from supervise.rsgi import RSGIProtocolClosed

_CONNECT = {"type": "websocket.connect"}
# What the native message's kind says (RSGI's WebsocketMessageType).
_KIND_CLOSE, _KIND_BYTES = 0, 1
# Events a WebSocket app may send, for the error an unknown one gets.
_KNOWN = frozenset(
    {
        "websocket.accept",
        "websocket.send",
        "websocket.close",
        "websocket.http.response.start",
        "websocket.http.response.body",
    }
)


class _Handshake:
    """Not answered yet."""


class _Denying:
    """websocket.http.response.start came; its body is being gathered."""


class _Open:
    """Accepted: messages flow."""


class _Closed:
    """Refused, denied, or the app closed the session."""


def _disconnect(code: int, reason: str = "") -> dict[str, Any]:
    return {"type": "websocket.disconnect", "code": code, "reason": reason}


class EngineWebSocket:
    """One session's ``receive`` and ``send``."""

    __slots__ = ("_answered", "_connected", "_denial", "_final", "_transport", "proto", "state")

    def __init__(self, proto: Any) -> None:
        self.proto = proto
        self.state: type = _Handshake
        self._transport: Any = None
        self._connected = False
        self._final: dict[str, Any] | None = None
        self._denial: tuple[int, list[Any], list[bytes]] | None = None
        # Set once the handshake is answered: a receive before it waits for it.
        self._answered = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        if not self._connected:
            self._connected = True
            return _CONNECT
        if self._final is not None:
            return self._final
        if self._transport is None:
            await self._handshake_over()
            if self._transport is None:
                self._final = self._final or _disconnect(1006)
                return self._final
        message = await self._transport.receive()
        if message.kind == _KIND_CLOSE:
            self._final = _disconnect(message.code, message.reason)
            return self._final
        key = "bytes" if message.kind == _KIND_BYTES else "text"
        return {"type": "websocket.receive", key: message.data}

    async def _handshake_over(self) -> None:
        """Until the app answered the handshake, or the server gave up on it
        (a graceful stop, the handshake timeout, the client gone: 503)."""
        answered = asyncio.ensure_future(self._answered.wait())
        gone = asyncio.ensure_future(self.proto.client_disconnect())
        try:
            await asyncio.wait((answered, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            answered.cancel()
            gone.cancel()

    async def send(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        state = self.state
        if state is _Open:
            await self._send_open(kind, message)
        elif state is _Handshake:
            await self._send_handshake(kind, message)
        elif state is _Denying:
            self._send_denial_body(kind, message)
        else:
            if kind not in _KNOWN:
                raise RuntimeError(f"Unexpected ASGI message {kind!r} on a WebSocket")
            raise ClientDisconnected("the WebSocket connection is closed")

    async def _send_open(self, kind: Any, message: dict[str, Any]) -> None:
        if kind == "websocket.send":
            data = send_payload(message)
            transport = self._transport
            try:
                if isinstance(data, str):
                    await transport.send_str(data)
                else:
                    await transport.send_bytes(data)
            except RSGIProtocolClosed:
                # The session ended under the app (the peer closed or broke the
                # protocol): the app's next receive says how.
                self.state = _Closed
                raise ClientDisconnected("the WebSocket connection is closed") from None
        elif kind == "websocket.close":
            code, reason = close_args(message)
            self.state = _Closed
            self.proto.close(code, reason)
        else:
            raise RuntimeError(f"Expected 'websocket.send' or 'websocket.close', got {kind!r}")

    async def _send_handshake(self, kind: Any, message: dict[str, Any]) -> None:
        if kind == "websocket.accept":
            subprotocol, headers = accept_fields(message)
            if subprotocol is not None:
                headers.append((b"sec-websocket-protocol", subprotocol.encode()))
            self.state = _Open
            try:
                self._transport = await self.proto.accept(headers=headers)
            except RSGIProtocolClosed:
                # The client left before the 101 (or the server is stopping).
                self.state = _Closed
                self._final = _disconnect(1006)
            finally:
                self._answered.set()
        elif kind == "websocket.close":
            # Before the handshake a close is a refusal (ASGI: HTTP 403).
            self.proto.close(403)
            self._refused()
        elif kind == "websocket.http.response.start":
            self._denial = (int(message["status"]), list(message.get("headers") or ()), [])
            self.state = _Denying
        else:
            raise RuntimeError(
                "Expected 'websocket.accept', 'websocket.close' or "
                f"'websocket.http.response.start' before the handshake, got {kind!r}"
            )

    def _send_denial_body(self, kind: Any, message: dict[str, Any]) -> None:
        if kind != "websocket.http.response.body":
            raise RuntimeError(f"Expected 'websocket.http.response.body', got {kind!r}")
        assert self._denial is not None
        status, headers, body = self._denial
        body.append(bytes(message.get("body") or b""))
        if message.get("more_body", False):
            return
        try:
            self.proto.respond(status, [(bytes(n), bytes(v)) for n, v in headers], b"".join(body))
        except (TypeError, ValueError) as exc:
            raise RuntimeError(f"Invalid denial response: {exc}") from None
        self._refused()

    def _refused(self) -> None:
        self.state = _Closed
        self._final = _disconnect(1006)
        self._answered.set()


def make_ws_handler(
    *,
    app: Any,
    log: Logger,
    access_log: bool,
    record: Callable[[int, float, int], None] | None = None,
) -> Callable[[dict[str, Any], Any], Coroutine[Any, Any, None]]:
    """``handler(scope, protocol)``: the coroutine the native server starts for
    a WebSocket handshake of an ASGI app."""
    measured = access_log or record is not None

    async def handle(scope: dict[str, Any], proto: Any) -> None:
        started = perf_counter() if measured else 0.0
        ws = EngineWebSocket(proto)
        try:
            await app(scope, ws.receive, ws.send)
        except ClientDisconnected:
            # The end of a naive echo loop once the peer is gone: no traceback.
            if ws.state is not _Closed:
                log.exception("Exception in ASGI application for WebSocket %s", scope["path"])
            proto._finish(True)
        except Exception:
            log.exception("Exception in ASGI application for WebSocket %s", scope["path"])
            proto._finish(True)
        except BaseException:
            proto._finish(True)
            raise
        else:
            proto._finish(False)
        finally:
            if measured:
                elapsed = perf_counter() - started
                if record is not None:
                    record(proto._status, elapsed, 0)
                if access_log:
                    log.access(_WsRecord(proto._status), None, _ws_environ(scope), elapsed)

    return handle


def _ws_environ(scope: dict[str, Any]) -> dict[str, str]:
    return access_environ({**scope, "method": "GET"})


class _WsRecord:
    """The handshake's answer as the access log reads it."""

    __slots__ = ("headers", "sent", "status", "status_code")

    def __init__(self, status: int) -> None:
        self.status_code = status or None
        self.status = str(status) if status else "-"
        self.sent = 0
        self.headers: list[tuple[str, str]] = []
