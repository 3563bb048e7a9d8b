"""``--send-timeout`` and ``--send-min-rate`` on an asyncio transport: a
connection whose write buffer is over its high-water mark and has not shrunk
for ``send_timeout``, or that shrinks it slower than the floor, is aborted,
and what was buffered for it goes with it.

Paused writing alone is no stall: a client on a slow link keeps taking bytes
and the buffer keeps shrinking, so it is served however long its response
takes (nginx's ``send_timeout`` works the same way), as long as it takes at
least ``send_min_rate`` bytes a second of the time the server waits on it
(send_pace.py), counted in what the client's TCP acknowledged (the
transport writes to the socket directly while its buffer is empty, which
the buffer's size never shows). The worker's tick reads the buffer's size
(and the acknowledged count while paused), so this costs no timer per
connection.
"""

from __future__ import annotations

from typing import Any

from supervise.http.send_pace import SendPace, bytes_acked, pace_for

TOOK_NOTHING = "it took no bytes within send_timeout"
TOO_SLOW = "it took bytes slower than send_min_rate"


class WriteStall:
    """The stall clock of one connection: started by ``pause_writing``,
    stopped by ``resume_writing``, read by the tick."""

    __slots__ = ("acked", "left", "limit", "min_rate", "pace", "paused_at", "since", "sock")

    def __init__(self, limit: float, min_rate: int = 0) -> None:
        # 0: no limit, as the setting says.
        self.limit = limit or float("inf")
        self.since: float | None = None
        self.paused_at = 0.0
        self.left = 0
        # The floor, made at the first pause: the socket and its acknowledged
        # count at the last look (-1: not looked at yet).
        self.min_rate = min_rate
        self.pace: SendPace | None = None
        self.sock: Any = None
        self.acked = -1

    def paused(self, transport: Any, now: float) -> None:
        self.since = self.paused_at = now
        self.left = transport.get_write_buffer_size()
        if self.acked < 0:
            self._start_pace(transport)
        elif self.pace is not None:
            self._count()

    def _start_pace(self, transport: Any) -> None:
        self.acked = 0
        pace = pace_for(self.limit, self.min_rate) if self.limit != float("inf") else None
        if pace is None:
            return
        self.sock = transport.get_extra_info("socket")
        acked = bytes_acked(self.sock)
        if acked is not None:
            self.pace, self.acked = pace, acked

    def resumed(self, transport: Any, now: float) -> None:
        pace = self.pace
        if pace is not None and self.since is not None:
            self._count()
            pace.wait_ended(now - self.paused_at)
        self.since = None

    def _count(self) -> None:
        """What the client took since the last look."""
        acked = bytes_acked(self.sock)
        if acked is not None and self.pace is not None:
            self.pace.took(acked - self.acked)
            self.acked = acked

    def expired(self, transport: Any, now: float) -> str | None:
        """Why the client is to be dropped, or None."""
        if self.since is None:
            return None
        left = transport.get_write_buffer_size()
        if left < self.left:
            self.since = now
        self.left = left
        if now - self.since > self.limit:
            return TOOK_NOTHING
        if self.pace is not None:
            self._count()
            if self.pace.too_slow(now - self.paused_at):
                return TOO_SLOW
        return None
