"""What an RSGI app may import from supervise: the protocol's exceptions.

``RSGIProtocolError``: the protocol was misused (a second body read, a body
over ``limit_request_body``). ``RSGIProtocolClosed``: the client is gone (a
send on a closed stream, a read on a cut connection). Both are RuntimeErrors,
as Granian's of the same names.
"""

from __future__ import annotations

from supervise._native import RSGIProtocolClosed, RSGIProtocolError

__all__ = ["RSGIProtocolClosed", "RSGIProtocolError"]
