"""WSGI and ASGI apps for process-lifecycle tests: who answered, slow and stuck requests."""

import os
import time

VERSION = "1"


def app(environ, start_response):
    path = environ["PATH_INFO"]
    query = environ.get("QUERY_STRING", "")
    if path == "/sleep":
        time.sleep(float(query or "1"))
        body = b"slept"
    elif path == "/hang":
        # Stuck for good in a call no worker can schedule around (gevent does not
        # patch os.read): only SIGABRT/SIGKILL get it out.
        read_end, _write_end = os.pipe()
        os.read(read_end, 1)
    elif path == "/pid":
        body = str(os.getpid()).encode()
    elif path == "/version":
        body = VERSION.encode()
    else:
        body = b"ok"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


async def asgi_app(scope, receive, send):
    """The same routes for the asgi worker; /sleep waits without blocking the loop."""
    if scope["type"] != "http":
        return  # no lifespan support: the worker goes on without it
    path = scope["path"]
    query = scope["query_string"].decode()
    if path == "/sleep":
        # Imported here: the WSGI app must import for a worker running as `nobody`,
        # who may not be able to read the standard library's not-yet-imported parts.
        import asyncio

        await asyncio.sleep(float(query or "1"))
        body = b"slept"
    elif path == "/hang":
        read_end, _write_end = os.pipe()
        os.read(read_end, 1)  # blocks the event loop: only SIGABRT/SIGKILL get it out
    elif path == "/pid":
        body = str(os.getpid()).encode()
    elif path == "/version":
        body = VERSION.encode()
    else:
        body = b"ok"
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _RsgiApp:
    """The same routes for the rsgi worker (an RSGI app object, as Granian's docs show)."""

    def __rsgi_init__(self, loop):
        self.loop = loop

    async def __rsgi__(self, scope, proto):
        path = scope.path
        if path == "/sleep":
            import asyncio

            await asyncio.sleep(float(scope.query_string or "1"))
            body = "slept"
        elif path == "/hang":
            read_end, _write_end = os.pipe()
            os.read(read_end, 1)  # blocks the event loop: only SIGABRT/SIGKILL get it out
        elif path == "/pid":
            body = str(os.getpid())
        elif path == "/version":
            body = VERSION
        else:
            body = "ok"
        proto.response_str(200, [("content-type", "text/plain")], body)


rsgi_app = _RsgiApp()
