"""The Health and Drain settings, declared once: probe paths answered by the
server itself, and the delay a TERM waits, still serving, before the
graceful stop (what Kubernetes needs while it removes the pod from its
endpoints).

Apart from settings.py only to keep that table readable; settings.py includes
this section in its single ``SETTINGS`` table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from supervise.validators import BOOL, SECONDS, Check, Invalid

# What a probe path may hold: plain path segments, no query, no escapes (a
# probe is compared byte for byte with the request's path).
_PATH = re.compile(r"(/[A-Za-z0-9._~!$&'()*+,;=:@-]+)+")


def _health_path(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"{value!r} is not a string")
    text = value.strip().rstrip("/")
    if not text:
        return None
    if not _PATH.fullmatch(text):
        raise Invalid(
            f"{value!r}: a health path is an absolute path such as /healthz "
            "(letters, digits and -._~ in its segments; no query, no %-escapes)"
        )
    return text


HEALTH_PATH = Check("str or None", _health_path)


def declare(add: Callable[..., None]) -> None:
    """The Health and Drain section."""
    add(
        name="health_path",
        native=True,
        flags=["--health-path"],
        metavar="PATH",
        validator=HEALTH_PATH,
        default=None,
        help="Answer health probes at this path in the server, before the app, on every "
        "worker class (off by default). `PATH` and `PATH/ready` answer readiness: 200 "
        "`ready` while the worker serves, 503 `draining` once its stop or the master's "
        "`--shutdown-delay` has begun, so a load balancer stops sending it new requests. "
        "`PATH/live` answers liveness: 200 `live` whenever the worker answers at all "
        "(also while draining, so Kubernetes does not restart a pod that is shutting "
        "down; on `-k rsgi` and `-k native` 503 when the worker's Python loop has been "
        "stuck for a second). GET and HEAD; other methods get 405. Probes are left out "
        "of the access log (see `--health-access-log`), of `--max-requests` and of the "
        "request metrics, and counted in `supervise_health_checks_total`. With "
        "`--metrics-bind` the metrics address answers the same paths for the server as "
        "a whole.",
    )
    add(
        name="health_access_log",
        native=True,
        flags=["--health-access-log"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Write health probes (`--health-path`) to the access log like any other "
        "request. Off by default: a probe every second would bury the requests that "
        "matter.",
    )
    add(
        name="shutdown_delay",
        flags=["--shutdown-delay"],
        metavar="SECONDS",
        validator=SECONDS,
        default=0,
        help="On SIGTERM, first turn readiness (`--health-path`) to 503 and keep accepting "
        "and serving as usual for this many seconds, then stop gracefully as without it "
        "(`--graceful-timeout`). Kubernetes sends TERM while it is still removing the pod "
        "from its endpoints, so requests keep arriving for a few seconds: this serves "
        "them instead of refusing them. A second TERM, or INT/QUIT, stops at once. Not "
        "applied while a new master started by USR2 is running (it serves the same "
        "sockets). HUP and USR2 are unchanged. 0 (the default) stops at once, as before. "
        "Size `terminationGracePeriodSeconds` as this plus `--graceful-timeout` plus a "
        "margin.",
    )
