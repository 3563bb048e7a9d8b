"""What each ``supervise ctl`` command does in the master.

The transport (control.py) hands every complete request to ``dispatch``,
which runs in the arbiter's loop, as a signal handler does, and answers
through the transport. Commands do what the matching signal does, and say how
it went: ``reload`` answers only once the new generation serves or has
failed, ``retire`` uses the same zero-downtime path as max_requests.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from supervise import __version__, procmem
from supervise.control import Connection, ControlServer
from supervise.scoreboard import State

if TYPE_CHECKING:
    from supervise.arbiter import Arbiter

COMMANDS = ("status", "reload", "scale", "retire", "reopen-logs", "stop")
MAX_WORKERS = 1024


class ControlCommands:
    """The commands, bound to one arbiter."""

    def __init__(self, arbiter: Arbiter) -> None:
        self.arbiter = arbiter
        self.server: ControlServer | None = None
        self.reload_waiters: list[Connection] = []

    def dispatch(self, conn: Connection, request: dict[str, Any]) -> None:
        command = request["command"]
        args = request.get("args") or []
        if command not in COMMANDS or not isinstance(args, list):
            self._fail(conn, f"unknown command {command!r}; commands: {', '.join(COMMANDS)}")
            return
        getattr(self, "_" + command.replace("-", "_"))(conn, [str(a) for a in args])

    def _reply(self, conn: Connection, answer: dict[str, Any], *, close: bool = True) -> None:
        assert self.server is not None
        self.server.reply(conn, answer, close=close)

    def _fail(self, conn: Connection, error: str) -> None:
        self._reply(conn, {"ok": False, "error": error})

    # -- commands -------------------------------------------------------------------
    def _status(self, conn: Connection, args: list[str]) -> None:
        self._reply(conn, {"ok": True, **self.status()})

    def _reload(self, conn: Connection, args: list[str]) -> None:
        self.reload_waiters.append(conn)
        self.arbiter.log.info("Reload requested (supervise ctl)")
        self.arbiter.reload()

    def reload_finished(self, *, ok: bool, message: str) -> None:
        """The arbiter's word on the latest reload: answer whoever asked for one."""
        waiters, self.reload_waiters = self.reload_waiters, []
        for conn in waiters:
            self._reply(conn, {"ok": ok, "message" if ok else "error": message})

    def _scale(self, conn: Connection, args: list[str]) -> None:
        arbiter = self.arbiter
        text = args[0] if args else ""
        try:
            number = int(text)
        except ValueError:
            self._fail(conn, f"scale takes N, +N or -N, not {text!r}")
            return
        target = arbiter.num_workers + number if text[0] in "+-" else number
        if not 1 <= target <= MAX_WORKERS:
            self._fail(conn, f"cannot scale to {target} workers (1 to {MAX_WORKERS})")
            return
        old = arbiter.num_workers
        if target != old:
            arbiter.set_num_workers(target)
        self._reply(conn, {"ok": True, "message": f"workers: {old} -> {target}"})

    def _retire(self, conn: Connection, args: list[str]) -> None:
        arbiter = self.arbiter
        try:
            pid = int(args[0])
        except (IndexError, ValueError):
            self._fail(conn, "retire takes the pid of a worker (see supervise ctl status)")
            return
        rec = arbiter.workers.get(pid)
        if rec is None:
            self._fail(conn, f"no worker with pid {pid}")
        elif rec.stopping or rec.retiring:
            self._fail(conn, f"worker {pid} is already leaving")
        elif not rec.ready:
            self._fail(conn, f"worker {pid} is still booting")
        elif rec.generation != arbiter.generation:
            self._fail(conn, f"worker {pid} belongs to generation {rec.generation}, being replaced")
        else:
            arbiter.retire(rec, "retire", "was asked to retire (supervise ctl)")
            self._reply(conn, {"ok": True, "message": f"worker {pid}: a replacement is starting"})

    def _reopen_logs(self, conn: Connection, args: list[str]) -> None:
        self.arbiter.handle_usr1()
        count = len(self.arbiter.workers)
        self._reply(conn, {"ok": True, "message": f"log files reopened (master, {count} workers)"})

    def _stop(self, conn: Connection, args: list[str]) -> None:
        graceful = "--graceful" in args
        how = "gracefully" if graceful else "now"
        self._reply(
            conn, {"ok": True, "message": f"master {os.getpid()} stopping {how}"}, close=False
        )
        self.arbiter.log.info("Stop requested (supervise ctl, %s)", how)
        if graceful:
            self.arbiter.handle_term()
        else:
            self.arbiter.handle_int()

    # -- status ---------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        arbiter = self.arbiter
        cfg = arbiter.cfg
        now = time.monotonic()
        workers = []
        for rec in sorted(arbiter.workers.values(), key=lambda r: r.worker.age):
            slot = rec.worker.slot
            state = slot.state
            if rec.stopping:
                state = State.STOPPING
            elif rec.retire:
                state = State.RETIRING
            workers.append(
                {
                    "pid": rec.pid,
                    "generation": rec.generation,
                    "state": state.name.lower(),
                    "requests": slot.requests,
                    "in_flight": slot.in_flight,
                    "connections": slot.active,
                    "rss": procmem.rss(rec.pid),
                    "age": round(now - rec.booted, 3),
                    "heartbeat_age": round(max(now - slot.last_heartbeat, 0.0), 3),
                }
            )
        return {
            "master": {
                "pid": os.getpid(),
                "version": __version__,
                "started_at": arbiter.started_at,
                "uptime": round(time.time() - arbiter.started_at, 3),
                "app": cfg.app_uri,
                "worker_class": cfg.worker_class_str,
                "binds": [listener.name for listener in arbiter.listeners],
                # HTTP/3's UDP addresses, and the indexes workers hold in them.
                "quic_binds": [g.name for g in arbiter.quic.groups] if arbiter.quic else [],
                "config": cfg.config,
                "control_socket": cfg.control_socket,
                "metrics_bind": cfg.metrics_bind,
                "generation": arbiter.generation,
                "serving_generation": arbiter.serving_generation,
                "reloading": arbiter.reloading,
                "target_workers": arbiter.num_workers,
                "parent_master": arbiter.master_pid or None,
                "new_master": arbiter.reexec_pid or None,
            },
            "workers": workers,
        }
