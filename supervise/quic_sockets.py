"""The UDP sockets of ``--quic-bind`` (HTTP/3), owned by the arbiter.

Theory of operation
-------------------
TCP listeners are shared: every worker accepts on the same socket. A QUIC
connection has no accept, so each worker gets a UDP socket of its own, all of
one address joined in a SO_REUSEPORT group, and the kernel routes every
datagram to one of them with the program of ``quic_routing``: by the socket
index our connection IDs carry, and new connections only to the workers that
take them now (``route``). An index is a worker's for its whole life: handed
out at spawn (``take``), given back when the worker is reaped (``release``);
the sockets themselves are never closed while the server runs, because the
kernel renumbers a group when one of its members goes, which would send live
connections to the wrong worker. A socket whose worker has exited waits,
unread, for the next worker given its index; the packets of connections that
died with the old one meet that worker, which answers them with a stateless
reset (so the client learns at once that its connection is gone).

After USR2 the new master inherits the groups by fd number
(``SUPERVISE_QUIC_FDS``) with the old master's workers still reading some of
them: every inherited index stays out of its hands (``reserved``) until the
old master is gone.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from supervise import quic_routing
from supervise.sockets import BindError, parse_address

QUIC_FDS_ENV = "SUPERVISE_QUIC_FDS"
# One byte of the connection ID holds the index (quic_routing.MAX_SOCKET_INDEX).
MAX_SOCKETS = quic_routing.MAX_SOCKET_INDEX + 1


@dataclass(frozen=True)
class QuicShare:
    """What one worker is given of the groups: its index, its socket in each
    group (fd numbers it inherits), and the Alt-Svc value to advertise."""

    index: int
    fds: tuple[int, ...]
    alt_svc: str | None


class QuicGroup:
    """The sockets of one ``--quic-bind`` address, in the kernel's order."""

    def __init__(self, bind: str, sockets: list[socket.socket]) -> None:
        self.bind = bind
        self.sockets = sockets
        host, port = sockets[0].getsockname()[:2]
        self.port = int(port)
        self.name = f"[{host}]:{port}" if sockets[0].family == socket.AF_INET6 else f"{host}:{port}"

    def grow(self, size: int) -> None:
        """Bind sockets to the same address until the group has ``size``."""
        while len(self.sockets) < size:
            first = self.sockets[0]
            self.sockets.append(_udp_socket(first.family, first.getsockname()))

    def url(self) -> str:
        return f"https://{self.name} (HTTP/3, udp)"


def _udp_socket(family: int, address: Any) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        # A USR2 master inherits it by fd number, as it does the TCP listeners.
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


def bind_group(bind: str) -> QuicGroup:
    """The first socket of a group (its port settles a port of 0)."""
    family, address = parse_address(bind, default_port=443)
    if family in (-1, socket.AF_UNIX):
        raise BindError(f"invalid quic_bind {bind!r}: HTTP/3 needs HOST:PORT (UDP)")
    try:
        return QuicGroup(bind, [_udp_socket(family, address)])
    except OSError as exc:
        raise BindError(f"cannot bind quic_bind {bind} (udp): {exc.strerror}") from None


class QuicSockets:
    """Every ``--quic-bind`` group, and which of their indexes workers hold."""

    def __init__(self, groups: list[QuicGroup], reserved: Iterable[int] = ()) -> None:
        self.groups = groups
        self.in_use: set[int] = set()
        self.reserved: set[int] = set(reserved)
        self.routed: tuple[int, ...] | None = None

    @classmethod
    def create(cls, binds: Sequence[str], environ: Mapping[str, str]) -> QuicSockets | None:
        inherited = environ.get(QUIC_FDS_ENV)
        if inherited:
            return cls.inherit(binds, inherited)
        if not binds:
            return None
        return cls([bind_group(bind) for bind in binds])

    @classmethod
    def inherit(cls, binds: Sequence[str], text: str) -> QuicSockets:
        """The old master's groups, from ``fd,fd;fd,fd`` (one part per bind)."""
        groups = []
        for bind, part in zip(binds, text.split(";"), strict=False):
            fds = [int(fd) for fd in part.split(",") if fd]
            sockets = [socket.socket(fileno=fd) for fd in fds]
            for sock in sockets:
                sock.set_inheritable(True)
            groups.append(QuicGroup(bind, sockets))
        size = max((len(g.sockets) for g in groups), default=0)
        return cls(groups, reserved=range(size))

    def env(self) -> dict[str, str]:
        """What a USR2 master needs to take the groups over."""
        text = ";".join(",".join(str(s.fileno()) for s in g.sockets) for g in self.groups)
        return {QUIC_FDS_ENV: text}

    def take(self) -> int:
        """The lowest index no worker holds, its socket bound in every group."""
        taken = self.in_use | self.reserved
        index = next(i for i in range(MAX_SOCKETS + 1) if i not in taken)
        if index >= MAX_SOCKETS:
            raise BindError(f"HTTP/3: more than {MAX_SOCKETS} workers at once")
        for group in self.groups:
            group.grow(index + 1)
        self.in_use.add(index)
        return index

    def release(self, index: int | None) -> None:
        if index is not None:
            self.in_use.discard(index)

    def old_master_gone(self) -> None:
        self.reserved.clear()

    def share(self, index: int, alt_svc: str | None) -> QuicShare:
        fds = tuple(group.sockets[index].fileno() for group in self.groups)
        return QuicShare(index, fds, alt_svc)

    def route(self, accepting: Sequence[int]) -> None:
        """New connections to ``accepting`` from now on (once per change)."""
        wanted = tuple(sorted(accepting))
        if wanted == self.routed:
            return
        for group in self.groups:
            quic_routing.attach(group.sockets[0].fileno(), wanted)
        self.routed = wanted

    def close(self) -> None:
        for group in self.groups:
            for sock in group.sockets:
                with contextlib.suppress(OSError):
                    sock.close()
        self.groups = []


def alt_svc(cfg: Any, groups: Sequence[QuicGroup]) -> str | None:
    """The Alt-Svc value TLS responses carry: ``--alt-svc``, or for ``auto``
    the first group's port (the bound one, so port 0 works), good for a day."""
    value = (cfg.alt_svc or "").strip()
    if not groups or value.lower() in ("", "off", "none"):
        return None
    if value.lower() != "auto":
        return value
    return f'h3=":{groups[0].port}"; ma=86400'
