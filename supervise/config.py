"""Every setting, declared once.

The ``SETTINGS`` table is the single source of truth: the command-line parser
(``cli.py``), the config-file names, ``SUPERVISE_CMD_ARGS``, ``--print-config``
and ``docs/settings.md`` are all generated from it, so a setting cannot exist in
one place and be missing from another. Names, flags and defaults follow
Gunicorn's wherever Gunicorn has the setting, so that a gunicorn.conf.py works
unchanged with ``-c``.

Regenerate the docs with ``python -m supervise.config --markdown > docs/settings.md``.
"""

from __future__ import annotations

import copy
import grp
import importlib
import inspect
import ipaddress
import math
import os
import pwd
import re
import ssl
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SECTIONS", "SETTINGS", "Config", "ConfigError", "Setting", "settings_markdown"]


class ConfigError(Exception):
    """A bad setting; the message is one line naming the setting and what is allowed."""


class Invalid(ValueError):
    """Raised by validators with the reason only; ``Setting.validate`` adds the setting name."""


# --------------------------------------------------------------------------- validators
#
# A validator takes a value from any source (a string from the command line or
# SUPERVISE_CMD_ARGS, any Python object from a config file) and returns the
# normalised value, or raises Invalid with a short reason.


@dataclass(frozen=True)
class Check:
    """A validator plus the type name the docs show for it."""

    kind: str
    fn: Callable[[Any], Any]

    def __call__(self, value: Any) -> Any:
        return self.fn(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_int(value: Any) -> int:
    if _is_int(value):
        return value
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
    raise Invalid(f"{value!r} is not an integer")


def int_check(lo: int = 0, hi: int | None = None) -> Check:
    def check(value: Any) -> int:
        n = _parse_int(value)
        if hi is not None and not lo <= n <= hi:
            raise Invalid(f"must be between {lo} and {hi}, got {n}")
        if n < lo:
            raise Invalid(f"must be at least {lo}, got {n}")
        return n

    return Check("int", check)


def _number(value: Any) -> int | float:
    """Seconds: an int stays an int (Gunicorn configs use ints), floats are allowed too."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)
        except ValueError:
            raise Invalid(f"{value!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(f"{value!r} is not a number")
    if not math.isfinite(value) or value < 0:
        raise Invalid(f"must be a number of seconds >= 0, got {value!r}")
    return value


SECONDS = Check("number", _number)

_TRUE = {"true", "yes", "on", "1", "y"}
_FALSE = {"false", "no", "off", "0", "n"}


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if _is_int(value) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise Invalid(f"{value!r} is not a boolean (use true or false)")


BOOL = Check("bool", _bool)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{value!r} is not a string")
    return value.strip()


def _opt_str(value: Any) -> str | None:
    if value is None:
        return None
    return _str(value) or None


STR = Check("str", _str)
OPT_STR = Check("str or None", _opt_str)


def _str_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]  # Gunicorn's "legacy" form: bind = "0.0.0.0:80"
    if not isinstance(value, (list, tuple)):
        raise Invalid(f"{value!r} is not a list of strings")
    return [s for s in (_str(v) for v in value) if s]


STR_LIST = Check("list of str", _str_list)


def _bind_list(value: Any) -> list[str]:
    binds = _str_list(value)
    if not binds:
        raise Invalid("give at least one address (HOST:PORT, unix:PATH or fd://FD)")
    return binds


def choice_check(*choices: str) -> Check:
    def check(value: Any) -> str:
        text = _str(value).lower()
        if text not in choices:
            raise Invalid(f"{value!r} is not one of {', '.join(choices)}")
        return text

    return Check(" | ".join(choices), check)


def _dict(value: Any) -> dict:
    if not isinstance(value, dict):
        raise Invalid(f"{value!r} is not a dict")
    return dict(value)


def _str_dict(value: Any) -> dict[str, str]:
    d = _dict(value)
    for k, v in d.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise Invalid(f"keys and values must be strings, got {k!r}: {v!r}")
    return d


def _addr_list(value: Any) -> list[str]:
    """Comma-separated IPs or networks (``*`` trusts everybody), as in Gunicorn."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise Invalid(f"{value!r} is not a comma-separated list of addresses")
    out = []
    for item in items:
        item = _str(item)
        if not item:
            continue
        if item != "*":
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise Invalid(f"{item!r} is not an IP address, a network or '*'") from None
        out.append(item)
    return out


_SHORT_WORKERS = ("sync", "gthread", "gevent", "asgi", "rsgi")
# Worker classes commonly named in gunicorn.conf.py files, and ours that do the same job.
_GUNICORN_WORKERS = {
    "gunicorn.workers.sync.SyncWorker": "sync",
    "gunicorn.workers.gthread.ThreadWorker": "gthread",
    "gunicorn.workers.ggevent.GeventWorker": "gevent",
    "uvicorn.workers.UvicornWorker": "asgi",
    "uvicorn.workers.UvicornH11Worker": "asgi",
    "uvicorn_worker.UvicornWorker": "asgi",
    "uvicorn_worker.UvicornH11Worker": "asgi",
}
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*[.:][A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _worker_class(value: Any) -> str:
    # Gunicorn also accepts the class object itself; keep a dotted path so that
    # supervise.workers.load_worker_class can resolve it after a HUP as well.
    if isinstance(value, type):
        if value.__module__ in ("__config__", "__main__"):
            raise Invalid(
                f"class {value.__qualname__} is defined in the config file: "
                "put it in an importable module and give its dotted path"
            )
        return f"{value.__module__}:{value.__qualname__}"
    name = _str(value)
    name = _GUNICORN_WORKERS.get(name, name)
    if name in _SHORT_WORKERS or _DOTTED.fullmatch(name):
        return name
    raise ConfigError(
        f"unknown worker class {name!r}: use {', '.join(_SHORT_WORKERS[:-1])} "
        f"or {_SHORT_WORKERS[-1]}, or a dotted path to a Worker subclass"
    )


def _user(value: Any) -> int:
    if value is None:
        return os.geteuid()
    if _is_int(value):
        return value
    name = _str(value)
    if name.isdigit():
        return int(name)
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        raise Invalid(f"no such user {name!r}") from None


def _group(value: Any) -> int:
    if value is None:
        return os.getegid()
    if _is_int(value):
        return value
    name = _str(value)
    if name.isdigit():
        return int(name)
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise Invalid(f"no such group {name!r}") from None


def _umask(value: Any) -> int:
    """Octal as people write it: 0o22, 022 and 0x12 all work; plain digits are decimal."""
    if _is_int(value):
        mask = value
    elif isinstance(value, str):
        text = value.strip().lower()
        try:
            # int(x, 0) refuses "022", which is how umasks are usually written.
            mask = int(text, 8) if re.fullmatch(r"0\d+", text) else int(text, 0)
        except ValueError:
            raise Invalid(f"{value!r} is not a umask (e.g. 0o22 or 022)") from None
    else:
        raise Invalid(f"{value!r} is not a umask (e.g. 0o22 or 022)")
    if not 0 <= mask <= 0o777:
        raise Invalid(f"must be between 0 and 0o777, got {oct(mask)}")
    return mask


def _raw_env(value: Any) -> list[str]:
    items = _str_list(value)
    for item in items:
        key, sep, _ = item.partition("=")
        if not sep or not key:
            raise Invalid(f"{item!r} is not in KEY=VALUE form")
    return items


def _chdir(value: Any) -> str:
    path = os.path.abspath(os.path.expanduser(_str(value)))
    if not os.path.isdir(path):
        raise Invalid(f"{value!r} is not a directory")
    return path


def _existing_file(value: Any) -> str | None:
    path = _opt_str(value)
    if path is not None and not os.path.isfile(path):
        raise Invalid(f"no such file {path!r}")
    return path


_CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _cert_reqs(value: Any) -> int:
    if isinstance(value, str):
        text = value.strip().lower().removeprefix("cert_")
        if text in _CERT_REQS:
            return int(_CERT_REQS[text])
    try:
        n = _parse_int(value)
    except Invalid:
        n = -1
    if n not in (0, 1, 2):
        raise Invalid(f"{value!r} is not 0 (none), 1 (optional) or 2 (required)")
    return n


def _root_path(value: Any) -> str:
    path = _opt_str(value) or ""
    if path and not path.startswith("/"):
        raise Invalid(f"{value!r} must start with '/'")
    return path.rstrip("/")


def _sendfile(value: Any) -> bool:
    # Gunicorn configs may say sendfile = None, meaning "the default" (enabled).
    return True if value is None else _bool(value)


def _positional_arity_ok(fn: Callable, arity: int) -> bool | None:
    """Can fn be called with exactly ``arity`` positional arguments? None: cannot tell."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*range(arity))
    except TypeError:
        return False
    return True


def _import_callable(path: str) -> Callable:
    module_name, sep, attr = path.rpartition(":") if ":" in path else path.rpartition(".")
    if not sep or not module_name:
        raise Invalid(f"{path!r} is not a dotted path like 'package.module.function'")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except ImportError as exc:
        raise Invalid(f"cannot import {path!r}: {exc}") from None
    except AttributeError:
        raise Invalid(f"{module_name!r} has no attribute {attr!r}") from None
    return obj


def hook_check(arity: int, params: str, accept_fewer: bool = False) -> Check:
    """A server hook: a callable (or its dotted path) taking ``arity`` positional args.

    ``accept_fewer`` exists for post_request, which Gunicorn also accepts with
    2 or 3 parameters; such a hook is wrapped so callers always pass 4.
    """

    def check(value: Any) -> Callable:
        fn = _import_callable(value) if isinstance(value, str) else value
        if not callable(fn):
            raise Invalid(f"{value!r} is not callable")
        ok = _positional_arity_ok(fn, arity)
        if ok is not False:
            return fn
        if accept_fewer:
            for n in range(arity - 1, 1, -1):
                if _positional_arity_ok(fn, n):
                    return _truncate_args(fn, n)
        raise Invalid(f"the hook must accept {arity} positional argument(s): {params}")

    return Check(f"callable({params})", check)


def _truncate_args(fn: Callable, n: int) -> Callable:
    def hook(*args: Any) -> Any:
        return fn(*args[:n])

    hook.__wrapped__ = fn  # type: ignore[attr-defined]
    hook.__qualname__ = getattr(fn, "__qualname__", "hook")
    hook.__module__ = getattr(fn, "__module__", __name__)
    return hook


# --------------------------------------------------------------------------- default hooks


def on_starting(server: Any) -> None:
    pass


def on_reload(server: Any) -> None:
    pass


def when_ready(server: Any) -> None:
    pass


def pre_fork(server: Any, worker: Any) -> None:
    pass


def post_fork(server: Any, worker: Any) -> None:
    pass


def post_worker_init(worker: Any) -> None:
    pass


def worker_int(worker: Any) -> None:
    pass


def worker_abort(worker: Any) -> None:
    pass


def pre_exec(server: Any) -> None:
    pass


def pre_request(worker: Any, req: Any) -> None:
    worker.log.debug("%s %s", req.method, req.path)


def post_request(worker: Any, req: Any, environ: dict, resp: Any) -> None:
    pass


def child_exit(server: Any, worker: Any) -> None:
    pass


def worker_exit(server: Any, worker: Any) -> None:
    pass


def nworkers_changed(server: Any, new_value: int, old_value: int | None) -> None:
    pass


def on_exit(server: Any) -> None:
    pass


def ssl_context(config: Any, default_ssl_context_factory: Callable[[], ssl.SSLContext]) -> Any:
    return default_ssl_context_factory()


# --------------------------------------------------------------------------- the table


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


SECTIONS = (
    "Config File",
    "Server Socket",
    "Worker Processes",
    "Security",
    "Debugging",
    "Server Mechanics",
    "Logging",
    "Process Naming",
    "SSL",
    "Server Hooks",
)

_HOOK_SIGNATURES = {
    "on_starting": (on_starting, "server"),
    "on_reload": (on_reload, "server"),
    "when_ready": (when_ready, "server"),
    "pre_fork": (pre_fork, "server, worker"),
    "post_fork": (post_fork, "server, worker"),
    "post_worker_init": (post_worker_init, "worker"),
    "worker_int": (worker_int, "worker"),
    "worker_abort": (worker_abort, "worker"),
    "pre_exec": (pre_exec, "server"),
    "pre_request": (pre_request, "worker, req"),
    "post_request": (post_request, "worker, req, environ, resp"),
    "child_exit": (child_exit, "server, worker"),
    "worker_exit": (worker_exit, "server, worker"),
    "nworkers_changed": (nworkers_changed, "server, new_value, old_value"),
    "on_exit": (on_exit, "server"),
    "ssl_context": (ssl_context, "config, default_ssl_context_factory"),
}

_HOOK_HELP = {
    "on_starting": "Called in the master just before it initialises (before the "
    "sockets are bound and any worker is forked).",
    "on_reload": "Called in the master when a SIGHUP reload starts, after the new "
    "configuration has been loaded and before the new generation of workers is forked.",
    "when_ready": "Called in the master once the server is started: sockets bound, "
    "first workers forked.",
    "pre_fork": "Called in the master just before a worker is forked; `worker` is the "
    "new Worker object, not yet running.",
    "post_fork": "Called in the worker process just after the fork, before the "
    "application is loaded.",
    "post_worker_init": "Called in the worker once it has loaded the application, just "
    "before it starts serving.",
    "worker_int": "Called in the worker when it exits on SIGINT or SIGQUIT (fast stop).",
    "worker_abort": "Called in the worker when it receives SIGABRT, which the master "
    "sends to a worker that missed its heartbeat for `timeout` seconds; the worker has "
    "already logged the stack of every thread.",
    "pre_exec": "Called in the forked child of the master just before it executes a "
    "fresh supervise (the SIGUSR2 upgrade).",
    "pre_request": "Called in the worker before each request is handed to the "
    "application. The default logs `METHOD PATH` at debug level.",
    "post_request": "Called in the worker after each request. For compatibility, a "
    "callable that takes only (worker, req) or (worker, req, environ) is accepted.",
    "child_exit": "Called in the master just after a worker process has exited.",
    "worker_exit": "Called in the worker process just before it exits.",
    "nworkers_changed": "Called in the master after the number of workers changed "
    "(TTIN, TTOU, reload). `old_value` is None the first time.",
    "on_exit": "Called in the master just before supervise exits.",
    "ssl_context": "Called in the worker to build the `ssl.SSLContext`. "
    "`default_ssl_context_factory()` returns the context built from keyfile, certfile, "
    "ca_certs, cert_reqs and ciphers; return it, changed as you need (for example a "
    "minimum TLS version), or a context of your own.",
}


def _env_int(var: str, fallback: int) -> Callable[[Mapping[str, str]], Any]:
    return lambda environ: environ.get(var) or fallback


def _default_bind(environ: Mapping[str, str]) -> list[str]:
    port = environ.get("PORT")
    return [f"0.0.0.0:{port}"] if port else ["127.0.0.1:8000"]


def _default_sendfile(environ: Mapping[str, str]) -> bool:
    value = environ.get("SENDFILE")
    return True if value is None else value.strip().lower() in ("y", "1", "yes", "true")


DEFAULT_ACCESS_LOG_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'


def _build() -> dict[str, Setting]:
    table: list[Setting] = []

    def add(**kw: Any) -> None:
        if "flags" in kw:
            kw["flags"] = tuple(kw["flags"])
        table.append(Setting(**kw))

    # -- Config File
    sec = "Config File"
    add(
        name="config",
        section=sec,
        flags=["-c", "--config"],
        metavar="CONFIG",
        validator=OPT_STR,
        default_doc="`./supervise.conf.py` when that file exists",
        help="The configuration file: a Python file (`PATH` or `file:PATH`) or an "
        "importable module (`python:MODULE_NAME`). Module-level names equal to setting "
        "names set those settings; other names are ignored, so a gunicorn.conf.py works "
        "as it is. When not given, `./supervise.conf.py` is read if it exists. The "
        "command line and SUPERVISE_CMD_ARGS override what the file sets. The file is "
        "read again on SIGHUP.",
    )
    add(
        name="wsgi_app",
        section=sec,
        validator=OPT_STR,
        metavar="MODULE:APP",
        help="The application, as `MODULE:ATTRIBUTE` (for example `myproject.wsgi:application`"
        " or `main:create_app()`), for use in a config file. The APP argument on the "
        "command line takes precedence over it. Despite the name it names ASGI and RSGI "
        "applications too.",
    )
    add(
        name="check_config",
        section=sec,
        flags=["--check-config"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Check the configuration, import the application and exit. The status is 0 "
        "when both are fine, 1 (with the reason) when the application cannot be loaded, 2 for "
        "an invalid setting.",
    )
    add(
        name="print_config",
        section=sec,
        flags=["--print-config"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Print every resolved setting and exit. The values combine the defaults, the "
        "config file, SUPERVISE_CMD_ARGS and the command line, one `name = value` per "
        "line, sorted. "
        "Unlike Gunicorn, it does not import the application; add --check-config for that.",
    )

    # -- Server Socket
    sec = "Server Socket"
    add(
        name="bind",
        section=sec,
        flags=["-b", "--bind"],
        metavar="ADDRESS",
        action="append",
        validator=Check("list of str", _bind_list),
        default_factory=_default_bind,
        env="PORT",
        default_doc="`['127.0.0.1:8000']`, or `['0.0.0.0:$PORT']` when the PORT "
        "environment variable is set",
        help="An address to listen on; repeat the option to listen on several. Forms: "
        "`HOST`, `HOST:PORT`, `[IPV6]:PORT`, `unix:PATH` and `fd://FD` (an inherited file "
        "descriptor). Sockets handed over by systemd (LISTEN_FDS) are used instead when "
        "present.",
    )
    add(
        name="backlog",
        section=sec,
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
        section=sec,
        flags=["--reuse-port"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Set SO_REUSEPORT on the listening sockets, so that other processes can bind "
        "the same address (the kernel then spreads connections between them).",
    )

    # -- Worker Processes
    sec = "Worker Processes"
    add(
        name="workers",
        section=sec,
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
        section=sec,
        flags=["-k", "--worker-class"],
        metavar="CLASS",
        validator=Check("str", _worker_class),
        default="sync",
        help="The kind of worker: sync, gthread, gevent, asgi, rsgi, or a dotted path. "
        "`sync` serves WSGI one request at a time, `gthread` WSGI on a thread pool with "
        "keep-alive, `gevent` WSGI on greenlets, `asgi` ASGI on asyncio and `rsgi` RSGI "
        "on the native server; a dotted path names a subclass of "
        "`supervise.workers.base.Worker`. As in Gunicorn, `sync` with "
        "`threads` above 1 runs the gthread worker. Gunicorn's own class paths and "
        "`uvicorn.workers.UvicornWorker` are read as the matching supervise worker.",
    )
    add(
        name="threads",
        section=sec,
        flags=["--threads"],
        metavar="INT",
        validator=int_check(1),
        default=1,
        help="The number of threads per worker that run the application, for the gthread "
        "worker (and the WSGI side of the rsgi worker). Setting it above 1 with the sync "
        "worker selects gthread.",
    )
    add(
        name="worker_connections",
        section=sec,
        flags=["--worker-connections"],
        metavar="INT",
        validator=int_check(1),
        default=1000,
        help="The most connections one worker holds open at once, for the gthread, "
        "gevent, asgi and rsgi workers. Connections beyond it wait in the backlog.",
    )
    add(
        name="max_requests",
        section=sec,
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
        section=sec,
        flags=["--max-requests-jitter"],
        metavar="INT",
        validator=int_check(0),
        default=0,
        help="Add a random number between 0 and this to each worker's max_requests, so "
        "that workers started together are not all replaced at the same moment.",
    )
    add(
        name="timeout",
        section=sec,
        flags=["-t", "--timeout"],
        metavar="SECONDS",
        validator=SECONDS,
        default=30,
        help="Kill and replace a worker silent for this many seconds. A worker that has "
        "not reported a heartbeat for that long is considered stuck: the master sends it "
        "SIGABRT (it logs every thread's stack) and then SIGKILL, and starts a replacement. For "
        "the sync worker this bounds how long "
        "one request may run; the other workers report while requests run. 0 disables it.",
    )
    add(
        name="graceful_timeout",
        section=sec,
        flags=["--graceful-timeout"],
        metavar="SECONDS",
        validator=SECONDS,
        default=30,
        help="How long workers may take to finish the requests in flight after a graceful "
        "stop (SIGTERM, a reload or a recycle) before they are killed.",
    )
    add(
        name="keepalive",
        section=sec,
        flags=["--keep-alive"],
        metavar="SECONDS",
        validator=SECONDS,
        default=2,
        help="How long to wait for the next request on an idle keep-alive connection. "
        "Behind a load balancer that reuses connections, set it higher than the load "
        "balancer's idle timeout. 0 disables keep-alive. The sync worker closes every "
        "connection after one response and ignores it.",
    )

    # -- Security (limits and slow-client timeouts)
    sec = "Security"
    add(
        name="limit_request_line",
        section=sec,
        flags=["--limit-request-line"],
        metavar="INT",
        validator=int_check(0, 8190),
        default=4094,
        help="The longest request line (method, target and version) accepted, in bytes, "
        "from 0 (no limit) to 8190. Longer requests are answered 414.",
    )
    add(
        name="limit_request_fields",
        section=sec,
        flags=["--limit-request-fields"],
        metavar="INT",
        validator=int_check(0, 32768),
        default=100,
        help="The most header fields a request may carry, at most 32768 (0: the maximum). "
        "Requests with more are answered 431.",
    )
    add(
        name="limit_request_field_size",
        section=sec,
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
        section=sec,
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
        section=sec,
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
        name="body_timeout",
        section=sec,
        flags=["--body-timeout"],
        metavar="SECONDS",
        validator=SECONDS,
        default=30,
        help="How long a read of the request body may wait for the client to send more "
        "data; past it the read fails and the connection is closed. It bounds inactivity, "
        "not the total upload time. 0 disables it.",
    )

    # -- Debugging
    sec = "Debugging"
    add(
        name="reload",
        section=sec,
        flags=["--reload"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Replace the workers when a Python file of the application (or a file in "
        "reload_extra_files) changes. Meant for development; it cannot work with "
        "preload_app, since the master's own imports cannot be refreshed.",
    )
    add(
        name="reload_engine",
        section=sec,
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
        section=sec,
        flags=["--reload-extra-file"],
        metavar="FILE",
        action="append",
        validator=STR_LIST,
        default=[],
        help="Another file or directory to watch with --reload (templates, settings "
        "files); repeat the option for several.",
    )

    # -- Server Mechanics
    sec = "Server Mechanics"
    add(
        name="preload_app",
        section=sec,
        flags=["--preload"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Import the application in the master before forking the workers: workers "
        "start faster and share memory copy-on-write. The master's imports cannot be "
        "reloaded, so SIGHUP then reloads the configuration only; deploy new code with "
        "SIGUSR2.",
    )
    add(
        name="sendfile",
        section=sec,
        flags=["--no-sendfile"],
        action="store_false",
        validator=Check("bool", _sendfile),
        default_factory=_default_sendfile,
        env="SENDFILE",
        default_doc="`True`, or the SENDFILE environment variable (`1`, `yes`, `true` "
        "enable it) when set",
        help="Send files with sendfile(); --no-sendfile turns it off. This applies to files "
        "the application returns through `wsgi.file_wrapper`; turn it off on file systems "
        "where sendfile is broken.",
    )
    add(
        name="chdir",
        section=sec,
        flags=["--chdir"],
        metavar="DIR",
        validator=Check("str", _chdir),
        default_factory=lambda environ: os.getcwd(),
        default_doc="the current directory",
        help="Change to this directory before loading the application; it is also put "
        "first on sys.path so that the application's modules import.",
    )
    add(
        name="daemon",
        section=sec,
        flags=["-D", "--daemon"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Detach from the terminal and run in the background. Under systemd, "
        "supervisord or a container, leave it off.",
    )
    add(
        name="raw_env",
        section=sec,
        flags=["-e", "--env"],
        metavar="KEY=VALUE",
        action="append",
        validator=Check("list of str", _raw_env),
        default=[],
        help="Set an environment variable for the application, as `KEY=VALUE`; repeat the "
        'option for several. In a config file: `raw_env = ["KEY=VALUE"]`.',
    )
    add(
        name="pidfile",
        section=sec,
        flags=["-p", "--pid"],
        metavar="FILE",
        validator=OPT_STR,
        help="Write the master's process id to this file. During a SIGUSR2 upgrade the old "
        "master's file is renamed to `FILE.oldbin`.",
    )
    add(
        name="worker_tmp_dir",
        section=sec,
        flags=["--worker-tmp-dir"],
        metavar="DIR",
        validator=OPT_STR,
        help="Ignored; accepted for compatibility with Gunicorn. Gunicorn keeps worker "
        "heartbeats in temporary files, supervise keeps them in shared memory, so no "
        "directory is needed.",
    )
    add(
        name="user",
        section=sec,
        flags=["-u", "--user"],
        metavar="USER",
        validator=Check("int", _user),
        default_factory=lambda environ: os.geteuid(),
        default_doc="the current user",
        help="Run the workers as this user, given by name or numeric id (the master must "
        "start as root to switch).",
    )
    add(
        name="group",
        section=sec,
        flags=["-g", "--group"],
        metavar="GROUP",
        validator=Check("int", _group),
        default_factory=lambda environ: os.getegid(),
        default_doc="the current group",
        help="Run the workers as this group, given by name or numeric id.",
    )
    add(
        name="umask",
        section=sec,
        flags=["-m", "--umask"],
        metavar="INT",
        validator=Check("int", _umask),
        default=0,
        help="The file mode creation mask for the server's processes, which also sets the "
        "permissions of unix sockets. Octal is written `0o22` or `022`; a number "
        "without a leading 0 is decimal.",
    )
    add(
        name="initgroups",
        section=sec,
        flags=["--initgroups"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="When switching to `user`, also give the workers all of that user's "
        "supplementary groups.",
    )
    add(
        name="forwarded_allow_ips",
        section=sec,
        flags=["--forwarded-allow-ips"],
        metavar="ADDRESSES",
        validator=Check("list of str", _addr_list),
        default_factory=lambda environ: environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1"),
        env="FORWARDED_ALLOW_IPS",
        default_doc="`'127.0.0.1,::1'`, or the FORWARDED_ALLOW_IPS environment variable when set",
        help="The proxies trusted with X-Forwarded-* and Forwarded headers. A "
        "comma-separated list of addresses or networks: only from those peers do the "
        "headers set the client address and the scheme; from anyone else they are "
        "ignored. `*` trusts every peer: use it only when nothing "
        "but your proxy can reach the server.",
    )
    add(
        name="secure_scheme_headers",
        section=sec,
        validator=Check("dict", _str_dict),
        default={
            "X-FORWARDED-PROTOCOL": "ssl",
            "X-FORWARDED-PROTO": "https",
            "X-FORWARDED-SSL": "on",
        },
        help="Headers by which a trusted proxy says the client used HTTPS. When a peer in "
        "forwarded_allow_ips sends one of these headers with exactly the given value, the "
        "application sees the `https` scheme. Header names are case-insensitive, values "
        "are compared exactly. Make sure the proxy removes these headers when a client sends them.",
    )
    add(
        name="proxy_allow_ips",
        section=sec,
        flags=["--proxy-allow-from"],
        metavar="ADDRESSES",
        validator=Check("list of str", _addr_list),
        default="127.0.0.1,::1",
        default_doc="`'127.0.0.1,::1'`",
        help="Comma-separated addresses or networks allowed to send a PROXY protocol "
        "header (`*` for any).",
    )
    add(
        name="pythonpath",
        section=sec,
        flags=["--pythonpath"],
        metavar="DIRS",
        validator=OPT_STR,
        help="Comma-separated directories to put on sys.path before loading the "
        "application, for example `/srv/app,/srv/lib`.",
    )
    add(
        name="root_path",
        section=sec,
        flags=["--root-path"],
        metavar="PATH",
        validator=Check("str", _root_path),
        default_factory=lambda environ: environ.get("SCRIPT_NAME", ""),
        env="SCRIPT_NAME",
        default_doc="`''`, or the SCRIPT_NAME environment variable when set",
        help="The URL prefix the application is mounted under, such as `/api`. "
        "It becomes SCRIPT_NAME (ASGI `root_path`) and is removed from the start "
        "of PATH_INFO.",
    )
    add(
        name="server_header",
        section=sec,
        flags=["--server-header"],
        action="toggle",
        validator=BOOL,
        default=True,
        help="Send `Server: supervise` on responses that do not set a Server header. "
        "--no-server-header leaves it out, so that the software is not advertised.",
    )
    add(
        name="enable_stdio_inheritance",
        section=sec,
        flags=["-R", "--enable-stdio-inheritance"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="With --daemon, keep stdout and stderr open instead of redirecting them to "
        "/dev/null. Set PYTHONUNBUFFERED=1 to see output immediately.",
    )

    # -- Logging
    sec = "Logging"
    add(
        name="accesslog",
        section=sec,
        flags=["--access-logfile"],
        metavar="FILE",
        validator=OPT_STR,
        help="Write one line per request to this file, `-` meaning stdout; no access log "
        "is written when it is not set.",
    )
    add(
        name="access_log_format",
        section=sec,
        flags=["--access-logformat"],
        metavar="FORMAT",
        validator=STR,
        default=DEFAULT_ACCESS_LOG_FORMAT,
        help="The format of access log lines. It uses Gunicorn's atoms, written "
        "`%(NAME)s`: `h` remote address, `l` `-`, `u` user name (basic auth), `t` time, "
        "`r` request line, `m` method, `U` path, `q` query string, `H` protocol, `s` status, "
        "`B` body bytes "
        "sent, `b` the same or `-`, `f` referer, `a` user agent, `T` request time in "
        "seconds, `M` in milliseconds, `D` in microseconds, `L` in decimal seconds, `p` "
        "process id, `{header}i` a request header, `{header}o` a response header and "
        "`{name}e` an environment variable (else a WSGI environ key). Unknown atoms print "
        "`-`; quotes and control characters in values are escaped.",
    )
    add(
        name="errorlog",
        section=sec,
        flags=["--error-logfile", "--log-file"],
        metavar="FILE",
        validator=STR,
        default="-",
        help="Where the server's own messages go: a file, or `-` for stderr.",
    )
    add(
        name="loglevel",
        section=sec,
        flags=["--log-level"],
        metavar="LEVEL",
        validator=choice_check("debug", "info", "warning", "error", "critical"),
        default="info",
        help="The least severe error-log messages written: `debug`, `info`, `warning`, "
        "`error` or `critical`.",
    )
    add(
        name="capture_output",
        section=sec,
        flags=["--capture-output"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Send what the application prints to stdout and stderr to the error log file "
        "(only when errorlog is a file).",
    )
    add(
        name="logconfig_dict",
        section=sec,
        validator=Check("dict", _dict),
        default={},
        help="A `logging.config.dictConfig` dictionary applied after supervise has set up "
        "its loggers, `supervise.error` and `supervise.access`. `version: 1` and "
        "`disable_existing_loggers: False` are filled in when missing. A Gunicorn "
        "dictionary that configures `gunicorn.error` / `gunicorn.access` (and not the "
        "supervise names) is honoured: supervise then logs through those loggers. When "
        "set, access lines are emitted even without accesslog, for your handlers to "
        "route.",
    )

    # -- Process Naming
    add(
        name="proc_name",
        section="Process Naming",
        flags=["-n", "--name"],
        metavar="NAME",
        validator=OPT_STR,
        default_doc="the application (`MODULE:APP`)",
        help="The name shown in process titles (`ps`, `top`): `supervise: master [NAME]` "
        "and `supervise: worker [NAME] gen N`. Useful to tell several servers apart.",
    )

    # -- SSL
    sec = "SSL"
    add(
        name="keyfile",
        section=sec,
        flags=["--keyfile"],
        metavar="FILE",
        validator=Check("str or None", _existing_file),
        help="The TLS private key (PEM). Setting keyfile or certfile serves HTTPS.",
    )
    add(
        name="certfile",
        section=sec,
        flags=["--certfile"],
        metavar="FILE",
        validator=Check("str or None", _existing_file),
        help="The TLS certificate chain (PEM), the server's certificate first. Setting "
        "keyfile or certfile serves HTTPS.",
    )
    add(
        name="ca_certs",
        section=sec,
        flags=["--ca-certs"],
        metavar="FILE",
        validator=Check("str or None", _existing_file),
        help="CA certificates (PEM) used to verify client certificates; see cert_reqs.",
    )
    add(
        name="cert_reqs",
        section=sec,
        flags=["--cert-reqs"],
        metavar="INT",
        validator=Check("int", _cert_reqs),
        default=int(ssl.CERT_NONE),
        help="Whether clients must present a certificate: 0 or `none` (default), 1 or "
        "`optional`, 2 or `required`, as the `ssl.CERT_*` constants.",
    )
    add(
        name="ciphers",
        section=sec,
        flags=["--ciphers"],
        metavar="CIPHERS",
        validator=OPT_STR,
        help="The TLS 1.2 cipher suites, as an OpenSSL cipher list. When not set, Python's "
        "default list is used, which is a sound choice.",
    )
    add(
        name="do_handshake_on_connect",
        section=sec,
        flags=["--do-handshake-on-connect"],
        action="store_true",
        validator=BOOL,
        default=False,
        help="Complete the TLS handshake as soon as a connection is accepted, instead of "
        "on the first read (see `ssl.SSLContext.wrap_socket`).",
    )
    add(
        name="suppress_ragged_eofs",
        section=sec,
        flags=["--suppress-ragged-eofs"],
        action="toggle",
        validator=BOOL,
        default=True,
        help="Treat a client that closes the TCP connection without a TLS close_notify "
        "as a normal end of stream instead of an error (see `ssl.SSLContext.wrap_socket`)."
        " --no-suppress-ragged-eofs turns it off.",
    )

    # -- Server Hooks
    for name, (fn, params) in _HOOK_SIGNATURES.items():
        arity = params.count(",") + 1
        add(
            name=name,
            section="Server Hooks",
            validator=hook_check(arity, params, accept_fewer=name == "post_request"),
            default=fn,
            arity=arity,
            default_doc="does nothing"
            if name not in ("pre_request", "ssl_context")
            else (
                "logs `METHOD PATH` at debug level"
                if name == "pre_request"
                else "returns `default_ssl_context_factory()`"
            ),
            help=f"`def {name}({params})`: {_HOOK_HELP[name]}",
        )

    return {s.name: s for s in table}


SETTINGS: dict[str, Setting] = _build()

# Settings a config file may not set: the file has already been chosen by then.
NOT_FROM_FILE = frozenset({"config"})


# --------------------------------------------------------------------------- Config


class Config:
    """The resolved settings. Every setting is an attribute (``cfg.workers``)."""

    settings: Mapping[str, Setting] = SETTINGS

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        values = {s.name: s.default_value(environ) for s in SETTINGS.values()}
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(f"no setting named {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in SETTINGS:
            self.set(name, value)
        else:
            object.__setattr__(self, name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(SETTINGS))

    def __repr__(self) -> str:
        return f"<Config app={self.app_uri!r} workers={self.workers} k={self.worker_class!r}>"

    def set(self, name: str, value: Any) -> None:
        """Validate and store one setting; ConfigError when the value is not allowed."""
        setting = SETTINGS.get(name)
        if setting is None:
            raise ConfigError(f"unknown setting {name!r}")
        self._values[name] = setting.validate(value)

    def get(self, name: str) -> Any:
        if name not in SETTINGS:
            raise ConfigError(f"unknown setting {name!r}")
        return self._values[name]

    def items(self) -> Iterator[tuple[str, Any]]:
        """(name, value) for every setting, sorted by name."""
        for name in sorted(self._values):
            yield name, self._values[name]

    def copy(self) -> Config:
        clone = object.__new__(Config)
        object.__setattr__(clone, "_values", dict(self._values))
        return clone

    # -- derived values

    @property
    def app_uri(self) -> str | None:
        """The application reference: the APP argument, or wsgi_app from a config file."""
        return self._values["wsgi_app"]

    @property
    def env(self) -> dict[str, str]:
        """raw_env as a dict (validated to be KEY=VALUE already)."""
        return dict(item.split("=", 1) for item in self._values["raw_env"])

    @property
    def uid(self) -> int:
        return self._values["user"]

    @property
    def gid(self) -> int:
        return self._values["group"]

    @property
    def is_ssl(self) -> bool:
        return bool(self._values["certfile"] or self._values["keyfile"])

    @property
    def proc_name(self) -> str:
        return self._values["proc_name"] or self.app_uri or "supervise"

    @property
    def worker_class_str(self) -> str:
        """The worker class to run: the -k value, except that sync with threads > 1 means
        gthread, as in Gunicorn."""
        name = self._values["worker_class"]
        if name == "sync" and self._values["threads"] > 1:
            return "gthread"
        return name


# --------------------------------------------------------------------------- docs


def _doc_default(s: Setting) -> str:
    if s.default_doc is not None:
        return s.default_doc
    return f"`{s.default!r}`"


def _doc_flags(s: Setting) -> str:
    flags = list(s.flags)
    if s.action == "toggle":
        flags += [f"--no-{f[2:]}" for f in s.flags if f.startswith("--")]
    meta = "" if s.action in ("store_true", "store_false", "toggle") else f" {s.metavar}"
    return ", ".join(f"`{f}{meta}`" for f in flags)


def settings_markdown() -> str:
    """docs/settings.md, generated from SETTINGS."""
    out = [
        "# Settings",
        "",
        "<!-- Generated by `python -m supervise.config --markdown > docs/settings.md`;"
        " edit supervise/config.py instead. -->",
        "",
        "Every setting can be given in a config file (`-c FILE`; a module-level name equal "
        "to the setting name sets it), and most on the command line. Precedence, highest "
        "first: the command line, the `SUPERVISE_CMD_ARGS` environment variable (parsed like "
        "a command line), the config file, the defaults. Names, flags and defaults follow "
        "Gunicorn's, so a gunicorn.conf.py works unchanged; names supervise does not know "
        "are ignored. `supervise --print-config` shows the resolved values.",
        "",
    ]
    for section in SECTIONS:
        members = [s for s in SETTINGS.values() if s.section == section]
        out += [f"## {section}", ""]
        out += [", ".join(f"[{s.name}](#{s.name})" for s in members), ""]
        for s in members:
            out += [f"### {s.name}", ""]
            if s.flags:
                out.append(f"- Command line: {_doc_flags(s)}")
            else:
                out.append("- Command line: none (config file only)")
            out.append(f"- Type: {s.validator.kind}")
            out.append(f"- Default: {_doc_default(s)}")
            out += ["", s.help, ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m supervise.config --markdown > docs/settings.md")
    sys.stdout.write(settings_markdown())
