"""Bind strings -> listening sockets, and handing them to a re-executed master.

Forms of ``--bind``: ``HOST:PORT``, ``[IPV6]:PORT``, ``HOST`` (port 8000),
``unix:PATH`` and ``fd://N``. Listeners also come from systemd socket
activation (``LISTEN_FDS``/``LISTEN_PID``) and, after USR2, from the old master
through ``SUPERVISE_FDS`` — in both cases by fd number, which exec preserves.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import struct
import sys
import time
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, NoReturn

from supervise import process

INHERITED_FDS_ENV = "SUPERVISE_FDS"
SD_LISTEN_FDS_START = 3


class BindError(Exception):
    """A listener could not be created; str() is the message for the user."""


class Listener:
    """A listening socket and how to describe it to users and to WSGI."""

    __slots__ = ("bind", "family", "is_unix", "name", "server_name", "server_port", "sock")

    def __init__(self, sock: socket.socket, bind: str | None = None) -> None:
        self.sock = sock
        self.family = sock.family
        self.is_unix = sock.family == socket.AF_UNIX
        addr = sock.getsockname()
        if self.is_unix:
            path = addr.decode() if isinstance(addr, bytes) else addr
            self.name = f"unix:{path}"
            self.server_name, self.server_port = path or "localhost", ""
        elif sock.family == socket.AF_INET6:
            self.name = f"[{addr[0]}]:{addr[1]}"
            self.server_name, self.server_port = addr[0], str(addr[1])
        else:
            self.name = f"{addr[0]}:{addr[1]}"
            self.server_name, self.server_port = addr[0], str(addr[1])
        self.bind = bind or self.name

    def fileno(self) -> int:
        return self.sock.fileno()

    def url(self, scheme: str = "http") -> str:
        return self.name if self.is_unix else f"{scheme}://{self.name}"

    def __repr__(self) -> str:
        return f"<Listener {self.name}>"


def parse_address(bind: str, default_port: int = 8000) -> tuple[int, Any]:
    """``bind`` -> (family, address) for socket.bind, or (-1, fd) for fd://N."""
    if bind.startswith("unix:"):
        path = bind[5:]
        if path.startswith("//"):  # unix:///run/app.sock
            path = path[2:]
        if not path:
            raise BindError(f"invalid bind {bind!r}: unix: needs a path")
        return socket.AF_UNIX, path
    if bind.startswith("fd://"):
        try:
            return -1, int(bind[5:])
        except ValueError:
            raise BindError(f"invalid bind {bind!r}: fd:// needs a number") from None
    if bind.startswith("["):
        host, sep, rest = bind[1:].partition("]")
        if not sep:
            raise BindError(f"invalid bind {bind!r}: missing ']'")
        port_text = rest[1:] if rest.startswith(":") else ""
        family = socket.AF_INET6
    else:
        host, _, port_text = bind.rpartition(":") if ":" in bind else (bind, "", "")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if not host:
        host = "0.0.0.0"
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise BindError(f"invalid bind {bind!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise BindError(f"invalid bind {bind!r}: port must be 0-65535")
    if family == socket.AF_INET:
        try:
            host = socket.gethostbyname(host)
        except OSError:
            raise BindError(f"invalid bind {bind!r}: cannot resolve host {host!r}") from None
    return family, (host, port)


def _remove_stale_unix_socket(path: str) -> None:
    """Remove a socket file left by a dead server, but never a live server's."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise BindError(f"cannot bind unix:{path}: the path exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)  # nobody answers: stale
        return
    finally:
        probe.close()
    raise BindError(f"cannot bind unix:{path}: another server is listening there")


def _bind_one(bind: str, cfg: Any) -> socket.socket:
    family, address = parse_address(bind)
    if family == -1:
        return socket.socket(fileno=address)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if family == socket.AF_UNIX:
            _remove_stale_unix_socket(address)
            with process.bind_umask(cfg.umask):
                sock.bind(address)
            if cfg.uid != os.getuid() or cfg.gid != os.getgid():
                os.chown(address, cfg.uid, cfg.gid)
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if cfg.reuse_port and hasattr(socket, "SO_REUSEPORT"):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                # Lets [::]:8000 and 0.0.0.0:8000 be bound side by side.
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            # Accepted sockets inherit TCP_NODELAY on Linux: one setsockopt
            # here saves one per connection in every worker.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind(address)
        sock.listen(cfg.backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def bind_listener(bind: str, cfg: Any, log: Any, retries: int = 5, delay: float = 1.0) -> Listener:
    """Bind one address, retrying while it is in use (a previous server still exiting)."""
    for attempt in range(retries + 1):
        try:
            sock = _bind_one(bind, cfg)
        except BindError:
            raise
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE and attempt < retries:
                log.error("Connection in use: %s, retrying in %ss", bind, delay)
                time.sleep(delay)
                continue
            reason = exc.strerror or str(exc)
            raise BindError(f"cannot bind {bind}: {reason}") from None
        sock.set_inheritable(True)
        return Listener(sock, bind)
    raise AssertionError("unreachable")


def _listeners_from_fds(fds: Iterable[int]) -> list[Listener]:
    listeners = []
    for fd in fds:
        try:
            sock = socket.socket(fileno=fd)
        except OSError as exc:
            raise BindError(f"inherited fd {fd} is not a socket: {exc.strerror}") from None
        sock.set_inheritable(True)
        listeners.append(Listener(sock))
    return listeners


def systemd_fds(environ: Mapping[str, str]) -> list[int]:
    """The fds systemd passed us (socket activation), or []."""
    try:
        if int(environ.get("LISTEN_PID", "0")) != os.getpid():
            return []
        count = int(environ.get("LISTEN_FDS", "0"))
    except ValueError:
        return []
    return list(range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + count))


def create_listeners(cfg: Any, log: Any, environ: MutableMapping[str, str]) -> list[Listener]:
    """Listeners from the old master (USR2), systemd, or by binding cfg.bind."""
    inherited = environ.pop(INHERITED_FDS_ENV, "")
    if inherited:
        fds = [int(fd) for fd in inherited.split(",") if fd]
        return _listeners_from_fds(fds)
    fds = systemd_fds(environ)
    if fds:
        for key in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
            environ.pop(key, None)
        log.info("Using %d socket(s) from systemd", len(fds))
        return _listeners_from_fds(fds)
    listeners: list[Listener] = []
    try:
        for bind in cfg.bind:
            listeners.append(bind_listener(bind, cfg, log))
    except BaseException:
        close_listeners(listeners, unlink=True)
        raise
    return listeners


def _address_key(family: int, address: Any) -> tuple:
    if family == socket.AF_UNIX:
        return ("unix", address.decode() if isinstance(address, bytes) else address)
    return (family, address[0], address[1])


def _find(listeners: list[Listener], bind: str) -> Listener | None:
    """The listener already serving ``bind``, compared by address, not by spelling."""
    family, address = parse_address(bind)
    if family == -1:
        return next((lis for lis in listeners if lis.fileno() == address), None)
    want = _address_key(family, address)
    for listener in listeners:
        have = _address_key(listener.family, listener.sock.getsockname())
        # Port 0 asked for "any free port": the one picked earlier still fits.
        if have == want or (want[0] != "unix" and want[2] == 0 and have[:2] == want[:2]):
            return listener
    return None


def rebind(
    current: list[Listener], binds: list[str], cfg: Any, log: Any
) -> tuple[list[Listener], list[Listener]]:
    """Listeners for ``binds`` after a reload: (wanted, newly bound).

    Addresses already open are kept (their sockets never close, so nothing is
    refused); new ones are bound now, so a bad new address fails the reload
    before any worker is replaced.
    """
    wanted: list[Listener] = []
    created: list[Listener] = []
    try:
        for bind in binds:
            listener = _find(current, bind)
            if listener is None:
                listener = bind_listener(bind, cfg, log, retries=0)
                created.append(listener)
                log.info("Listening at: %s (%s)", listener.url(), os.getpid())
            if listener not in wanted:
                wanted.append(listener)
    except BaseException:
        close_listeners(created, unlink=True)
        raise
    return wanted, created


def close_listeners(listeners: Iterable[Listener], unlink: bool = True) -> None:
    for listener in listeners:
        path = listener.name[5:] if listener.is_unix else None
        with contextlib.suppress(OSError):
            listener.sock.close()
        if unlink and path:
            with contextlib.suppress(OSError):
                os.unlink(path)


def exec_with_listeners(
    listeners: list[Listener], argv: list[str], cwd: str, extra_env: dict[str, str]
) -> NoReturn:
    """Replace this process by a fresh master that inherits ``listeners`` by fd number.

    Runs ``python -m supervise`` from the installed package, so a USR2 after an
    upgrade starts the new code; the sockets never close, so no connection is
    refused while the new master boots.
    """
    env = dict(os.environ)
    env.update(extra_env)
    env[INHERITED_FDS_ENV] = ",".join(str(listener.fileno()) for listener in listeners)
    for key in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        env.pop(key, None)
    try:
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "supervise", *argv], env)
    finally:
        os._exit(1)


# struct tcp_info (linux/tcp.h): eight u8 fields, then u32s; on a listening
# socket tcpi_unacked is the accept queue's length and tcpi_sacked its size.
_TCP_INFO_UNACKED = 24
_TCP_INFO_SIZE = 32


def listen_queue(sock: socket.socket) -> tuple[int, int] | None:
    """(connections waiting to be accepted, the queue's size) of a listening TCP
    socket, where the kernel tells (Linux); None elsewhere (unix sockets too)."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not hasattr(socket, "TCP_INFO"):
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
    except OSError:
        return None
    if len(info) < _TCP_INFO_SIZE:
        return None
    waiting, size = struct.unpack_from("=II", info, _TCP_INFO_UNACKED)
    return waiting, size
