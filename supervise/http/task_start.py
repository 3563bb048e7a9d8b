"""How an ASGI request's coroutine becomes a Task, for every loop that runs
ASGI apps (the asgi worker's protocol and the native engine's bridge)."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable
from typing import Any

# Before 3.12 a Task given no name formats "Task-N" as it is made: about 5% of
# a small request on the native engine. Every request Task takes this one.
REQUEST_TASK_NAME = "supervise-request"


def task_starter(loop: asyncio.AbstractEventLoop) -> Callable[[Any], Any]:
    """From Python 3.12, an eager Task: the app runs at once, up to its first
    real wait, so an app that answers without waiting (most requests) costs
    no loop turn and its Task is never scheduled; the app still runs in a
    real Task (``current_task()``, cancel scopes, contextvars). Before 3.12,
    a Task made directly with a fixed name. Either way the loop's task
    factory is not asked, and the callable is C-level: no Python frame of
    ours per request."""
    if sys.version_info >= (3, 12):
        return functools.partial(asyncio.Task, loop=loop, eager_start=True)
    return functools.partial(asyncio.Task, loop=loop, name=REQUEST_TASK_NAME)
