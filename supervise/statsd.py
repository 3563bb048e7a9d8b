"""statsd with Gunicorn's metric names, sent from the metrics helper.

Gunicorn sends three datagrams per request from the worker that served it.
Here the workers only count in shared memory (no system call on the request
path) and the helper sends what changed once per ``flush()``, one metric per
datagram in Gunicorn's format, so existing dashboards keep working:

- ``gunicorn.requests:N|c|@1.0`` and ``gunicorn.request.status.CODE:N|c|@1.0``
  (the counts since the last flush);
- ``gunicorn.request.duration:MS|ms``: one timing per histogram bucket that
  received requests, with a sample rate of 1/count (``|@0.25`` for four) so
  the statsd server counts every request; the value is the bucket's middle,
  or the exact mean when only one bucket received requests, so percentiles
  have the buckets' resolution (docs/operations.md);
- ``gunicorn.workers:N|g`` (every flush) and ``gunicorn.log.LEVEL:N|c|@1.0``.

``--statsd-prefix`` and ``--dogstatsd-tags`` apply as in Gunicorn. Sending
never blocks and never fails loudly: a datagram that cannot go is dropped.
"""

from __future__ import annotations

import contextlib
import re
import socket
from typing import Any

from supervise.metrics import Totals
from supervise.scoreboard import DURATION_BOUNDS, LOG_LEVELS, OTHER_STATUS, Snapshot
from supervise.settings_ops import STATSD_DEFAULT_PORT, split_host_port, unix_path


def format_prefix(prefix: str) -> str:
    """Gunicorn's rule: a non-empty prefix ends with exactly one dot."""
    return re.sub(r"^(.+[^.]+)\.*$", r"\g<1>.", prefix) if prefix else ""


def bucket_value_ms(index: int) -> float:
    """A bucket's middle in milliseconds (the last, open, bucket: its lower bound)."""
    if index >= len(DURATION_BOUNDS):
        return DURATION_BOUNDS[-1] * 1000.0
    lower = DURATION_BOUNDS[index - 1] if index else 0.0
    return (lower + DURATION_BOUNDS[index]) * 500.0


def _number(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return text or "0"


class StatsdSender:
    """Turns successive snapshots into datagrams for one statsd address."""

    def __init__(self, *, address: str, prefix: str, tags: str, log: Any, from_zero: bool) -> None:
        """``from_zero``: the master just started, so everything counted so far is
        new; otherwise (a restarted helper) the first snapshot is the baseline."""
        self.address = address
        self.prefix = format_prefix(prefix)
        self.suffix = f"|#{tags}".encode("ascii") if tags else b""
        self.log = log
        self.sock: socket.socket | None = None
        self.last: Totals | None = Totals.zero() if from_zero else None

    def _connect(self) -> socket.socket | None:
        path = unix_path(self.address)
        try:
            if path is not None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                target: Any = path
            else:
                host, port = split_host_port(self.address, STATSD_DEFAULT_PORT)
                family, _, _, _, target = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
                sock = socket.socket(family, socket.SOCK_DGRAM)
            sock.setblocking(False)
            sock.connect(target)
        except (OSError, ValueError) as exc:
            self.log.debug("statsd %s: %s", self.address, exc)
            return None
        return sock

    def send(self, line: str) -> None:
        if self.sock is None:
            self.sock = self._connect()
            if self.sock is None:
                return
        # Nobody listening (yet), or a full buffer: statsd is best effort.
        with contextlib.suppress(OSError):
            self.sock.send((self.prefix + line).encode("ascii") + self.suffix)

    def flush(self, snap: Snapshot) -> None:
        totals = Totals(snap.departed, snap.workers, snap.master["logs"])  # type: ignore[arg-type]
        last, self.last = self.last, totals
        self.send(f"gunicorn.workers:{len(snap.workers)}|g")
        if last is None:
            return  # a restarted helper: its predecessor sent what came before
        codes = [now - before for now, before in zip(totals.codes, last.codes, strict=True)]
        answered = sum(codes[:OTHER_STATUS])
        if answered > 0:
            self.send(f"gunicorn.requests:{answered}|c|@1.0")
        for index, count in enumerate(codes[:OTHER_STATUS]):
            if count > 0:
                self.send(f"gunicorn.request.status.{index + 100}:{count}|c|@1.0")
        self._durations(totals, last)
        for level, now, before in zip(LOG_LEVELS, totals.logs, last.logs, strict=True):
            if now > before:
                self.send(f"gunicorn.log.{level}:{now - before}|c|@1.0")

    def _durations(self, totals: Totals, last: Totals) -> None:
        counts = [now - before for now, before in zip(totals.buckets, last.buckets, strict=True)]
        filled = [(i, n) for i, n in enumerate(counts) if n > 0]
        if len(filled) == 1:
            n = filled[0][1]
            mean_ms = (totals.duration_sum - last.duration_sum) * 1000.0 / n
            values = [(mean_ms, n)]
        else:
            values = [(bucket_value_ms(i), n) for i, n in filled]
        for value, n in values:
            rate = "" if n == 1 else "|@" + f"{1.0 / n:.10f}".rstrip("0")
            self.send(f"gunicorn.request.duration:{_number(value)}|ms{rate}")

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None
