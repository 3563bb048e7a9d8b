"""``--reload`` for development: a file watcher thread inside each worker.

The watcher lives in the worker, not the arbiter, because the arbiter must
stay single-threaded to fork safely. On a change it sends the arbiter SIGHUP:
the arbiter then boots a new generation and retires the old one only once the
new code imports, so a syntax error leaves the last good code serving and
prints the error once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from supervise.workers.base import Worker

WATCHED_SUFFIXES = (".py", ".pyx", ".pyi")


def _watch_paths(worker: Worker) -> list[str]:
    paths = {os.getcwd()}
    paths.update(p for p in sys.path if p and os.path.isdir(p) and "site-packages" not in p)
    paths = {p for p in paths if not p.startswith(sys.base_prefix) and not p.startswith(sys.prefix)}
    for extra in worker.cfg.reload_extra_files:
        paths.add(str(Path(extra).resolve().parent if Path(extra).is_file() else extra))
    # Drop paths nested inside another watched path.
    ordered = sorted(paths, key=len)
    return [
        p for i, p in enumerate(ordered) if not any(p.startswith(q + os.sep) for q in ordered[:i])
    ]


def start_reloader(worker: Worker) -> threading.Thread | None:
    """Start the watcher thread; returns None (with a log line) without watchfiles."""
    try:
        import watchfiles
    except ImportError:
        worker.log.error("--reload needs watchfiles: pip install watchfiles")
        return None
    extra = {str(Path(p).resolve()) for p in worker.cfg.reload_extra_files}
    stop = threading.Event()

    def wanted(change: watchfiles.Change, path: str) -> bool:
        return path.endswith(WATCHED_SUFFIXES) or path in extra

    def watch() -> None:
        paths = _watch_paths(worker)
        worker.log.info("Reloader: watching %s for changes", ", ".join(paths))
        for changes in watchfiles.watch(
            *paths,
            watch_filter=wanted,
            stop_event=stop,
            debounce=200,
            force_polling=worker.cfg.reload_engine == "poll",
        ):
            names = ", ".join(sorted({os.path.relpath(path) for _, path in changes}))
            worker.log.info("Detected change in %s: reloading", names)
            os.kill(worker.ppid, signal.SIGHUP)

    thread = threading.Thread(target=watch, name="supervise-reloader", daemon=True)
    thread.start()
    return thread
