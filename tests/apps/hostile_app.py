"""Apps for the slow and hostile client tests, one per interface, same routes:

- ``GET /``: "ok" (what the probe asks for);
- ``GET /big``: 256 KiB, more than a socket's send buffer holds, so a client
  that reads slowly (slowhttptest -X) keeps the server writing;
- ``GET /huge``: 8 MiB made anew for each request (as a page rendered per
  request would be), so what a server holds for clients that do not read
  grows with their number until it stops holding it;
- ``GET /stream``: ``STREAM`` bytes in 64 KiB pieces, streamed (the app
  waits on back-pressure, so it holds one piece), for clients that read
  slowly on purpose (``--send-min-rate``);
- ``GET /block``: holds the thread that calls the app (the event loop, for
  ASGI and RSGI apps) for ``BLOCK`` seconds, as an app stuck in a call would;
- any other method: the app reads the whole body and answers its length, so
  a client that sends its body slowly (slowhttptest -B) keeps it reading.

``asgi_ws_app`` is ``asgi_app`` plus a WebSocket echo on every path, for the
WebSocket floods of tests/test_ws_hostile.py.
"""

import time

BIG = b"x" * (256 * 1024)
BLOCK = 4.0
HUGE = 8 * 2**20


def _answer(method: str, path: str, body: bytes) -> bytes:
    if method not in ("GET", "HEAD"):
        return b"read %d" % len(body)
    if path == "/block":
        time.sleep(BLOCK)
        return b"unblocked"
    if path == "/huge":
        return b"h" * HUGE
    return BIG if path == "/big" else b"ok"


STREAM = 256 * 2**20
PIECE = b"s" * 65536


def _pieces():
    for _ in range(STREAM // len(PIECE)):
        yield PIECE


def app(environ, start_response):
    if environ["PATH_INFO"] == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(STREAM))])
        return _pieces()
    body = b""
    if environ["REQUEST_METHOD"] not in ("GET", "HEAD"):
        body = environ["wsgi.input"].read()
    out = _answer(environ["REQUEST_METHOD"], environ["PATH_INFO"], body)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(out)))])
    return [out]


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/stream":
        headers = [(b"content-type", b"text/plain"), (b"content-length", str(STREAM).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for piece in _pieces():
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    body = b""
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        more = message.get("more_body", False)
    out = _answer(scope["method"], scope["path"], body)
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(out)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})


async def asgi_ws_app(scope, receive, send):
    if scope["type"] != "websocket":
        await asgi_app(scope, receive, send)
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message.get("text") is not None:
            await send({"type": "websocket.send", "text": message["text"]})
        else:
            await send({"type": "websocket.send", "bytes": message["bytes"]})


async def rsgi_app(scope, proto):
    if scope.path == "/stream":
        headers = [("content-type", "text/plain"), ("content-length", str(STREAM))]
        transport = proto.response_stream(200, headers)
        for piece in _pieces():
            await transport.send_bytes(piece)
        return
    body = b"" if scope.method in ("GET", "HEAD") else await proto()
    out = _answer(scope.method, scope.path, body)
    proto.response_bytes(200, [("content-type", "text/plain")], out)


async def rsgi_ws_app(scope, proto):
    """``rsgi_app`` plus a WebSocket echo on every path."""
    if scope.proto != "ws":
        await rsgi_app(scope, proto)
        return
    transport = await proto.accept()
    while True:
        message = await transport.receive()
        if message.kind == 0:  # close
            break
        if message.kind == 1:
            await transport.send_bytes(message.data)
        else:
            await transport.send_str(message.data)
    proto.close()


APPS = {"wsgi": "app", "asgi": "asgi_app", "rsgi": "rsgi_app"}
