"""Readiness for the gthread worker's leader: epoll (Linux), or poll() where there is none.

Connections are armed one-shot, so exactly one thread owns a connection from
its report until it re-arms it. Both classes take the same calls, from any thread.
"""

from __future__ import annotations

import contextlib
import os
import select

# Events one poll() takes: more are left in the kernel for the next one.
POLL_BATCH = 64


class _Epoll:
    """Readiness for the leader on epoll (Linux).

    Connections are armed one-shot: the kernel disarms one as it reports it, so
    exactly one thread owns a connection from its report until it re-arms it,
    and any thread can re-arm without waking the leader.
    """

    def __init__(self, wake_w: int) -> None:
        self._ep = select.epoll()
        self._exclusive = getattr(select, "EPOLLEXCLUSIVE", 0)
        # arm() runs once a request: its two masks made once.
        self._read_once = select.EPOLLIN | select.EPOLLONESHOT
        self._write_once = select.EPOLLOUT | select.EPOLLONESHOT

    def listen(self, fd: int, on: bool) -> None:
        if not on:
            with contextlib.suppress(OSError):
                self._ep.unregister(fd)
            return
        try:
            # With several workers on one listener, a connection wakes one of them.
            self._ep.register(fd, select.EPOLLIN | self._exclusive)
        except OSError:  # kernels before 4.5 refuse EPOLLEXCLUSIVE
            self._ep.register(fd, select.EPOLLIN)

    def watch(self, fd: int) -> None:
        self._ep.register(fd, select.EPOLLIN)

    def add(self, fd: int) -> None:
        self._ep.register(fd, select.EPOLLIN | select.EPOLLONESHOT)

    def arm(self, fd: int, write: bool) -> None:
        """Any thread: report ``fd`` once when readable (or writable). OSError if gone."""
        self._ep.modify(fd, self._write_once if write else self._read_once)

    def forget(self, fd: int) -> None:
        """Before the main thread closes a connection it holds (closing unregisters)."""

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        return self._ep.poll(timeout, POLL_BATCH)


class _Poll:
    """The same on poll(), where there is no epoll (macOS, the BSDs).

    The leader unregisters a connection as it reports it (one-shot by hand). A
    change made while the leader is inside poll() would be seen only by the
    next call, so the changing thread wakes it through ``wake_w``.
    """

    def __init__(self, wake_w: int) -> None:
        self._poll = select.poll()
        self._wake_w = wake_w
        self._oneshot: set[int] = set()
        self._polling = False

    def _changed(self) -> None:
        if self._polling:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b".")

    def listen(self, fd: int, on: bool) -> None:
        if on:
            self._poll.register(fd, select.POLLIN)
        else:
            with contextlib.suppress(KeyError):
                self._poll.unregister(fd)
        self._changed()

    def watch(self, fd: int) -> None:
        self._poll.register(fd, select.POLLIN)

    def add(self, fd: int) -> None:
        self.arm(fd, False)

    def arm(self, fd: int, write: bool) -> None:
        self._oneshot.add(fd)
        self._poll.register(fd, select.POLLOUT if write else select.POLLIN)
        self._changed()

    def forget(self, fd: int) -> None:
        self._oneshot.discard(fd)
        with contextlib.suppress(KeyError):
            self._poll.unregister(fd)

    def poll(self, timeout: float) -> list[tuple[int, int]]:
        self._polling = True
        try:
            events = self._poll.poll(timeout * 1000.0)
        finally:
            self._polling = False
        for fd, _ in events:
            if fd in self._oneshot:
                self._oneshot.discard(fd)
                with contextlib.suppress(KeyError):
                    self._poll.unregister(fd)
        return events
