"""The PROXY protocol (haproxy's proxy-protocol.txt, versions 1 and 2) for the
Python workers: who owes a header, and reading it off the socket.

The header is parsed natively (``_native.parse_proxy_header``) and read off
the raw socket *exactly*: each step peeks at what has arrived, and consumes
only bytes the parser placed inside the header. Whatever the proxy sent
behind it in the same packet (the request head, or a TLS ClientHello) stays
in the kernel for the HTTP parser or the TLS handshake, which therefore run
unchanged, and TLS can start after the header on a plain socket.

Trust: with ``--proxy-protocol``, a peer in ``proxy_allow_ips`` (and any
unix-socket peer, as for forwarded headers) must open with a header; a
missing or malformed one closes the connection before any HTTP is read, and
nothing is written back: the peer is a proxy, not a client to answer. Other
peers are served as plain clients, so a header from one of them is an invalid
request line (400). A header for TCP4/TCP6 replaces the peer address; UNKNOWN,
LOCAL, UNSPEC and UNIX keep the connection's own.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from time import monotonic
from typing import Any

from supervise._native import ProxyHeader, ProxyHeaderError, parse_proxy_header
from supervise.http.proxy import AllowList

# One peek holds any header a proxy sends in practice (v1 is at most 107
# bytes); a longer v2 header (TLVs) takes more steps, not a bigger buffer.
PEEK_SIZE = 4096

_NEVER = float("inf")


class ProxyRejected(Exception):
    """A peer that owes a header did not send a valid one in time: close, answer nothing."""


class ProxyPeerLeft(ProxyRejected):
    """The peer closed or reset the connection first (a proxy's health check
    does): worth a debug line only."""


class ProxyProtocol:
    """The ``--proxy-protocol`` rules of one worker."""

    def __init__(self, allow: Any) -> None:
        self.allow = AllowList(allow)

    @classmethod
    def from_config(cls, cfg: Any) -> ProxyProtocol | None:
        """The rules with --proxy-protocol on; None (nothing to check per connection) when off."""
        return cls(cfg.proxy_allow_ips) if cfg.proxy_protocol else None

    def expects(self, addr: Any) -> bool:
        """Whether the peer at ``addr`` (as accept() gave it) must send a header."""
        if type(addr) is tuple:
            return self.allow.trusts(addr[0])
        return True  # a unix socket: only local processes the file mode lets in

    @staticmethod
    def client(header: ProxyHeader, addr: Any) -> Any:
        """The peer address the connection is served as: the header's source, or ``addr``."""
        return header.source if header.source is not None else addr


class HeaderReader:
    """Reads one header off a non-blocking socket, a step at a time."""

    __slots__ = ("got",)

    def __init__(self) -> None:
        self.got = b""  # header bytes consumed from the socket so far

    def step(self, sock: socket.socket) -> ProxyHeader | None:
        """The header once it is complete; None to wait until the socket is
        readable again; ProxyRejected when it can never be valid."""
        while True:
            try:
                peeked = sock.recv(PEEK_SIZE, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError as exc:
                raise ProxyPeerLeft(f"connection lost before the PROXY header: {exc}") from None
            if not peeked:
                raise ProxyPeerLeft("connection closed before a complete PROXY header")
            buf = self.got + peeked
            try:
                header = parse_proxy_header(buf)
            except ProxyHeaderError as exc:
                raise ProxyRejected(str(exc)) from None
            if header is not None:
                _consume(sock, header.consumed - len(self.got))
                return header
            # Incomplete: every byte seen is part of the header, so take them all.
            _consume(sock, len(peeked))
            self.got = buf


def _consume(sock: socket.socket, size: int) -> None:
    """Take ``size`` bytes that a peek showed are waiting in the kernel."""
    while size > 0:
        try:
            data = sock.recv(size)
        except InterruptedError:
            continue
        except OSError as exc:
            raise ProxyPeerLeft(f"connection lost in the PROXY header: {exc}") from None
        if not data:
            raise ProxyPeerLeft("connection closed in the PROXY header")
        size -= len(data)


def read_header(
    sock: socket.socket, wait: Callable[[Any, bool, float | None], bool], timeout: float | None
) -> ProxyHeader:
    """The header, waiting through ``wait`` (a Connection's) for at most
    ``timeout`` seconds in all; ProxyRejected otherwise."""
    reader = HeaderReader()
    deadline = monotonic() + timeout if timeout else _NEVER
    while True:
        header = reader.step(sock)
        if header is not None:
            return header
        remaining = deadline - monotonic()
        if remaining <= 0 or not wait(sock, False, None if deadline == _NEVER else remaining):
            raise ProxyRejected("no complete PROXY header within header_timeout")


def log_rejected(log: Any, addr: Any, exc: ProxyRejected) -> None:
    """One line naming the peer: info, since a proxy that sends no valid header
    is a misconfiguration to fix; debug when the peer just left."""
    peer = f"{addr[0]}:{addr[1]}" if type(addr) is tuple else "a unix socket peer"
    level = log.debug if isinstance(exc, ProxyPeerLeft) else log.info
    level("Closed the connection from %s: %s", peer, exc)
