"""What protocol code may know of the worker that runs it.

Handlers and connections get this small object instead of the worker, so the
protocol code stays independent of the process model (thread pool, greenlets,
an event loop) and per-worker state never lives in class attributes.
"""

from __future__ import annotations

# On a graceful stop, a kept-alive connection idle for less than this may be
# about to carry the client's next request: it is answered (with
# "Connection: close") rather than closed under the request. 0.2 s lost a
# request once in CI, on a 2-core machine so loaded that a load client sat
# that long between a response and its next request; closing an idle
# connection always races with a client that sends on it, and the grace is
# what makes that a client idle by choice, not one held up by its machine.
IDLE_GRACE_ON_STOP = 1.0

# How long a connection waits on its client before its place under
# worker_connections may go to a newcomer: one that just connected, or just
# got its response, may have its request on the wire. Every worker (and the
# Rust server's room.rs) follows it.
MAKE_ROOM_GRACE = 1.0


class ServeState:
    """Shared by every connection of one worker process."""

    __slots__ = ("stopping",)

    def __init__(self) -> None:
        # Set by the worker when a graceful stop begins (in its TERM handler):
        # every response whose head is not sent yet then says "Connection: close".
        self.stopping = False
