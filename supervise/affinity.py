"""``--worker-cpu-affinity``: pin each worker process to one core, after fork.

Worker N (its scoreboard slot, which the arbiter hands out lowest-first and
reuses) goes to core N modulo the cores chosen, so TTIN/TTOU and HUP
generations keep spreading workers over the cores. ``auto`` chooses the cores
the master may run on; a list (``0,2-3``) chooses those. Off by default: with
as many workers as cores the kernel's own balancing is as good on an idle
machine, and pinning only pays where other processes compete for the cores
(measure: benchmarks/, the deploy table).
"""

from __future__ import annotations

import os
from typing import Any

OFF = "off"
AUTO = "auto"


def parse(value: Any) -> str | list[int]:
    """``off``, ``auto`` or a sorted list of core numbers; ValueError with the reason."""
    if isinstance(value, (list, tuple)):
        cores = {int(v) for v in value}
    else:
        text = str(value).strip().lower()
        if text in ("", OFF, "none", "false", "no"):
            return OFF
        if text == AUTO:
            return AUTO
        cores = set()
        for item in text.split(","):
            first, dash, last = item.strip().partition("-")
            if not first.isdigit() or (dash and not last.isdigit()):
                raise ValueError(f"{value!r} is not off, auto or a list of cores like 0,2-3")
            lo, hi = int(first), int(last) if dash else int(first)
            if hi < lo:
                raise ValueError(f"{item.strip()!r}: the range ends before it starts")
            cores.update(range(lo, hi + 1))
    if not cores or min(cores) < 0:
        raise ValueError(f"{value!r} names no core")
    return sorted(cores)


def core_for(setting: str | list[int], index: int) -> int | None:
    """The core worker ``index`` runs on, or None to leave it to the kernel."""
    if setting == OFF or not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0)) if setting == AUTO else list(setting)
    return cores[index % len(cores)]


def pin(setting: str | list[int], index: int) -> int | None:
    """Pin the calling process (a worker, just forked); the core, or None. OSError
    when the core does not exist or is not allowed to this process."""
    core = core_for(setting, index)
    if core is not None:
        os.sched_setaffinity(0, {core})
    return core
