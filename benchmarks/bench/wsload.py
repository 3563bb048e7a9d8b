"""WebSocket load generator: echo round trips or broadcast deliveries per second.

Standard library only (uvloop when importable), run as a script pinned to the load core.
wrk and h2load do not speak WebSocket, and a client library would spend more of the
client core on itself than this minimal framing does. Prints one JSON line shaped like
the wrk script's, so the harness parses every load generator the same way.

    python wsload.py URL --connections 64 --duration 5 --mode echo
    python wsload.py URL --verify --mode broadcast     # one message, exit 0 if correct
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import struct
import sys
import time
from urllib.parse import urlsplit

MESSAGE = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"  # 64 B
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_OP_TEXT, _OP_BINARY, _OP_CLOSE, _OP_PING, _OP_PONG = 0x1, 0x2, 0x8, 0x9, 0xA


class WsError(Exception):
    pass


def _client_frame(payload: bytes, opcode: int = _OP_BINARY) -> bytes:
    mask = os.urandom(4)
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    elif size < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, url: str) -> Conn:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        key = base64.b64encode(os.urandom(16))
        writer.write(
            b"GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
            % (parts.path.encode(), parts.hostname.encode(), parts.port or 80, key)
        )
        head = await reader.readuntil(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status + b" ":
            raise WsError(f"handshake answered {status.decode(errors='replace')!r}")
        accept = base64.b64encode(hashlib.sha1(key + _GUID).digest())
        if accept.lower() not in head.lower():
            raise WsError("handshake without the right Sec-WebSocket-Accept")
        return cls(reader, writer)

    def send(self, frame: bytes) -> None:
        self.writer.write(frame)

    async def receive(self) -> bytes:
        """The next data message; answers pings (uvicorn pings idle clients) on the way."""
        while True:
            b0, b1 = await self.reader.readexactly(2)
            size = b1 & 0x7F
            if size == 126:
                (size,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif size == 127:
                (size,) = struct.unpack("!Q", await self.reader.readexactly(8))
            mask = await self.reader.readexactly(4) if b1 & 0x80 else b""
            data = await self.reader.readexactly(size)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            opcode = b0 & 0x0F
            if opcode == _OP_PING:
                self.send(_client_frame(data, _OP_PONG))
            elif opcode == _OP_CLOSE:
                raise WsError("server closed the connection")
            elif opcode in (_OP_TEXT, _OP_BINARY, 0):
                return data

    async def close(self) -> None:
        try:
            self.send(_client_frame(struct.pack("!H", 1000), _OP_CLOSE))
            await self.writer.drain()
            self.writer.close()
        except (OSError, ConnectionError):
            pass


class Stats:
    def __init__(self) -> None:
        self.messages = 0
        self.latencies: list[float] = []
        self.errors = {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0}

    def result(self, duration: float) -> dict:
        lat = sorted(self.latencies) or [0.0]

        def pct(p: float) -> int:
            return int(lat[min(len(lat) - 1, int(len(lat) * p / 100))] * 1e6)

        mean = sum(lat) / len(lat)
        var = sum((x - mean) ** 2 for x in lat) / len(lat)
        return {
            "requests": self.messages,
            "duration_us": int(duration * 1e6),
            "bytes": self.messages * len(MESSAGE),
            "errors": self.errors,
            "latency_us": {
                "min": int(lat[0] * 1e6),
                "max": int(lat[-1] * 1e6),
                "mean": mean * 1e6,
                "stdev": var**0.5 * 1e6,
                "p50": pct(50),
                "p90": pct(90),
                "p99": pct(99),
            },
        }


async def _echo(conn: Conn, deadline: float, stats: Stats) -> None:
    frame = _client_frame(MESSAGE)
    clock = time.perf_counter
    while clock() < deadline:
        start = clock()
        conn.send(frame)
        data = await conn.receive()
        stats.latencies.append(clock() - start)
        if data == MESSAGE:
            stats.messages += 1
        else:
            stats.errors["status"] += 1


async def _broadcast(conns: list[Conn], deadline: float, stats: Stats) -> None:
    """Connection 0 publishes, waiting for its own copy before the next message; every
    copy any connection receives counts as one delivery."""
    own = asyncio.Event()

    async def subscriber(index: int, conn: Conn) -> None:
        while True:
            data = await conn.receive()
            if data != MESSAGE:
                stats.errors["status"] += 1
                continue
            if time.perf_counter() < deadline:
                stats.messages += 1
            if index == 0:
                own.set()

    readers = [asyncio.ensure_future(subscriber(i, c)) for i, c in enumerate(conns)]
    frame = _client_frame(MESSAGE)
    clock = time.perf_counter
    try:
        while clock() < deadline:
            own.clear()
            start = clock()
            conns[0].send(frame)
            try:
                await asyncio.wait_for(own.wait(), timeout=max(0.1, deadline - clock() + 1))
            except asyncio.TimeoutError:
                stats.errors["timeout"] += 1
                break
            stats.latencies.append(clock() - start)
    finally:
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)


async def run_load(url: str, connections: int, duration: float, mode: str) -> dict:
    stats = Stats()
    conns: list[Conn] = []
    for _ in range(connections):
        try:
            conns.append(await Conn.open(url))
        except (OSError, WsError, asyncio.IncompleteReadError):
            stats.errors["connect"] += 1
    if not conns:
        return stats.result(0.0)
    if mode == "broadcast":
        # Let the server register every subscriber before the first publish.
        await asyncio.sleep(0.2)
    start = time.perf_counter()
    deadline = start + duration
    try:
        if mode == "echo":
            results = await asyncio.gather(
                *(_echo(c, deadline, stats) for c in conns), return_exceptions=True
            )
        else:
            results = [await _broadcast(conns, deadline, stats)]
    finally:
        elapsed = time.perf_counter() - start
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
    stats.errors["read"] += sum(1 for r in results if isinstance(r, BaseException))
    return stats.result(min(elapsed, duration) if mode == "broadcast" else elapsed)


async def verify(url: str, mode: str) -> str:
    """'' if a message makes the round trip intact, else what went wrong."""
    try:
        conn = await asyncio.wait_for(Conn.open(url), 10)
        conn.send(_client_frame(MESSAGE))
        data = await asyncio.wait_for(conn.receive(), 10)
        await conn.close()
    except (OSError, WsError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "" if data == MESSAGE else f"{mode} returned {data[:40]!r}, expected the 64 B message"


def _run(coro):
    try:
        import uvloop  # the client core should not be the bottleneck when we can help it

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--mode", choices=("echo", "broadcast"), default="echo")
    parser.add_argument("--verify", action="store_true")
    args = parser.parse_args(argv)
    if args.verify:
        problem = _run(verify(args.url, args.mode))
        print(problem or "ok")
        return 1 if problem else 0
    result = _run(run_load(args.url, args.connections, args.duration, args.mode))
    print("BENCH_JSON " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
