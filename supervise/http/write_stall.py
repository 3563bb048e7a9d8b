"""``--send-timeout`` on an asyncio transport: a connection whose write
buffer is over its high-water mark and has not shrunk for that long is
aborted, and what was buffered for it goes with it.

Paused writing alone is no stall: a client on a slow link keeps taking bytes
and the buffer keeps shrinking, so it is served however long its response
takes (nginx's ``send_timeout`` works the same way). The worker's tick reads
the buffer's size, so this costs no timer per connection.
"""

from __future__ import annotations

from typing import Any


class WriteStall:
    """The stall clock of one connection: started by ``pause_writing``,
    stopped by ``resume_writing``, read by the tick."""

    __slots__ = ("left", "limit", "since")

    def __init__(self, limit: float) -> None:
        # 0: no limit, as the setting says.
        self.limit = limit or float("inf")
        self.since: float | None = None
        self.left = 0

    def paused(self, transport: Any, now: float) -> None:
        self.since = now
        self.left = transport.get_write_buffer_size()

    def resumed(self) -> None:
        self.since = None

    def expired(self, transport: Any, now: float) -> bool:
        """Whether the client has taken nothing for the whole limit."""
        if self.since is None:
            return False
        left = transport.get_write_buffer_size()
        if left < self.left:
            self.left, self.since = left, now
            return False
        return now - self.since > self.limit
