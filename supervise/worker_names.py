"""Worker classes named the way Gunicorn and Uvicorn users name them.

A gunicorn.conf.py or a Procfile says ``-k uvicorn.workers.UvicornWorker`` or
``worker_class = "gevent_pywsgi"``. Those cannot be imported into supervise's
arbiter (they are Gunicorn Worker subclasses), but most have a supervise worker
that does the same job: the ``-k`` validator reads them as that worker and the
configuration loader tells the user which ``-k`` to write. The few with no
counterpart (eventlet, tornado) are refused with what to use instead.

This module imports nothing of supervise, so that the validators can use it.
"""

from __future__ import annotations

from typing import NamedTuple


class Translated(NamedTuple):
    """A foreign worker class that a supervise worker replaces."""

    to: str  # the supervise -k name
    whose: str  # what the user named, in words


class Refused(NamedTuple):
    """A foreign worker class with no supervise counterpart."""

    whose: str
    advice: str


_GUNICORN_SYNC = Translated("sync", "Gunicorn's sync worker")
_GUNICORN_GTHREAD = Translated("gthread", "Gunicorn's gthread worker")
_GUNICORN_GEVENT = Translated("gevent", "Gunicorn's gevent worker")
_GUNICORN_PYWSGI = Translated("gevent", "Gunicorn's gevent pywsgi worker")
_GUNICORN_ASGI = Translated("asgi", "Gunicorn's asgi worker")
_UVICORN = Translated("asgi", "Uvicorn's worker for Gunicorn")
_EVENTLET = Refused(
    "Gunicorn's eventlet worker",
    "eventlet is unmaintained and supervise has no eventlet worker; use -k gevent for "
    "WSGI on greenlets (or -k gthread)",
)
_TORNADO = Refused(
    "Gunicorn's tornado worker",
    "supervise has no Tornado worker; serve a WSGI app with -k gthread (or sync, gevent) "
    "and run a tornado.web.Application with Tornado's own server",
)

# Keys are normalised by ``_key``: no "egg:gunicorn#" prefix, ":" read as ".".
FOREIGN: dict[str, Translated | Refused] = {
    # Gunicorn's short names that supervise spells differently or lacks.
    "gevent_wsgi": _GUNICORN_PYWSGI,
    "gevent_pywsgi": _GUNICORN_PYWSGI,
    "eventlet": _EVENTLET,
    "tornado": _TORNADO,
    # Gunicorn's class paths.
    "gunicorn.workers.sync.SyncWorker": _GUNICORN_SYNC,
    "gunicorn.workers.gthread.ThreadWorker": _GUNICORN_GTHREAD,
    "gunicorn.workers.ggevent.GeventWorker": _GUNICORN_GEVENT,
    "gunicorn.workers.ggevent.GeventPyWSGIWorker": _GUNICORN_PYWSGI,
    "gunicorn.workers.gasgi.ASGIWorker": _GUNICORN_ASGI,
    "gunicorn.workers.geventlet.EventletWorker": _EVENTLET,
    "gunicorn.workers.gtornado.TornadoWorker": _TORNADO,
    # Uvicorn's workers for Gunicorn, in uvicorn itself and in the uvicorn-worker package.
    "uvicorn.workers.UvicornWorker": _UVICORN,
    "uvicorn.workers.UvicornH11Worker": _UVICORN,
    "uvicorn_worker.UvicornWorker": _UVICORN,
    "uvicorn_worker.UvicornH11Worker": _UVICORN,
}

EGG_PREFIX = "egg:gunicorn#"


def _key(name: str) -> str:
    return name.removeprefix(EGG_PREFIX).replace(":", ".")


def foreign(name: str, ours: tuple[str, ...]) -> Translated | Refused | None:
    """What ``name`` means when it is a Gunicorn or Uvicorn worker class, else None.

    ``ours`` are supervise's short names: ``egg:gunicorn#sync`` is one of them with
    Gunicorn's entry-point prefix, and it is read as that worker.
    """
    key = _key(name)
    found = FOREIGN.get(key)
    if found is not None:
        return found
    if name.startswith(EGG_PREFIX) and key in ours:
        return Translated(key, f"Gunicorn's {key} worker")
    return None


def close_name(name: str, ours: tuple[str, ...]) -> str | None:
    """The supervise worker a mistyped short name probably meant (``gthraed``)."""
    if "." in name or ":" in name:
        return None
    import difflib  # only for a mistyped name: the master stays lighter

    matches = difflib.get_close_matches(name.lower(), ours, n=1, cutoff=0.7)
    return matches[0] if matches else None
