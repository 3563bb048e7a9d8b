"""A native-server worker whose loop (or every thread that calls its WSGI
app) is stuck stops accepting, so new clients go to the other workers
instead of waiting on it, and dying with it if `--timeout` kills it.

Two workers; one request holds one worker's app for a few seconds
(tests/apps/hostile_app.py's ``/block``). Once it has been stuck for more
than a second, a run of new connections must all be answered before that
request is: answered by the other worker, none left waiting on the stuck
one. An order of events, not a timing, is asserted.
"""

from __future__ import annotations

import select
import time

import pytest
from conftest import WSGI_WORKERS, worker_params
from hostile import hostile_app

NATIVE = [
    p
    for p in worker_params("asgi") + worker_params("rsgi") + WSGI_WORKERS
    if p.values[0] in ("rsgi", "native")
]


def get_ok(server) -> bytes:
    sock = server.connect(timeout=10)
    try:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        return data
    finally:
        sock.close()


@pytest.mark.parametrize("worker", NATIVE)
def test_a_stuck_worker_leaves_new_connections_to_the_others(start_server, worker) -> None:
    server = start_server("-k", worker, hostile_app(worker), "-w", "2", "--timeout", "30")
    server.wait_workers(2)
    blocked = server.connect(timeout=10)
    try:
        blocked.sendall(b"GET /block HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        time.sleep(1.5)  # past the second after which a silent loop is stuck
        answers = [get_ok(server) for _ in range(20)]
        still_blocked = not select.select([blocked], [], [], 0)[0]
        rest = b""
        blocked.settimeout(10)
        while chunk := blocked.recv(65536):
            rest += chunk
    finally:
        blocked.close()
    assert all(a.startswith(b"HTTP/1.1 200") and a.endswith(b"ok") for a in answers)
    assert still_blocked, "the blocked request ended before the others were answered"
    assert rest.endswith(b"unblocked")
