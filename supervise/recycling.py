"""Which workers are due for replacement by age (--worker-lifetime) or memory
(--max-worker-memory), decided in the arbiter's loop.

Deciding is all this does: the arbiter replaces a worker the way it does at
max_requests (the replacement first, TERM once it serves), so recycling never
drops capacity. Memory is read every ``MEMORY_PERIOD`` seconds, never faster,
whatever the loop's pace: RSS for every worker (one small /proc read each,
also what the metrics show), PSS only for a worker whose RSS is over the
limit (see procmem.py for why PSS decides).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from supervise import procmem

if TYPE_CHECKING:
    from supervise.config import Config
    from supervise.worker_record import WorkerRecord

MEMORY_PERIOD = 2.0
MIB = 1024 * 1024
_NEVER = float("inf")


class Due(NamedTuple):
    record: WorkerRecord
    cause: str  # "memory" | "lifetime" (scoreboard.EXIT_CAUSES)
    reason: str  # for the log line


class Recycler:
    """The recycling rules of one configuration (rebuilt on reload)."""

    def __init__(self, cfg: Config, *, measure: bool) -> None:
        """``measure``: read every worker's RSS even without a memory limit (metrics)."""
        self.limit = cfg.max_worker_memory * MIB
        self.lifetime = float(cfg.worker_lifetime)
        jitter = cfg.worker_lifetime_jitter
        self.jitter = self.lifetime / 10 if jitter is None else float(jitter)
        self.measure = measure or bool(self.limit)
        self.next_measure = 0.0

    def deadline(self, booted: float) -> float:
        """When a worker booted at ``booted`` (monotonic) is due, by age."""
        if not self.lifetime:
            return _NEVER
        return booted + self.lifetime + random.uniform(0, self.jitter)

    def due(self, records: Iterable[WorkerRecord], now: float) -> list[Due]:
        """Workers to replace now: serving, not already leaving, past a limit."""
        measure = self.measure and now >= self.next_measure
        if measure:
            self.next_measure = now + MEMORY_PERIOD
        found = []
        for rec in records:
            if measure:
                rss = procmem.rss(rec.pid)
                if rss is not None:
                    rec.worker.slot.set_memory(rss)
            if not rec.ready or rec.stopping or rec.killed or rec.retiring:
                continue
            if now >= rec.retire_at:
                age = now - rec.booted
                found.append(Due(rec, "lifetime", f"has run {age:.0f}s (worker_lifetime)"))
                continue
            if measure and self.limit and (rss or 0) > self.limit:
                pss = procmem.pss(rec.pid)
                used, kind = (pss, "PSS") if pss is not None else (rss or 0, "RSS")
                if used > self.limit:
                    found.append(
                        Due(
                            rec,
                            "memory",
                            f"uses {used / MIB:.1f} MiB ({kind}; max_worker_memory "
                            f"{self.limit // MIB} MiB)",
                        )
                    )
        return found
