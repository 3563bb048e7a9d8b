"""Echo throughput of `supervise -k asgi --ws wsproto` vs `--ws websockets` (not a test).

    .venv/bin/python tests/autobahn/echo_bench.py [--rounds 3] [--seconds 3]

One worker serves tests/apps/asgi_ws_apps.py:echo; a raw-socket client keeps
WINDOW messages in flight on each of CONNECTIONS connections (pre-masked
frames, the replies only counted), so the client costs little next to the
server. The libraries run in interleaved rounds; the figures are messages/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONNECTIONS = 4
WINDOW = 64
SIZES = (16, 4096, 65536)
SUPERVISE = [sys.executable, "-m", "supervise", "-k", "asgi", "--log-level", "warning"]


def masked_frame(payload: bytes) -> bytes:
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        header = struct.pack("!BB", 0x82, 0x80 | n)
    elif n < 65536:
        header = struct.pack("!BBH", 0x82, 0x80 | 126, n)
    else:
        header = struct.pack("!BBQ", 0x82, 0x80 | 127, n)
    full = (mask * (n // 4 + 1))[:n]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(full, "big")).to_bytes(n, "big")
    return header + mask + masked


def reply_size(n: int) -> int:
    return n + (2 if n < 126 else 4 if n < 65536 else 10)


async def client(port: int, size: int, seconds: float) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"GET / HTTP/1.1\r\nHost: b\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    await reader.readuntil(b"\r\n\r\n")
    batch = masked_frame(os.urandom(size)) * WINDOW
    per_batch = reply_size(size) * WINDOW
    done = 0
    deadline = time.monotonic() + seconds
    writer.write(batch)
    while time.monotonic() < deadline:
        writer.write(batch)  # keep the next window in flight while reading this one
        await reader.readexactly(per_batch)
        done += WINDOW
    await reader.readexactly(per_batch)
    writer.close()
    return done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(ws: str, size: int, seconds: float) -> float:
    port = free_port()
    server = subprocess.Popen(
        [*SUPERVISE, "--ws", ws, "-b", f"127.0.0.1:{port}", "asgi_ws_apps:echo"],
        cwd=REPO / "tests" / "apps",
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)

        async def run() -> int:
            counts = await asyncio.gather(
                *(client(port, size, seconds) for _ in range(CONNECTIONS))
            )
            return sum(counts)

        start = time.monotonic()
        total = asyncio.run(run())
        return total / (time.monotonic() - start)
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    results: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):
        for size in SIZES:
            for ws in ("websockets", "wsproto"):
                rate = measure(ws, size, args.seconds)
                results.setdefault((ws, size), []).append(rate)
                print(f"{ws:10} {size:6} B  {rate:9.0f} msg/s", flush=True)
    print("\nmedian msg/s   websockets   wsproto   ratio")
    for size in SIZES:
        a = sorted(results["websockets", size])[args.rounds // 2]
        b = sorted(results["wsproto", size])[args.rounds // 2]
        print(f"{size:6} B      {a:9.0f}  {b:9.0f}   {a / b:5.2f}x")


if __name__ == "__main__":
    main()
