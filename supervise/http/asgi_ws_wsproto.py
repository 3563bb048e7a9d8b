"""The WebSocket codec on wsproto (``--ws wsproto``).

wsproto parses the handshake (with h11), frames, control frames and close
codes, and decodes text incrementally; what it leaves to the caller, and this
module does: the message size limit (``--ws-max-size``, close 1009), the
reassembly of fragments into whole ASGI messages, and answering a close frame.
"""

from __future__ import annotations

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    Pong,
    RejectConnection,
    TextMessage,
)
from wsproto.extensions import PerMessageDeflate
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from supervise.http.asgi_ws import CLOSED, WebSocketProtocol

_OPEN = ConnectionState.OPEN
_REMOTE_CLOSING = ConnectionState.REMOTE_CLOSING


class WsprotoProtocol(WebSocketProtocol):
    """A WebSocket session whose codec is wsproto."""

    def _handshake(self, head: bytes) -> bytes | None:
        self._ws = ws = WSConnection(ConnectionType.SERVER)
        self._conn = None  # the frame layer, once accepted
        self._parts: list = []  # the fragments of the message being received
        self._size = 0
        try:
            ws.receive_data(head)
            events = list(ws.events())
        except RemoteProtocolError as exc:
            reject = exc.event_hint or RejectConnection(status_code=400)
            reject.headers = [*reject.headers, (b"connection", b"close")]
            return ws.send(reject)
        if not events:  # the HTTP side handed over a head h11 cannot parse
            return b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        return None

    def _accept_response(self, subprotocol: str | None, headers: list) -> bytes:
        extensions = [PerMessageDeflate()] if self.per_message_deflate else []
        try:
            data = self._ws.send(
                AcceptConnection(
                    subprotocol=subprotocol, extensions=extensions, extra_headers=headers
                )
            )
        except LocalProtocolError as exc:
            raise RuntimeError(f"Invalid websocket.accept: {exc}") from None
        self._conn = self._ws.connection
        return data

    def _feed(self, data: bytes) -> None:
        conn = self._conn
        conn.receive_data(data)
        for event in conn.events():
            if isinstance(event, Message):
                self._data_frame(event)
            elif isinstance(event, Ping):
                self.transport.write(conn.send(event.response()))
            elif isinstance(event, Pong):
                self._pong()
            elif isinstance(event, CloseConnection):
                self._close_frame(event)
            if self.state is CLOSED:
                return  # failed or closed: what follows in this read is dropped

    def _data_frame(self, event: Message) -> None:
        self._size += len(event.data)
        if self._size > self.max_size:
            self._fail(1009, f"message over {self.max_size} bytes")
            return
        if not event.message_finished:
            self._parts.append(event.data)
            return
        parts, self._parts, self._size = self._parts, [], 0
        if isinstance(event, TextMessage):
            self._message("".join(parts) + event.data if parts else event.data)
        elif isinstance(event, BytesMessage):
            self._message(b"".join(parts) + event.data if parts else bytes(event.data))

    def _close_frame(self, event: CloseConnection) -> None:
        conn = self._conn
        if conn.state is _REMOTE_CLOSING:
            # The peer started the closing handshake: echo its code.
            self.transport.write(conn.send(event.response()))
            self._peer_closed(event.code, event.reason or "")
        elif conn.state is _OPEN:
            # wsproto reports a protocol error as a close event but leaves the
            # answer to us: send that close frame, then drop the connection.
            self._fail(event.code, event.reason or "")
        else:
            # The answer to our own close frame.
            self._peer_closed(event.code, event.reason or "")

    def _fail(self, code: int, reason: str) -> None:
        self.transport.write(self._conn.send(CloseConnection(code=code, reason=reason)))
        self._peer_failed(code, reason)

    def _frame_message(self, data: str | bytes) -> bytes:
        return self._conn.send(
            TextMessage(data=data) if isinstance(data, str) else BytesMessage(data=data)
        )

    def _frame_close(self, code: int, reason: str) -> bytes:
        try:
            return self._conn.send(CloseConnection(code=code, reason=reason))
        except (LocalProtocolError, ValueError) as exc:
            raise RuntimeError(f"websocket.close with code {code}: {exc}") from None

    def _frame_ping(self, payload: bytes) -> bytes:
        return self._conn.send(Ping(payload=payload))
