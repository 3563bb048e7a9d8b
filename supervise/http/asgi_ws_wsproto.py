"""The WebSocket codec on wsproto (``--ws wsproto``).

wsproto parses the handshake (with h11), frames, control frames and close
codes, and decodes text incrementally; what it leaves to the caller, and this
module does: the message size limit (``--ws-max-size``, close 1009, counted
over the fragments so far: bytes for a binary message, characters for a text
one, as wsproto hands out decoded text), the reassembly of fragments into
whole ASGI messages (one growing buffer per message, never an object per
fragment), and answering pings and a close frame.
"""

from __future__ import annotations

import io

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

from supervise.http.asgi_ws import WebSocketProtocol
from supervise.http.asgi_ws_machine import CLOSED

_OPEN = ConnectionState.OPEN
_REMOTE_CLOSING = ConnectionState.REMOTE_CLOSING


class WsprotoProtocol(WebSocketProtocol):
    """A WebSocket session whose codec is wsproto."""

    def _handshake(self, head: bytes) -> bytes | None:
        self._ws = ws = WSConnection(ConnectionType.SERVER)
        self._conn = None  # the frame layer, once accepted
        # The fragmented message being received: None, a StringIO or a bytearray.
        self._partial: io.StringIO | bytearray | None = None
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

    def _feed(self, data: bytes) -> int:
        conn = self._conn
        conn.receive_data(data)
        pings: list[bytes] = []  # the payloads owed a pong, answered in one write
        frames = 0
        for event in conn.events():
            frames += 1
            if isinstance(event, Message):
                self._data_frame(event)
            elif isinstance(event, Ping):
                pings.append(event.payload)
            elif isinstance(event, Pong):
                self._pong()
            elif isinstance(event, CloseConnection):
                self._answer(pings)
                self._close_frame(event)
            if self.machine.state is CLOSED:
                return frames  # failed or closed: what follows in this read is dropped
        self._answer(pings)
        return frames

    def _answer(self, pings: list[bytes]) -> None:
        conn = self._conn
        # wsproto sends pongs only while open: after our close frame pings go unanswered.
        if pings and conn.state is _OPEN:
            self.transport.write(b"".join([conn.send(Pong(payload=p)) for p in pings]))
        pings.clear()

    def _data_frame(self, event: Message) -> None:
        data = event.data
        self._size += len(data)
        if self._size > self.max_size:
            self._fail(1009, f"message over {self.max_size} bytes")
            return
        partial = self._partial
        if partial is None:
            text = isinstance(event, TextMessage)
            if event.message_finished:
                self._size = 0
                self._message(data if text else bytes(data))
                return
            self._partial = partial = io.StringIO() if text else bytearray()
        if isinstance(partial, io.StringIO):
            partial.write(data)
        else:
            partial += data
        if event.message_finished:
            self._partial, self._size = None, 0
            if isinstance(partial, io.StringIO):
                self._message(partial.getvalue())
            else:
                self._message(bytes(partial))

    def _close_frame(self, event: CloseConnection) -> None:
        conn = self._conn
        if conn.state is _REMOTE_CLOSING:
            # The peer started the closing handshake: echo its code.
            self.transport.write(conn.send(event.response()))
            self._session_over(event.code, event.reason or "")
        elif conn.state is _OPEN:
            # wsproto reports a protocol error as a close event but leaves the
            # answer to us: send that close frame, then drop the connection.
            self._fail(event.code, event.reason or "")
        else:
            # The answer to our own close frame.
            self._session_over(event.code, event.reason or "")

    def _fail(self, code: int, reason: str) -> None:
        self.transport.write(self._conn.send(CloseConnection(code=code, reason=reason)))
        self._session_over(code, reason)

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
