"""The master's reloads: HUP (a new generation of workers with the
configuration read again, the old one stopped only once the new one serves)
and USR2 (a new master on the same sockets). The arbiter's loop calls these;
what they change is the arbiter's own state, so they are its methods, kept
here to leave ``arbiter.py`` the loop, its signals and its workers.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from supervise import sockets, systemd
from supervise.workers import load_worker_class

if TYPE_CHECKING:
    from supervise.config import Config
    from supervise.operations import Operations
    from supervise.quic_sockets import QuicSockets
    from supervise.worker_record import WorkerRecord
    from supervise.workers.base import Worker

# The old master's pid, for a USR2 child: it takes over once that one is gone.
MASTER_PID_ENV = "SUPERVISE_MASTER_PID"


class Reloads:
    """HUP and USR2, as methods of the ``Arbiter`` (which defines the state below)."""

    cfg: Config
    log: Any
    ops: Operations
    app: Any
    pid: int
    argv: list[str]
    start_cwd: str
    listeners: list[sockets.Listener]
    previous_listeners: list[sockets.Listener] | None
    open_listeners: list[sockets.Listener]
    quic: QuicSockets | None
    systemd_sockets: bool
    workers: dict[int, WorkerRecord]
    worker_class: type[Worker]
    num_workers: int
    generation: int
    previous_cfg: Config | None
    reloading: bool
    reexec_pid: int
    master_pid: int
    respawn_delay: float
    next_spawn_at: float
    pidfile: Any
    reload_config: Callable[[], Config]

    if TYPE_CHECKING:  # the arbiter's

        def _log_notices(self, cfg: Config) -> None: ...
        def _close_unused_listeners(self) -> None: ...
        def _terminate(self, rec: WorkerRecord, sig: int = ..., *, cause: str) -> None: ...
        def _set_proctitle(self) -> None: ...

    # -- reload (HUP) ---------------------------------------------------------------
    def reload(self) -> None:
        systemd.reloading()
        self.ops.reload_started()
        here = os.getcwd()
        try:
            # Relative -c and --chdir paths mean what they meant at start.
            os.chdir(self.start_cwd)
            new_cfg = self.reload_config()
            new_class = load_worker_class(new_cfg.worker_class_str)
            new_class.import_in_master(new_cfg)
        except (Exception, SystemExit) as exc:
            self._reload_refused(exc, "bad configuration")
            return
        finally:
            os.chdir(here)
        if not self.systemd_sockets:
            try:
                listeners, _ = sockets.rebind(self.listeners, new_cfg.bind, new_cfg, self.log)
            except sockets.BindError as exc:
                self._reload_refused(exc, "cannot bind")
                return
            if self.previous_listeners is None:  # else a reload is already under way
                self.previous_listeners = self.listeners
            self.open_listeners.extend(lis for lis in listeners if lis not in self.open_listeners)
            self.listeners = listeners
        if list(new_cfg.quic_bind) != list(self.cfg.quic_bind):
            # Its sockets cannot close while workers hold QUIC connections
            # on them (quic_sockets.py says why).
            self.log.warning("quic_bind changed: that takes a restart; HTTP/3 stays as it was")
        self.previous_cfg = self.cfg
        self.cfg = new_cfg
        self.worker_class = new_class
        self.log.setup(new_cfg)
        self._log_notices(new_cfg)
        self.ops.configured(new_cfg)
        os.environ.update(new_cfg.env)
        if new_cfg.chdir:
            with contextlib.suppress(OSError):
                os.chdir(os.path.join(self.start_cwd, new_cfg.chdir))
        if self.app is not None:
            self.log.info(
                "preload_app is on: HUP reloads the configuration only; deploy new code with USR2"
            )
        old_workers = self.num_workers
        self.num_workers = new_cfg.workers
        if old_workers != self.num_workers:
            new_cfg.nworkers_changed(self, self.num_workers, old_workers)
        self.generation += 1
        self.reloading = True
        self.respawn_delay = 0.0
        self.next_spawn_at = 0.0
        self.log.info("Reloading: starting worker generation %d", self.generation)
        new_cfg.on_reload(self)

    def _reload_refused(self, exc: BaseException, why: str) -> None:
        self.log.error("Reload failed, configuration kept as it was: %s", exc)
        systemd.notify("READY=1", f"STATUS=reload failed: {why}")
        self.ops.reload_finished(
            ok=False, message=f"reload failed, configuration kept as it was: {exc}"
        )

    def _reload_failed(self, reason: str, fallback: int) -> None:
        failed = self.generation
        self.log.error(
            "Reload failed: generation %d cannot boot (%s); generation %d keeps serving",
            failed,
            reason,
            fallback,
        )
        self.generation = fallback
        if self.previous_listeners is not None:
            self.listeners, self.previous_listeners = self.previous_listeners, None
            self._close_unused_listeners()
        if self.previous_cfg is not None:
            self.cfg = self.previous_cfg
            self.worker_class = load_worker_class(self.cfg.worker_class_str)
            self.log.setup(self.cfg)
            self.ops.configured(self.cfg)
            self.num_workers = self.cfg.workers
        self.reloading = False
        for rec in self.workers.values():
            if rec.generation == failed:
                self._terminate(rec, signal.SIGKILL, cause="boot_failure")
        systemd.notify("READY=1", f"STATUS=reload failed: {reason}")
        self.ops.reload_finished(
            ok=False,
            message=f"reload failed: generation {failed} cannot boot ({reason}); "
            f"generation {fallback} keeps serving",
        )

    # -- USR2: a new master on the same sockets -------------------------------------
    def reexec(self) -> None:
        if self.reexec_pid:
            self.log.warning(
                "USR2 ignored: a new master (pid %s) is already running", self.reexec_pid
            )
            return
        if self.master_pid:
            self.log.warning("USR2 ignored: this master's parent master is still running")
            return
        if self.pidfile is not None:
            self.pidfile.rename(f"{self.cfg.pidfile}.oldbin")
        self.cfg.pre_exec(self)
        pid = os.fork()
        if pid:
            self.reexec_pid = pid
            self.log.info("USR2: started a new master (pid %s)", pid)
            systemd.notify(f"MAINPID={pid}")
            return
        extra_env = {MASTER_PID_ENV: str(self.pid)}
        if self.quic is not None:
            extra_env.update(self.quic.env())
        sockets.exec_with_listeners(self.listeners, self.argv, self.start_cwd, extra_env)

    def _reexec_child_exited(self, status: int) -> None:
        code = os.waitstatus_to_exitcode(status)
        self.log.error(
            "New master (pid %s) exited with %s; this master goes on", self.reexec_pid, code
        )
        self.reexec_pid = 0
        if self.quic is not None:
            self.quic.routed = None  # the child may have routed: route again
        if self.pidfile is not None:
            self.pidfile.rename(self.cfg.pidfile)
            self.pidfile.create(self.pid)
        self.ops.new_master_failed()
        systemd.notify(f"MAINPID={self.pid}", "READY=1")

    def _check_master(self) -> None:
        """A USR2 child becomes the one master once its parent is gone."""
        if self.master_pid and os.getppid() != self.master_pid:
            self.log.info("Old master %s is gone: this master takes over", self.master_pid)
            self.master_pid = 0
            if self.quic is not None:
                self.quic.old_master_gone()
            self._set_proctitle()
