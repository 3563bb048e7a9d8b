"""The gthread worker's connection: a whole response may wait until the
leader has run the other requests of the same poll, so that the poll's
responses leave together (workers/gthread.py sends them, `_release`).
"""

from __future__ import annotations

from typing import Any

from supervise.http.held_connection import HOLD_AT_MOST, HeldConnection, send_now


class HoldingConnection(HeldConnection):
    """A connection whose whole response may wait, in ``held``, until the
    leader has run the other requests of the same poll; then that poll's
    responses leave one after the other."""

    __slots__ = ("may_hold",)

    def __init__(
        self,
        sock: Any,
        environ: dict,
        trusted: bool,
        send_timeout: float | None,
        send_min_rate: int = 0,
    ) -> None:
        super().__init__(sock, environ, trusted, send_timeout, send_min_rate)
        self.may_hold = False  # set by the leader per request: more of its poll waits

    def send_last(self, data: bytes) -> None:
        if self.held:
            self.sendall(data)
        elif self.may_hold and len(data) <= HOLD_AT_MOST:
            self.held = data
        else:
            send_now(self, data)

    def release_what_fits(self) -> bool:
        """Send what of ``held`` the socket takes without waiting; True when
        nothing is left to send."""
        held = self.held
        sent = self.send_what_fits(held)
        self.held = held[sent:] if sent else held
        return sent == len(held)
