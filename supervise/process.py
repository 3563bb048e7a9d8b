"""Process-level chores of the master: daemonizing, pid files, privileges."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import sys
from collections.abc import Iterator

# What the master, the workers and the app always mask: group and other write.
SAFE_UMASK = 0o022


def apply_process_umask() -> int:
    """Set the process's umask to the inherited one plus SAFE_UMASK, and return it.

    Files and directories the app creates, log files (also those recreated on
    USR1) and the pid file then get at most 0644 / 0755, and a stricter mask
    from the environment (systemd's ``UMask=0077``) is kept. The ``umask``
    setting is not this: as in Gunicorn, it is the mask of the unix sockets the
    server binds (``bind_umask``).
    """
    inherited = os.umask(SAFE_UMASK)
    mask = inherited | SAFE_UMASK
    os.umask(mask)
    return mask


@contextlib.contextmanager
def bind_umask(mask: int) -> Iterator[None]:
    """The ``umask`` setting around one unix socket bind (the arbiter is single-threaded,
    so nothing else creates a file meanwhile)."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


class PidfileError(Exception):
    """The pid file names a running process or cannot be written."""


class Pidfile:
    """A pid file that is only removed by the process that wrote it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = 0

    def create(self, pid: int) -> None:
        other = self.read()
        if other and other != pid and other != os.getppid() and _alive(other):
            raise PidfileError(f"already running on pid {other} (or pid file {self.path} is stale)")
        tmp = f"{self.path}.{pid}.tmp"
        try:
            with open(tmp, "w") as f:
                f.write(f"{pid}\n")
            os.replace(tmp, self.path)
        except OSError as exc:
            raise PidfileError(f"cannot write pid file {self.path}: {exc.strerror}") from None
        self.pid = pid

    def rename(self, path: str) -> None:
        with contextlib.suppress(OSError):
            os.replace(self.path, path)
        self.path = path

    def read(self) -> int:
        try:
            with open(self.path) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def unlink(self) -> None:
        if self.read() == self.pid:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def daemonize(keep_stdio: bool = False) -> None:
    """Detach from the terminal the classic way (double fork, setsid)."""
    if os.fork():
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    # The umask is left alone: apply_process_umask() follows (Gunicorn sets 022 here,
    # which would also loosen a stricter inherited one).
    if keep_stdio:
        return
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > 2:
        os.close(null)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def drop_privileges(uid: int, gid: int, initgroups: bool = False) -> None:
    """Switch a worker to the configured user/group (the master keeps its own)."""
    if gid != os.getgid():
        if initgroups:
            os.initgroups(pwd.getpwuid(uid).pw_name, gid)
        else:
            with contextlib.suppress(PermissionError):
                os.setgroups([])
        os.setgid(gid)
    if uid != os.getuid():
        os.setuid(uid)


def describe_user(uid: int, gid: int) -> str:
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return f"{user}:{group}"
