"""Health probes (``--health-path``) answered by the worker, before the app.

Theory of operation: a probe is a request like any other until its path is
read; then, instead of the app, ``HealthProbes.answer`` decides its answer
from two facts the worker already has, and nothing here touches a socket:

- readiness (``PATH``, ``PATH/ready``): 200 while this worker serves, 503
  once it is stopping (its own graceful stop: a reload replaced it, a
  recycle, TERM) or its master is draining (``--shutdown-delay``: the
  master record's flag in the scoreboard, one load per probe);
- liveness (``PATH/live``): 200 whenever the worker answers at all, which
  is what liveness means for a worker whose loop runs the probe itself. It
  stays 200 while draining: a failing liveness probe makes Kubernetes kill
  the pod, which is the opposite of a graceful stop.

Each worker class calls ``answer`` where it has the request's method and
path, writes what it returns with its own response code (keep-alive, HEAD
and framing as for any response), and neither runs the app, the request
hooks nor ``--max-requests`` for it. The native server (rsgi, native)
answers the same paths in Rust (native/src/server/health.rs), with the
same texts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from supervise.scoreboard import State

READY = b"ready\n"
DRAINING = b"draining\n"
LIVE = b"live\n"


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    """What a probe is answered: status, reason phrase, headers and body."""

    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    @property
    def status_line(self) -> str:
        return f"{self.status} {self.reason}"

    @property
    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        return [(name.encode(), value.encode()) for name, value in self.headers]


_TEXT = ("Content-Type", "text/plain; charset=utf-8")
# A cached probe answer would hide the drain from the prober.
_NO_STORE = ("Cache-Control", "no-store")


def _answer(status: int, reason: str, body: bytes, *more: tuple[str, str]) -> ProbeAnswer:
    return ProbeAnswer(status, reason, (_TEXT, _NO_STORE, *more), body)


ANSWER_READY = _answer(200, "OK", READY)
ANSWER_DRAINING = _answer(503, "Service Unavailable", DRAINING)
ANSWER_LIVE = _answer(200, "OK", LIVE)
ANSWER_METHOD = _answer(405, "Method Not Allowed", b"Method Not Allowed\n", ("Allow", "GET, HEAD"))


class HealthProbes:
    """The probe paths under one ``--health-path`` and how they are answered."""

    __slots__ = ("_paths", "_ready")

    def __init__(self, base: str, *, ready: Callable[[], bool]) -> None:
        # Undecoded paths, as the native server compares them: one rule for
        # every class (the setting allows no %-escape, so none is lost).
        raw = base.encode()
        self._paths = {raw: True, raw + b"/ready": True, raw + b"/live": False}
        self._ready = ready

    @classmethod
    def for_worker(cls, worker: Any) -> HealthProbes | None:
        """The worker's probes (ready while it serves and its master does not
        drain); None when ``--health-path`` is off."""
        base = worker.cfg.health_path
        if not base:
            return None
        slot = worker.slot
        state = worker.state
        return cls(base, ready=lambda: not state.stopping and not slot.master_draining)

    @classmethod
    def for_server(cls, base: str | None, scoreboard: Any) -> HealthProbes | None:
        """The server's probes, for the metrics address: ready while the
        master does not drain and at least one worker is READY."""
        if not base:
            return None

        def ready() -> bool:
            snap = scoreboard.snapshot()
            return not snap.master["draining"] and any(w.state == State.READY for w in snap.workers)

        return cls(base, ready=ready)

    def is_probe(self, raw_path: bytes) -> bool:
        return raw_path in self._paths

    def answer(self, method: str, raw_path: bytes) -> ProbeAnswer | None:
        """The answer to a request for ``raw_path`` (undecoded, without the
        query), or None when it is not a probe path: the app gets it."""
        readiness = self._paths.get(raw_path)
        if readiness is None:
            return None
        if method not in ("GET", "HEAD"):
            return ANSWER_METHOD
        if not readiness:
            return ANSWER_LIVE
        return ANSWER_READY if self._ready() else ANSWER_DRAINING
