"""Access lines written by a thread of the worker's own, so that a slow disk or
a full pipe (``--access-logfile -`` read by a slow collector) never holds a
request: the request path appends the line to a deque, and the writer thread
writes what has gathered, in one write, every FLUSH_INTERVAL at most.

Why a thread and not ``logging.handlers.QueueHandler``: a QueueHandler still
builds a LogRecord and formats it on the request path (the most expensive part
of a logging call), and its listener wakes once per line. Here a line costs a
deque append, and the writer wakes once per batch. Why not write in the worker:
a write blocked on a full pipe stops an event-loop worker (asgi, rsgi, gevent)
entirely, every connection with it.

The writer is an operating-system thread even under gevent (its primitives are
taken from the unpatched modules), since a green one would block the hub in
write(). Lines beyond MAX_PENDING are dropped and counted, and the count is
logged once the writer catches up: memory stays bounded while the disk is stuck.
"""

from __future__ import annotations

import _thread
import contextlib
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

FLUSH_INTERVAL = 0.05  # seconds: lines are batched at most this long
MAX_PENDING = 100_000  # lines, about 20 MB at 200 bytes a line


def _unpatched() -> tuple[Callable[..., Any], Callable[[], Any], Callable[[float], None]]:
    """start_new_thread, allocate_lock and sleep, as the OS provides them."""
    if "gevent" in sys.modules:
        from gevent import monkey

        return (
            monkey.get_original("_thread", "start_new_thread"),
            monkey.get_original("_thread", "allocate_lock"),
            monkey.get_original("time", "sleep"),
        )
    return _thread.start_new_thread, _thread.allocate_lock, time.sleep


class LineWriter:
    """Lines for one logging handler (a FileHandler or a StreamHandler), written
    through its stream under its lock, so that reopen_files() swaps the stream safely."""

    def __init__(
        self,
        handler: Any,
        *,
        on_dropped: Callable[[int], None],
        reopen: Callable[[Any], None],
    ) -> None:
        self.handler = handler
        self.on_dropped = on_dropped
        self._reopen = reopen
        self._reopen_asked = False
        self.pending: deque[str] = deque()
        self.dropped = 0  # written by the request path only
        self._reported = 0  # written by the writer only
        self._start, allocate_lock, self._sleep = _unpatched()
        self._wake = allocate_lock()
        self._wake.acquire()
        self._done = allocate_lock()
        self._started = False
        self._stopping = False

    def write(self, line: str) -> None:
        """Queue one line (with its newline); the request path's whole cost."""
        pending = self.pending
        if len(pending) >= MAX_PENDING:
            self.dropped += 1
            return
        pending.append(line)
        if len(pending) == 1:
            self._signal()

    def reopen(self) -> None:
        """Have the thread reopen the file (USR1), before its next write."""
        self._reopen_asked = True
        self._signal()

    def _signal(self) -> None:
        if not self._started:
            self._started = True
            self._done.acquire()
            self._start(self._run, ())
        # Already signalled and not yet seen by the writer: nothing to do.
        with contextlib.suppress(RuntimeError):
            self._wake.release()

    def _run(self) -> None:
        try:
            while True:
                # The timeout covers a wake-up lost between a pop and an append.
                self._wake.acquire(timeout=1.0)
                if not self._stopping:
                    self._sleep(FLUSH_INTERVAL)
                if self._reopen_asked:
                    self._reopen_asked = False
                    try:
                        self._reopen(self.handler)
                    except OSError as exc:
                        sys.stderr.write(f"supervise: cannot reopen the access log: {exc}\n")
                self._flush()
                if self._stopping and not self.pending:
                    return
        finally:
            self._done.release()

    def _flush(self) -> None:
        pending = self.pending
        lines = []
        try:
            while True:
                lines.append(pending.popleft())
        except IndexError:
            pass
        if lines:
            handler = self.handler
            handler.acquire()
            try:
                stream = handler.stream
                if stream is not None:
                    stream.write("".join(lines))
                    stream.flush()
            except (OSError, ValueError) as exc:
                sys.stderr.write(f"supervise: cannot write the access log: {exc}\n")
            finally:
                handler.release()
        dropped = self.dropped - self._reported
        if dropped and not pending:
            self._reported += dropped
            self.on_dropped(dropped)

    def close(self, timeout: float) -> bool:
        """Write what is pending and stop the thread; False when it could not finish
        within ``timeout`` (a write still blocked): the rest is lost with the process."""
        if not self._started:
            return True
        self._stopping = True
        with contextlib.suppress(RuntimeError):
            self._wake.release()
        if self._done.acquire(timeout=timeout):
            self._done.release()
            return True
        return False
