"""Raw WebSocket helpers for the tests: a handshake on a plain socket, masked
client frames, unmasked server frames. Where a client library would hide what
the server does (dropped connections, bare close frames, unanswered pings)."""

from __future__ import annotations

import base64
import os
import socket
import struct

KEY = base64.b64encode(os.urandom(16)).decode()


def handshake(
    server, path: str = "/", key: str = KEY, extra: str = ""
) -> tuple[socket.socket, bytes]:
    """Open a raw connection and upgrade it; returns the socket and the response head."""
    sock = server.connect(timeout=10)
    sock.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    return sock, head


def frame(opcode: int, payload: bytes = b"", fin: bool = True) -> bytes:
    """A masked client frame."""
    mask = os.urandom(4)
    first = (0x80 if fin else 0) | opcode
    n = len(payload)
    if n < 126:
        header = struct.pack("!BB", first, 0x80 | n)
    elif n < 65536:
        header = struct.pack("!BBH", first, 0x80 | 126, n)
    else:
        header = struct.pack("!BBQ", first, 0x80 | 127, n)
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def read_frame(sock: socket.socket) -> tuple[int, bytes]:
    """One unmasked server frame: (opcode, payload); (-1, b"") when the server closed."""

    def exact(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    try:
        first, second = exact(2)
        n = second & 0x7F
        if n == 126:
            n = struct.unpack("!H", exact(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", exact(8))[0]
        return first & 0x0F, exact(n)
    except (EOFError, ConnectionResetError):
        return -1, b""


def close_code(payload: bytes) -> int:
    return struct.unpack("!H", payload[:2])[0]


def split_frames(data: bytes) -> tuple[list[tuple[int, bytes]], bytes]:
    """The whole unmasked server frames at the start of ``data`` as (opcode,
    payload), and what is left (a frame not complete yet). For frames that
    come in something other than a socket: an HTTP/2 stream's DATA."""
    frames = []
    while len(data) >= 2:
        n, at = data[1] & 0x7F, 2
        if n == 126:
            if len(data) < 4:
                break
            n, at = struct.unpack("!H", data[2:4])[0], 4
        elif n == 127:
            if len(data) < 10:
                break
            n, at = struct.unpack("!Q", data[2:10])[0], 10
        if len(data) < at + n:
            break
        frames.append((data[0] & 0x0F, data[at : at + n]))
        data = data[at + n :]
    return frames, data


class H2WebSocket:
    """One WebSocket over HTTP/2 (RFC 8441) on a stream of ``client``, an
    h2_client.H2Client: an extended CONNECT, then frames in DATA."""

    def __init__(self, client, path: str, extra: list[tuple[str, str]] = ()) -> None:
        self.client = client
        self.stream = client.request(
            path,
            method="CONNECT",
            headers=[(":protocol", "websocket"), ("sec-websocket-version", "13"), *extra],
            open_ended=True,
        )
        self.used = 0  # bytes of the stream's DATA already split into frames
        self.frames: list[tuple[int, bytes]] = []

    @property
    def state(self):
        return self.client.streams[self.stream]

    def head(self) -> dict[str, str]:
        self.client.until(lambda c: ":status" in self.state.headers or self.state.reset)
        return self.state.headers

    def send(self, opcode: int, payload: bytes = b"") -> None:
        self.client.data(self.stream, frame(opcode, payload))

    def receive(self) -> tuple[int, bytes]:
        """The next whole frame from the server; (-1, b"") once the stream ended."""
        while not self.frames:
            data = self.state.body[self.used :]
            self.frames, rest = split_frames(data)
            self.used += len(data) - len(rest)
            if self.frames:
                break
            if self.state.ended or self.state.reset is not None or self.client.closed:
                return -1, b""
            self.client.pump()
        return self.frames.pop(0)
