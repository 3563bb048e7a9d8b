"""How much memory a process uses, read from /proc (Linux); None where unknown.

Two figures, for two uses. RSS (``/proc/PID/statm``) is one small read
whatever the process's size: cheap enough for every worker every few seconds
and for every ``supervise ctl status``. PSS (``/proc/PID/smaps_rollup``,
Linux 4.14+) divides each page shared by several processes between them, so
a preloaded app's pages shared with the master and the other workers count
only in part: that is what a worker really costs. Reading it walks the
process's page tables, so it is read only for a worker whose RSS is already
above the limit (PSS is never above RSS).
"""

from __future__ import annotations

import os

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss(pid: int) -> int | None:
    """Resident set size in bytes."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            fields = f.read().split()
        return int(fields[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def pss(pid: int) -> int | None:
    """Proportional set size in bytes; None where smaps_rollup is missing or unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
