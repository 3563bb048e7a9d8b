"""The PROXY protocol settings, declared once (Gunicorn's names).

Apart from settings.py only to keep that table readable; settings.py
includes them in its single ``SETTINGS`` table, in the Server Mechanics
section next to forwarded_allow_ips.
"""

from __future__ import annotations

from collections.abc import Callable

from supervise.validators import ADDRESSES, BOOL


def declare(add: Callable[..., None]) -> None:
    """Append the PROXY protocol settings through ``add`` (settings._adder)."""
    add(
        name="proxy_protocol",
        flags=["--proxy-protocol"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Read a PROXY protocol header (version 1 or 2, as haproxy's `send-proxy` "
        "and `send-proxy-v2` and nginx's `proxy_protocol on` write it) at the start of "
        "every connection from a peer in proxy_allow_ips; the client address it carries "
        "becomes REMOTE_ADDR (ASGI and RSGI: the client). From those peers the header "
        "is required: a connection without a valid one is closed before anything "
        "reaches the application. Other peers are served as plain HTTP (or TLS) "
        "clients. Unix-socket peers count as trusted. With TLS the header comes before "
        "the handshake. It must arrive within header_timeout.",
    )
    add(
        name="proxy_allow_ips",
        flags=["--proxy-allow-from"],
        metavar="ADDRESSES",
        validator=ADDRESSES,
        default="127.0.0.1,::1",
        default_doc="`'127.0.0.1,::1'`",
        help="Comma-separated addresses or networks (`10.0.0.0/8`) allowed, and with "
        "--proxy-protocol required, to send a PROXY protocol header (`*` for any).",
    )
