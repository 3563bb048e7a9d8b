"""What every launcher shares: its command line and the app it serves.

Run as scripts (`python launchers/run_bjoern.py ...`), so this directory is sys.path[0]
and `common` imports; the apps come from PYTHONPATH (the runner sets it to benchmarks/).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable


def parse(description: str) -> tuple[str, int, Callable]:
    """(host, port, WSGI app) from `--host H --port P module:attr`."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("app", help="module:attribute, e.g. apps.wsgi_app:app")
    args = p.parse_args()
    module, _, attr = args.app.partition(":")
    app = getattr(importlib.import_module(module), attr or "app")
    return args.host, args.port, app
