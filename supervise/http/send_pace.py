"""``--send-min-rate``: the slowest a client may take a response.

``--send-timeout`` alone drops a client that takes nothing for that long; one
that takes a few bytes now and then would keep its connection, and what the
server buffered for it, as long as it likes. This is the floor under it,
measured only while the server waits for the client to make room (the app's
own time is not the client's fault): once the waits add up to
``send_timeout``, the client must have taken ``send_min_rate`` bytes for each
second of them, or it is dropped; otherwise a new window starts.

"Taken" is what the socket (or the transport's buffer) accepted, which lags
what the client read by at most the buffers in between: a client just above
the floor may look below it for one window, so the setting's help asks for
margin. The rule touches no clock and no counter on a connection whose writes
never wait: a pace is made at its first wait.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

# struct tcp_info (linux/tcp.h): tcpi_bytes_acked, a u64 at byte 120 (Linux 4.1).
_TCP_INFO_SIZE = 128
_BYTES_ACKED = struct.Struct("=Q")
_BYTES_ACKED_AT = 120


class SendPace:
    """The floor of one connection: bytes taken against seconds waited."""

    __slots__ = ("rate", "taken", "waited", "window")

    def __init__(self, window: float, rate: int) -> None:
        self.window = window
        self.rate = rate
        self.waited = 0.0
        self.taken = 0

    def took(self, count: int) -> None:
        self.taken += count

    def wait_ended(self, seconds: float) -> None:
        self.waited += seconds

    def too_slow(self, waiting: float = 0.0) -> bool:
        """Whether the window is over and the client fell under the floor;
        ``waiting``: how long the wait in progress has lasted so far (it is
        added by ``wait_ended`` once over, so a new window counts only its
        part after now)."""
        total = self.waited + waiting
        if total < self.window:
            return False
        if self.taken < self.rate * total:
            return True
        self.waited = -waiting
        self.taken = 0
        return False


def bytes_acked(sock: Any) -> int | None:
    """How many bytes the peer of a TCP socket has acknowledged; None where
    the kernel does not say (a Unix socket, another system).

    An asyncio transport writes straight to the socket while its buffer is
    empty, which the buffer's size never shows: this is what the client took."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
    except (OSError, AttributeError):
        return None
    if len(info) < _TCP_INFO_SIZE:
        return None
    return _BYTES_ACKED.unpack_from(info, _BYTES_ACKED_AT)[0]


def peer_name(client: Any) -> str:
    """A client as every class names it in "Dropped ...": host:port."""
    if isinstance(client, tuple) and len(client) >= 2:
        return f"{client[0]}:{client[1]}"
    return str(client or "")


def pace_for(send_timeout: float | None, send_min_rate: int) -> SendPace | None:
    """A connection's pace, or None where either setting switches the floor off."""
    if not send_timeout or not send_min_rate:
        return None
    return SendPace(send_timeout, send_min_rate)
