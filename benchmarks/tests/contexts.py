"""A runner.Context for tests that only build commands and placements."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import runner


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
