"""ASGI WebSockets on the engine (``-k native``): the ASGI session rules
(``asgi_ws_machine.WebSocketMachine``, the asgi worker's too) over the
engine's native WebSocket objects, the ones RSGI apps get
(native/src/rsgi/ws_protocol.rs, ws_transport.rs): frames, flow control,
pings, the close handshake, the graceful stop (1012) and what the app's end
leaves to do (``finish``: 403/500 before accept, 1000/1011 after) run in
Rust; this class carries out what the machine asks for on those objects, and
pulls the messages Rust queued into the machine as the app's receive wants
them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from time import perf_counter
from typing import Any

from supervise.http.asgi_engine import access_environ
from supervise.http.asgi_ws_machine import (
    Accept,
    Action,
    Close,
    Deny,
    Refuse,
    WebSocketMachine,
)
from supervise.http.errors import ClientDisconnected
from supervise.logs import Logger
from supervise.rsgi import RSGIProtocolClosed

# What the native message's kind says (RSGI's WebsocketMessageType).
_KIND_CLOSE = 0


class EngineWebSocket:
    """One session's ``receive`` and ``send``."""

    __slots__ = ("_answered", "_denial_body", "_transport", "machine", "proto")

    def __init__(self, proto: Any) -> None:
        self.proto = proto
        self.machine = WebSocketMachine()
        self._transport: Any = None
        # The denial response's body so far: the native object takes it whole.
        self._denial_body: list[bytes] = []
        # Set once the handshake is answered: a receive before it waits for it.
        self._answered = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        machine = self.machine
        while (event := machine.next_event()) is None:
            await self._pull()
        return event

    async def _pull(self) -> None:
        """Hand the machine the next thing the session has for the app."""
        if self._transport is None:
            await self._handshake_over()
            if self._transport is None:
                self.machine.ended(1006)
                return
        message = await self._transport.receive()
        if message.kind == _KIND_CLOSE:
            self.machine.ended(message.code, message.reason)
        else:
            self.machine.received(message.data)

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
        answer = self.machine.app_sent(message)
        if isinstance(answer, (str, bytes)):
            await self._send_message(answer)
        elif answer is not None:
            await self._carry_out(answer)

    async def _carry_out(self, action: Action) -> None:
        if isinstance(action, Close):
            self.proto.close(action.code, action.reason)
        elif isinstance(action, Accept):
            await self._accept(action)
        elif isinstance(action, Deny):
            self._deny(action)
        elif isinstance(action, Refuse):
            self.proto.close(action.status)
            self._answered.set()
        # Abort comes only from app_ended: Rust's finish() does the engine's.

    async def _send_message(self, data: str | bytes) -> None:
        try:
            if isinstance(data, str):
                await self._transport.send_str(data)
            else:
                await self._transport.send_bytes(data)
        except RSGIProtocolClosed:
            # The session ended under the app (the peer closed or broke the
            # protocol): the app's next receive says how.
            self.machine.gone()
            raise ClientDisconnected("the WebSocket connection is closed") from None

    async def _accept(self, accept: Accept) -> None:
        headers = accept.headers
        if accept.subprotocol is not None:
            headers.append((b"sec-websocket-protocol", accept.subprotocol.encode()))
        try:
            self._transport = await self.proto.accept(headers=headers)
        except RSGIProtocolClosed:
            # The client left before the 101 (or the server is stopping).
            self.machine.closed()
        except BaseException:
            self.machine.accept_failed()
            raise
        finally:
            self._answered.set()

    def _deny(self, part: Deny) -> None:
        self._denial_body.append(part.body)
        if not part.last:
            return
        try:
            self._respond(part.status, part.headers)
        except BaseException:
            self.machine.denial_failed()
            raise
        self._answered.set()

    def _respond(self, status: int, headers: list[Any]) -> None:
        try:
            fields = [(bytes(n), bytes(v)) for n, v in headers]
            self.proto.respond(status, fields, b"".join(self._denial_body))
        except (TypeError, ValueError) as exc:
            raise RuntimeError(f"Invalid denial response: {exc}") from None


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
            if not ws.machine.over:
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
