"""Apps for the tests behind a proxy (tests/test_nginx.py), one per interface:
an HTTP request is answered with JSON saying what the server handed the app
as the client's address, the scheme and the Host, so a test sees from outside
what the proxy headers changed. A WebSocket (asgi, rsgi) is accepted, sent
the same JSON, then echoed until the client closes.
"""

from __future__ import annotations

import json
import os


def _seen(client: str, scheme: str, host: str) -> bytes:
    seen = {"client": client, "scheme": scheme, "host": host, "pid": os.getpid()}
    return json.dumps(seen).encode()


def app(environ, start_response):
    client, host = environ.get("REMOTE_ADDR", ""), environ.get("HTTP_HOST", "")
    body = _seen(client, environ["wsgi.url_scheme"], host)
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


async def asgi_app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    headers = dict(scope["headers"])
    client = scope["client"][0] if scope["client"] else ""
    seen = _seen(client, scope["scheme"], headers.get(b"host", b"").decode("latin-1"))
    if scope["type"] == "http":
        response = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(seen))]
        await send({"type": "http.response.start", "status": 200, "headers": response})
        await send({"type": "http.response.body", "body": seen})
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": seen.decode()})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        echo = {"text": message.get("text"), "bytes": message.get("bytes")}
        await send({"type": "websocket.send", **echo})


def _rsgi_client(client: str) -> str:
    """RSGI gives "address:port" ("" on a unix socket): the address alone."""
    host = client.rpartition(":")[0] if client.count(":") == 1 or client.startswith("[") else client
    return host.strip("[]")


async def rsgi_app(scope, proto):
    seen = _seen(_rsgi_client(scope.client), scope.scheme, scope.headers.get("host", ""))
    if scope.proto != "ws":
        proto.response_bytes(200, [("content-type", "application/json")], seen)
        return
    from supervise.rsgi import WebsocketMessageType

    transport = await proto.accept()
    await transport.send_str(seen.decode())
    while True:
        message = await transport.receive()
        if message.kind == WebsocketMessageType.close:
            break
        if message.kind == WebsocketMessageType.bytes:
            await transport.send_bytes(message.data)
        else:
            await transport.send_str(message.data)
    proto.close()


APPS = {"wsgi": "app", "asgi": "asgi_app", "rsgi": "rsgi_app"}
