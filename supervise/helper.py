"""The arbiter's side of the metrics helper: one small process that answers
Prometheus scrapes (--metrics-bind) and sends statsd datagrams (--statsd-host).

Why a helper process and not the arbiter's loop (docs/internals.md, "The
metrics helper"): the arbiter never parses HTTP and must never wait on a
client, and a scrape is HTTP from a client the arbiter does not control. The
helper reads everything from the shared scoreboard it inherits, so it needs
no channel to the arbiter; the arbiter binds its socket (a bad address is an
error at start, not in a child), forks it, and restarts it when it dies.

During a USR2 upgrade the old master keeps answering scrapes until it exits;
the new master binds the metrics address as soon as it is free (it tries
again every second), so a scrape always describes one master's workers.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import stat
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from supervise import process
from supervise.control import socket_answers
from supervise.settings_ops import split_host_port, unix_path
from supervise.validators import Invalid

if TYPE_CHECKING:
    from supervise.config import Config
    from supervise.scoreboard import Scoreboard

RETRY_BIND = 1.0
MAX_RESTART_DELAY = 30.0
# A helper that ran this long before dying restarts at once (the delay resets).
STABLE_AFTER = 60.0


class HelperError(Exception):
    """The metrics address cannot be bound; str() is the one-line reason."""


def bind_metrics(address: str, *, umask: int) -> tuple[socket.socket, str | None]:
    """A listening socket on ``address`` and the unix path it created, if any.
    A unix socket is bound under the ``umask`` setting, as the listeners are,
    so a scraper running as another user can connect by default.
    Raises OSError (EADDRINUSE while another process holds it) or HelperError."""
    path = unix_path(address)
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISSOCK(os.stat(path).st_mode):
                raise HelperError(f"metrics_bind {address}: the path exists, not a socket")
            if not socket_answers(path):
                os.unlink(path)  # stale
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target: Any = path
    else:
        try:
            host, port = split_host_port(address, None)
        except Invalid as exc:
            raise HelperError(f"metrics_bind: {exc}") from None
        try:
            info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        except OSError as exc:
            raise HelperError(f"metrics_bind {address}: cannot resolve {host!r}: {exc}") from None
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        target = info[4]
    try:
        if path is None:
            sock.bind(target)
        else:
            with process.bind_umask(umask):
                sock.bind(target)
        sock.listen(64)
    except BaseException:
        sock.close()
        raise
    return sock, path


class MetricsHelper:
    """Binds, forks, watches and stops the helper process."""

    def __init__(self, *, cfg: Config, log: Any, scoreboard: Scoreboard, takeover: bool) -> None:
        """``takeover``: this master was started by USR2; an address still held by
        the old master is waited for instead of being an error."""
        self.cfg = cfg
        self.log = log
        self.scoreboard = scoreboard
        self.takeover = takeover
        self.sock: socket.socket | None = None
        self.path: str | None = None
        self._inode: tuple[int, int] | None = None
        self.pid = 0
        self.started = 0.0
        self.restart_at = 0.0
        self.delay = 0.0
        self.next_bind = 0.0
        self.said_waiting = False

    @property
    def enabled(self) -> bool:
        return bool(self.cfg.metrics_bind or self.cfg.statsd_host)

    def bind(self) -> None:
        """Bind --metrics-bind at start (HelperError when it cannot be)."""
        address = self.cfg.metrics_bind
        if not address:
            return
        try:
            self.sock, self.path = bind_metrics(address, umask=self.cfg.umask)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE and self.takeover:
                if not self.said_waiting:
                    self.said_waiting = True
                    self.log.info(
                        "Metrics address %s is still the old master's: serving metrics "
                        "once it is free",
                        address,
                    )
                self.next_bind = time.monotonic() + RETRY_BIND
                return
            raise HelperError(f"cannot bind metrics_bind {address}: {exc.strerror}") from None
        if self.path is not None:
            info = os.stat(self.path)
            self._inode = (info.st_dev, info.st_ino)
        self.log.info("Serving metrics at: %s", address)

    def tick(self, now: float, *, listeners: list[str], in_child: Callable[[], None]) -> None:
        """Start the helper when due: at start, after a death, once the address is free."""
        if not self.enabled or self.pid:
            return
        if self.cfg.metrics_bind and self.sock is None:
            if now < self.next_bind:
                return
            try:
                self.bind()
            except HelperError as exc:
                self.log.error("%s", exc)
                self.next_bind = now + RETRY_BIND * 10
                return
            if self.sock is None:
                return
        if now < self.restart_at:
            return
        self._fork(listeners, in_child)

    def _fork(self, listeners: list[str], in_child: Callable[[], None]) -> None:
        # As for workers: the arbiter's handlers must not run in the child.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            pid = os.fork()
        except BaseException:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            raise
        if pid:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            self.pid = pid
            self.started = time.monotonic()
            self.log.debug("Metrics helper started (pid %s)", pid)
            return
        code = 1
        try:
            for sig in _SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C goes to the master
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
            sock, self.sock = self.sock, None  # in_child() closes the master's sockets
            in_child()
            self.log.count = None  # the master's log counters are the master's to write
            from supervise.metrics_server import serve

            serve(
                sock=sock,
                cfg=self.cfg,
                log=self.log,
                scoreboard=self.scoreboard,
                listeners=listeners,
                from_zero=not self.started,
            )
            code = 0
        except BaseException:
            with contextlib.suppress(BaseException):
                self.log.exception("Metrics helper failed")
        finally:
            os._exit(code)

    def reaped(self, pid: int, status: int) -> bool:
        """Whether ``pid`` was the helper; if so, plan its restart."""
        if not pid or pid != self.pid:
            return False
        self.pid = 0
        lived = time.monotonic() - self.started
        delay = min(max(self.delay * 2, 1.0), MAX_RESTART_DELAY)
        self.delay = 0.0 if lived > STABLE_AFTER else delay
        self.restart_at = time.monotonic() + self.delay
        self.log.error(
            "Metrics helper (pid %s) exited with %s; restarting in %.0fs",
            pid,
            os.waitstatus_to_exitcode(status),
            self.delay,
        )
        return True

    def stop(self) -> None:
        """Stop the helper, and close and unlink its socket (the master is exiting)."""
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(self.pid, os.WNOHANG)[0]:
                        break
                time.sleep(0.02)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
            self.pid = 0
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.path and self._inode:
            with contextlib.suppress(OSError):
                info = os.stat(self.path)
                if (info.st_dev, info.st_ino) == self._inode:
                    os.unlink(self.path)

    def close_in_child(self) -> None:
        """In a worker: the metrics socket is not its own."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None


_SIGNALS = (
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGTERM,
    signal.SIGTTIN,
    signal.SIGTTOU,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
    signal.SIGCHLD,
)
