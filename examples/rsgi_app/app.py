"""An RSGI application, written as Granian's documentation shows: it runs
unchanged under `granian --interface rsgi` and under supervise.

    cd examples/rsgi_app && supervise -k rsgi -w 2 app:app

Routes: `/` (text), `/json`, `/echo` (POST: the body streamed back),
`/stream` (a chunked response), `/files/NAME` (from static/, sent by the
server), and `/ws` (a WebSocket echo).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

STATIC = Path(__file__).parent / "static"


class App:
    """An object with `__rsgi__`; the init/del hooks run once per worker process."""

    def __rsgi_init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.started = loop.time()

    def __rsgi_del__(self, loop: asyncio.AbstractEventLoop) -> None:
        pass

    async def __rsgi__(self, scope, protocol) -> None:
        if scope.proto == "ws":
            await self.websocket(protocol)
            return
        path = scope.path
        if path == "/":
            protocol.response_str(
                200, [("content-type", "text/plain; charset=utf-8")], "Hello, world!\n"
            )
        elif path == "/json":
            body = {
                "method": scope.method,
                "http_version": scope.http_version,
                "scheme": scope.scheme,
            }
            protocol.response_bytes(
                200, [("content-type", "application/json")], json.dumps(body).encode()
            )
        elif path == "/echo" and scope.method == "POST":
            transport = protocol.response_stream(
                200, [("content-type", "application/octet-stream")]
            )
            async for chunk in protocol:
                await transport.send_bytes(chunk)
        elif path == "/stream":
            transport = protocol.response_stream(200, [("content-type", "text/plain")])
            for i in range(5):
                await transport.send_str(f"line {i}\n")
        elif path.startswith("/files/"):
            name = path.removeprefix("/files/")
            target = (STATIC / name).resolve()
            if target.parent != STATIC.resolve() or not target.is_file():
                protocol.response_str(404, [("content-type", "text/plain")], "not found\n")
            else:
                protocol.response_file(200, [("content-type", "text/plain")], str(target))
        else:
            protocol.response_str(404, [("content-type", "text/plain")], "not found\n")

    async def websocket(self, protocol) -> None:
        transport = await protocol.accept()
        while True:
            message = await transport.receive()
            if message.kind == 0:  # closed
                return
            if message.kind == 1:
                await transport.send_bytes(message.data)
            else:
                await transport.send_str(f"echo: {message.data}")


app = App()
