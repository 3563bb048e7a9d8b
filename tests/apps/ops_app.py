"""Apps for the operations tests (metrics, statsd, control, recycling), one per
interface with the same routes:

- ``/status/NNN``: that status, body "status NNN";
- ``/bytes/N``: a body of N bytes;
- ``/raise``: the app raises before responding (a 500, logged as an exception);
- ``/grow?MB``: the worker keeps MB more MiB of touched memory ("grew PID");
- ``/pid``: the worker's pid; ``/sleep?S``: answer after S seconds;
- anything else: "ok".
"""

import os
import time

HOARD = []


def _route(path, query):
    """(status, body) or None for /raise; the work of /grow and blocking /sleep done."""
    if path.startswith("/status/"):
        code = int(path[len("/status/") :])
        return code, b"status %d" % code
    if path.startswith("/bytes/"):
        return 200, b"x" * int(path[len("/bytes/") :])
    if path == "/raise":
        return None
    if path == "/grow":
        # bytearray() zero-fills: every page is touched, so it is resident.
        HOARD.append(bytearray(int(query or "1") * 1024 * 1024))
        return 200, b"grew %d" % os.getpid()
    if path == "/pid":
        return 200, str(os.getpid()).encode()
    return 200, b"ok"


_REASONS = {200: "OK", 204: "No Content", 301: "Moved Permanently", 404: "Not Found"}


def app(environ, start_response):
    path, query = environ["PATH_INFO"], environ.get("QUERY_STRING", "")
    if path == "/sleep":
        time.sleep(float(query or "1"))
    routed = _route(path, query)
    if routed is None:
        raise RuntimeError("the app failed on purpose")
    status, body = routed
    start_response(
        f"{status} {_REASONS.get(status, 'Status')}",
        [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))],
    )
    return [body]


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return
    path, query = scope["path"], scope["query_string"].decode()
    if path == "/sleep":
        import asyncio

        await asyncio.sleep(float(query or "1"))
    routed = _route(path, query)
    if routed is None:
        raise RuntimeError("the app failed on purpose")
    status, body = routed
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def rsgi_app(scope, proto):
    path, query = scope.path, scope.query_string
    if path == "/sleep":
        import asyncio

        await asyncio.sleep(float(query or "1"))
    routed = _route(path, query)
    if routed is None:
        raise RuntimeError("the app failed on purpose")
    status, body = routed
    proto.response_bytes(status, [("content-type", "text/plain")], body)


APPS = {"wsgi": "app", "asgi": "asgi_app", "rsgi": "rsgi_app"}
