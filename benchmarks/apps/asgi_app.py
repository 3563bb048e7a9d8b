"""ASGI benchmark app: every scenario by path, the same bytes as the WSGI and RSGI apps."""

from __future__ import annotations

import asyncio

from apps import payload

_TEXT = [(b"content-type", b"text/plain")]
_FILE_PATH = payload.ensure_file()
_FILE_BYTES = payload.file_bytes()
_OCTET = (b"content-type", b"application/octet-stream")


def _head(ctype: list[tuple[bytes, bytes]], size: int) -> dict:
    return {
        "type": "http.response.start",
        "status": 200,
        "headers": [*ctype, (b"content-length", str(size).encode())],
    }


def _fixed(body: bytes, ctype: list[tuple[bytes, bytes]] = _TEXT):
    start = _head(ctype, len(body))
    message = {"type": "http.response.body", "body": body}

    async def handler(scope, receive, send):
        await send(start)
        await send(message)

    return handler


async def _str(scope, receive, send):
    body = payload.TEXT_4B.encode()
    await send(_head(_TEXT, len(body)))
    await send({"type": "http.response.body", "body": body})


async def _json(scope, receive, send):
    body = payload.json_body()
    await send(_head([(b"content-type", b"application/json")], len(body)))
    await send({"type": "http.response.body", "body": body})


async def _echo(scope, receive, send):
    parts = []
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return
        parts.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(parts)
    await send(_head(_TEXT, len(body)))
    await send({"type": "http.response.body", "body": body})


async def _file(scope, receive, send):
    await send(_head([_OCTET], payload.FILE_SIZE))
    if "http.response.pathsend" in (scope.get("extensions") or {}):
        await send({"type": "http.response.pathsend", "path": _FILE_PATH})
        return
    # Without pathsend an app has to read the file itself, so that is what we measure.
    with open(_FILE_PATH, "rb") as f:
        body = f.read()
    await send({"type": "http.response.body", "body": body})


def _sleeper(seconds: float):
    inner = _fixed(payload.BODY_4B)

    async def handler(scope, receive, send):
        await asyncio.sleep(seconds)
        await inner(scope, receive, send)

    return handler


_not_found_start = {
    "type": "http.response.start",
    "status": 404,
    "headers": [*_TEXT, (b"content-length", b"9")],
}


async def _not_found(scope, receive, send):
    await send(_not_found_start)
    await send({"type": "http.response.body", "body": b"not found"})


ROUTES = {
    "/4b": _fixed(payload.BODY_4B),
    "/1k": _fixed(payload.BODY_1K),
    "/10k": _fixed(payload.BODY_10K),
    "/str": _str,
    "/json": _json,
    "/echo": _echo,
    "/file": _file,
    "/filebytes": _fixed(_FILE_BYTES, [_OCTET]),
    "/io10": _sleeper(0.010),
    "/io100": _sleeper(0.100),
}

# Connections of /ws/broadcast in this worker process: a message from any is sent to all.
_subscribers: set = set()


async def _ws_echo(receive, send):
    while True:
        message = await receive()
        kind = message["type"]
        if kind == "websocket.receive":
            if message.get("bytes") is not None:
                await send({"type": "websocket.send", "bytes": message["bytes"]})
            else:
                await send({"type": "websocket.send", "text": message["text"]})
        elif kind == "websocket.disconnect":
            return


async def _ws_broadcast(receive, send):
    _subscribers.add(send)
    try:
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "websocket.receive":
                if message.get("bytes") is not None:
                    out = {"type": "websocket.send", "bytes": message["bytes"]}
                else:
                    out = {"type": "websocket.send", "text": message["text"]}
                for peer in list(_subscribers):
                    try:
                        await peer(out)
                    except Exception:  # a peer that went away mid-broadcast
                        _subscribers.discard(peer)
            elif kind == "websocket.disconnect":
                return
    finally:
        _subscribers.discard(send)


async def _websocket(scope, receive, send):
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    path = scope["path"]
    if path not in ("/ws/echo", "/ws/broadcast"):
        await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "websocket.accept"})
    if path == "/ws/echo":
        await _ws_echo(receive, send)
    else:
        await _ws_broadcast(receive, send)


async def _lifespan(receive, send):
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope, receive, send):
    kind = scope["type"]
    if kind == "http":
        await ROUTES.get(scope["path"], _not_found)(scope, receive, send)
    elif kind == "websocket":
        await _websocket(scope, receive, send)
    elif kind == "lifespan":
        await _lifespan(receive, send)


application = app
