"""What the arbiter knows about each worker process it forked."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from supervise.scoreboard import State
from supervise.workers.base import APP_LOAD_ERROR, WORKER_BOOT_ERROR

if TYPE_CHECKING:
    from supervise.workers.base import Worker


class WorkerRecord:
    """What the arbiter knows about one child: never anything it must ask the child."""

    __slots__ = (
        "abort_sent",
        "booted",
        "cause",
        "generation",
        "killed",
        "pid",
        "ready",
        "retire",
        "retire_at",
        "term_sent",
        "worker",
    )

    def __init__(self, pid: int, worker: Worker, *, retire_at: float) -> None:
        self.pid = pid
        self.worker = worker
        self.generation = worker.generation
        self.ready = False
        self.term_sent = 0.0
        self.abort_sent = 0.0
        self.killed = False
        self.booted = time.monotonic()
        self.retire_at = retire_at  # --worker-lifetime
        # Set when the arbiter wants it replaced (memory, lifetime, ctl retire):
        # the same path as a worker that marked itself RETIRING at max_requests.
        self.retire = ""
        self.cause = ""  # why it was asked to leave (scoreboard.EXIT_CAUSES)

    @property
    def stopping(self) -> bool:
        return bool(self.term_sent)

    @property
    def retiring(self) -> bool:
        return bool(self.retire) or self.worker.slot.state == State.RETIRING

    def exit_cause(self, code: int) -> str:
        """Why it left, for the metrics (scoreboard.EXIT_CAUSES): what it was asked,
        else a failed boot or a crash."""
        if self.cause:
            return self.cause
        if code in (APP_LOAD_ERROR, WORKER_BOOT_ERROR) and not self.ready:
            return "boot_failure"
        return "crash"
