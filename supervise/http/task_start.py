"""How an ASGI request's coroutine becomes a Task, for every loop that runs
ASGI apps (the asgi worker's protocol and the native engine's bridge)."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable
from typing import Any


def task_starter(loop: asyncio.AbstractEventLoop) -> Callable[[Any], Any]:
    """From Python 3.12, an eager Task: the app runs at once, up to its first
    real wait, so an app that answers without waiting (most requests) costs
    no loop turn and its Task is never scheduled; the app still runs in a
    real Task (``current_task()``, cancel scopes, contextvars). Before 3.12,
    the loop's own ``create_task``. Either is a C-level callable: no Python
    frame of ours per request."""
    if sys.version_info >= (3, 12):
        return functools.partial(asyncio.Task, loop=loop, eager_start=True)
    return loop.create_task
