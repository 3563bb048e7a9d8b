"""One app per interface for the HTTP/3 tests, with the same routes:

- ``/echo``: the request body's length and SHA-256, and the HTTP version the
  app was told, as ``LENGTH SHA256 VERSION``;
- ``/stream?n=N``: N chunks of 64 KiB, each of the byte ``ord('a') + i % 26``,
  sent one by one (a streamed response: no Content-Length from the app);
- ``/hop`` (RSGI): ``hop``, with the HTTP/1.1 fields HTTP/3 must not carry;
- ``/alt`` (RSGI): ``alt``, with the app's own Alt-Svc;
- anything else: ``hello``.
"""

from __future__ import annotations

import hashlib

CHUNK = 64 * 1024


def _echo(body: bytes, version: str) -> bytes:
    return f"{len(body)} {hashlib.sha256(body).hexdigest()} {version}".encode()


def _chunks(query: str) -> list[bytes]:
    n = int(dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("n", "4"))
    return [bytes([ord("a") + i % 26]) * CHUNK for i in range(n)]


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/echo":
        body = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [_echo(body, environ["SERVER_PROTOCOL"])]
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return iter(_chunks(environ.get("QUERY_STRING", "")))
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return  # no lifespan: the worker goes on without it
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path = scope["path"]
    headers = [(b"content-type", b"text/plain")]
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for chunk in _chunks(scope["query_string"].decode()):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    out = _echo(body, "HTTP/" + scope["http_version"]) if path == "/echo" else b"hello"
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})


async def rsgi_app(scope, proto):
    if scope.path == "/echo":
        body = await proto()
        proto.response_bytes(
            200, [("content-type", "text/plain")], _echo(body, "HTTP/" + scope.http_version)
        )
        return
    if scope.path == "/stream":
        transport = proto.response_stream(200, [("content-type", "application/octet-stream")])
        for chunk in _chunks(scope.query_string):
            await transport.send_bytes(chunk)
        return
    if scope.path == "/hop":
        hop = [("connection", "keep-alive"), ("keep-alive", "timeout=5"), ("x-kept", "1")]
        proto.response_bytes(200, hop, b"hop")
        return
    if scope.path == "/alt":
        proto.response_bytes(200, [("alt-svc", 'h3=":9443"; ma=5')], b"alt")
        return
    proto.response_bytes(200, [("content-type", "text/plain")], b"hello")
