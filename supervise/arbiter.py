"""The master process: one loop, a signal queue, small handlers.

Signal handlers only queue the signal; the wake-up fd interrupts the loop's
select and the loop acts. Workers are grouped in generations: HUP (and
``--reload``) starts a new generation and stops the old one only once the new
one is ready, so a broken deploy never takes the site down. Each new
generation boots one "canary" worker first: if the app cannot load, its error
is printed once and the old generation (or, at start, nobody) is left as is.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from supervise import SERVER_SOFTWARE, loading, process, quic_sockets, sockets, systemd
from supervise.arbiter_reload import MASTER_PID_ENV, Reloads
from supervise.control import ControlError
from supervise.helper import HelperError
from supervise.operations import Operations
from supervise.scoreboard import Scoreboard, State
from supervise.signals import SignalQueue
from supervise.worker_record import WorkerRecord
from supervise.workers import load_worker_class
from supervise.workers.base import APP_LOAD_ERROR, WORKER_BOOT_ERROR

if TYPE_CHECKING:
    from supervise.config import Config
    from supervise.workers.base import Worker

# How long a worker that ignored SIGABRT gets before SIGKILL.
ABORT_GRACE = 2.0
MAX_RESPAWN_DELAY = 30.0


class HaltServer(Exception):
    def __init__(self, reason: str, exit_status: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.exit_status = exit_status


class Arbiter(Reloads):
    """Owns the listeners and the signals; forks, watches and replaces workers."""

    def __init__(
        self, cfg: Config, *, argv: list[str], reload_config: Callable[[], Config]
    ) -> None:
        """``argv`` starts a new master on USR2; ``reload_config`` reads the
        configuration again on HUP (it may raise: the reload then fails)."""
        from supervise.logs import Logger

        self.cfg = cfg
        self.argv = list(argv)
        self.reload_config = reload_config
        # Before the log files are opened: they, the pid file and the app's files
        # get the safe mask.
        process.apply_process_umask()
        self.log = Logger(cfg)
        self.pid = os.getpid()
        self.start_cwd = os.getcwd()
        self.app: Any = None
        self.listeners: list[sockets.Listener] = []
        # During a reload that changed --bind: what to restore or to close.
        self.previous_listeners: list[sockets.Listener] | None = None
        self.open_listeners: list[sockets.Listener] = []
        # --quic-bind's UDP groups (HTTP/3); None without it.
        self.quic: quic_sockets.QuicSockets | None = None
        self.systemd_sockets = False
        self.workers: dict[int, WorkerRecord] = {}
        self.scoreboard: Scoreboard | None = None
        self.signals = SignalQueue()
        self.pidfile: process.Pidfile | None = None
        self.worker_class: type[Worker] = load_worker_class(cfg.worker_class_str)
        self.worker_class.import_in_master(cfg)
        self.num_workers = cfg.workers
        self.generation = 1
        self.serving_generation = 0  # the newest generation that was fully ready
        self.proven: set[int] = set()  # generations with at least one worker that booted
        self.previous_cfg: Config | None = None
        self.reloading = False
        self.reexec_pid = 0
        self.master_pid = int(os.environ.pop(MASTER_PID_ENV, "0") or 0)
        self.respawn_delay = 0.0
        self.next_spawn_at = 0.0
        self.worker_age = 0
        self.stopping = False
        # --shutdown-delay: when the drain that a TERM began ends in the graceful stop.
        self.drain_until: float | None = None
        self.started_at = time.time()
        self.noticed: set[str] = set()  # config notices already logged (each once)
        # The control socket, the metrics helper, recycling (operations.py).
        self.ops = Operations(self)

    # -- properties used by hooks (Gunicorn-compatible names) ---------------
    @property
    def proc_name(self) -> str:
        return self.cfg.proc_name

    # -- start-up ----------------------------------------------------------------
    def start(self) -> None:
        cfg = self.cfg
        if cfg.daemon and not self.master_pid:
            process.daemonize(cfg.enable_stdio_inheritance)
            self.pid = os.getpid()
        self.log.info("Starting %s", SERVER_SOFTWARE)
        self._log_notices(cfg)
        cfg.on_starting(self)
        self.signals.install()
        if cfg.pidfile:
            self.pidfile = process.Pidfile(cfg.pidfile)
            self.pidfile.create(self.pid)
        os.environ.update(cfg.env)
        loading.prepare_import_path(cfg.chdir, cfg.pythonpath)
        if cfg.preload_app:
            self.app = self._load_app_in_master()
        # Sockets from systemd are its to manage: never rebound, never unlinked.
        self.systemd_sockets = bool(sockets.systemd_fds(os.environ))
        self.listeners = sockets.create_listeners(cfg, self.log, os.environ)
        self.open_listeners = list(self.listeners)
        scheme = "https" if cfg.is_ssl else "http"
        for listener in self.listeners:
            self.log.info("Listening at: %s (%s)", listener.url(scheme), self.pid)
        self.quic = quic_sockets.QuicSockets.create(cfg.quic_bind, os.environ)
        os.environ.pop(quic_sockets.QUIC_FDS_ENV, None)
        for group in self.quic.groups if self.quic else ():
            self.log.info("Listening at: %s (%s)", group.url(), self.pid)
        self.log.info("Using worker: %s", cfg.worker_class_str)
        self.scoreboard = Scoreboard()
        self.ops.open()
        self._set_proctitle()
        cfg.when_ready(self)

    def _log_notices(self, cfg: Config) -> None:
        """What the config loader noticed (ignored names, Gunicorn-only settings, which
        file it read): each text once per master, not again on every HUP."""
        for notice in cfg.notices:
            if notice.text not in self.noticed:
                self.noticed.add(notice.text)
                (self.log.warning if notice.is_warning else self.log.info)("%s", notice.text)

    def _load_app_in_master(self) -> Any:
        try:
            app = loading.load_app(self.cfg)
            self.worker_class.interface_for(app, self.cfg)
        except loading.AppLoadError as exc:
            if exc.details:
                self.log.error("Failed to load %r:\n%s", self.cfg.app_uri, exc.details.rstrip())
                raise HaltServer(
                    "app failed to load (see the error above)", APP_LOAD_ERROR
                ) from None
            raise HaltServer(str(exc), APP_LOAD_ERROR) from None
        return app

    def _set_proctitle(self) -> None:
        with contextlib.suppress(ImportError):
            from setproctitle import setproctitle

            role = "master" if not self.master_pid else "master (new, USR2)"
            setproctitle(f"supervise: {role} [{self.cfg.proc_name}]")

    # -- the loop ------------------------------------------------------------------
    def run(self) -> None:
        """Run until stopped; exits the process with the right status."""
        try:
            self.start()
            while True:
                self._reap_workers()
                name = self.signals.pop()
                if name is not None:
                    self.log.info("Handling signal: %s", name.lower())
                    getattr(self, f"handle_{name.lower()}")()
                    continue
                self._check_drain()
                self._check_master()
                self._check_workers()
                self._manage_workers()
                self._route_quic()
                self.ops.tick()
                self._sleep()
        except StopIteration:
            self._halt(0)
        except KeyboardInterrupt:
            self._halt(0)
        except HaltServer as exc:
            self._halt(exc.exit_status, exc.reason)
        except (sockets.BindError, process.PidfileError, ControlError, HelperError) as exc:
            self.log.error("%s", exc)
            self._halt(1)
        except SystemExit:
            raise
        except BaseException:
            self.log.exception("Unhandled exception in the master loop")
            self._stop(graceful=False)
            self._halt(1)

    def _sleep(self) -> None:
        # Poll fast while something is changing, slowly when all is steady.
        busy = self.reloading or any(not rec.ready or rec.stopping for rec in self.workers.values())
        timeout = 0.05 if busy else 1.0
        if self.drain_until is not None:
            timeout = max(0.0, min(timeout, self.drain_until - time.monotonic()))
        for fd, events in self.signals.wait(timeout, self.ops.watch()):
            self.ops.ready(fd, events)

    def _halt(self, status: int, reason: str | None = None) -> None:
        self._stop(graceful=False)
        self.ops.close()
        if reason:
            self.log.error("Shutting down: %s", reason)
        self.log.info("Shutting down: Master")
        if self.pidfile is not None:
            self.pidfile.unlink()
        with contextlib.suppress(Exception):
            self.cfg.on_exit(self)
        sys.exit(status)

    # -- signal handlers ---------------------------------------------------------
    def handle_hup(self) -> None:
        if self.drain_until is not None:
            self.log.warning("HUP ignored: draining before the stop (--shutdown-delay)")
            return
        self.reload()

    def handle_term(self) -> None:
        delay = float(self.cfg.shutdown_delay or 0)
        # After USR2 the new master serves the same sockets: nothing to drain.
        if self.drain_until is None and delay > 0 and not self.reexec_pid:
            self._begin_drain(delay)
            return
        self._stop(graceful=True)
        raise StopIteration

    def handle_int(self) -> None:
        self._stop(graceful=False)
        raise StopIteration

    handle_quit = handle_int

    def handle_ttin(self) -> None:
        self.set_num_workers(self.num_workers + 1)

    def handle_ttou(self) -> None:
        if self.num_workers > 1:
            self.set_num_workers(self.num_workers - 1)

    def handle_usr1(self) -> None:
        self.log.reopen_files()
        for rec in self.workers.values():
            self._kill(rec.pid, signal.SIGUSR1)

    def handle_usr2(self) -> None:
        if self.drain_until is not None:
            self.log.warning("USR2 ignored: draining before the stop (--shutdown-delay)")
            return
        self.reexec()

    def handle_winch(self) -> None:
        # Gunicorn stops all workers on WINCH when daemonized; we only log,
        # because a terminal resize must never take a site down.
        self.log.debug("SIGWINCH ignored")

    def _begin_drain(self, delay: float) -> None:
        """TERM with --shutdown-delay: readiness probes answer 503 from now on
        (the scoreboard's flag, read by every worker), while the workers keep
        accepting and serving; the graceful stop follows after ``delay``."""
        self.drain_until = time.monotonic() + delay
        assert self.scoreboard is not None
        self.scoreboard.master.set_draining(True)
        systemd.notify(f"STATUS=draining for {delay:g} s before stopping")
        self.log.info(
            "Draining: readiness probes answer 503, still serving; graceful stop in %g s "
            "(--shutdown-delay; TERM again to stop now)",
            delay,
        )

    def _check_drain(self) -> None:
        if self.drain_until is not None and time.monotonic() >= self.drain_until:
            self.log.info("Drain over: stopping gracefully")
            self._stop(graceful=True)
            raise StopIteration

    def set_num_workers(self, count: int) -> None:
        old, self.num_workers = self.num_workers, count
        self.log.info("Number of workers: %d -> %d", old, count)
        self.cfg.nworkers_changed(self, count, old)

    # -- workers: the steady-state rules ------------------------------------------
    def _check_workers(self) -> None:
        """Read the scoreboard: readiness and timeouts."""
        now = time.monotonic()
        for rec in list(self.workers.values()):
            slot = rec.worker.slot
            state = slot.state
            if not rec.ready and state in (State.READY, State.RETIRING):
                rec.ready = True
                self.proven.add(rec.generation)
                self.respawn_delay = 0.0
            if rec.killed:
                continue
            if rec.stopping:
                if now - rec.term_sent > self.cfg.graceful_timeout:
                    self.log.warning("Worker %s did not stop in time: SIGKILL", rec.pid)
                    self._kill_hard(rec)
                continue
            if rec.abort_sent:
                if now - rec.abort_sent > ABORT_GRACE:
                    self._kill_hard(rec)
                continue
            if self.cfg.timeout > 0 and now - slot.last_heartbeat > self.cfg.timeout:
                self.log.critical("WORKER TIMEOUT (pid:%s)", rec.pid)
                rec.abort_sent = now
                rec.cause = rec.cause or "timeout"
                self._kill(rec.pid, signal.SIGABRT)

    def _manage_workers(self) -> None:
        if self.stopping:
            return
        gen = self.generation
        current = [r for r in self.workers.values() if r.generation == gen and not r.stopping]
        active = [r for r in current if not r.retiring]
        ready = [r for r in active if r.ready]

        # Too few: spawn, but one canary at a time until the generation has
        # booted once, and again while boots are failing (respawn_delay set).
        missing = self.num_workers - len(active)
        if missing > 0 and time.monotonic() >= self.next_spawn_at:
            if gen not in self.proven or self.respawn_delay:
                missing = 0 if any(not r.ready for r in active) else 1
            for _ in range(missing):
                self.spawn_worker()
        # Too many (TTOU, smaller config): stop the oldest.
        if len(active) > self.num_workers:
            surplus = sorted(active, key=lambda r: r.worker.age)[: len(active) - self.num_workers]
            for rec in surplus:
                self._terminate(rec, cause="scale_down")
        # Enough ready workers: retire the replaced ones and the old generations.
        if len(ready) >= self.num_workers:
            for rec in list(self.workers.values()):
                if rec.stopping:
                    continue
                if rec.generation != gen:
                    self._terminate(rec, cause="reload")
                elif rec.retiring:
                    cause = rec.retire or "max_requests"
                    self.log.info("Worker %s replaced (%s): stopping it", rec.pid, cause)
                    self._terminate(rec, cause=cause)
            if self.serving_generation != gen:
                first, was_reload = self.serving_generation == 0, self.reloading
                self.serving_generation = gen
                self.reloading = False
                self.previous_cfg = None
                self.previous_listeners = None
                self._close_unused_listeners()
                if first:
                    self.log.info("Ready: %d worker(s) serving", len(ready))
                    self.ops.serving()
                if was_reload:
                    self.log.info("Reload complete: generation %d serving", gen)
                    self.ops.reload_finished(
                        ok=True, message=f"reload complete: generation {gen} serving"
                    )
                systemd.notify("READY=1", f"STATUS=generation {gen}: {len(ready)} workers serving")

    def _close_unused_listeners(self) -> None:
        """Close what a reload stopped listening on (old workers hold their own copies)."""
        unused = [lis for lis in self.open_listeners if lis not in self.listeners]
        for listener in unused:
            self.log.info("No longer listening at: %s", listener.url())
        sockets.close_listeners(unused, unlink=not self.master_pid)
        self.open_listeners = list(self.listeners)

    def spawn_worker(self) -> None:
        assert self.scoreboard is not None
        self.worker_age += 1
        slot = self.scoreboard.claim()
        jitter = random.randint(0, self.cfg.max_requests_jitter) if self.cfg.max_requests else 0
        worker = self.worker_class(
            age=self.worker_age,
            ppid=self.pid,
            listeners=self.listeners,
            app=self.app,
            cfg=self.cfg,
            log=self.log,
            slot=slot,
            generation=self.generation,
            max_requests=self.cfg.max_requests + jitter if self.cfg.max_requests else 0,
        )
        if self.quic is not None:
            alt_svc = quic_sockets.alt_svc(self.cfg, self.quic.groups)
            worker.quic = self.quic.share(self.quic.take(), alt_svc)
        worker.watch_files = self.cfg.reload and not any(
            r.worker.watch_files
            for r in self.workers.values()
            if r.generation == self.generation and not r.stopping
        )
        self.cfg.pre_fork(self, worker)
        self.scoreboard.prepare(slot, self.generation)
        # Until the child has its own handlers, it runs the arbiter's: a TERM
        # caught there would only be queued in the child's copy of the queue,
        # and the worker would serve on until SIGKILL. Blocked, the signal
        # waits for the worker's handlers (Worker._init_signals unblocks).
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, self.worker_class.SIGNALS)
        # Frozen, the master's objects are out of the worker's garbage collections,
        # which would otherwise write to every one of them and so copy every page
        # they share with the master. The master unfreezes its own at once.
        gc.freeze()
        try:
            pid = os.fork()
        except BaseException:
            gc.unfreeze()
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            raise
        if pid:
            gc.unfreeze()
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            slot.set_pid(pid)
            worker.pid = pid
            retire_at = self.ops.lifetime_deadline()
            self.workers[pid] = WorkerRecord(pid, worker, retire_at=retire_at)
            self.log.info("Booting worker with pid: %s (generation %d)", pid, self.generation)
            return
        self._run_worker(worker)

    def _run_worker(self, worker: Worker) -> None:
        """The child side of spawn_worker; never returns."""
        code = WORKER_BOOT_ERROR
        try:
            worker.pid = os.getpid()
            worker.slot.set_pid(worker.pid)
            self.ops.in_child()
            self.workers.clear()
            process.drop_privileges(self.cfg.uid, self.cfg.gid, self.cfg.initgroups)
            self.cfg.post_fork(self, worker)
            code = worker.init_process()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            self.log.exception("Exception while starting worker %s", os.getpid())
        finally:
            with contextlib.suppress(BaseException):
                self.log.info("Worker exiting (pid: %s)", worker.pid)
                self.cfg.worker_exit(self, worker)
            worker.exit(code)

    def _reap_workers(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if not pid:
                return
            if pid == self.reexec_pid:
                self._reexec_child_exited(status)
                continue
            if self.ops.reaped(pid, status):
                continue
            rec = self.workers.pop(pid, None)
            if rec is None:
                continue
            self._worker_exited(rec, status)

    def _worker_exited(self, rec: WorkerRecord, status: int) -> None:
        assert self.scoreboard is not None
        self.scoreboard.release(rec.worker.slot)
        if self.quic is not None and rec.worker.quic is not None:
            self.quic.release(rec.worker.quic.index)
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            sig = -code
            if sig == signal.SIGKILL and not rec.killed:
                self.log.error("Worker (pid:%s) was sent SIGKILL! Perhaps out of memory?", rec.pid)
            elif sig != signal.SIGKILL:
                self.log.error("Worker (pid:%s) was killed by signal %s", rec.pid, sig)
        elif code and not rec.stopping and code not in (APP_LOAD_ERROR, WORKER_BOOT_ERROR):
            self.log.error("Worker (pid:%s) exited with code %s", rec.pid, code)
        self.ops.worker_exited(rec.exit_cause(code))
        with contextlib.suppress(Exception):
            self.cfg.child_exit(self, rec.worker)
        if code in (APP_LOAD_ERROR, WORKER_BOOT_ERROR) and not rec.ready:
            self._boot_failed(rec, code)

    def _boot_failed(self, rec: WorkerRecord, code: int) -> None:
        what = "app failed to load" if code == APP_LOAD_ERROR else "worker failed to boot"
        if rec.generation != self.generation:
            return  # a generation we already gave up on
        if rec.generation not in self.proven:
            fallback = max(
                (r.generation for r in self.workers.values() if r.generation in self.proven),
                default=0,
            )
            if fallback:
                self._reload_failed(what, fallback)
                return
            raise HaltServer(f"{what} (see the error above)", code)
        # The generation booted before: something changed under it (a database
        # down at import time, say). Keep the others serving; retry slower.
        self.respawn_delay = min(max(self.respawn_delay * 2, 1.0), MAX_RESPAWN_DELAY)
        self.next_spawn_at = time.monotonic() + self.respawn_delay
        self.log.error("Worker failed to boot (%s); next try in %.0fs", what, self.respawn_delay)

    def _terminate(self, rec: WorkerRecord, sig: int = signal.SIGTERM, *, cause: str) -> None:
        rec.cause = rec.cause or cause
        if sig == signal.SIGKILL:
            self._kill_hard(rec)
            return
        if not rec.term_sent:
            rec.term_sent = time.monotonic()
            rec.worker.slot.set_state(State.STOPPING)  # for the metrics, at once
            # New QUIC connections go elsewhere before this one stops taking them.
            self._route_quic()
            self._kill(rec.pid, sig)

    def _route_quic(self) -> None:
        """New QUIC connections to the workers that take them now (ready, not
        replaced, not stopping); before any is ready, to the current
        generation's booting ones, whose sockets hold the packets till they read."""
        if self.quic is None or self.reexec_pid:
            return  # a USR2 child master routes from now on
        live = [r for r in self.workers.values() if r.worker.quic is not None and not r.stopping]
        accepting = [r.worker.quic.index for r in live if r.ready and not r.retiring]
        if not accepting:
            current = [r for r in live if r.generation == self.generation]
            accepting = [r.worker.quic.index for r in current]
        try:
            self.quic.route(accepting)
        except OSError as exc:
            self.log.error("HTTP/3: cannot route new connections: %s", exc)

    def _kill_hard(self, rec: WorkerRecord) -> None:
        rec.killed = True
        rec.term_sent = rec.term_sent or time.monotonic()
        self._kill(rec.pid, signal.SIGKILL)

    def _kill(self, pid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    def retire(self, rec: WorkerRecord, cause: str, reason: str) -> None:
        """Replace a serving worker without a capacity gap: as at max_requests,
        the replacement starts now and the worker gets TERM once it serves."""
        rec.retire = cause
        rec.worker.slot.set_state(State.RETIRING)
        self.log.info("Worker %s %s: a replacement is starting", rec.pid, reason)
        self._route_quic()

    # -- stopping -----------------------------------------------------------------
    def _stop(self, graceful: bool = True) -> None:
        """Stop every worker: TERM and wait graceful_timeout, or QUIT at once."""
        if self.stopping and not self.workers:
            return
        self.stopping = True
        if self.scoreboard is not None:
            self.scoreboard.master.set_draining(True)
        systemd.notify("STOPPING=1")
        self.ops.stop_helper()
        # Unix sockets handed to a USR2 child, or to systemd, must stay.
        unlink = not self.reexec_pid and not self.master_pid and not self.systemd_sockets
        opened = self.open_listeners + [
            lis for lis in self.listeners if lis not in self.open_listeners
        ]
        sockets.close_listeners(opened, unlink=unlink)
        self.listeners = self.open_listeners = []
        sig = signal.SIGTERM if graceful else signal.SIGQUIT
        limit = self.cfg.graceful_timeout if graceful else min(self.cfg.graceful_timeout, 5.0)
        for rec in self.workers.values():
            rec.term_sent = time.monotonic()
            rec.cause = rec.cause or "stop"
            self._kill(rec.pid, sig)
        deadline = time.monotonic() + limit
        while self.workers and time.monotonic() < deadline:
            self._reap_workers()
            time.sleep(0.05)
        for rec in self.workers.values():
            self._kill_hard(rec)
        while self.workers:
            self._reap_workers()
            time.sleep(0.01)
