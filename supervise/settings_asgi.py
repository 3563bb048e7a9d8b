"""The settings of the event-loop workers (asgi; the WebSocket ones also rsgi), declared once.

They live apart from settings.py only to keep that table readable; settings.py
includes this section in its single ``SETTINGS`` table, so the command line,
config files and docs see them like every other setting. Names and flags
follow Uvicorn's where Uvicorn has the setting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from supervise.validators import BOOL, SECONDS, choice_check, int_check

LOOPS = ("auto", "asyncio", "uvloop", "rloop")
WS_IMPLEMENTATIONS = ("auto", "wsproto", "websockets", "off")


def declare(add: Callable[..., None]) -> None:
    """Append the event-loop section's settings through ``add`` (settings._adder)."""
    add(
        name="loop",
        flags=["--loop"],
        metavar="LOOP",
        validator=choice_check(*LOOPS),
        default="auto",
        help="The event loop of the asgi, rsgi and native workers: `uvloop` (installed "
        "with supervise on Linux and macOS), `asyncio` (the standard library's), `rloop` "
        "(a Rust loop: `pip install rloop`), or `auto`: uvloop when it can be imported, "
        "else asyncio. A WSGI app on -k native runs without a loop (on the runtime threads), "
        "so this setting does not apply to it. "
        "With -k asgi, where the loop owns the sockets, rloop 0.5 leaves "
        "a connection the worker closed open until the garbage collector frees it: fine "
        "for measuring, not for serving (rsgi and native keep their sockets in Rust).",
    )
    add(
        name="lifespan",
        flags=["--lifespan"],
        metavar="MODE",
        validator=choice_check("auto", "on", "off"),
        default="auto",
        help="The ASGI lifespan protocol: `on` runs the app's startup before the worker "
        "serves (a failed startup fails the boot: at start the server exits, on HUP the "
        "old workers keep serving) and its shutdown on a graceful stop; `auto` does the "
        "same but goes on without lifespan when the app does not support it; `off` "
        "never sends lifespan events.",
    )
    add(
        name="limit_concurrency",
        native=True,
        flags=["--limit-concurrency"],
        metavar="INT",
        validator=int_check(0),
        default=0,
        help="Answer 503 Service Unavailable to requests arriving while this many are "
        "already in flight in the worker (0: no limit): asgi, rsgi and native (where a "
        "WSGI app's HTTP/1.1 requests are bounded by --threads instead). Open "
        "connections are capped separately by `worker_connections`.",
    )
    add(
        name="factory",
        flags=["--factory"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Treat APP as a factory: call it with no arguments, once per worker, and "
        "serve what it returns (`module:create_app()` says the same in the APP itself).",
    )
    _declare_websockets(add)


def _declare_websockets(add: Callable[..., Any]) -> None:
    add(
        name="ws",
        flags=["--ws"],
        metavar="IMPL",
        validator=choice_check(*WS_IMPLEMENTATIONS),
        default="auto",
        help="WebSocket support: for the asgi worker `wsproto`, `websockets` (the "
        "sans-I/O layer of each library) or `auto` (the faster one installed); the rsgi "
        "worker always uses its native codec (tungstenite) unless `off`. `off`: upgrade "
        "requests are answered as plain HTTP requests.",
    )
    add(
        name="ws_max_size",
        native=True,
        flags=["--ws-max-size"],
        metavar="BYTES",
        validator=int_check(1),
        default=16 * 1024 * 1024,
        help="The largest WebSocket message accepted; a bigger one closes the "
        "connection with 1009 (message too big).",
    )
    add(
        name="ws_ping_interval",
        native=True,
        flags=["--ws-ping-interval"],
        metavar="SECONDS",
        validator=SECONDS,
        default=20.0,
        help="Send a WebSocket ping this often (0: never), to keep the connection open "
        "through proxies and to find dead peers.",
    )
    add(
        name="ws_ping_timeout",
        native=True,
        flags=["--ws-ping-timeout"],
        metavar="SECONDS",
        validator=SECONDS,
        default=20.0,
        help="Close a WebSocket connection whose peer has not answered a ping within "
        "this long (1011).",
    )
    add(
        name="ws_per_message_deflate",
        flags=["--ws-per-message-deflate"],
        action="toggle",
        validator=BOOL,
        default=True,
        help="Offer permessage-deflate compression to WebSocket clients that ask for it "
        "(asgi worker; the rsgi worker never compresses). --no-ws-per-message-deflate "
        "turns it off.",
    )
