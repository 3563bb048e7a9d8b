"""Read-side flow control of one asgi worker WebSocket session (``http/asgi_ws.py``).

Reading pauses for as long as any reason holds it (a bit in ``ReadFlow._holds``)
and resumes once none does: the app has not taken ``QUEUE_HIGH`` messages,
the transport's write buffer is full (a peer that does not read must not make
us queue what its frames ask for), bytes already read wait for the next turn
of the loop, or a client sent more than a message's worth before the accept.

Received bytes go to the codec ``FEED_SLICE`` at a time; once a turn of the
loop has parsed ``FRAMES_PER_TURN`` frames, the rest of the read waits for the
next turn, reading paused. A read is up to 256 KiB: in frames of one byte that
is ~37,000 frames, a fifth of a second of parsing (a second with wsproto) that
other connections would wait behind; a slice is at most ~2,300 frames. A big
frame costs a few microseconds more per slice, and is parsed in one turn.
With ten clients flooding pings, 1024 frames a turn let a probe wait 1.4 s on
wsproto, 256 0.3 s; messages stop a turn sooner anyway (QUEUE_HIGH).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

FEED_SLICE = 16 * 1024
FRAMES_PER_TURN = 256
# Received messages queued for the app: reading pauses at HIGH and resumes at LOW.
QUEUE_HIGH = 16
QUEUE_LOW = 4

# Why reading is paused: bits of ReadFlow._holds.
QUEUE_FULL = 1  # the app has not taken QUEUE_HIGH messages
WRITE_FULL = 2  # the transport's write buffer is over its high-water mark
BACKLOG = 4  # bytes already read wait for the next turn (FRAMES_PER_TURN)
EARLY = 8  # before the accept, more early bytes than a message may have

# The codec: parses received bytes, reports what came; returns how many frames
# (or parts of frames) it parsed.
Feed = Callable[[Any], int]


class ReadFlow:
    """When one session reads and how much it parses per turn of the loop."""

    __slots__ = (
        "_backlog",
        "_early",
        "_feed",
        "_holds",
        "_loop",
        "_max_early",
        "_parse_soon",
        "_paused",
        "_stopped",
        "_transport",
    )

    def __init__(self, transport: Any, loop: Any, feed: Feed, max_early: int) -> None:
        self._transport = transport
        self._loop = loop
        self._feed = feed
        self._max_early = max_early
        self._paused = False
        self._holds = 0
        # Bytes that arrived before the app accepted (a client may not send
        # frames before the 101, but a fast one may pipeline them).
        self._early = bytearray()
        # Bytes read but not parsed yet, and whether a turn of the loop is
        # already asked to parse them.
        self._backlog = b""
        self._parse_soon = False
        # Nothing more is parsed: the transport is closing or gone.
        self._stopped = False

    # -- bytes read ---------------------------------------------------------------

    def early(self, data: bytes) -> None:
        """Bytes read before the accept: kept for it, reading paused past a message's size."""
        self._early += data
        if len(self._early) > self._max_early:
            self.hold(EARLY)

    def take_early(self) -> bytes:
        """The accept is out: the bytes read before it, reading no longer held for them."""
        early, self._early = bytes(self._early), bytearray()
        if early:
            self.release(EARLY)
        return early

    def received(self, data: bytes) -> None:
        """Bytes read from an open (or closing) session: parsed now, or once nothing holds."""
        # Held reading is paused, but a transport may still hand over what it
        # had already read: that waits in the backlog too.
        self._backlog = self._backlog + data if self._backlog else data
        if not self._holds & ~BACKLOG:
            self._parse()
        else:
            self.hold(BACKLOG)

    # -- the app's queue, the write buffer ---------------------------------------------

    def message_queued(self, queued: int) -> None:
        """The app's queue grew to ``queued`` messages."""
        if queued >= QUEUE_HIGH:
            self.hold(QUEUE_FULL)

    def message_taken(self, queued: int) -> None:
        """The app took a message; ``queued`` are left."""
        if self._holds & QUEUE_FULL and queued <= QUEUE_LOW:
            self.release(QUEUE_FULL)

    def hold(self, why: int) -> None:
        """Pause reading for ``why`` (a QUEUE_FULL... bit) until ``release(why)``."""
        self._holds |= why
        if not self._paused and not self._transport.is_closing():
            self._paused = True
            self._transport.pause_reading()

    def release(self, why: int) -> None:
        """``why`` holds no longer; once nothing does, the backlog is parsed
        (in a turn of its own), then reading resumes."""
        if not self._holds & why:
            return
        self._holds &= ~why
        if self._holds & ~BACKLOG:
            return
        if self._backlog:
            self._parse_later()
        elif self._paused:
            self._holds = 0
            self._resume()

    # -- the end ------------------------------------------------------------------------

    def stop(self) -> None:
        """The transport is closing: nothing more is parsed, and reading
        resumes so that the peer's end of the connection is seen."""
        self._stopped = True
        self._backlog = b""
        self._holds = 0
        if self._paused:
            self._resume()

    def lost(self) -> None:
        """The connection is gone: what waited to be parsed is dropped."""
        self._stopped = True
        self._backlog = b""

    # -- parsing ------------------------------------------------------------------------

    def _parse(self) -> None:
        """Give the backlog to the codec, a slice at a time, while nothing holds
        reading and this turn has parsed fewer than FRAMES_PER_TURN frames."""
        self._parse_soon = False
        data, self._backlog = self._backlog, b""
        size = len(data)
        if self._stopped:
            return  # closed since this turn was asked for
        if 0 < size <= FEED_SLICE and not self._holds & ~BACKLOG:
            self._feed(data)
            at = size
        else:
            at = self._feed_slices(data)
        if self._stopped:
            return  # closed: the rest of the read is dropped
        if at < size:
            self._backlog = data[at:]
            self.hold(BACKLOG)
            if not self._holds & ~BACKLOG:
                self._parse_later()
        else:
            self.release(BACKLOG)

    def _feed_slices(self, data: bytes) -> int:
        """Feed slices of ``data`` for as long as this turn may; how far it got."""
        view = memoryview(data)  # slices without copies
        size = len(data)
        at = frames = 0
        while (
            at < size
            and not self._holds & ~BACKLOG
            and frames < FRAMES_PER_TURN
            and not self._stopped
        ):
            frames += self._feed(view[at : at + FEED_SLICE])
            at += FEED_SLICE
        return at

    def _parse_later(self) -> None:
        if not self._parse_soon:
            self._parse_soon = True
            self._loop.call_soon(self._parse)

    def _resume(self) -> None:
        self._paused = False
        if not self._transport.is_closing():
            self._transport.resume_reading()
