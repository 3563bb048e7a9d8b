"""RSGI benchmark app: every scenario by path, the same bytes as the WSGI and ASGI apps."""

from __future__ import annotations

import asyncio

from apps import payload

_FILE_PATH = payload.ensure_file()
_FILE_BYTES = payload.file_bytes()

# RSGI websocket message kinds (the spec's numbering).
_WS_CLOSE = 0
_WS_BYTES = 1


def _headers(ctype: str, size: int) -> list[tuple[str, str]]:
    return [("content-type", ctype), ("content-length", str(size))]


def _fixed(body: bytes, ctype: str = "text/plain"):
    headers = _headers(ctype, len(body))

    async def handler(scope, proto):
        proto.response_bytes(200, headers, body)

    return handler


async def _str(scope, proto):
    text = payload.TEXT_4B
    proto.response_str(200, _headers("text/plain", len(text.encode())), text)


async def _json(scope, proto):
    body = payload.json_body()
    proto.response_bytes(200, _headers("application/json", len(body)), body)


async def _echo(scope, proto):
    body = b"".join([chunk async for chunk in proto])
    proto.response_bytes(200, _headers("text/plain", len(body)), body)


_FILE_HEADERS = _headers("application/octet-stream", payload.FILE_SIZE)


async def _file(scope, proto):
    proto.response_file(200, _FILE_HEADERS, _FILE_PATH)


def _sleeper(seconds: float):
    headers = _headers("text/plain", 4)

    async def handler(scope, proto):
        await asyncio.sleep(seconds)
        proto.response_bytes(200, headers, payload.BODY_4B)

    return handler


_NOT_FOUND_HEADERS = _headers("text/plain", 9)


async def _not_found(scope, proto):
    proto.response_bytes(404, _NOT_FOUND_HEADERS, b"not found")


ROUTES = {
    "/4b": _fixed(payload.BODY_4B),
    "/1k": _fixed(payload.BODY_1K),
    "/10k": _fixed(payload.BODY_10K),
    "/str": _str,
    "/json": _json,
    "/echo": _echo,
    "/file": _file,
    "/filebytes": _fixed(_FILE_BYTES, "application/octet-stream"),
    "/io10": _sleeper(0.010),
    "/io100": _sleeper(0.100),
}

# Transports of /ws/broadcast in this worker process: a message from any is sent to all.
_subscribers: set = set()


async def _send(transport, message) -> None:
    if message.kind == _WS_BYTES:
        await transport.send_bytes(message.data)
    else:
        await transport.send_str(message.data)


async def _websocket(scope, proto):
    if scope.path not in ("/ws/echo", "/ws/broadcast"):
        proto.close(1008)
        return
    transport = await proto.accept()
    broadcast = scope.path == "/ws/broadcast"
    if broadcast:
        _subscribers.add(transport)
    try:
        while True:
            message = await transport.receive()
            if message.kind == _WS_CLOSE:
                break
            if not broadcast:
                await _send(transport, message)
                continue
            for peer in list(_subscribers):
                try:
                    await _send(peer, message)
                except Exception:  # a peer that went away mid-broadcast
                    _subscribers.discard(peer)
    finally:
        _subscribers.discard(transport)
    proto.close(None)


async def app(scope, proto):
    if scope.proto == "http":
        await ROUTES.get(scope.path, _not_found)(scope, proto)
    elif scope.proto == "ws":
        await _websocket(scope, proto)


application = app
