"""What the arbiter runs for operators, kept out of its loop's code: the
control socket, the metrics helper, recycling by memory and age, and the
master's figures in the scoreboard.

The arbiter calls in at fixed points (start, every loop turn, its wait,
fork, reap, reload, stop); everything here is non-blocking, as the loop is.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from supervise import sockets
from supervise.control import ControlError, ControlServer
from supervise.control_commands import ControlCommands
from supervise.helper import MetricsHelper
from supervise.recycling import Recycler
from supervise.scoreboard import MasterRecord

if TYPE_CHECKING:
    from supervise.arbiter import Arbiter
    from supervise.config import Config

# How often the steady loop measures what only the metrics show (listen queues)
# and drops control clients past their deadline.
OPS_PERIOD = 1.0


# Bound or started once per master: a HUP does not change them.
RESTART_ONLY = ("metrics_bind", "statsd_host", "statsd_prefix", "dogstatsd_tags", "control_socket")


def metrics_on(cfg: Config) -> bool:
    return bool(cfg.metrics_bind or cfg.statsd_host)


class Operations:
    """The control socket, the metrics helper and the recycler of one arbiter."""

    def __init__(self, arbiter: Arbiter) -> None:
        self.arbiter = arbiter
        self.recycler = Recycler(arbiter.cfg, measure=metrics_on(arbiter.cfg))
        self.commands = ControlCommands(arbiter)
        self.control: ControlServer | None = None
        self.helper: MetricsHelper | None = None
        self.next_period = 0.0

    @property
    def master(self) -> MasterRecord:
        assert self.arbiter.scoreboard is not None
        return self.arbiter.scoreboard.master

    def open(self) -> None:
        """At start, once the scoreboard exists. Raises ControlError or HelperError."""
        arbiter = self.arbiter
        cfg = arbiter.cfg
        assert arbiter.scoreboard is not None
        self.master.start(arbiter.pid)
        arbiter.log.count = self.master.count_log
        if cfg.control_socket:
            self.control = ControlServer(
                path=cfg.control_socket, log=arbiter.log, dispatch=self.commands.dispatch
            )
            self.commands.server = self.control
            if not arbiter.master_pid:  # a USR2 master takes the path over once it serves
                self.control.open()
                arbiter.log.info("Control socket: %s", cfg.control_socket)
        self.helper = MetricsHelper(
            cfg=cfg,
            log=arbiter.log,
            scoreboard=arbiter.scoreboard,
            takeover=bool(arbiter.master_pid),
        )
        self.helper.bind()

    # -- the loop -------------------------------------------------------------------
    def tick(self) -> None:
        """Every loop turn: recycling, the helper, and once a second the rest."""
        arbiter = self.arbiter
        now = time.monotonic()
        for due in self.recycler.due(list(arbiter.workers.values()), now):
            arbiter.retire(due.record, due.cause, due.reason)
        if self.helper is not None and not arbiter.stopping:
            self.helper.tick(
                now,
                listeners=[listener.name for listener in arbiter.listeners],
                in_child=self.in_child,
            )
        self.master.set_generations(
            arbiter.generation, arbiter.serving_generation, arbiter.num_workers
        )
        if now < self.next_period:
            return
        self.next_period = now + OPS_PERIOD
        if self.control is not None:
            self.control.expire(now)
        if metrics_on(arbiter.cfg):
            self.master.set_listen_queues(
                [sockets.listen_queue(listener.sock) or (0, 0) for listener in arbiter.listeners]
            )

    def watch(self) -> dict[int, int] | None:
        return self.control.watch() if self.control is not None else None

    def ready(self, fd: int, events: int) -> None:
        if self.control is not None:
            self.control.ready(fd, events)

    # -- events ---------------------------------------------------------------------
    def in_child(self) -> None:
        """In any process forked from the master: what belongs to the master only."""
        self.arbiter.signals.close_in_child()
        if self.control is not None:
            self.control.close_in_child()
        if self.helper is not None:
            self.helper.close_in_child()

    def reaped(self, pid: int, status: int) -> bool:
        return self.helper is not None and self.helper.reaped(pid, status)

    def worker_exited(self, cause: str) -> None:
        self.master.count_exit(cause)

    def reload_started(self) -> None:
        self.master.count_reload()

    def reload_finished(self, *, ok: bool, message: str) -> None:
        if not ok:
            self.master.count_reload(failed=True)
        self.commands.reload_finished(ok=ok, message=message)

    def configured(self, cfg: Config) -> None:
        """A reload applied ``cfg`` (or a failed one restored it): its recycling
        rules apply from now on; the sockets keep theirs until a restart."""
        self.recycler = Recycler(cfg, measure=metrics_on(cfg))
        started = self.helper.cfg if self.helper is not None else None
        for name in RESTART_ONLY:
            if started is not None and getattr(cfg, name) != getattr(started, name):
                self.arbiter.log.warning(
                    "%s changed: it takes effect when the master restarts (USR2)", name
                )

    def lifetime_deadline(self) -> float:
        return self.recycler.deadline(time.monotonic())

    def serving(self) -> None:
        """The first generation serves: a USR2 master now takes the control socket."""
        if self.arbiter.master_pid and self.control is not None and self.control.sock is None:
            try:
                self.control.take_over()
            except ControlError as exc:
                self.arbiter.log.error("%s", exc)

    def new_master_failed(self) -> None:
        """The USR2 child died: the control path comes back to this master."""
        if self.control is not None:
            self.control.reclaim()

    def stop_helper(self) -> None:
        if self.helper is not None:
            self.helper.stop()

    def close(self) -> None:
        """The master is exiting."""
        self.stop_helper()
        if self.control is not None:
            self.control.close()
