"""The master's end of ``supervise ctl``: a unix socket served from the
arbiter's one loop, without ever blocking it.

Protocol: the client sends one JSON object on one line (``{"command":
"scale", "args": ["+1"]}``); the master answers one JSON object on one line
(``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``) and closes,
except that an answer may wait (a reload answers once the new generation
serves or has failed) and ``stop`` keeps the connection open until the master
exits, so the client sees when it is gone.

Why the arbiter serves this itself (the metrics have a helper process): a
command acts on the arbiter's own state (workers, generations), the protocol
is one small line each way, not HTTP, and everything is bounded: sockets are
non-blocking, a request must arrive whole within ``REQUEST_TIMEOUT`` and fit
in ``MAX_REQUEST`` bytes, an answer must be taken within ``REPLY_TIMEOUT``,
and at most ``MAX_CONNECTIONS`` are open. A slow or hostile client costs a
few polls, never a wait.

Who may connect: the socket file is mode 0600, owned by the master's user,
and each peer's credentials (SO_PEERCRED) must be that user's or root's.

USR2: a new master binds its socket only once its workers serve: it binds a
temporary name, hard-links the old master's socket to ``PATH.oldbin`` and
renames its own over PATH, so PATH always answers, first from the old master,
then from the new one, and the old one stays reachable at ``PATH.oldbin``. A
master only ever unlinks the path names that still lead to its own socket.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import socket
import stat
import struct
import time
from collections.abc import Callable
from typing import Any

MAX_REQUEST = 64 * 1024
MAX_CONNECTIONS = 16
REQUEST_TIMEOUT = 5.0
REPLY_TIMEOUT = 5.0
_NEVER = float("inf")


class ControlError(Exception):
    """The control socket cannot be set up; str() is the one-line reason."""


class Connection:
    """One client of the control socket."""

    __slots__ = ("close_after", "deadline", "inbuf", "outbuf", "sock", "waiting")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = b""
        self.deadline = time.monotonic() + REQUEST_TIMEOUT
        self.waiting = False  # the request is in; the answer will come later
        self.close_after = True


def _peer_allowed(sock: socket.socket) -> bool:
    if not hasattr(socket, "SO_PEERCRED"):
        return True  # the file mode is the check where the kernel gives no credentials
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return uid in (0, os.geteuid())


class ControlServer:
    """A non-blocking unix-socket server driven by the arbiter's poll loop."""

    def __init__(
        self, *, path: str, log: Any, dispatch: Callable[[Connection, dict[str, Any]], None]
    ) -> None:
        """``dispatch(conn, request)`` runs each complete request; it answers with
        ``reply()``, at once or later."""
        self.path = path
        self.log = log
        self.dispatch = dispatch
        self.sock: socket.socket | None = None
        self.conns: dict[int, Connection] = {}
        self._inode: tuple[int, int] | None = None

    # -- setting up -----------------------------------------------------------------
    def open(self) -> None:
        """Bind PATH at start: refused while another master answers there."""
        try:
            mode = os.stat(self.path).st_mode
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ControlError(f"control socket {self.path}: {exc.strerror}") from None
        else:
            if not stat.S_ISSOCK(mode):
                raise ControlError(f"control socket {self.path}: the path exists, not a socket")
            if socket_answers(self.path):
                raise ControlError(f"control socket {self.path}: another master is listening there")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)  # stale: its master is gone
        self.sock = self._bind(self.path)

    def take_over(self) -> None:
        """USR2's new master, now serving: PATH becomes ours, the old master's
        socket stays reachable at PATH.oldbin."""
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        sock = self._bind(tmp)
        old = self.path + ".oldbin"
        try:
            if socket_answers(self.path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(old)
                os.link(self.path, old)
            os.rename(tmp, self.path)
        except OSError as exc:
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise ControlError(f"control socket {self.path}: {exc.strerror}") from None
        self.sock = sock
        self.log.info("Control socket taken over: %s (the old master: %s)", self.path, old)

    def reclaim(self) -> None:
        """The old master again, its USR2 child gone: PATH back to this master
        when the child had taken it."""
        if self.sock is None or self._path_is_ours(self.path):
            return
        old = self.path + ".oldbin"
        if self._path_is_ours(old) and not socket_answers(self.path):
            with contextlib.suppress(OSError):
                os.rename(old, self.path)
                self.log.info("Control socket back at %s", self.path)

    def _bind(self, path: str) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # created 0600: no window with a wider mode
        try:
            sock.bind(path)
            os.chmod(path, 0o600)
            sock.listen(MAX_CONNECTIONS)
        except OSError as exc:
            sock.close()
            raise ControlError(f"control socket {path}: {exc.strerror or exc}") from None
        finally:
            os.umask(old_umask)
        sock.setblocking(False)
        info = os.stat(path)
        self._inode = (info.st_dev, info.st_ino)
        return sock

    def _path_is_ours(self, path: str) -> bool:
        try:
            info = os.stat(path)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == self._inode

    # -- the loop -------------------------------------------------------------------
    def watch(self) -> dict[int, int]:
        """fd -> poll events, for the arbiter's wait."""
        fds: dict[int, int] = {}
        if self.sock is not None:
            fds[self.sock.fileno()] = select.POLLIN
        for fd, conn in self.conns.items():
            if conn.outbuf:
                fds[fd] = select.POLLOUT
            elif not conn.waiting:
                fds[fd] = select.POLLIN
            else:
                fds[fd] = 0  # still told about a hang-up
        return fds

    def ready(self, fd: int, events: int) -> None:
        if self.sock is not None and fd == self.sock.fileno():
            self._accept()
            return
        conn = self.conns.get(fd)
        if conn is None:
            return
        if events & select.POLLOUT:
            self._flush(conn)
        elif events & select.POLLIN:
            self._read(conn)
        elif events & (select.POLLHUP | select.POLLERR):
            self._drop(conn)

    def expire(self, now: float) -> None:
        """Drop clients past their deadline (call about once a second)."""
        for conn in list(self.conns.values()):
            if now > conn.deadline:
                self._drop(conn)

    def _accept(self) -> None:
        assert self.sock is not None
        for _ in range(MAX_CONNECTIONS):
            try:
                sock, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    return
                raise
            sock.setblocking(False)
            conn = Connection(sock)
            self.conns[sock.fileno()] = conn
            if not _peer_allowed(sock):
                self.reply(conn, {"ok": False, "error": "permission denied"})
            elif len(self.conns) > MAX_CONNECTIONS:
                self.reply(conn, {"ok": False, "error": "busy: too many control connections"})

    def _read(self, conn: Connection) -> None:
        try:
            data = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        conn.inbuf += data
        line, sep, _ = conn.inbuf.partition(b"\n")
        if not sep:
            if len(conn.inbuf) > MAX_REQUEST:
                self.reply(conn, {"ok": False, "error": "request too long"})
            return
        conn.waiting = True
        conn.deadline = _NEVER
        try:
            request = json.loads(line)
            if not isinstance(request, dict) or not isinstance(request.get("command"), str):
                raise ValueError("not a command")
        except ValueError:
            self.reply(conn, {"ok": False, "error": "malformed request"})
            return
        self.dispatch(conn, request)

    def reply(self, conn: Connection, answer: dict[str, Any], *, close: bool = True) -> None:
        """Send ``answer``; the connection closes once it is out, unless ``close``
        is False (it then stays open until the master exits)."""
        if conn.sock.fileno() not in self.conns:
            return  # the client went away meanwhile
        conn.outbuf += json.dumps(answer).encode() + b"\n"
        conn.close_after = close
        conn.waiting = not close
        conn.deadline = time.monotonic() + REPLY_TIMEOUT
        self._flush(conn)

    def _flush(self, conn: Connection) -> None:
        try:
            sent = conn.sock.send(conn.outbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        conn.outbuf = conn.outbuf[sent:]
        if conn.outbuf:
            return
        if conn.close_after:
            self._drop(conn)
        else:
            conn.deadline = _NEVER

    def _drop(self, conn: Connection) -> None:
        self.conns.pop(conn.sock.fileno(), None)
        with contextlib.suppress(OSError):
            conn.sock.close()

    # -- leaving --------------------------------------------------------------------
    def close(self) -> None:
        """The master is exiting: unlink what still leads to this socket, close all."""
        if self.sock is not None:
            for path in (self.path, self.path + ".oldbin"):
                if self._path_is_ours(path):
                    with contextlib.suppress(OSError):
                        os.unlink(path)
            self.sock.close()
            self.sock = None
        for conn in list(self.conns.values()):
            self._drop(conn)

    def close_in_child(self) -> None:
        """In a forked worker or helper: the master's sockets are not its own."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
        for conn in self.conns.values():
            with contextlib.suppress(OSError):
                conn.sock.close()
        self.conns = {}
        self.sock = None


def socket_answers(path: str) -> bool:
    """Whether a process accepts connections on the unix socket ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True
