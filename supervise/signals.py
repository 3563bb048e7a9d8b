"""The arbiter's signal queue: handlers only record the signal; the loop acts.

``signal.set_wakeup_fd`` writes a byte to a pipe for every signal, so the
loop's ``wait`` returns at once when one arrives, with no race between
checking the queue and going to sleep.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Mapping
from typing import Any

# The signals the arbiter acts on, by name (without "SIG").
HANDLED = {
    getattr(signal, f"SIG{name}"): name
    for name in ("HUP", "QUIT", "INT", "TERM", "TTIN", "TTOU", "USR1", "USR2", "WINCH")
}
_MAX_QUEUED = 16


class SignalQueue:
    """Queued signals, and a wait that any signal (CHLD included) interrupts."""

    def __init__(self) -> None:
        self.queue: list[int] = []
        self._r = self._w = -1

    def install(self) -> None:
        self._r, self._w = os.pipe()
        for fd in (self._r, self._w):
            os.set_blocking(fd, False)
            os.set_inheritable(fd, False)
        signal.set_wakeup_fd(self._w)
        for sig in HANDLED:
            signal.signal(sig, self._record)
        # CHLD needs a Python handler for the wake-up byte; reaping is the loop's.
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    def _record(self, signum: int, frame: Any) -> None:
        # Queued HUPs (e.g. a burst from --reload) collapse into one reload;
        # TTIN/TTOU count, so three TTINs add three workers.
        if len(self.queue) < _MAX_QUEUED and not (signum == signal.SIGHUP and signum in self.queue):
            self.queue.append(signum)

    def pop(self) -> str | None:
        """The name of the oldest queued signal ("HUP"), or None."""
        return HANDLED[self.queue.pop(0)] if self.queue else None

    def wait(self, timeout: float, watch: Mapping[int, int] | None = None) -> list[tuple[int, int]]:
        """Sleep until a signal arrives, a watched fd is ready (``watch``: fd ->
        poll events) or ``timeout`` seconds pass; return the ready watched fds."""
        poller = select.poll()
        poller.register(self._r, select.POLLIN)
        for fd, events in (watch or {}).items():
            poller.register(fd, events)
        try:
            ready = poller.poll(timeout * 1000.0)
        except InterruptedError:
            return []
        found = []
        for fd, events in ready:
            if fd != self._r:
                found.append((fd, events))
                continue
            with contextlib.suppress(OSError):
                while os.read(self._r, 4096):
                    pass
        return found

    def close_in_child(self) -> None:
        """In a forked worker: the arbiter's pipe and handlers are not its own."""
        signal.set_wakeup_fd(-1)
        for fd in (self._r, self._w):
            with contextlib.suppress(OSError):
                os.close(fd)
