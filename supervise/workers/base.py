"""The worker contract: everything a worker class gets for free after fork.

A worker class subclasses ``Worker`` and writes ``run()``: serve on the
inherited listeners, call ``notify()`` often enough, count requests with
``request_done()``, and return once ``alive`` turns False after finishing
in-flight work. The arbiter never looks inside a worker; it only reads the
worker's scoreboard slot and sends it signals.

What differs between worker classes is said through public hooks, never by
overriding the boot sequence: ``patch()`` (before the app is imported),
``create_tls()``, ``on_stop()``, ``signal_handlers()`` (an event-loop worker
routes them through its loop) and ``spawn_thread()``. The Python workers that
accept connections themselves share ``workers.accepting.SocketWorker``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from supervise import _native, affinity, loading
from supervise.http.state import IDLE_GRACE_ON_STOP, ServeState
from supervise.quic_sockets import QuicShare
from supervise.scoreboard import ResponseFigures, Slot, State

if TYPE_CHECKING:
    import ssl

    from supervise.config import Config
    from supervise.logs import Logger
    from supervise.sockets import Listener

__all__ = ["APP_LOAD_ERROR", "IDLE_GRACE_ON_STOP", "WORKER_BOOT_ERROR", "Worker"]

# Exit statuses the arbiter understands (same numbers as Gunicorn's).
WORKER_BOOT_ERROR = 3
APP_LOAD_ERROR = 4


class Worker:
    """Base class of every worker; subclasses set ``interface`` and write ``run()``."""

    interface: ClassVar[str] = "wsgi"
    # Signals whose arbiter handlers must not leak into the worker.
    SIGNALS: ClassVar[tuple[int, ...]] = (
        signal.SIGHUP,
        signal.SIGQUIT,
        signal.SIGINT,
        signal.SIGTERM,
        signal.SIGTTIN,
        signal.SIGTTOU,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGWINCH,
        signal.SIGCHLD,
        signal.SIGABRT,
    )

    def __init__(
        self,
        *,
        age: int,
        ppid: int,
        listeners: list[Listener],
        app: Any,
        cfg: Config,
        log: Logger,
        slot: Slot,
        generation: int,
        max_requests: int,
    ) -> None:
        self.age = age
        self.ppid = ppid
        self.listeners = listeners
        self.app = app
        self.cfg = cfg
        self.log = log
        self.slot = slot
        # HTTP/3: its index in the --quic-bind groups, set by the arbiter (QuicShare).
        self.quic: QuicShare | None = None
        self.generation = generation
        self.max_requests = max_requests or sys.maxsize
        self.timeout = float(cfg.timeout)
        self.pid = 0
        self.nr = 0
        self.alive = True
        self.booted = False
        self.aborted = False
        self.retiring = False
        # --reload: the arbiter picks one worker per generation to watch files.
        self.watch_files = False
        self.wakeup_fd = -1
        self.ssl_context: ssl.SSLContext | None = None
        # --static-map (supervise._native.StaticFiles), made at boot; None: off.
        self.statics: Any = None
        # What the protocol code sees of this worker (stopping, ...).
        self.state = ServeState()
        self._wakeup_w = -1
        self._last_ppid_check = 0.0
        # Per-response figures (status, duration, body bytes), counted only when
        # something reads them; published to the slot with the heartbeat.
        self.figures = ResponseFigures(slot) if metrics_enabled(cfg) else None
        self.record: Callable[[int, float, int], None] | None = (
            self.figures.record if self.figures is not None else None
        )

    def __str__(self) -> str:
        return f"<Worker {self.pid}>"

    # -- after fork ----------------------------------------------------------
    def init_process(self) -> int:
        """Runs in the child right after fork; returns the exit status.

        A failure before the worker is ready exits with WORKER_BOOT_ERROR or
        APP_LOAD_ERROR, which tells the arbiter not to respawn blindly.
        """
        self.pid = os.getpid()
        try:
            self._init_process()
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) and exc.code else WORKER_BOOT_ERROR
        except BaseException:
            self.log.exception("Worker %s failed to boot", self.pid)
            return WORKER_BOOT_ERROR
        code = 0
        try:
            self.run()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            self.log.exception("Exception in worker process %s", self.pid)
            code = 1
        finally:
            if self.figures is not None:
                self.figures.publish()  # complete before the arbiter moves them
            self.slot.set_state(State.STOPPING)
        return code

    def exit(self, code: int) -> None:
        """Leave the process without the arbiter's atexit handlers or finalisers."""
        try:
            self.log.stop_background_writes()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

    def _init_process(self) -> None:
        self._set_proctitle()
        self.log.count = self.slot.count_log
        self.log.start_background_writes()
        random.seed()
        self._pin_to_core()
        self._init_signals()
        self.patch()
        # Per-process switches of the native response heads, for every worker class.
        _native.set_server_header(None if not self.cfg.server_header else "supervise")
        _native.set_date_header(self.cfg.date_header)
        _native.keep_freed_heap()
        self.ssl_context = self.create_tls()
        self.statics = self._static_files()
        if self.app is None:
            self.app = self._load_app()
        else:
            self._check_app(self.app)
        self.cfg.post_worker_init(self)
        if self.watch_files:
            self._start_file_watcher()
        self.startup()
        self.booted = True
        self.slot.heartbeat()
        self.slot.set_state(State.READY)
        self.wake_arbiter()

    def _static_files(self) -> Any:
        """--static-map, resolved here where the working directory is
        --chdir; a folder gone since the master checked it fails the boot
        with one line (the canary rule then stops the server at start)."""
        from supervise.static_files import static_files

        try:
            return static_files(self.cfg)
        except ValueError as exc:
            self.log.error("%s", exc)
            raise SystemExit(WORKER_BOOT_ERROR) from None

    # -- hooks a worker class may override ---------------------------------------
    def patch(self) -> None:
        """Runs after fork, before TLS and the app are set up: monkey-patching goes here."""

    def startup(self) -> None:
        """Runs once the app is loaded, before the worker is marked READY.

        An event-loop worker creates its loop here and runs the app's lifespan
        startup; raising ``SystemExit(APP_LOAD_ERROR)`` fails the boot, so the
        canary rule covers a failing startup (at start the arbiter exits with
        the error shown once; on HUP the serving generation stays).
        """

    def create_tls(self) -> Any:
        """The TLS context this worker serves with, or None without TLS.

        The default is a Python ``ssl.SSLContext``; a worker that does TLS
        natively (rustls) overrides this to build and check its own from the
        same settings. A bad certificate is one log line and a boot error.
        """
        if not self.cfg.is_ssl:
            return None
        from supervise.tls import TLSConfigError, create_ssl_context

        try:
            return create_ssl_context(self.cfg)
        except TLSConfigError as exc:
            self.log.error("%s", exc)  # a bad certificate needs no traceback
            raise SystemExit(WORKER_BOOT_ERROR) from None

    def on_stop(self) -> None:
        """A graceful stop has begun (``alive`` is False, ``state.stopping`` True).

        It runs where the stop signal is handled: in a Python signal handler
        for a worker that keeps the default handlers, so it must only set flags
        or write to a pipe (no locks); on the event loop for a worker that
        routes ``signal_handlers()`` through its loop.
        """

    def signal_handlers(self) -> dict[int, Callable[[], None]]:
        """The worker's signals and what each does, as zero-argument callables.

        The base class installs them with ``signal.signal`` and wakes
        ``wakeup_fd`` on every signal. A worker with its own event loop
        re-registers them there instead (``loop.add_signal_handler``), which
        takes the wake-up over: ``wakeup_fd`` is then never written. SIGABRT
        is not among them on purpose: it must run even while the loop is
        blocked by the app (that is why the arbiter sends it), so it stays a
        plain signal handler.
        """
        return {
            signal.SIGTERM: self.begin_stop,
            signal.SIGQUIT: self.quit,
            signal.SIGINT: self.quit,
            signal.SIGUSR1: self.log.reopen_files,
        }

    def spawn_thread(self, target: Callable[[], None], name: str) -> None:
        """Run ``target`` on an operating-system thread (a worker whose threads
        are green, gevent, starts it where native code may block)."""
        threading.Thread(target=target, name=name, daemon=True).start()

    def _start_file_watcher(self) -> None:
        from supervise.reloader import FileWatcher

        watcher = FileWatcher(
            extra_files=self.cfg.reload_extra_files,
            force_polling=self.cfg.reload_engine == "poll",
            on_change=lambda: os.kill(self.ppid, signal.SIGHUP),
            log=self.log,
        )
        self.spawn_thread(watcher.run, "supervise-reloader")

    def _pin_to_core(self) -> None:
        """--worker-cpu-affinity, before anything starts threads (they inherit it)."""
        try:
            core = affinity.pin(self.cfg.worker_cpu_affinity, self.slot.index)
        except OSError as exc:
            self.log.warning("Worker %s cannot be pinned: %s", self.pid, exc)
            return
        if core is not None:
            self.log.debug("Worker %s pinned to core %s", self.pid, core)

    def _set_proctitle(self) -> None:
        try:
            from setproctitle import setproctitle
        except ImportError:  # pragma: no cover - it is a declared dependency
            return
        setproctitle(f"supervise: worker [{self.cfg.proc_name}] gen {self.generation}")

    def _load_app(self) -> Any:
        try:
            app = loading.load_app(self.cfg)
            self._check_app(app)
        except loading.AppLoadError as exc:
            if exc.details:
                # The traceback's last line already says what went wrong.
                self.log.error("Failed to load %r:\n%s", self.cfg.app_uri, exc.details.rstrip())
            else:
                self.log.error("%s", exc)
            raise SystemExit(APP_LOAD_ERROR) from None
        return app

    def _check_app(self, app: Any) -> None:
        try:
            self.interface_for(app, self.cfg)
        except loading.AppLoadError as exc:
            self.log.error("%s", exc)
            raise SystemExit(APP_LOAD_ERROR) from None

    @classmethod
    def import_in_master(cls, cfg: Config) -> None:
        """Import, in the master before it forks, the libraries every worker of this
        class would otherwise import after fork (an event loop, a WebSocket
        library), so that the workers share those pages instead of each holding a
        copy. A library that fails to import is left to the worker, which says so."""

    @classmethod
    def interface_for(cls, app: Any, cfg: Config) -> str:
        """The interface this class serves ``app`` with (the master asks too, before
        forking); AppLoadError, saying which ``-k`` fits, when it cannot serve it.
        A class that serves several interfaces picks one here."""
        loading.check_interface(app, cfg.app_uri or "app", cls.interface, cfg.worker_class_str)
        return cls.interface

    def _init_signals(self) -> None:
        for sig in self.SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        os.set_inheritable(r, False)
        os.set_inheritable(w, False)
        self.wakeup_fd, self._wakeup_w = r, w
        signal.set_wakeup_fd(w)
        for sig, action in self.signal_handlers().items():
            signal.signal(sig, _as_signal_handler(action))
        signal.signal(signal.SIGABRT, _as_signal_handler(self.abort))
        # A `pkill -HUP supervise` aimed at the master must not kill workers.
        for sig in (signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGWINCH):
            signal.signal(sig, signal.SIG_IGN)
        # The arbiter forks with these blocked: one sent since (a TERM from a
        # reload that finished fast) is delivered now, to the handlers above.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self.SIGNALS)

    def drain_wakeup(self) -> None:
        """Empty the wake-up pipe after the selector reported it readable."""
        try:
            while os.read(self.wakeup_fd, 4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    # -- what the signals do -----------------------------------------------------
    def begin_stop(self) -> None:
        """TERM: stop gracefully (finish in-flight work, then ``run()`` returns)."""
        if not self.alive:
            return
        self.alive = False
        self.state.stopping = True
        self.on_stop()

    def quit(self) -> None:
        """INT/QUIT: exit now."""
        self.alive = False
        self.cfg.worker_int(self)
        raise SystemExit(0)

    def abort(self) -> None:
        """ABRT (the arbiter saw no heartbeat): log every thread's stack and exit."""
        self.alive = False
        self.aborted = True
        self.log.critical(
            "Worker %s (gen %s) aborted: no heartbeat for %ss; stack of every thread:\n%s",
            self.pid,
            self.generation,
            self.cfg.timeout,
            format_all_stacks(),
        )
        try:
            self.cfg.worker_abort(self)
        finally:
            # A worker stuck while booting must not be respawned forever.
            self.exit(1 if self.booted else WORKER_BOOT_ERROR)

    # -- used by run() ----------------------------------------------------------
    def notify(self, *, busy_for: float = 0.0) -> None:
        """Stamp the heartbeat; once a second publish the response figures and
        stop serving when the arbiter is gone. ``busy_for``: how long the app
        has held every thread that runs it (the stamp goes back that far, so
        the arbiter's timeout counts from there)."""
        self.slot.heartbeat(busy_for)
        now = time.monotonic()
        if now - self._last_ppid_check >= 1.0:
            self._last_ppid_check = now
            if self.figures is not None:
                self.figures.publish()
            # What a burst of large bodies left free in the heap goes back
            # to the system (see native/src/heap.rs).
            _native.give_back_freed_heap()
            if os.getppid() != self.ppid:
                self.log.info("Parent changed, shutting down: %s", self)
                self.begin_stop()

    def request_done(self, count: int = 1) -> None:
        """Count finished requests (a worker counting in batches passes how many);
        past max_requests ask for a replacement."""
        self.nr += count
        self.slot.set_requests(self.nr)
        if self.nr >= self.max_requests and not self.retiring:
            self.retiring = True
            self.slot.set_state(State.RETIRING)
            self.wake_arbiter()
            self.log.info(
                "Worker %s served %d requests (max_requests); a replacement is starting",
                self.pid,
                self.nr,
            )

    def wake_arbiter(self) -> None:
        """Make the arbiter look at the scoreboard now rather than at its next tick.

        SIGCHLD is harmless to it: its handler only wakes the loop, and a
        reap that finds no dead child does nothing.
        """
        with contextlib.suppress(OSError):
            os.kill(self.ppid, signal.SIGCHLD)

    def health_checked(self) -> None:
        """One --health-path probe answered (counted for the metrics only)."""
        if self.figures is not None:
            self.figures.health_checks += 1

    def request_finished(self, status: int, seconds: float, sent: int) -> None:
        """One response is complete: its figures (when metrics are on) and the count.

        ``seconds`` is only read when ``record`` is set; a caller that does not
        time requests otherwise passes 0.0.
        """
        record = self.record
        if record is not None:
            record(status, seconds, sent)
        self.request_done()

    def set_active(self, count: int) -> None:
        """Open connections (scoreboard)."""
        self.slot.set_active(count)

    def set_in_flight(self, count: int) -> None:
        """Requests being served now (scoreboard)."""
        self.slot.set_in_flight(count)

    def run(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement run()")


def metrics_enabled(cfg: Config) -> bool:
    """Whether anything reads the per-response figures (Prometheus or statsd)."""
    return bool(cfg.metrics_bind or cfg.statsd_host)


def _as_signal_handler(action: Callable[[], None]) -> Callable[[int, Any], None]:
    def handler(signum: int, frame: Any) -> None:
        action()

    return handler


def format_all_stacks() -> str:
    """The Python stack of every thread, for a worker that stopped answering."""
    names = {t.ident: t.name for t in threading.enumerate()}
    chunks = []
    for ident, frame in sys._current_frames().items():
        chunks.append(f'Thread "{names.get(ident, ident)}":\n')
        chunks.extend(traceback.format_stack(frame))
    return "".join(chunks).rstrip()
