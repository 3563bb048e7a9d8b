"""The gthread worker's connection: a whole response may wait until the
leader has run the other requests of the same poll, so that the poll's
responses leave together (workers/gthread.py sends them, `_release`).
"""

from __future__ import annotations

import contextlib
from typing import Any

from supervise.http.connection import Connection
from supervise.http.errors import ClientError

# The largest whole response that may wait for the rest of its poll (see
# HoldingConnection); a larger one is sent at once.
HOLD_AT_MOST = 64 * 1024


# The base class's function, as a global: called once a request, and
# `Class.function` is an attribute load of a class that CPython 3.11 does not
# specialise (a global is).
_send_now = Connection.sendall


class HoldingConnection(Connection):
    """A connection whose whole response may wait, in ``held``, until the
    leader has run the other requests of the same poll; then that poll's
    responses leave one after the other. Each write wakes its reader: a client
    on the same host, woken once per response across cores, cost the worker
    more than holding (figures: docs/performance.md, "One poll's responses leave together")."""

    __slots__ = ("held", "may_hold")

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
        self.may_hold = False  # set by the leader per request: more of its poll waits

    def send_last(self, data: bytes) -> None:
        if self.held:
            self.sendall(data)
        elif self.may_hold and len(data) <= HOLD_AT_MOST:
            self.held = data
        else:
            _send_now(self, data)

    def sendall(self, data: bytes) -> None:
        if self.held:  # what was held goes first (a pipelined request's answer)
            data = self.held + data
            self.held = b""
        _send_now(self, data)

    def release(self) -> None:
        """Send what was held (ClientDisconnected, ClientTimeout as sendall)."""
        held = self.held
        if held:
            self.held = b""
            _send_now(self, held)

    def release_what_fits(self) -> bool:
        """Send what of ``held`` the socket takes without waiting; True when
        nothing is left to send."""
        held = self.held
        sent = self.send_what_fits(held)
        self.held = held[sent:] if sent else held
        return sent == len(held)

    def close(self) -> None:
        if self.held:
            with contextlib.suppress(ClientError):
                self.release()
        super().close()
