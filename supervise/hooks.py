"""The server hooks: their defaults, and the one place each hook is described.

Each default below declares its hook once: its parameters are the positional
arguments a user's hook must accept, and its docstring is the help shown by
docs/settings.md. ``settings.py`` turns ``HOOKS`` into the "Server Hooks" settings,
so a hook cannot be documented with one signature and validated against another.
"""

from __future__ import annotations

import inspect
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Hook:
    """One hook, as the settings table needs it; built from the default's own definition."""

    name: str
    default: Callable[..., Any]
    params: str  # "server, worker": what a user's hook is called with
    help: str
    default_doc: str  # what the default does, for docs/settings.md
    accept_fewer: bool  # also accept a hook taking fewer arguments (see hook_check)

    @property
    def arity(self) -> int:
        return self.params.count(",") + 1


HOOKS: dict[str, Hook] = {}


def _default_hook(does: str = "does nothing", accept_fewer: bool = False) -> Callable[[_F], _F]:
    def declare(fn: _F) -> _F:
        # --print-config shows a hook as <module.qualname>. The defaults have always been
        # public as supervise.config.NAME (that module re-exports them), so they keep that
        # name; pickle resolves it to the same object.
        fn.__module__ = "supervise.config"
        HOOKS[fn.__name__] = Hook(
            name=fn.__name__,
            default=fn,
            params=", ".join(inspect.signature(fn).parameters),
            help=" ".join((inspect.getdoc(fn) or "").split()),
            default_doc=does,
            accept_fewer=accept_fewer,
        )
        return fn

    return declare


@_default_hook()
def on_starting(server: Any) -> None:
    """Called in the master just before it initialises (before the sockets are bound and any
    worker is forked)."""


@_default_hook()
def on_reload(server: Any) -> None:
    """Called in the master when a SIGHUP reload starts, after the new configuration has been
    loaded and before the new generation of workers is forked."""


@_default_hook()
def when_ready(server: Any) -> None:
    """Called in the master once the server is started: sockets bound, first workers forked."""


@_default_hook()
def pre_fork(server: Any, worker: Any) -> None:
    """Called in the master just before a worker is forked; `worker` is the new Worker object,
    not yet running."""


@_default_hook()
def post_fork(server: Any, worker: Any) -> None:
    """Called in the worker process just after the fork, before the application is loaded."""


@_default_hook()
def post_worker_init(worker: Any) -> None:
    """Called in the worker once it has loaded the application, just before it starts
    serving."""


@_default_hook()
def worker_int(worker: Any) -> None:
    """Called in the worker when it exits on SIGINT or SIGQUIT (fast stop)."""


@_default_hook()
def worker_abort(worker: Any) -> None:
    """Called in the worker when it receives SIGABRT, which the master sends to a worker that
    missed its heartbeat for `timeout` seconds; the worker has already logged the stack of
    every thread."""


@_default_hook()
def pre_exec(server: Any) -> None:
    """Called in the forked child of the master just before it executes a fresh supervise
    (the SIGUSR2 upgrade)."""


@_default_hook(does="logs `METHOD PATH` at debug level")
def pre_request(worker: Any, req: Any) -> None:
    """Called in the worker before each request is handed to the application. The default
    logs `METHOD PATH` at debug level."""
    worker.log.debug("%s %s", req.method, req.path)


@_default_hook(accept_fewer=True)
def post_request(worker: Any, req: Any, environ: dict, resp: Any) -> None:
    """Called in the worker after each request. For compatibility, a callable that takes only
    (worker, req) or (worker, req, environ) is accepted."""


@_default_hook()
def child_exit(server: Any, worker: Any) -> None:
    """Called in the master just after a worker process has exited."""


@_default_hook()
def worker_exit(server: Any, worker: Any) -> None:
    """Called in the worker process just before it exits."""


@_default_hook()
def nworkers_changed(server: Any, new_value: int, old_value: int | None) -> None:
    """Called in the master after the number of workers changed (TTIN, TTOU, reload).
    `old_value` is None the first time."""


@_default_hook()
def on_exit(server: Any) -> None:
    """Called in the master just before supervise exits."""


@_default_hook(does="returns `default_ssl_context_factory()`")
def ssl_context(config: Any, default_ssl_context_factory: Callable[[], ssl.SSLContext]) -> Any:
    """Called in the worker to build the `ssl.SSLContext`. `default_ssl_context_factory()`
    returns the context built from keyfile, certfile, ca_certs, cert_reqs and ciphers; return
    it, changed as you need (for example a minimum TLS version), or a context of your own."""
    return default_ssl_context_factory()
