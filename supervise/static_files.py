"""``--static-map`` for every worker class: the settings turned into the
native decision maker (``supervise._native.StaticFiles``, the same rules the
Rust server applies), with each folder resolved once."""

from __future__ import annotations

import os
from typing import Any

from supervise import _native


def resolved_map(cfg: Any, base: str | None = None) -> list[str]:
    """``static_map`` with each folder made absolute: against ``base``, else
    the working directory (a worker's is ``--chdir`` already)."""
    out = []
    for item in cfg.static_map or ():
        prefix, _, folder = item.partition("=")
        folder = os.path.expanduser(folder)
        if not os.path.isabs(folder):
            folder = os.path.join(base or os.getcwd(), folder)
        out.append(f"{prefix}={os.path.normpath(folder)}")
    return out


def static_files(cfg: Any, base: str | None = None) -> _native.StaticFiles | None:
    """The worker's static files; None without ``--static-map``. ValueError
    (one line naming the folder) when a folder cannot be served."""
    if not cfg.static_map:
        return None
    return _native.StaticFiles(
        resolved_map(cfg, base),
        cache_control=cfg.static_cache_control,
        immutable=bool(cfg.static_immutable),
        fallthrough=bool(cfg.static_fallthrough),
        follow_symlinks=bool(cfg.static_follow_symlinks),
    )
