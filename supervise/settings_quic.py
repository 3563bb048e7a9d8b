"""The HTTP/3 settings, declared once: the UDP addresses the arbiter binds
for QUIC (``quic_sockets.py``) and what TLS responses advertise of them.

Apart from settings.py only to keep that table readable; settings.py includes
this section in its single ``SETTINGS`` table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from supervise.validators import OPT_STR, Check, Invalid


def _quic_bind(value: Any) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise Invalid(f"{value!r} is not a list of HOST:PORT")
    out = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise Invalid(f"{item!r}: write HOST:PORT, for example 0.0.0.0:443")
        if item.startswith(("unix:", "fd://")):
            raise Invalid(f"{item!r}: HTTP/3 runs on UDP, so HOST:PORT only")
        out.append(item.strip())
    return out


QUIC_BIND = Check("list of HOST:PORT", _quic_bind)


def declare(add: Callable[..., None]) -> None:
    """The HTTP/3 section."""
    add(
        name="quic_bind",
        flags=["--quic-bind"],
        metavar="ADDRESS",
        action="append",
        validator=QUIC_BIND,
        default=[],
        help="Serve HTTP/3 (QUIC) on this UDP address, as `HOST:PORT` or `[::]:PORT` "
        "(usually the port of a TLS `--bind`, as `listen 443 quic` in nginx); repeat it "
        "for several. `-k rsgi` and `-k native` only, and TLS is required (`--certfile`). "
        "The arbiter binds the sockets before the workers start and keeps them across "
        "HUP and USR2, one per worker in a SO_REUSEPORT group, and routes each QUIC "
        "connection to its worker for its whole life, so a reload loses no connection. "
        "A change to it takes a restart (HUP keeps the first addresses).",
    )
    add(
        name="alt_svc",
        flags=["--alt-svc"],
        metavar="VALUE",
        validator=OPT_STR,
        default="auto",
        help="The `Alt-Svc` field that HTTP/1.1 and HTTP/2 responses over TLS carry when "
        '`--quic-bind` is set, which tells browsers to switch to HTTP/3: `auto` (`h3=":PORT"; '
        "ma=86400` with the first `--quic-bind` port), `off` for none, or the field's "
        "whole value. A response the app gave an `Alt-Svc` keeps the app's.",
    )
