"""Apps for the slow and hostile client tests, one per interface, same routes:

- ``GET /``: "ok" (what the probe asks for);
- ``GET /big``: 256 KiB, more than a socket's send buffer holds, so a client
  that reads slowly (slowhttptest -X) keeps the server writing;
- any other method: the app reads the whole body and answers its length, so
  a client that sends its body slowly (slowhttptest -B) keeps it reading.
"""

BIG = b"x" * (256 * 1024)


def _answer(method: str, path: str, body: bytes) -> bytes:
    if method not in ("GET", "HEAD"):
        return b"read %d" % len(body)
    return BIG if path == "/big" else b"ok"


def app(environ, start_response):
    body = b""
    if environ["REQUEST_METHOD"] not in ("GET", "HEAD"):
        body = environ["wsgi.input"].read()
    out = _answer(environ["REQUEST_METHOD"], environ["PATH_INFO"], body)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(out)))])
    return [out]


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
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


async def rsgi_app(scope, proto):
    body = b"" if scope.method in ("GET", "HEAD") else await proto()
    out = _answer(scope.method, scope.path, body)
    proto.response_bytes(200, [("content-type", "text/plain")], out)


APPS = {"wsgi": "app", "asgi": "asgi_app", "rsgi": "rsgi_app"}
