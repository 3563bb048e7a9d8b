"""The worker contract: everything a worker class gets for free after fork.

A worker class subclasses ``Worker`` and writes ``run()``: accept on the
inherited listeners, serve, call ``notify()`` often enough, count requests with
``request_done()``, and return once ``alive`` turns False after finishing
in-flight work. The arbiter never looks inside a worker; it only reads the
worker's scoreboard slot and sends it signals.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any, ClassVar

from supervise import loading
from supervise.scoreboard import Slot, State

if TYPE_CHECKING:
    import ssl

    from supervise.config import Config
    from supervise.logs import Logger
    from supervise.sockets import Listener

# Exit statuses the arbiter understands (same numbers as Gunicorn's).
WORKER_BOOT_ERROR = 3
APP_LOAD_ERROR = 4

# On a graceful stop, a kept-alive connection idle for less than this may be
# about to carry the client's next request: it is answered (with
# "Connection: close") rather than closed under the request.
IDLE_GRACE_ON_STOP = 0.2

# accept() failures that concern one connection only: go on with the next one.
ACCEPT_RETRY = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR})
# Out of descriptors or memory: stop accepting for a moment instead of spinning.
ACCEPT_BACKOFF = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


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
        self._wakeup_w = -1
        self._last_ppid_check = 0.0

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
            self.slot.set_state(State.STOPPING)
        return code

    def exit(self, code: int) -> None:
        """Leave the process without the arbiter's atexit handlers or finalisers."""
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

    def _init_process(self) -> None:
        self._set_proctitle()
        random.seed()
        self._init_signals()
        if self.cfg.is_ssl:
            from supervise.tls import TLSConfigError, create_ssl_context

            try:
                self.ssl_context = create_ssl_context(self.cfg)
            except TLSConfigError as exc:
                self.log.error("%s", exc)  # a bad certificate needs no traceback
                raise SystemExit(WORKER_BOOT_ERROR) from None
        if self.app is None:
            self.app = self._load_app()
        else:
            self._check_app(self.app)
        self.cfg.post_worker_init(self)
        if self.watch_files:
            from supervise.reloader import start_reloader

            start_reloader(self)
        self.booted = True
        self.slot.heartbeat()
        self.slot.set_state(State.READY)
        self.wake_arbiter()

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
            loading.check_interface(
                app, self.cfg.app_uri or "app", self.interface, self.cfg.worker_class_str
            )
        except loading.AppLoadError as exc:
            self.log.error("%s", exc)
            raise SystemExit(APP_LOAD_ERROR) from None

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
        signal.signal(signal.SIGTERM, self.handle_term)
        signal.signal(signal.SIGQUIT, self.handle_quit)
        signal.signal(signal.SIGINT, self.handle_quit)
        signal.signal(signal.SIGABRT, self.handle_abort)
        signal.signal(signal.SIGUSR1, self.handle_usr1)
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

    # -- signal handlers -------------------------------------------------------
    def handle_term(self, signum: int, frame: Any) -> None:
        self.alive = False

    def handle_quit(self, signum: int, frame: Any) -> None:
        self.alive = False
        self.cfg.worker_int(self)
        raise SystemExit(0)

    def handle_abort(self, signum: int, frame: Any) -> None:
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

    def handle_usr1(self, signum: int, frame: Any) -> None:
        self.log.reopen_files()

    # -- used by run() ----------------------------------------------------------
    def notify(self) -> None:
        """Stamp the heartbeat; stop serving when the arbiter is gone."""
        self.slot.heartbeat()
        now = time.monotonic()
        if now - self._last_ppid_check >= 1.0:
            self._last_ppid_check = now
            if os.getppid() != self.ppid:
                self.log.info("Parent changed, shutting down: %s", self)
                self.alive = False

    def request_done(self) -> None:
        """Count a finished request; past max_requests ask for a replacement."""
        self.nr += 1
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

    def accept_failed(self, exc: OSError) -> bool:
        """Judge an accept() error: True means try the next connection, False
        means pause accepting for a moment (logged); anything else is a bug and
        is raised."""
        if exc.errno in ACCEPT_RETRY:
            return True
        if exc.errno in ACCEPT_BACKOFF:
            self.log.error("accept() failed: %s; pausing for a moment", exc)
            return False
        raise exc

    def wrap_tls(self, sock: Any, addr: Any) -> Any:
        """The accepted socket wrapped for TLS (handshake left to the caller), or
        None when wrapping failed; the socket is then closed."""
        assert self.ssl_context is not None
        try:
            return self.ssl_context.wrap_socket(
                sock,
                server_side=True,
                do_handshake_on_connect=False,
                suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
            )
        except (OSError, ValueError) as exc:
            self.log.debug("TLS setup for %s failed: %s", addr, exc)
            sock.close()
            return None

    def set_active(self, count: int) -> None:
        self.slot.set_active(count)

    def run(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement run()")


def format_all_stacks() -> str:
    """The Python stack of every thread, for a worker that stopped answering."""
    names = {t.ident: t.name for t in threading.enumerate()}
    chunks = []
    for ident, frame in sys._current_frames().items():
        chunks.append(f'Thread "{names.get(ident, ident)}":\n')
        chunks.extend(traceback.format_stack(frame))
    return "".join(chunks).rstrip()
