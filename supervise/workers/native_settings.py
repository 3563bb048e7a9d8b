"""What the native server is built from: one dict, made once per worker.

Every setting declared with ``native=True`` goes in under its own name, as
the registry holds it; the keys below ``derived`` are worked out from
several settings or from the worker. native/src/native_server/config.rs
reads each key into the server's ``ServerConfig`` and refuses a key it does
not know, so adding a native-server setting touches its declaration, that
reader and the code that uses it.
"""

from __future__ import annotations

import ipaddress
import sys
from typing import Any

from supervise.settings import SETTINGS
from supervise.settings_rsgi import backpressure
from supervise.static_files import resolved_map

NATIVE_SETTINGS = tuple(name for name, setting in SETTINGS.items() if setting.native)


def proxy_allow(cfg: Any) -> list[str] | None:
    """--proxy-protocol for the native server: the peers that must send a header,
    written as ipaddress writes networks (``10.0.0.0/8``) so that Rust reads
    every form the setting accepts; None when the setting is off."""
    if not cfg.proxy_protocol:
        return None
    return [
        item if item == "*" else str(ipaddress.ip_network(item, strict=False))
        for item in cfg.proxy_allow_ips or []
    ]


def native_settings(
    cfg: Any,
    *,
    threads: int,
    mode: str,
    ws: bool,
    max_requests: int,
    tls: Any,
    log_answered: bool = False,
    quic: Any = None,
) -> dict[str, Any]:
    """The native server's settings for a worker whose app side wants
    ``threads`` runtime threads in ``mode`` (``st``/``mt``), WebSockets or not;
    ``max_requests`` is the worker's own number (jitter applied, 0 for none),
    ``tls`` the rustls configuration or None; ``quic`` the worker's
    ``QuicShare`` (HTTP/3) or None; ``log_answered``: whether the
    access log or the metrics want what the server answers itself (static
    files)."""
    settings = {name: getattr(cfg, name) for name in NATIVE_SETTINGS}
    settings.update(
        threads=threads,
        mode=mode,
        ws=ws,
        backpressure=backpressure(cfg),
        # The response that reaches it says Connection: close.
        max_requests=max_requests if max_requests < sys.maxsize else 0,
        server_header="supervise" if cfg.server_header else None,
        proxy_allow=proxy_allow(cfg),
        tls=tls,
        # Folders made absolute here, where the working directory is --chdir.
        static_map=resolved_map(cfg),
        log_answered=log_answered,
        # HTTP/3 (quic_sockets.QuicShare): the worker's UDP sockets, and the
        # Alt-Svc that TLS responses advertise them with.
        quic=(quic.index, list(quic.fds)) if quic is not None else None,
        alt_svc=quic.alt_svc if quic is not None and tls is not None else None,
    )
    return settings
