"""Worker classes by short name; ``-k`` also takes a dotted path to a third-party class."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from supervise.workers.base import Worker

WORKER_CLASSES = {
    "sync": "supervise.workers.sync:SyncWorker",
    "gthread": "supervise.workers.gthread:ThreadWorker",
    "gevent": "supervise.workers.ggevent:GeventWorker",
    "asgi": "supervise.workers.asgi:AsgiWorker",
    "rsgi": "supervise.workers.rsgi:RsgiWorker",
}

# What to install when a worker's optional dependency is missing.
_EXTRAS = {"gevent": "pip install 'supervise[gevent]'"}


class WorkerClassError(Exception):
    """The worker class named by -k cannot be used; str() says why."""


def load_worker_class(name: str) -> type[Worker]:
    from supervise.workers.base import Worker

    target = WORKER_CLASSES.get(name, name)
    module_name, sep, attr = target.rpartition(":") if ":" in target else target.rpartition(".")
    if not sep or not module_name:
        raise WorkerClassError(
            f"unknown worker class {name!r}: use {', '.join(WORKER_CLASSES)} or a dotted path"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if name in WORKER_CLASSES and exc.name and not exc.name.startswith("supervise"):
            hint = _EXTRAS.get(name, f"pip install {exc.name}")
            raise WorkerClassError(
                f"worker class {name!r} needs {exc.name!r}, which is not installed: {hint}"
            ) from None
        if name in WORKER_CLASSES and exc.name == module_name:
            raise WorkerClassError(
                f"worker class {name!r} is not in this version of supervise yet"
            ) from None
        if name in WORKER_CLASSES:
            raise WorkerClassError(f"worker class {name!r} cannot be loaded: {exc}") from None
        raise WorkerClassError(f"cannot import worker class {name!r}: {exc}") from None
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Worker)):
        raise WorkerClassError(f"{name!r} is not a subclass of supervise.workers.base.Worker")
    return cls
