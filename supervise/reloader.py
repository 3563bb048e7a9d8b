"""``--reload`` for development: a file watcher on a thread of one worker.

The watcher lives in a worker, not the arbiter, because the arbiter must stay
single-threaded to fork safely. It knows nothing of workers: it is given the
extra files to watch and a callback, which the worker points at "send the
arbiter SIGHUP". The arbiter then boots a new generation and retires the old
one only once the new code imports, so a syntax error leaves the last good
code serving and prints the error once.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

WATCHED_SUFFIXES = (".py", ".pyx", ".pyi")


def watch_paths(extra_files: Iterable[str]) -> list[str]:
    """The directories to watch: the working directory, the app's import path
    (not the standard library or site-packages) and the extra files' folders."""
    paths = {os.getcwd()}
    paths.update(p for p in sys.path if p and os.path.isdir(p) and "site-packages" not in p)
    paths = {p for p in paths if not p.startswith(sys.base_prefix) and not p.startswith(sys.prefix)}
    for extra in extra_files:
        paths.add(str(Path(extra).resolve().parent if Path(extra).is_file() else extra))
    # Drop paths nested inside another watched path.
    ordered = sorted(paths, key=len)
    return [
        p for i, p in enumerate(ordered) if not any(p.startswith(q + os.sep) for q in ordered[:i])
    ]


class FileWatcher:
    """Calls ``on_change`` after source files change; ``run()`` blocks (start it on a thread)."""

    def __init__(
        self,
        *,
        extra_files: Iterable[str],
        force_polling: bool,
        on_change: Callable[[], None],
        log: Any,
    ) -> None:
        self.extra_files = list(extra_files)
        self.force_polling = force_polling
        self.on_change = on_change
        self.log = log
        self.stop_event = threading.Event()

    def run(self) -> None:
        try:
            import watchfiles
        except ImportError:
            self.log.error("--reload needs watchfiles: pip install watchfiles")
            return
        extra = {str(Path(p).resolve()) for p in self.extra_files}

        def wanted(change: watchfiles.Change, path: str) -> bool:
            return path.endswith(WATCHED_SUFFIXES) or path in extra

        paths = watch_paths(self.extra_files)
        self.log.info("Reloader: watching %s for changes", ", ".join(paths))
        for changes in watchfiles.watch(
            *paths,
            watch_filter=wanted,
            stop_event=self.stop_event,
            debounce=200,
            force_polling=self.force_polling,
        ):
            names = ", ".join(sorted({os.path.relpath(path) for _, path in changes}))
            self.log.info("Detected change in %s: reloading", names)
            self.on_change()
