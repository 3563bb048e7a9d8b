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

# Directories never watched: virtualenvs, version control, caches, build outputs,
# JavaScript dependencies. Inside a project they hold far more files than its code,
# and watching them costs inotify watches (or, polling, a scan of each file every
# turn). Hidden directories and any directory holding a pyvenv.cfg (a virtualenv of
# any name) are skipped as well.
SKIPPED_DIRS = frozenset(
    {
        "venv",
        "node_modules",
        "__pycache__",
        "site-packages",
        "target",
        "build",
        "dist",
    }
)
# Past this many directories the walk stops (supervise --reload started from / or a
# home directory) and the log says so.
MAX_DIRS = 5000


def _skipped(parent: str, name: str) -> bool:
    return (
        name.startswith(".")
        or name in SKIPPED_DIRS
        or name.endswith(".egg-info")
        or os.path.exists(os.path.join(parent, name, "pyvenv.cfg"))
    )


def watch_roots(extra_files: Iterable[str]) -> list[str]:
    """The trees to watch: the working directory, the app's import path (not the
    standard library or site-packages) and the extra files' folders."""
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


def watch_dirs(roots: Iterable[str]) -> tuple[list[str], set[str], bool]:
    """Every directory under ``roots`` worth watching, each to be watched on its own
    (not recursively, so that skipped trees are never entered); the names of the
    directories skipped; and whether MAX_DIRS cut the walk short. A directory made
    later is seen by the next generation's watcher (the change that imports it
    reloads)."""
    dirs: list[str] = []
    skipped: set[str] = set()
    for root in roots:
        for parent, names, _ in os.walk(root):
            if len(dirs) >= MAX_DIRS:
                return dirs, skipped, True
            dirs.append(parent)
            kept = [n for n in names if not _skipped(parent, n)]
            skipped.update(set(names) - set(kept))
            names[:] = kept
    return dirs, skipped, False


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def describe_watch(
    roots: Iterable[str], dir_count: int, skipped: Iterable[str], extra_count: int = 0
) -> str:
    """The one log line that says what --reload watches and what it leaves out.

    It names the file kinds as well as the places, since a change to any other
    file (a template, a .env) reloads nothing, and lists the names of the
    directories skipped so that one can tell why an edit there is not seen.
    """
    kinds = ", ".join(f"*{suffix}" for suffix in WATCHED_SUFFIXES)
    extra = f" and {_count(extra_count, 'extra file', 'extra files')}" if extra_count else ""
    # Names, not a count: one name (__pycache__) may stand for many directories.
    left_out = ", ".join(sorted(skipped))
    if left_out:
        excluded = f"skipping virtualenv, hidden, dependency and build directories: {left_out}"
    else:
        excluded = "no directory skipped"
    return (
        f"Reloader: watching {kinds} files{extra} in "
        f"{_count(dir_count, 'directory', 'directories')} under {', '.join(roots)}; {excluded}"
    )


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

        roots = watch_roots(self.extra_files)
        dirs, skipped, cut = watch_dirs(roots)
        self.log.info("%s", describe_watch(roots, len(dirs), skipped, len(extra)))
        if cut:
            self.log.warning(
                "Reloader: more than %d directories: watching only the first ones; "
                "start supervise from the project's directory",
                MAX_DIRS,
            )
        for changes in watchfiles.watch(
            *dirs,
            watch_filter=wanted,
            stop_event=self.stop_event,
            debounce=200,
            force_polling=self.force_polling,
            recursive=False,
        ):
            names = ", ".join(sorted({os.path.relpath(path) for _, path in changes}))
            self.log.info("Detected change in %s: reloading", names)
            self.on_change()
