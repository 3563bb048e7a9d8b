"""A connection whose whole response may wait, in ``held``, before it is
sent: the gthread and gevent workers hold the responses of one poll (one hub
turn) and send them together, since each write wakes its reader (figures:
docs/performance.md, "One poll's responses leave together"). When a worker
holds, and how it sends what is held, is the worker's; what is shared is
here: what is held goes out first, before anything else sent, and at close.
"""

from __future__ import annotations

import contextlib
from typing import Any

from supervise.http.connection import Connection
from supervise.http.errors import ClientError

# The largest whole response that may wait; a larger one is sent at once.
HOLD_AT_MOST = 64 * 1024

# The base class's function, as a global: called once a request, and
# `Class.function` is an attribute load of a class that CPython 3.11 does not
# specialise (a global is).
send_now = Connection.sendall


class HeldConnection(Connection):
    """A connection with a response that may be waiting (``held``)."""

    __slots__ = ("held",)

    def __init__(
        self,
        sock: Any,
        environ: dict,
        trusted: bool,
        send_timeout: float | None,
        send_min_rate: int = 0,
    ) -> None:
        super().__init__(sock, environ, trusted, send_timeout, send_min_rate)
        self.held = b""

    def sendall(self, data: bytes) -> None:
        if self.held:  # what was held goes first (a pipelined request's answer)
            data = self.held + data
            self.held = b""
        send_now(self, data)

    def release(self) -> None:
        """Send what is held, waiting as sendall does (ClientError as sendall)."""
        held = self.held
        if held:
            self.held = b""
            send_now(self, held)

    def close(self) -> None:
        if self.held:
            with contextlib.suppress(ClientError):
                self.release()
        super().close()
