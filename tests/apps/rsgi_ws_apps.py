"""RSGI WebSocket apps for tests/test_rsgi_websocket.py and Autobahn, written
the way Granian's documentation shows them: ``scope.proto == "ws"``,
``transport = await protocol.accept()``, ``await transport.receive()`` giving
messages with ``kind`` and ``data``, ``send_bytes``/``send_str``, and
``protocol.close(status)``.

``app`` is an object with ``__rsgi__`` routing on the path; ``echo`` is the
plain echo function Autobahn runs against. What the app observes is printed
("APP: ..."), so the tests read it from the server log.
"""

from __future__ import annotations

import asyncio
import json
import os

from rsgi_apps import scope_fields

from supervise.rsgi import RSGIProtocolClosed, RSGIProtocolError, WebsocketMessageType


def _note(*parts: object) -> None:
    print("APP:", *parts, flush=True)


def _params(scope) -> dict[str, str]:
    return dict(p.split("=", 1) for p in scope.query_string.split("&") if "=" in p)


async def _send(transport, message) -> None:
    if message.kind == WebsocketMessageType.bytes:
        await transport.send_bytes(message.data)
    else:
        await transport.send_str(message.data)


async def echo(scope, protocol):
    """Echo every message until the client closes (Granian's own example)."""
    if scope.proto != "ws":
        protocol.response_str(200, [("content-type", "text/plain")], "ws echo")
        return
    transport = await protocol.accept()
    while True:
        message = await transport.receive()
        if message.kind == WebsocketMessageType.close:
            break
        await _send(transport, message)
    protocol.close()


async def _echo_noting(transport) -> None:
    while True:
        message = await transport.receive()
        if message.kind == WebsocketMessageType.close:
            _note("closed", message.kind, message.data)
            try:
                await transport.receive()
            except RSGIProtocolClosed:
                _note("receive after close raised RSGIProtocolClosed")
            return
        await _send(transport, message)


async def _info(scope, protocol, transport) -> None:
    await transport.send_str(
        json.dumps(
            {
                **scope_fields(scope),
                "headers": dict(scope.headers.items()),
                "pid": os.getpid(),
            }
        )
    )
    await _echo_noting(transport)


async def _close(scope, protocol, transport) -> None:
    await transport.receive()
    protocol.close(int(_params(scope)["code"]))
    _note("after close kind", (await transport.receive()).kind)
    try:
        await transport.send_str("too late")
    except RSGIProtocolClosed:
        _note("send after close raised RSGIProtocolClosed")


async def _raise_after(scope, protocol, transport) -> None:
    await transport.receive()
    raise RuntimeError("boom after accept")


async def _stream(scope, protocol, transport) -> None:
    params = _params(scope)
    chunk = b"x" * int(params["size"])
    for _ in range(int(params["n"])):
        await transport.send_bytes(chunk)
    # Returning closes with 1000.


async def _push(scope, protocol, transport) -> None:
    # Sends until the client is gone, never receiving (Granian's ws_push test app).
    sent = 0
    try:
        while True:
            await transport.send_str("ping")
            sent += 1
    except RSGIProtocolClosed:
        _note("push stopped by RSGIProtocolClosed after", sent > 0)


async def _idle(scope, protocol, transport) -> None:
    _note("idle got kind", (await transport.receive()).kind)


async def _misuse(scope, protocol, transport) -> None:
    try:
        await protocol.accept()
    except RSGIProtocolError:
        _note("second accept raised RSGIProtocolError")
    waiting = asyncio.ensure_future(transport.receive())
    await asyncio.sleep(0)
    try:
        transport.receive()
    except RSGIProtocolError:
        _note("concurrent receive raised RSGIProtocolError")
    await transport.send_str("ready")
    first = await waiting
    await transport.send_str(f"got {first.data}")
    try:
        protocol.close(1005)
    except ValueError:
        _note("close(1005) raised ValueError")
    protocol.close(4003)


async def _cancelled_receive(scope, protocol, transport) -> None:
    # A receive given up on before its message came must not lose that message.
    pending = transport.receive()
    pending.cancel()
    await transport.send_str("cancelled")
    await asyncio.sleep(0.5)  # the client's message arrives meanwhile
    message = await transport.receive()
    await transport.send_str(f"next receive got {message.data}")
    await _echo_noting(transport)


async def _pushed_bytearray(scope, protocol, transport) -> None:
    await transport.send_bytes(bytearray(b"from a bytearray"))
    await _echo_noting(transport)


async def _echo_route(scope, protocol, transport) -> None:
    await _echo_noting(transport)


ACCEPTED = {
    "/": _echo_route,
    "/info": _info,
    "/close": _close,
    "/raise-after": _raise_after,
    "/stream": _stream,
    "/idle": _idle,
    "/push": _push,
    "/misuse": _misuse,
    "/cancelled-receive": _cancelled_receive,
    "/bytearray": _pushed_bytearray,
}


class App:
    """An RSGI app object, as Granian's docs show: ``__rsgi__`` routes."""

    async def __rsgi__(self, scope, protocol) -> None:
        if scope.proto != "ws":
            protocol.response_str(200, [("content-type", "text/plain")], "not a websocket")
            return
        path = scope.path
        if path == "/refuse":
            status = _params(scope).get("status")
            protocol.close(int(status) if status else None)
            return
        if path == "/return":
            return
        if path == "/raise-before":
            raise RuntimeError("boom before accept")
        if path == "/slow-start":
            await asyncio.sleep(2)
            try:
                await protocol.accept()
            except RSGIProtocolClosed:
                _note("late accept raised RSGIProtocolClosed")
            return
        handler = ACCEPTED.get(path)
        if handler is None:
            protocol.close(404)
            return
        transport = await protocol.accept()
        await handler(scope, protocol, transport)


app = App()
