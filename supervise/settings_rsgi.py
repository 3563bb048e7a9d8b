"""The settings of the native server (``-k rsgi``, ``-k native``), declared once.

Apart from settings.py only to keep that table readable; settings.py includes
this section in its single ``SETTINGS`` table. Names follow Granian's
(``--runtime-threads``, ``--runtime-mode``, ``--http``, ``--http2-*``); times
are in seconds, as everywhere in supervise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from supervise.validators import SECONDS, Check, Invalid, choice_check, int_check

# RFC 9113 6.5.2 bounds.
_MAX_WINDOW = 2**31 - 1
_MIN_FRAME, _MAX_FRAME = 2**14, 2**24 - 1


def _http(value: Any) -> str:
    # A config file may say `http = 2`.
    text = str(value).strip().lower() if isinstance(value, int) else value
    return choice_check("auto", "1", "2")(text)


HTTP = Check("auto | 1 | 2", _http)


def _opt_seconds(value: Any) -> float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
        return None
    seconds = SECONDS(value)
    if seconds == 0:
        raise Invalid("must be more than 0 seconds (leave it unset for no pings)")
    return seconds


OPT_SECONDS = Check("number or None", _opt_seconds)


def _opt_count(value: Any) -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
        return None
    return int_check(1)(value)


OPT_COUNT = Check("int or None", _opt_count)


def backpressure(cfg: Any) -> int:
    """The requests one worker hands to the app at once: the setting, or as
    Granian, the listen backlog shared out between the workers."""
    if cfg.backpressure is not None:
        return int(cfg.backpressure)
    return max(1, int(cfg.backlog) // max(1, int(cfg.workers)))


def declare(add: Callable[..., None]) -> None:
    """Append the native server's section through ``add`` (settings._adder)."""
    add(
        name="interface",
        flags=["--interface"],
        metavar="INTERFACE",
        validator=choice_check("auto", "wsgi", "asgi", "rsgi"),
        default="auto",
        help="The interface `-k native` serves the app with: `auto` (default) tells it "
        "from the app (`__rsgi__`, or the arguments of its callable), `wsgi`, `asgi`, "
        "`rsgi`. Naming it saves memory: under `auto` the master imports what an ASGI "
        "or RSGI app needs (asyncio, the loop), since the app loads in the workers; "
        "under `wsgi` no process imports them (about 3 MiB). "
        "Other worker classes serve one interface each and ignore this.",
    )
    add(
        name="runtime_threads",
        flags=["--runtime-threads"],
        metavar="INT",
        validator=int_check(1, 1024),
        default=1,
        help="The native server's network threads (tokio), per worker process, for RSGI "
        "and ASGI apps (`--threads` sets them for WSGI on `-k native`). The app "
        "itself always runs on the worker's one Python thread; more network threads "
        "only pay when parsing and writing, not the app, is the bottleneck.",
    )
    add(
        name="runtime_mode",
        flags=["--runtime-mode"],
        metavar="MODE",
        validator=choice_check("st", "mt"),
        default="st",
        help="How the native server's network threads are organised: `st`, one "
        "single-threaded runtime per thread, each accepting on every listener (no work "
        "stealing, no cross-thread wake-ups); `mt`, one work-stealing runtime with "
        "`runtime_threads` workers.",
    )
    add(
        name="backpressure",
        flags=["--backpressure"],
        metavar="INT",
        validator=OPT_COUNT,
        default=None,
        default_doc="`backlog / workers`, as Granian",
        help="How many requests one worker hands to the app at once (rsgi and native): "
        "the next one waits, unread, until one of them is answered, so a slow app "
        "cannot pile up work in the worker. Requests count, not connections: an idle "
        "keep-alive connection uses none. `limit_concurrency` instead answers 503 past "
        "its number; the two combine (a request waiting here counts as in flight there).",
    )
    add(
        name="http",
        native=True,
        flags=["--http"],
        metavar="VERSION",
        validator=HTTP,
        default="auto",
        help="The HTTP versions the rsgi worker speaks: `auto` (default) HTTP/1.1 and "
        "HTTP/2, chosen by ALPN over TLS and, in clear text or when the client offers no "
        "ALPN, by the client's first bytes (HTTP/2 with prior knowledge, as `curl "
        "--http2-prior-knowledge`); `1` HTTP/1.1 only; `2` HTTP/2 only. The HTTP/1.1 "
        "`Upgrade: h2c` dance is not offered. The Python workers speak HTTP/1.1 only.",
    )
    add(
        name="http2_max_concurrent_streams",
        native=True,
        flags=["--http2-max-concurrent-streams"],
        metavar="INT",
        validator=int_check(1, 2**32 - 1),
        default=200,
        help="SETTINGS_MAX_CONCURRENT_STREAMS: the requests one HTTP/2 connection may "
        "have open at once (rsgi worker).",
    )
    add(
        name="http2_initial_stream_window_size",
        native=True,
        flags=["--http2-initial-stream-window-size"],
        metavar="BYTES",
        validator=int_check(65535, _MAX_WINDOW),
        default=1048576,
        help="SETTINGS_INITIAL_WINDOW_SIZE: how much of one request body an HTTP/2 client "
        "may send before the app reads it (rsgi worker).",
    )
    add(
        name="http2_initial_connection_window_size",
        native=True,
        flags=["--http2-initial-connection-window-size"],
        metavar="BYTES",
        validator=int_check(65535, _MAX_WINDOW),
        default=1048576,
        help="The same for all the request bodies of one HTTP/2 connection together (rsgi worker).",
    )
    add(
        name="http2_max_frame_size",
        native=True,
        flags=["--http2-max-frame-size"],
        metavar="BYTES",
        validator=int_check(_MIN_FRAME, _MAX_FRAME),
        default=16384,
        help="SETTINGS_MAX_FRAME_SIZE: the largest HTTP/2 frame payload a client may send "
        "(rsgi worker).",
    )
    add(
        name="http2_max_headers_size",
        native=True,
        flags=["--http2-max-headers-size"],
        metavar="BYTES",
        validator=int_check(1024, 2**32 - 1),
        default=65536,
        help="SETTINGS_MAX_HEADER_LIST_SIZE: the largest request head an HTTP/2 client may "
        "send, decompressed (names, values and 32 bytes per field). It also bounds what "
        "a flood of CONTINUATION frames can make the server buffer. The limit_request_* "
        "settings apply to HTTP/2 requests too (rsgi worker).",
    )
    add(
        name="http2_max_send_buffer_size",
        native=True,
        flags=["--http2-max-send-buffer-size"],
        metavar="BYTES",
        validator=int_check(1024, 2**31 - 1),
        default=409600,
        help="How much of one HTTP/2 response may wait in memory for the client's flow "
        "control window; past it the app's sends wait (rsgi worker).",
    )
    add(
        name="http2_keep_alive_interval",
        native=True,
        flags=["--http2-keep-alive-interval"],
        metavar="SECONDS",
        validator=OPT_SECONDS,
        default=None,
        help="Send an HTTP/2 PING on a connection that has been silent this long, and close "
        "it when no answer comes within http2_keep_alive_timeout: it finds clients that "
        "vanished without closing. Not set (default): no pings. Pings do not keep an idle "
        "connection open: keepalive still closes it (rsgi worker).",
    )
    add(
        name="http2_keep_alive_timeout",
        native=True,
        flags=["--http2-keep-alive-timeout"],
        metavar="SECONDS",
        validator=SECONDS,
        default=20,
        help="How long to wait for the answer to an HTTP/2 keep-alive PING (rsgi worker).",
    )
