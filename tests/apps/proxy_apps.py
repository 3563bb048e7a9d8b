"""Apps that say who the client is, for the PROXY protocol tests, one per interface.

Each answers "HOST PORT SCHEME" (PORT "-" when there is none) and appends the
request path to $PROXY_MARKS/seen, so a test can tell what reached the app.
"""

import os


def _mark(path: str) -> None:
    marks = os.environ.get("PROXY_MARKS")
    if marks:
        with open(os.path.join(marks, "seen"), "a") as out:
            out.write(path + "\n")


def app(environ, start_response):
    _mark(environ["PATH_INFO"])
    host = environ.get("REMOTE_ADDR") or "-"
    port = environ.get("REMOTE_PORT") or "-"
    body = f"{host} {port} {environ['wsgi.url_scheme']}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return
    _mark(scope["path"])
    client = scope.get("client")
    host, port = client if client else ("-", "-")
    body = f"{host} {port} {scope['scheme']}".encode()
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _RsgiApp:
    async def __rsgi__(self, scope, proto):
        _mark(scope.path)
        host, port = "-", "-"
        if scope.client:
            host, _, port = scope.client.rpartition(":")
            host = host.strip("[]")
        proto.response_str(200, [("content-type", "text/plain")], f"{host} {port} {scope.scheme}")


rsgi_app = _RsgiApp()
