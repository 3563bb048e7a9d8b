"""The one registry of worker classes; ``-k`` also takes a dotted path to a third-party class.

Everything that needs the list of worker classes (the ``-k`` validator, the
interface hints of loading.py, the tests' worker lists) derives it from
``WORKERS``. Only classes that exist are listed: a worker class lands here in
the same commit as its module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, NamedTuple

from supervise import DISTRIBUTION

if TYPE_CHECKING:
    from supervise.workers.base import Worker


class WorkerSpec(NamedTuple):
    """A built-in worker class: where it lives and what it serves."""

    target: str  # "module:Class", imported only when the class is used
    interface: str  # "wsgi" | "asgi" | "rsgi": what it serves by default
    extra: str | None = None  # the optional dependency set it needs, if any
    native_server: bool = False  # served by the Rust server (native/src/server)
    also: tuple[str, ...] = ()  # the other interfaces it serves (--interface)


WORKERS: dict[str, WorkerSpec] = {
    "sync": WorkerSpec("supervise.workers.sync:SyncWorker", "wsgi"),
    "gthread": WorkerSpec("supervise.workers.gthread:ThreadWorker", "wsgi"),
    "gevent": WorkerSpec("supervise.workers.ggevent:GeventWorker", "wsgi", extra="gevent"),
    "asgi": WorkerSpec("supervise.workers.asgi:AsgiWorker", "asgi"),
    "rsgi": WorkerSpec("supervise.workers.rsgi:RsgiWorker", "rsgi", native_server=True),
    # The engine serves every interface (--interface). RSGI is not listed in
    # `also`: the engine runs RSGI apps exactly as -k rsgi does (same code), so
    # the tests' RSGI suites would run it twice.
    "native": WorkerSpec(
        "supervise.workers.native:NativeWorker", "wsgi", native_server=True, also=("asgi",)
    ),
}


def names_for(interface: str) -> list[str]:
    """The short names of the built-in classes that serve ``interface``."""
    return [
        name
        for name, spec in WORKERS.items()
        if spec.interface == interface or interface in spec.also
    ]


class WorkerClassError(Exception):
    """The worker class named by -k cannot be used; str() says why."""


def load_worker_class(name: str) -> type[Worker]:
    from supervise.workers.base import Worker

    spec = WORKERS.get(name)
    target = spec.target if spec else name
    module_name, sep, attr = target.rpartition(":") if ":" in target else target.rpartition(".")
    if not sep or not module_name:
        raise WorkerClassError(
            f"unknown worker class {name!r}: use {', '.join(WORKERS)} or a dotted path"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if spec is None:
            raise WorkerClassError(f"cannot import worker class {name!r}: {exc}") from None
        if exc.name and not exc.name.startswith("supervise"):
            hint = f"pip install '{DISTRIBUTION}[{spec.extra}]'" if spec.extra else ""
            raise WorkerClassError(
                f"worker class {name!r} needs {exc.name!r}, which is not installed: "
                f"{hint or 'pip install ' + exc.name}"
            ) from None
        raise WorkerClassError(f"worker class {name!r} cannot be loaded: {exc}") from None
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Worker)):
        raise WorkerClassError(f"{name!r} is not a subclass of supervise.workers.base.Worker")
    return cls
