"""WSGI, ASGI and RSGI apps that misbehave on purpose, for the soak test (tests/soak.py).

- Every request leaks SOAK_LEAK bytes (default 16 KiB) for good: only
  --max-requests recycling keeps a worker's memory bounded.
- GET /block deadlocks the worker: that request and every later one in the
  same process block in a call no worker class can schedule around (gevent
  does not patch os.read), so the worker stops beating and the arbiter's
  --timeout kills and replaces it.
- While the file $SOAK_FLAGS/broken exists, importing this module fails: a
  HUP then boots a generation that cannot start, and the old one keeps serving.
- The response body is the worker's pid, so the client knows who answered.
"""

import os
import threading
from pathlib import Path

_flags = os.environ.get("SOAK_FLAGS")
if _flags and (Path(_flags) / "broken").exists():
    raise ImportError("soak_app: broken on purpose ($SOAK_FLAGS/broken exists)")

_LEAK = int(os.environ.get("SOAK_LEAK", "16384"))
_leaked: list[bytes] = []
_deadlocked = threading.Event()


def _respond_to(path: str) -> bytes:
    """The body for ``path``, after leaking and maybe deadlocking (as a buggy app would)."""
    if path == "/block":
        _deadlocked.set()
    if _deadlocked.is_set():
        read_end, _write_end = os.pipe()
        os.read(read_end, 1)  # never returns: only the arbiter's kill ends it
    _leaked.append(bytes(_LEAK))
    return str(os.getpid()).encode()


def app(environ, start_response):
    body = _respond_to(environ["PATH_INFO"])
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return  # no lifespan support: the worker goes on without it
    body = _respond_to(scope["path"])
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _RsgiApp:
    async def __rsgi__(self, scope, proto):
        body = _respond_to(scope.path)
        proto.response_bytes(200, [("content-type", "text/plain")], body)


rsgi_app = _RsgiApp()
