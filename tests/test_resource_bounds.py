"""Hostile clients must not make a worker's memory grow without bound.

Every worker class meets an endless header, an endless request line, an
endless chunked body past --limit-request-body, a million tiny chunks and
hundreds of connections that send nothing. The test measures the workers'
RSS (/proc/PID/status) before and after, checks the status each client got,
and that the server goes on serving.
"""

from __future__ import annotations

import select
import socket
import time

import pytest
from conftest import WSGI_WORKERS, worker_params
from hostile import Prober, hostile_app, worker_rss

# Soaks, hostile clients and external suites: `pytest -m long` (CI runs it too).
pytestmark = pytest.mark.long

ALL_WORKERS = WSGI_WORKERS + worker_params("asgi") + worker_params("rsgi")
ENDLESS = 50 * 2**20  # what a hostile client sends at most, per attack
GROWTH_BOUND = 50 * 2**20
LIMIT_BODY = 2**20


def stream_until_answered(server, first: bytes, filler: bytes, total: int = ENDLESS) -> bytes:
    """Send ``first`` then ``filler`` over and over (``total`` bytes at most),
    stopping as soon as the server answers or closes; what it answered."""
    sock = server.connect(timeout=20)
    try:
        sock.sendall(first)
        sent = len(first)
        while sent < total:
            if select.select([sock], [], [], 0)[0]:
                break  # an answer (or the close) has come: stop sending
            try:
                sock.sendall(filler)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(filler)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
        return b"".join(chunks)
    finally:
        sock.close()


def status_of(raw: bytes) -> int:
    assert raw.startswith(b"HTTP/1."), raw[:200]
    return int(raw.split(b" ", 2)[1])


@pytest.fixture(params=ALL_WORKERS)
def server(request, start_server):
    worker = request.param
    return start_server("-k", worker, hostile_app(worker), "--limit-request-body", str(LIMIT_BODY))


def test_hostile_requests_get_their_status_and_memory_stays_bounded(server) -> None:
    before = sum(worker_rss(server.pid).values())
    filler = b"a" * 65536

    endless_header = stream_until_answered(server, b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: ", filler)
    assert status_of(endless_header) == 431
    endless_line = stream_until_answered(server, b"GET /", filler)
    assert status_of(endless_line) == 414
    many_fields = stream_until_answered(
        server, b"GET / HTTP/1.1\r\nHost: t\r\n", b"X-A: b\r\n" * 8192
    )
    assert status_of(many_fields) == 431

    chunk = b"10000\r\n" + b"b" * 0x10000 + b"\r\n"
    past_limit = stream_until_answered(
        server, b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n", chunk
    )
    assert status_of(past_limit) == 413

    # A million one-byte chunks (6 MB on the wire, 1 MB of body): served, in full.
    tiny = b"1\r\nc\r\n" * 1000
    body = b"".join([tiny] * 1000) + b"0\r\n\r\n"
    head = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    tiny_chunks = stream_until_answered(server, head + body, b"", total=0)
    assert status_of(tiny_chunks) == 200
    assert tiny_chunks.endswith(b"read 1000000")

    assert server.get("/")[0] == 200
    growth = sum(worker_rss(server.pid).values()) - before
    assert growth < GROWTH_BOUND, f"the workers grew by {growth / 2**20:.0f} MiB"


def test_silent_connections_do_not_stop_the_server(server) -> None:
    before = sum(worker_rss(server.pid).values())
    silent = []
    try:
        with Prober(server.host, server.port) as prober:
            for _ in range(500):
                silent.append(socket.create_connection((server.host, server.port), timeout=10))
            time.sleep(3)  # the probe keeps asking while they are all open
            growth = sum(worker_rss(server.pid).values()) - before
        probes = prober.result
        assert probes.total >= 1
        assert not probes.failures, probes.failures[:5]
        assert growth < GROWTH_BOUND, f"the workers grew by {growth / 2**20:.0f} MiB"
    finally:
        for sock in silent:
            sock.close()
    assert server.get("/")[0] == 200
