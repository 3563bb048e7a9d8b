"""The operations settings, declared once: metrics, statsd, the control socket,
and recycling by memory and by age.

Apart from settings.py only to keep that table readable; settings.py includes
these sections in its single ``SETTINGS`` table (recycling next to
max_requests, where an operator looks for it). Names follow Gunicorn's where
Gunicorn has the setting (statsd_host, statsd_prefix, dogstatsd_tags).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from supervise.validators import SECONDS, Check, Invalid, int_check

STATSD_DEFAULT_PORT = 8125


def split_host_port(text: str, default_port: int | None) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPV6]:PORT`` -> (host, port); the port may be left out
    when there is a default. Raises Invalid; resolves nothing."""
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise Invalid(f"{text!r}: write an IPv6 address as [ADDRESS]:PORT")
        port_text = rest[1:]
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    elif ":" in text:
        raise Invalid(f"{text!r}: write an IPv6 address as [ADDRESS]:PORT")
    else:
        host, port_text = text, ""
    if not port_text:
        if default_port is None:
            raise Invalid(f"{text!r} has no port (HOST:PORT)")
        return host or "127.0.0.1", default_port
    if not re.fullmatch(r"\d{1,5}", port_text) or int(port_text) > 65535:
        raise Invalid(f"{text!r}: the port must be a number from 0 to 65535")
    return host or "127.0.0.1", int(port_text)


def unix_path(text: str) -> str | None:
    """The path of ``unix:PATH`` or ``unix://PATH``, else None."""
    if not text.startswith("unix:"):
        return None
    path = text[5:]
    return path[2:] if path.startswith("//") else path


def _address(default_port: int | None, what: str) -> Check:
    def check(value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise Invalid(f"{value!r} is not a string")
        text = value.strip()
        if not text:
            return None
        path = unix_path(text)
        if path is not None:
            if not path:
                raise Invalid(f"{text!r}: unix: needs a path")
            # Absolute now: the master changes directory (--chdir) before binding.
            return f"unix:{os.path.abspath(path)}"
        split_host_port(text, default_port)
        return text

    return Check(f"str ({what}) or None", check)


METRICS_ADDRESS = _address(None, "HOST:PORT or unix:PATH")
STATSD_ADDRESS = _address(STATSD_DEFAULT_PORT, "HOST[:PORT] or unix:PATH")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Invalid(f"{value!r} is not a string")
    return value.strip()


TEXT = Check("str", _text)


def _tags(value: Any) -> str:
    """Gunicorn's form: ``key:value,key2:value2`` (sent as-is after ``|#``)."""
    text = _text(value)
    if any(c in text for c in "|#\n ") or not text.isascii():
        raise Invalid(f"{text!r}: tags are comma-separated ASCII key:value pairs without spaces")
    return text


TAGS = Check("str", _tags)


def _socket_path(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"{value!r} is not a path")
    text = value.strip()
    path = unix_path(text)
    path = path if path is not None else text
    # Absolute now: the master changes directory (--chdir) before binding.
    return os.path.abspath(path) if path else None


SOCKET_PATH = Check("str or None", _socket_path)


def _jitter(value: Any) -> float | int | None:
    return None if value is None else SECONDS(value)


JITTER = Check("number or None", _jitter)


def declare_metrics(add: Callable[..., None]) -> None:
    """The Metrics section: Prometheus and statsd."""
    add(
        name="metrics_bind",
        flags=["--metrics-bind"],
        metavar="ADDRESS",
        validator=METRICS_ADDRESS,
        default=None,
        help="Serve Prometheus metrics at `/metrics` on this address: `HOST:PORT`, "
        "`[IPV6]:PORT` or `unix:PATH`; off by default. A small helper process (`supervise: "
        "metrics`) answers scrapes from the shared scoreboard, so a scrape never waits on "
        "the master or a worker. Bind it to a private address: it tells anyone who can "
        "reach it how busy the server is. Changing it takes a restart (USR2), not a HUP.",
    )
    add(
        name="statsd_host",
        flags=["--statsd-host"],
        metavar="STATSD_ADDR",
        validator=STATSD_ADDRESS,
        default=None,
        help="Send statsd metrics (UDP, or a unix datagram socket with `unix:PATH`) to "
        "`HOST[:PORT]` (port 8125 by default), with Gunicorn's metric names: "
        "gunicorn.requests, gunicorn.request.status.<code>, gunicorn.request.duration, "
        "gunicorn.workers and gunicorn.log.<level>. Figures are sent once a second from "
        "the metrics helper, not per request from the workers.",
    )
    add(
        name="statsd_prefix",
        flags=["--statsd-prefix"],
        metavar="STATSD_PREFIX",
        validator=TEXT,
        default="",
        help="A prefix for every statsd metric name (a trailing dot is added when "
        "missing), as Gunicorn's.",
    )
    add(
        name="dogstatsd_tags",
        flags=["--dogstatsd-tags"],
        metavar="DOGSTATSD_TAGS",
        validator=TAGS,
        default="",
        help="Tags added to every statsd metric in DogStatsD's form, comma-separated "
        "`key:value` pairs (e.g. `env:prod,app:shop`).",
    )


def declare_control(add: Callable[..., None]) -> None:
    """The Control section."""
    add(
        name="control_socket",
        flags=["--control-socket"],
        metavar="PATH",
        validator=SOCKET_PATH,
        default=None,
        help="A unix socket on which the master takes `supervise ctl` commands (status, "
        "reload, scale, retire, reopen-logs, stop). Off by default, because whoever can "
        "connect can stop the server: when set, the socket is created with mode 0600 "
        "(its owner is the master's user) and only that user or root is answered. During "
        "a USR2 upgrade the new master takes the path over once its workers serve; the "
        "old master then answers at `PATH.oldbin`. Changing it takes a restart (USR2).",
    )


def declare_recycling(add: Callable[..., None]) -> None:
    """Recycling settings, in the Worker Processes section."""
    add(
        name="max_worker_memory",
        flags=["--max-worker-memory"],
        metavar="MIB",
        validator=int_check(0),
        default=0,
        help="Replace a worker whose memory exceeds this many MiB; 0 disables it. The "
        "master checks every 2 seconds: the resident set size (RSS) first, which is cheap, "
        "and for a worker above the limit its proportional set size (PSS), where pages "
        "shared with other processes (a preloaded app) count only in part; the worker is "
        "replaced when its PSS is above the limit. The replacement is started first and "
        "the worker stopped gracefully once it serves, so capacity never drops.",
    )
    add(
        name="worker_lifetime",
        flags=["--worker-lifetime"],
        metavar="SECONDS",
        validator=SECONDS,
        default=0,
        help="Replace a worker once it has run this many seconds (plus its jitter), a "
        "bound for apps that leak in ways memory limits miss (file descriptors, caches); 0 "
        "disables it. Replaced the same way as at max_requests: no capacity gap.",
    )
    add(
        name="worker_lifetime_jitter",
        flags=["--worker-lifetime-jitter"],
        metavar="SECONDS",
        validator=JITTER,
        default=None,
        default_doc="a tenth of worker_lifetime",
        help="Add a random number of seconds between 0 and this to each worker's "
        "lifetime, so that workers started together are not replaced together.",
    )
