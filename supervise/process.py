"""Process-level chores of the master: daemonizing, pid files, privileges."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import sys


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
    os.umask(0o22)
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
