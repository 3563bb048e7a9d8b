"""Every setting, declared once.

The ``SETTINGS`` table is the single source of truth: the command-line parser
(``cli.py``), the config-file names, ``SUPERVISE_CMD_ARGS``, ``--print-config``
and ``docs/settings.md`` are all generated from it, so a setting cannot exist in
one place and be missing from another. Names, flags and defaults follow
Gunicorn's wherever Gunicorn has the setting, so that a gunicorn.conf.py works
unchanged with ``-c``. The order of declaration is the order of the docs.

Regenerate the docs with ``python -m supervise.config --markdown > docs/settings.md``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from supervise import (
    settings_asgi,
    settings_health,
    settings_logs,
    settings_mechanics,
    settings_ops,
    settings_quic,
    settings_rsgi,
    settings_static,
    settings_tls,
)
from supervise.hooks import HOOKS
from supervise.validators import (
    BIND_LIST,
    BOOL,
    CPU_AFFINITY,
    OPT_STR,
    SECONDS,
    STR_LIST,
    WORKER_CLASS,
    Check,
    ConfigError,
    choice_check,
    hook_check,
    int_check,
)


@dataclass(frozen=True)
class Setting:
    """One setting. ``default_factory(environ)`` replaces ``default`` when the default
    depends on the environment (PORT, WEB_CONCURRENCY, the current user, ...)."""

    name: str
    section: str
    validator: Check
    default: Any = None
    flags: tuple[str, ...] = ()
    metavar: str | None = None
    action: str = "store"  # store | append | store_true | store_false | toggle
    nargs: str | int | None = None
    help: str = ""
    arity: int | None = None  # hooks only
    env: str | None = None  # environment variable that supplies the default
    default_factory: Callable[[Mapping[str, str]], Any] | None = None
    default_doc: str | None = None
    # Handed to the native server as it is, under its name
    # (workers/native_settings.py; read by native/src/native_server/config.rs).
    native: bool = False

    @property
    def label(self) -> str:
        """How error messages name the setting: ``workers (-w, --workers)``."""
        return f"{self.name} ({', '.join(self.flags)})" if self.flags else self.name

    @property
    def short_help(self) -> str:
        """The first sentence, for ``--help``."""
        first = re.split(r"(?<=[.!?])\s", self.help, maxsplit=1)[0]
        return first

    def validate(self, value: Any) -> Any:
        try:
            return self.validator(value)
        except ConfigError:
            raise
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"invalid value for {self.label}: {exc}") from None

    def default_value(self, environ: Mapping[str, str]) -> Any:
        if self.default_factory is None:
            # Validated too, so that defaults have the same normal form as set values.
            return self.validate(copy.deepcopy(self.default))
        try:
            return self.validate(self.default_factory(environ))
        except ConfigError as exc:
            if self.env:
                raise ConfigError(f"{exc} (from the {self.env} environment variable)") from None
            raise


def _env_int(var: str, fallback: int) -> Callable[[Mapping[str, str]], Any]:
    return lambda environ: environ.get(var) or fallback


def _default_bind(environ: Mapping[str, str]) -> list[str]:
    port = environ.get("PORT")
    return [f"0.0.0.0:{port}"] if port else ["127.0.0.1:8000"]


def _adder(table: list[Setting], section: str) -> Callable[..., None]:
    """``add(**fields)`` for one section: the section is named once, above its settings."""

    def add(*, flags: Sequence[str] = (), **fields: Any) -> None:
        table.append(Setting(section=section, flags=tuple(flags), **fields))

    return add


def _build() -> dict[str, Setting]:
    table: list[Setting] = []

    add = _adder(table, "Config File")
    add(
        name="config",
        flags=["-c", "--config"],
        metavar="CONFIG",
        validator=OPT_STR,
        default_doc="`./supervise.conf.py` when that file exists, else `./gunicorn.conf.py`",
        help="The configuration file: a Python file (`PATH` or `file:PATH`) or an "
        "importable module (`python:MODULE_NAME`). Module-level names equal to setting "
        "names set those settings, so a gunicorn.conf.py works as it is. Other names are "
        'ignored with a warning (with "did you mean" for a misspelt setting, and the '
        "reason for a Gunicorn setting supervise does not have), except names starting "
        "with `_`, ALL-CAPS names, modules, classes and imported functions. When not "
        "given, `./supervise.conf.py` is read if it exists, else Gunicorn's "
        "`./gunicorn.conf.py` (the log says so). The command line, SUPERVISE_CMD_ARGS and "
        "GUNICORN_CMD_ARGS override what the file sets. The file is read again on SIGHUP.",
    )
    add(
        name="wsgi_app",
        validator=OPT_STR,
        metavar="MODULE:APP",
        help="The application, as `MODULE:ATTRIBUTE` (for example `myproject.wsgi:application`"
        " or `main:create_app()`), for use in a config file. The APP argument on the "
        "command line takes precedence over it. Despite the name it names ASGI and RSGI "
        "applications too.",
    )
    add(
        name="check_config",
        flags=["--check-config"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Check the configuration, import the application and exit. The status is 0 "
        "when both are fine, 1 (with the reason) when the application cannot be loaded, 2 for "
        "an invalid setting or a config-file name that looks like a misspelt setting. "
        "Warnings (names that set nothing, Gunicorn settings supervise does not have) are "
        "printed on stderr and leave the status at 0.",
    )
    add(
        name="print_config",
        flags=["--print-config"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Print every resolved setting and exit. The values combine the defaults, the "
        "config file, GUNICORN_CMD_ARGS, SUPERVISE_CMD_ARGS and the command line, one "
        "`name = value` per line, sorted (warnings go to stderr). "
        "Unlike Gunicorn, it does not import the application; add --check-config for that.",
    )

    add = _adder(table, "Server Socket")
    add(
        name="bind",
        flags=["-b", "--bind"],
        metavar="ADDRESS",
        action="append",
        validator=BIND_LIST,
        default_factory=_default_bind,
        env="PORT",
        default_doc="`['127.0.0.1:8000']`, or `['0.0.0.0:$PORT']` when the PORT "
        "environment variable is set",
        help="An address to listen on, as `HOST:PORT`, `[::1]:PORT` (IPv6), `unix:PATH` or "
        "`fd://N` (an inherited file descriptor); repeat the option to listen on several. "
        "A bare `HOST` means port 8000, and port 0 picks a free port (the log says which). "
        "Sockets handed over by systemd (LISTEN_FDS) are used instead when present.",
    )
    add(
        name="backlog",
        flags=["--backlog"],
        metavar="INT",
        validator=int_check(1),
        default=2048,
        help="The size of the kernel's queue of connections not yet accepted. Clients "
        "beyond it are refused or time out; it matters only under heavy load. The kernel "
        "caps it at net.core.somaxconn.",
    )
    add(
        name="reuse_port",
        flags=["--reuse-port"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Set SO_REUSEPORT on the listening sockets, so that other processes can bind "
        "the same address (the kernel then spreads connections between them).",
    )

    add = _adder(table, "Worker Processes")
    add(
        name="workers",
        flags=["-w", "--workers"],
        metavar="INT",
        validator=int_check(1),
        default_factory=_env_int("WEB_CONCURRENCY", 1),
        env="WEB_CONCURRENCY",
        default_doc="`1`, or the WEB_CONCURRENCY environment variable when set",
        help="The number of worker processes. For the sync worker, 2 to 4 per CPU core "
        "is the usual starting point; for the gthread, gevent, asgi and rsgi workers, "
        "one per core is often enough. Change it at run time with SIGTTIN and SIGTTOU.",
    )
    add(
        name="worker_class",
        flags=["-k", "--worker-class"],
        metavar="CLASS",
        validator=WORKER_CLASS,
        default="sync",
        help="The kind of worker: sync, gthread, gevent, asgi, rsgi, native, or a dotted "
        "path. `sync` serves WSGI one request at a time, `gthread` WSGI on a thread pool "
        "with keep-alive, `gevent` WSGI on greenlets, `asgi` ASGI on asyncio, `rsgi` RSGI "
        "on the native server, and `native` WSGI, ASGI or RSGI apps on the native server "
        "(`--interface`; HTTP/2 and TLS included); a dotted path names a subclass of "
        "`supervise.workers.base.Worker`. As in Gunicorn, `sync` with "
        "`threads` above 1 runs the gthread worker. Gunicorn's own names and class paths "
        "(`egg:gunicorn#gevent`, `gunicorn.workers.ggevent.GeventWorker`, `gevent_pywsgi`) "
        "and `uvicorn.workers.UvicornWorker` run the matching supervise worker, with a "
        "warning that says which `-k` to write; Gunicorn's eventlet and tornado workers "
        "have no counterpart and are refused with what to use instead.",
    )
    add(
        name="threads",
        flags=["--threads"],
        metavar="INT",
        validator=int_check(1),
        default=1,
        help="The number of threads per worker that run the application, for the gthread "
        "worker and WSGI apps on `-k native` (there each thread does its connections' "
        "I/O and calls the app itself; above 1 they share one work-stealing runtime, so "
        "an idle thread takes over the connections of one held up by the app). Setting "
        "it above 1 with the sync worker selects gthread.",
    )
    add(
        name="worker_cpu_affinity",
        flags=["--worker-cpu-affinity"],
        metavar="off|auto|LIST",
        validator=CPU_AFFINITY,
        default="off",
        help="Pin each worker process to one core: `auto` spreads workers over the cores "
        "the master may use (worker N on core N modulo their number, kept across TTIN/TTOU "
        "and HUP generations), a list such as `0,2-3` over those cores; `off` leaves "
        "scheduling to the kernel. Every worker class.",
    )
    add(
        name="worker_connections",
        native=True,
        flags=["--worker-connections"],
        metavar="INT",
        validator=int_check(1),
        default=1000,
        help="The most connections one worker holds open at once (sync: heads still "
        "on their way). New connections beyond it wait their turn, unread (in the "
        "backlog, or for asgi in the worker), and none is refused: "
        "--limit-concurrency is the setting that answers 503. asgi, rsgi and native "
        "also make room: a newcomer takes the seat of the connection nearest its "
        "deadline among those that have waited on their client for a second (idle "
        "keep-alive, a head or TLS handshake still on its way), so a slowloris cannot "
        "lock clients out (on the Rust server an HTTP/2 or WebSocket connection "
        "counts as in a request).",
    )
    add(
        name="max_requests",
        flags=["--max-requests"],
        metavar="INT",
        validator=int_check(0),
        default=0,
        help="Replace a worker after it has served this many requests, a simple bound on "
        "memory leaks; 0 disables it. The replacement is started before the old worker "
        "stops, so no request is refused.",
    )
    add(
        name="max_requests_jitter",
        flags=["--max-requests-jitter"],
        metavar="INT",
        validator=int_check(0),
        default=0,
        help="Add a random number between 0 and this to each worker's max_requests, so "
        "that workers started together are not all replaced at the same moment.",
    )
    settings_ops.declare_recycling(add)
    add(
        name="timeout",
        flags=["-t", "--timeout"],
        metavar="SECONDS",
        validator=SECONDS,
        default=30,
        help="Kill and replace a worker silent for this many seconds. A worker that has "
        "not reported a heartbeat for that long is considered stuck: the master sends it "
        "SIGABRT (it logs every thread's stack) and then SIGKILL, and starts a replacement. "
        "sync: this bounds how long one request may run. gthread: the worker counts as stuck "
        "only when every thread has been in its current request this long (Gunicorn never "
        "kills a gthread worker for slow requests). gevent: a greenlet that hogs the CPU this "
        "long stops the heartbeat. 0 disables it.",
    )
    add(
        name="graceful_timeout",
        flags=["--graceful-timeout"],
        metavar="SECONDS",
        validator=SECONDS,
        default=30,
        help="How long workers may take to finish the requests in flight after a graceful "
        "stop (SIGTERM, a reload or a recycle) before they are killed.",
    )
    add(
        name="keepalive",
        native=True,
        flags=["--keep-alive"],
        metavar="SECONDS",
        validator=SECONDS,
        default=2,
        help="How long to wait for the next request on an idle keep-alive connection. "
        "Behind a load balancer that reuses connections, set it higher than the load "
        "balancer's idle timeout. 0 disables keep-alive. The sync worker closes every "
        "connection after one response and ignores it.",
    )

    add = _adder(table, "Security")  # limits and slow-client timeouts
    add(
        name="limit_request_line",
        native=True,
        flags=["--limit-request-line"],
        metavar="INT",
        validator=int_check(0, 8190),
        default=4094,
        help="The longest request line (method, target and version) accepted, in bytes, "
        "from 0 (no limit) to 8190. Longer requests are answered 414.",
    )
    add(
        name="limit_request_fields",
        native=True,
        flags=["--limit-request-fields"],
        metavar="INT",
        validator=int_check(0, 32768),
        default=100,
        help="The most header fields a request may carry, at most 32768 (0: the maximum). "
        "Requests with more are answered 431.",
    )
    add(
        name="limit_request_field_size",
        native=True,
        flags=["--limit-request-field_size", "--limit-request-field-size"],
        metavar="INT",
        validator=int_check(0),
        default=8190,
        help="The largest single request header field (name and value), in bytes; 0 means "
        "no limit, which lets a client make the server buffer arbitrarily large heads. "
        "Larger fields are answered 431.",
    )
    add(
        name="limit_request_body",
        native=True,
        flags=["--limit-request-body"],
        metavar="BYTES",
        validator=int_check(0),
        default=0,
        help="The largest request body accepted, in bytes; 0 means no limit. A larger "
        "Content-Length is answered 413 before the application runs; a chunked body that "
        "grows past it is cut off with 413.",
    )
    add(
        name="header_timeout",
        native=True,
        flags=["--header-timeout"],
        metavar="SECONDS",
        validator=SECONDS,
        default=10,
        help="How long a client may take to send a complete request head, from the first "
        "byte to the blank line; past it the connection is closed. This keeps slow or "
        "idle clients from holding a worker. 0 disables it (not recommended for the sync "
        "worker).",
    )
    add(
        name="send_timeout",
        native=True,
        flags=["--send-timeout"],
        metavar="SECONDS",
        validator=SECONDS,
        default=30,
        help="How long a client may go without taking any response bytes while the server "
        "has some to send (nginx's send_timeout); past it the connection is closed, so a "
        "client that stops reading holds neither a worker nor the response buffered for "
        "it. It bounds inactivity, not the total download time: a slow client that keeps "
        "reading is served. Also WebSocket frames, and on HTTP/2 a connection whose "
        "streams all wait for the client to open its flow-control window. 0 disables it. "
        "The sync worker stamps no heartbeat while it writes: keep this below `timeout`, "
        "or the arbiter restarts the worker before the connection is closed.",
    )
    add(
        name="send_min_rate",
        native=True,
        flags=["--send-min-rate"],
        metavar="BYTES",
        validator=int_check(0),
        default=1024,
        help="The slowest a client may take a response, in bytes per second: over each "
        "`send_timeout` the server spends waiting for a client to make room, the client must "
        "take at least this many bytes a second, or the connection is closed (as "
        "`send_timeout`, logged once). It keeps clients that read a few bytes now and then "
        "from holding a connection, and what it buffers, for ever. Counted in what the "
        "socket accepts, which lags the client by at most its buffer, so give clients some "
        "margin. 0: no floor (only `send_timeout` applies).",
    )
    add(
        name="body_timeout",
        flags=["--body-timeout"],
        metavar="SECONDS",
        validator=SECONDS,
        default=30,
        help="How long a read of the request body may wait for the client to send more "
        "data; past it the read fails and the connection is closed. It bounds inactivity, "
        "not the total upload time. 0 disables it.",
    )

    add = _adder(table, "Debugging")
    add(
        name="reload",
        flags=["--reload"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Replace the workers when a Python file of the application (or a file in "
        "reload_extra_files) changes. Meant for development; it cannot work with "
        "preload_app, since the master's own imports cannot be refreshed. The working "
        "directory and the app's import path are watched, except virtualenvs (any "
        "directory holding a pyvenv.cfg), hidden directories (`.venv`, `.git`, `.tox`), "
        "`venv`, `node_modules`, `__pycache__`, `site-packages`, `build`, `dist`, `target` "
        "and `*.egg-info`.",
    )
    add(
        name="reload_engine",
        flags=["--reload-engine"],
        metavar="ENGINE",
        validator=choice_check("auto", "poll", "inotify"),
        default="auto",
        help="How --reload notices changes: auto or poll. Both use watchfiles: `auto` "
        "(and its Gunicorn alias `inotify`) uses the operating system's file "
        "notifications, `poll` checks the files periodically, which works on network and "
        "container file systems "
        "where notifications are missing.",
    )
    add(
        name="reload_extra_files",
        flags=["--reload-extra-file"],
        metavar="FILE",
        action="append",
        validator=STR_LIST,
        default=[],
        help="Another file or directory to watch with --reload (templates, settings "
        "files); repeat the option for several.",
    )

    settings_mechanics.declare(_adder(table, "Server Mechanics"))
    settings_logs.declare(_adder(table, "Logging"))

    add = _adder(table, "Process Naming")
    add(
        name="proc_name",
        flags=["-n", "--name"],
        metavar="NAME",
        validator=OPT_STR,
        default_doc="the application (`MODULE:APP`)",
        help="The name shown in process titles (`ps`, `top`): `supervise: master [NAME]` "
        "and `supervise: worker [NAME] gen N`. Useful to tell several servers apart.",
    )

    settings_tls.declare(_adder(table, "SSL"))
    settings_asgi.declare(_adder(table, "Event-Loop Workers (asgi, rsgi, native)"))
    settings_rsgi.declare(_adder(table, "Native Server (rsgi, native)"))
    settings_ops.declare_metrics(_adder(table, "Metrics"))
    settings_ops.declare_control(_adder(table, "Control"))
    settings_health.declare(_adder(table, "Health and Drain"))
    settings_static.declare(_adder(table, "Static Files"))
    settings_quic.declare(_adder(table, "HTTP/3"))

    add = _adder(table, "Server Hooks")
    for hook in HOOKS.values():
        add(
            name=hook.name,
            validator=hook_check(hook.arity, hook.params, accept_fewer=hook.accept_fewer),
            default=hook.default,
            arity=hook.arity,
            default_doc=hook.default_doc,
            help=f"`def {hook.name}({hook.params})`: {hook.help}",
        )

    return {s.name: s for s in table}


SETTINGS: dict[str, Setting] = _build()

# The sections in the order of the table, as --help and the docs list them.
SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(s.section for s in SETTINGS.values()))

# Settings a config file may not set: the file has already been chosen by then.
NOT_FROM_FILE = frozenset({"config"})
