"""The WebSocket codec on websockets' sans-I/O layer (``websockets.server.ServerProtocol``).

``--ws websockets``; also what ``--ws auto`` picks when websockets is installed:
its frame masking is C-accelerated, and in our echo measurement it served
more messages per second than wsproto (see ``asgi_ws.protocol_class``).

The library parses the handshake, frames, control frames, close codes and
max size; what it leaves to its own I/O layers, and this module does: text
messages are decoded here (incrementally, so invalid UTF-8 fails at the
fragment that carries it, as Autobahn's 6.x cases want), and fragments are
reassembled here, into one growing buffer per message (a list of parts cost
70-150 bytes of RSS per one-byte fragment). The library checks the size of
the message so far, fragments included, against ``--ws-max-size``.
"""

from __future__ import annotations

import codecs
import io
import logging
import struct
from typing import Any

from websockets.exceptions import InvalidState, ProtocolError
from websockets.extensions.permessage_deflate import enable_server_permessage_deflate
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.server import ServerProtocol

from supervise.http.asgi_ws import WebSocketProtocol

# websockets logs "connection open/closed" at INFO for every connection; keep
# only its warnings and errors in supervise's log.
_logger = logging.getLogger("supervise.websockets")
_logger.setLevel(logging.WARNING)

_TEXT, _BINARY, _CONT = Opcode.TEXT, Opcode.BINARY, Opcode.CONT
_CLOSE, _PONG = Opcode.CLOSE, Opcode.PONG
_Utf8Decoder = codecs.getincrementaldecoder("utf-8")
_OPEN = State.OPEN
_HEAD_16 = struct.Struct("!BBH").pack
_HEAD_64 = struct.Struct("!BBQ").pack


def _frame_head(first: int, payload: bytes) -> bytes:
    """The head of a final, unmasked frame (RFC 6455 5.2): FIN and opcode, then the
    length in 7 bits, or 126 and 16 bits, or 127 and 64 bits."""
    size = len(payload)
    if size < 126:
        return bytes((first, size))
    if size < 65536:
        return _HEAD_16(first, 126, size)
    return _HEAD_64(first, 127, size)


class _ServerProtocol(ServerProtocol):
    """ServerProtocol that accepts a close frame between the fragments of a message.

    RFC 6455 5.4 lets control frames, close included, come between fragments;
    websockets fails such a close with 1002, where the peer expects its own
    code echoed (Autobahn 7.1.5). The unfinished message is dropped.
    """

    def recv_frame(self, frame: Frame) -> None:
        if frame.opcode is _CLOSE:
            self.current_size = None
        super().recv_frame(frame)


class _Text:
    """A fragmented text message in progress: its decoder and the text so far
    (a StringIO that is only written to keeps one growing buffer)."""

    __slots__ = ("decoder", "text")

    def __init__(self) -> None:
        self.decoder = _Utf8Decoder()
        self.text = io.StringIO()


class WebsocketsProtocol(WebSocketProtocol):
    """A WebSocket session whose codec is websockets' ``ServerProtocol``."""

    def _handshake(self, head: bytes) -> bytes | None:
        extensions = enable_server_permessage_deflate(None) if self.per_message_deflate else None
        self._ws = ws = _ServerProtocol(
            extensions=extensions, max_size=self.max_size, logger=_logger
        )
        # The fragmented message being received: None, a _Text, or a bytearray.
        self._partial: Any = None
        ws.receive_data(head)
        events = ws.events_received()
        if not events:  # the HTTP side handed over a head websockets cannot parse
            return b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        self._response = ws.accept(events[0])
        if self._response.status_code != 101:
            ws.send_response(self._response)
            return b"".join(ws.data_to_send())
        return None

    def _accept_response(self, subprotocol: str | None, headers: list) -> bytes:
        ws, response = self._ws, self._response
        if subprotocol is not None:
            ws.subprotocol = subprotocol
            response.headers["Sec-WebSocket-Protocol"] = subprotocol
        for name, value in headers:
            response.headers[name.decode("latin-1")] = value.decode("latin-1")
        try:
            ws.send_response(Response(101, "Switching Protocols", response.headers))
        except ValueError as exc:  # a header the app gave is not valid HTTP
            raise RuntimeError(f"Invalid websocket.accept headers: {exc}") from None
        return b"".join(ws.data_to_send())

    def _feed(self, data: bytes) -> int:
        ws = self._ws
        ws.receive_data(data)
        events = ws.events_received()
        for frame in events:
            opcode = frame.opcode
            if opcode is _BINARY or opcode is _TEXT or opcode is _CONT:
                self._data_frame(opcode, frame.data, frame.fin)
            elif opcode is _PONG:
                self._pong()
            if ws.eof_sent:
                break  # failed or closed: what follows in this read is dropped
            # PING: the library queued the pong; CLOSE: handled after the flush.
        self._flush()
        return len(events)

    def _data_frame(self, opcode: Opcode, data: bytes, fin: bool) -> None:
        partial = self._partial
        try:
            if opcode is _TEXT:
                if fin:
                    self._message(data.decode())
                    return
                partial = self._partial = _Text()
            elif opcode is _BINARY:
                if fin:
                    self._message(bytes(data))
                    return
                partial = self._partial = bytearray()
            if isinstance(partial, _Text):
                partial.text.write(partial.decoder.decode(data, fin))
                if fin:
                    self._partial = None
                    self._message(partial.text.getvalue())
            else:
                partial += data
                if fin:
                    self._partial = None
                    self._message(bytes(partial))
        except UnicodeDecodeError as exc:
            if self._ws.state is State.OPEN:
                self._ws.fail(1007, f"invalid UTF-8 at position {exc.start}")

    def _flush(self) -> None:
        """Write what the library queued; end the session when it says so."""
        ws = self._ws
        out = ws.data_to_send()
        if not out:
            return
        eof = out[-1] == b""
        self.transport.write(b"".join(out))
        if not eof:
            return
        if ws.close_rcvd is not None:
            self._session_over(ws.close_rcvd.code, ws.close_rcvd.reason)
        else:
            sent = ws.close_sent
            self._session_over(
                1006 if sent is None else sent.code, "" if sent is None else sent.reason
            )

    def _frame_message(self, data: str | bytes) -> bytes:
        ws = self._ws
        if ws.state is _OPEN and not ws.extensions:
            # A whole message, unmasked, no extension: two to ten bytes of head,
            # written here. The library's own path (a Frame, checked, serialized,
            # queued, then joined) was a fifth of a broadcasting worker's time.
            if isinstance(data, str):
                payload = data.encode()
                return _frame_head(0x81, payload) + payload
            return _frame_head(0x82, data) + data
        if isinstance(data, str):
            ws.send_text(data.encode())
        else:
            ws.send_binary(data)
        return b"".join(ws.data_to_send())

    def _frame_close(self, code: int, reason: str) -> bytes:
        ws = self._ws
        try:
            ws.send_close(code, reason)
        except (ProtocolError, InvalidState) as exc:
            raise RuntimeError(f"websocket.close with code {code}: {exc}") from None
        return b"".join(ws.data_to_send())

    def _frame_ping(self, payload: bytes) -> bytes:
        ws = self._ws
        ws.send_ping(payload)
        return b"".join(ws.data_to_send())
