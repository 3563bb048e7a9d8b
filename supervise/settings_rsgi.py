"""The settings of the rsgi worker's native server, declared once.

Apart from settings.py only to keep that table readable; settings.py includes
this section in its single ``SETTINGS`` table. Names follow Granian's
(``--runtime-threads``, ``--runtime-mode``).
"""

from __future__ import annotations

from collections.abc import Callable

from supervise.validators import choice_check, int_check


def declare(add: Callable[..., None]) -> None:
    """Append the RSGI section's settings through ``add`` (settings._adder)."""
    add(
        name="runtime_threads",
        flags=["--runtime-threads"],
        metavar="INT",
        validator=int_check(1, 1024),
        default=1,
        help="The rsgi worker's network threads (tokio), per worker process. The app "
        "itself always runs on the worker's one Python thread; more network threads "
        "only pay when parsing and writing, not the app, is the bottleneck.",
    )
    add(
        name="runtime_mode",
        flags=["--runtime-mode"],
        metavar="MODE",
        validator=choice_check("st", "mt"),
        default="st",
        help="How the rsgi worker's network threads are organised: `st`, one "
        "single-threaded runtime per thread, each accepting on every listener (no work "
        "stealing, no cross-thread wake-ups); `mt`, one work-stealing runtime with "
        "`runtime_threads` workers.",
    )
