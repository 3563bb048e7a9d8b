"""What an RSGI app may import from supervise: the protocol's exceptions and
the WebSocket message kinds.

``RSGIProtocolError``: the protocol was misused (a second body read, a body
over ``limit_request_body``, a second ``accept()``, two ``receive()`` at
once). ``RSGIProtocolClosed``: the client is gone (a send on a closed stream
or WebSocket, a read on a cut connection). Both are RuntimeErrors, as
Granian's of the same names.

``WebsocketMessageType``: the ``kind`` of a received WebSocket message
(an ``int``, so plain numbers compare equal too).
"""

from __future__ import annotations

from enum import IntEnum

from supervise._native import RSGIProtocolClosed, RSGIProtocolError

__all__ = ["RSGIProtocolClosed", "RSGIProtocolError", "WebsocketMessageType"]


class WebsocketMessageType(IntEnum):
    """RSGI's WebSocket message kinds."""

    close = 0
    bytes = 1
    string = 2
