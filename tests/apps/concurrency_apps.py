"""WSGI apps for the keep-alive and concurrency tests (gthread, gevent).

Each answer says something a test checks from the outside: which request it
was, which process served it, how long the app slept.
"""

from __future__ import annotations

import os
import time

FOUR = b"four"


def four(environ, start_response):
    """The 4-byte GET of the benchmark."""
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])
    return [FOUR]


def path(environ, start_response):
    """Answers its own path and the worker's pid: "/1 12345"."""
    body = f"{environ['PATH_INFO']} {os.getpid()}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def sized(environ, start_response):
    """A body of ?n bytes (default 60000), made of the path repeated: a client
    can tell whose answer it got and that none of it is missing."""
    size = int(environ.get("QUERY_STRING") or "60000")
    body = sized_body(environ["PATH_INFO"], size)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(size))])
    return [body]


def sized_body(path: str, size: int) -> bytes:
    unit = path.encode() + b"."
    return (unit * (size // len(unit) + 1))[:size]


def sleepy(environ, start_response):
    """Sleeps ?seconds (default 0.1) in the app: long I/O, as a database call would.

    Logs when it starts, so a test can act while the request is in flight.
    """
    seconds = float(environ.get("QUERY_STRING") or "0.1")
    print(f"sleepy request started: {environ['PATH_INFO']}", flush=True)
    time.sleep(seconds)
    body = f"slept {environ['PATH_INFO']}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def upload(environ, start_response):
    """Reads the whole body and answers its length."""
    body = str(len(environ["wsgi.input"].read())).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


try:  # the gthread worker on poll(), as on platforms without epoll (macOS, BSD)
    from supervise.workers.gthread import ThreadWorker, _Poll

    class PollThreadWorker(ThreadWorker):
        poller_class = _Poll

except ImportError:  # pragma: no cover - only when supervise itself is broken
    pass
