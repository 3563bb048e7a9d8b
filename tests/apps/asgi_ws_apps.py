"""ASGI apps for the WebSocket tests: `echo` routes on the path.

What the app observes (disconnect codes, errors raised by send) is printed,
so that the tests read it from the server log.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs


def _note(*parts: object) -> None:
    print("APP:", *parts, flush=True)


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _http(send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


async def _echo_loop(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            _note("disconnect", message["code"], repr(message.get("reason", "")))
            return
        if message.get("text") is not None:
            await send({"type": "websocket.send", "text": message["text"]})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})


async def _accepted(receive, send, **accept) -> None:
    assert (await receive())["type"] == "websocket.connect"
    await send({"type": "websocket.accept", **accept})


async def _route(scope, receive, send) -> None:
    path = scope["path"]
    query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
    if path == "/subprotocol":
        offered = scope["subprotocols"]
        await _accepted(
            receive,
            send,
            subprotocol=offered[-1] if offered else None,
            headers=[(b"x-accept", b"yes")],
        )
        await _echo_loop(receive, send)
    elif path == "/close":
        # The app closes after the first message, with the code/reason asked for.
        await _accepted(receive, send)
        await receive()
        await send(
            {"type": "websocket.close", "code": int(query["code"]), "reason": query["reason"]}
        )
        _note("after close", (await receive())["type"])
        try:
            await send({"type": "websocket.send", "text": "too late"})
        except OSError as exc:
            _note("send after close raised", type(exc).__name__)
    elif path == "/deny":
        assert (await receive())["type"] == "websocket.connect"
        await send(
            {
                "type": "websocket.http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"text/plain"), (b"x-deny", b"1")],
            }
        )
        await send({"type": "websocket.http.response.body", "body": b"go ", "more_body": True})
        await send({"type": "websocket.http.response.body", "body": b"away"})
    elif path == "/reject":
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.close"})
    elif path == "/return":
        assert (await receive())["type"] == "websocket.connect"
    elif path == "/raise-before":
        raise ValueError("boom before accept")
    elif path == "/raise-after":
        await _accepted(receive, send)
        await receive()
        raise ValueError("boom after accept")
    elif path == "/wrong-event":
        await _accepted(receive, send)
        try:
            await send({"type": "http.response.start", "status": 200})
        except RuntimeError as exc:
            _note("wrong event raised", type(exc).__name__)
            raise
    elif path == "/stream":
        # Sends ?n= messages of ?size= bytes as fast as the transport takes them.
        await _accepted(receive, send)
        chunk = b"x" * int(query.get("size", "65536"))
        for _ in range(int(query.get("n", "100"))):
            await send({"type": "websocket.send", "bytes": chunk})
        await send({"type": "websocket.close", "code": 1000})
    elif path == "/idle":
        # Accepts, then only waits: pings alone keep the connection alive.
        await _accepted(receive, send)
        message = await receive()
        _note("idle got", message["type"], message.get("code"))
    else:
        await _accepted(receive, send)
        await _echo_loop(receive, send)


async def echo(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
    elif scope["type"] == "http":
        await _http(send)
    else:
        await _route(scope, receive, send)


async def slow_start(scope, receive, send) -> None:
    """Never answers the handshake until told to stop (shutdown before accept)."""
    if scope["type"] != "websocket":
        await echo(scope, receive, send)
        return
    assert (await receive())["type"] == "websocket.connect"
    _note("waiting", (await receive())["type"])
    await asyncio.sleep(0)
