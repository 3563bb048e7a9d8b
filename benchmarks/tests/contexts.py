"""What the bench tests build alike: a runner.Context for the tests that only
build commands and placements, and a server's finished entry for the report tests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import loadgen, runner


def context(**changes: Any) -> runner.Context:
    """A Context with no venvs and no logs: the default two-core placement,
    with ``changes`` applied."""
    fields: dict[str, Any] = {
        "venvs": {},
        "servers": {},
        "levels": (64,),
        "duration": 1.0,
        "warmup": 0.0,
        "server_cpu": 0,
        "load_cpu": 1,
        "logs": Path("/nowhere"),
        "log": print,
        "all_cpus": (0, 1, 2),
    }
    fields.update(changes)
    return runner.Context(**fields)


def finished_entry(
    name: str,
    rps: float,
    iface: str,
    *,
    connections: int,
    command: list[str],
    processes: int,
    **run_extra: float,
) -> dict:
    """One server's entry as the runner leaves it after a single wrk run of
    ``rps`` (``run_extra``: more of that run's fields, such as latencies)."""
    run = loadgen.Load("wrk", connections, requests=int(rps), duration_s=1.0, rps=rps).to_dict()
    run.update(run_extra)
    entry = {
        "server": name,
        "interface": iface,
        "supervise": name.startswith("supervise"),
        "version": "1",
        "note": "",
        "status": "pending",
        "reason": "",
        "command": command,
        "memory_idle": {"rss": 2**20, "pss": 2**20, "processes": processes},
        "memory_load": {"rss": 2**21, "pss": 2**21, "processes": processes},
        "runs": [run],
    }
    runner.finalize(entry)
    return entry
