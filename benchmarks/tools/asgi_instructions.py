"""Instructions per request of the asgi worker's own Python, counted.

Wall-clock figures on a shared 2-core VM move 15-40% between runs; an
instruction count does not. This drives the worker's real ``HttpProtocol``
(with its ``AsgiContext``, ``RequestCycle`` and the benchmark app) on uvloop
with an in-memory transport, 64 connections each sent one request per round,
and runs that under callgrind twice, for two request counts: the difference
of the totals over the difference of the requests is the cost of one request,
start-up and warm-up cancelled out. The kernel's and the socket's share is not
in it: it measures what this project's Python (and the app) adds.

    python benchmarks/tools/asgi_instructions.py /4b            # GET 4 B
    python benchmarks/tools/asgi_instructions.py /echo --post   # POST 10 KiB echo
    SRC=/path/to/other/checkout python ...                      # the same for another tree

Needs valgrind. ``--run N`` is the inner mode callgrind runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CONNECTIONS = 64


class _Log:
    access_enabled = False

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


class _Transport:
    """What HttpProtocol calls on uvloop's transport, in memory."""

    def __init__(self) -> None:
        self.written = 0

    def get_extra_info(self, key: str, default: Any = None) -> Any:
        extra = {"peername": ("127.0.0.1", 5555), "sockname": ("127.0.0.1", 8000)}
        return extra.get(key, default)

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def writelines(self, parts: Any) -> None:
        self.written += sum(map(len, parts))

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def _request(path: str, post: bool) -> bytes:
    if not post:
        return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n\r\n"
    body = b"x" * 10240
    return (
        b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
        b"Content-Type: application/octet-stream\r\nContent-Length: 10240\r\n\r\n" + body
    )


async def _serve(path: str, post: bool, count: int) -> None:
    sys.path.insert(0, str(HERE.parent))
    from apps.asgi_app import app

    from supervise.config import Config
    from supervise.http.asgi_context import AsgiContext
    from supervise.http.asgi_http import HttpProtocol
    from supervise.http.state import ServeState

    ctx = AsgiContext(
        app=app,
        cfg=Config(),
        log=_Log(),
        state=ServeState(),
        loop=asyncio.get_running_loop(),
        request_done=lambda count: None,
        record=None,
        is_tls=False,
    )
    connections = []
    for _ in range(CONNECTIONS):
        proto, transport = HttpProtocol(ctx), _Transport()
        proto.connection_made(transport)
        connections.append(proto)
    raw = _request(path, post)

    async def rounds(n: int) -> None:
        for _ in range(n // CONNECTIONS):
            for proto in connections:
                proto.data_received(raw)
            # Two turns: the Tasks run (before 3.12), then their responses complete.
            await asyncio.sleep(0)
            await asyncio.sleep(0)

    await rounds(100 * CONNECTIONS)  # warm-up: the same in both runs
    await rounds(count)


def _count(args: argparse.Namespace, requests: int) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")
    if os.environ.get("SRC"):
        env["PYTHONPATH"] = os.environ["SRC"]
    cmd = [sys.executable, __file__, args.path, "--run", str(requests)]
    if args.post:
        cmd.append("--post")
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stderr
    return int(re.search(r"Collected : (\d+)", out).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", default="/4b")
    parser.add_argument("--post", action="store_true")
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run is not None:
        import uvloop

        uvloop.install()
        asyncio.run(_serve(args.path, args.post, args.run))
        return
    short, long = 20 * CONNECTIONS, 100 * CONNECTIONS
    per_request = (_count(args, long) - _count(args, short)) / (long - short)
    kind = "POST" if args.post else "GET"
    print(f"{kind} {args.path}: {per_request:,.0f} instructions a request")


if __name__ == "__main__":
    main()
