"""The connection as `-k asgi` and the engine (`-k native`) keep it for an
ASGI app: keep-alive and pipelining, the header timeout, a graceful stop,
flow control both ways, --limit-concurrency, --worker-connections, and each
event loop.

Every test runs the real server and talks to it over real sockets.
"""

from __future__ import annotations

import select
import signal
import socket
import threading
import time

import httpx
import pytest
from conftest import answers_until_closed, read_until_closed, wait_until
from test_asgi import raw_exchange, url

# -- keep-alive, timeouts, graceful stop -----------------------------------------------


def test_keep_alive_and_pipelining_answer_in_order(asgi):
    server = asgi()
    conn = server.http()
    for _ in range(3):
        conn.request("POST", "/echo", body=b"again")
        assert conn.getresponse().read() == b"again"
    conn.close()
    requests = b"".join(
        f"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{i:02d}".encode()
        for i in range(5)
    )
    data = raw_exchange(
        server, requests + b"GET /stream HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    assert data.count(b"HTTP/1.1 200 OK") == 6
    assert [data.index(f"\r\n\r\n{i:02d}".encode()) for i in range(5)] == sorted(
        data.index(f"\r\n\r\n{i:02d}".encode()) for i in range(5)
    )


def test_idle_keep_alive_connection_is_closed_after_keepalive(asgi):
    server = asgi("--keep-alive", "1")
    with server.connect() as sock:
        sock.sendall(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
        started = time.monotonic()
        read_until_closed(sock)
        assert time.monotonic() - started < 5


def test_header_timeout_closes_idle_and_unfinished_heads(asgi):
    server = asgi("--header-timeout", "2")
    idle = server.connect(timeout=10)
    partial = server.connect(timeout=10)
    try:
        partial.sendall(b"GET /stream HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        started = time.monotonic()
        assert read_until_closed(idle) == b""  # nothing begun: closed without a word
        assert read_until_closed(partial).startswith(b"HTTP/1.1 408 ")
        assert time.monotonic() - started < 8
    finally:
        idle.close()
        partial.close()
    assert httpx.get(url(server, "/stream")).status_code == 200


def test_term_answers_the_request_in_flight_with_close_and_closes_idle_ones(asgi, tmp_path):
    server = asgi("-w", "1")
    idle = server.connect(timeout=20)
    idle.sendall(b"GET /state HTTP/1.1\r\nHost: t\r\n\r\n")
    idle_answer = b""
    while not idle_answer.endswith(b"}"):  # the whole JSON body: the exchange is over
        idle_answer += idle.recv(65536)
    assert idle_answer.startswith(b"HTTP/1.1 200 ")
    marker = tmp_path / "sleeping"
    busy = server.connect(timeout=20)
    busy.sendall(f"GET /sleep?s=1.5&marker={marker} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    wait_until(marker.exists)
    server.signal(signal.SIGTERM)
    try:
        answer = read_until_closed(busy)  # closed by the server after the answer
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ") and body == b"slept"
        assert b"\r\nconnection: close" in head.lower()
        assert read_until_closed(idle) == b""  # the idle one is closed, not left open
        assert server.proc.wait(20) == 0
    finally:
        idle.close()
        busy.close()


# -- flow control and limits ---------------------------------------------------------------------


def worker_rss_kib(server) -> int:
    return int(httpx.get(url(server, "/rss")).text)


def test_slow_reader_does_not_grow_the_worker(asgi):
    server = asgi("-w", "1")
    before = worker_rss_kib(server)
    with server.connect(timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(b"GET /big?mib=64 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        time.sleep(1.5)  # read nothing: the app's sends must wait
        during = worker_rss_kib(server)
        total = len(read_until_closed(sock))
    assert total > 64 * 1024 * 1024
    assert during - before < 16 * 1024, (before, during)  # far below the 64 MiB sent


def test_fast_uploader_waits_for_a_slow_app(asgi):
    server = asgi("-w", "1")
    before = worker_rss_kib(server)
    size = 48 * 1024 * 1024
    result: dict[str, bytes] = {}

    def upload() -> None:
        with server.connect(timeout=30) as sock:
            sock.sendall(
                f"POST /slow-upload?wait=2 HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            chunk = b"u" * (1024 * 1024)
            for _ in range(size // len(chunk)):
                sock.sendall(chunk)
            result["response"] = read_until_closed(sock)

    thread = threading.Thread(target=upload)
    thread.start()
    time.sleep(1.2)
    during = worker_rss_kib(server)
    thread.join(30)
    assert result["response"].endswith(str(size).encode())
    assert during - before < 16 * 1024, (before, during)


def test_limit_concurrency_answers_503(asgi):
    server = asgi("-w", "1", "--limit-concurrency", "1")
    slow = threading.Thread(target=lambda: httpx.get(url(server, "/sleep?s=1.5"), timeout=10))
    slow.start()
    time.sleep(0.5)
    assert httpx.get(url(server, "/stream")).status_code == 503
    slow.join()
    assert httpx.get(url(server, "/stream")).status_code == 200


def test_worker_connections_makes_room_by_closing_a_waiting_connection(asgi):
    server = asgi("-w", "1", "--worker-connections", "3")
    silent = server.connect(timeout=10)
    time.sleep(0.2)
    trickling = server.connect(timeout=10)
    trickling.sendall(b"GET /stream HTTP/1.1\r\nHost: t\r\nX-Slow: ")  # a slowloris
    busy = threading.Thread(target=lambda: httpx.get(url(server, "/sleep?s=2"), timeout=10))
    busy.start()
    time.sleep(0.5)
    try:
        # Every slot taken: the new client gets the slot of the connection
        # nearest its header deadline that is not in a request.
        assert httpx.get(url(server, "/stream")).status_code == 200
        # Closed now, not at its header_timeout (10 s).
        assert select.select([silent], [], [], 3)[0]
        assert read_until_closed(silent) == b""
        # Later deadlines keep theirs: the trickling head, once complete, is served.
        trickling.sendall(b"1\r\nConnection: close\r\n\r\n")
        assert read_until_closed(trickling).startswith(b"HTTP/1.1 200 ")
        # The request in progress keeps its slot.
        busy.join(10)
        assert httpx.get(url(server, "/stream")).status_code == 200
    finally:
        trickling.close()
        silent.close()


def test_worker_connections_takes_the_slot_of_a_client_that_left_first(asgi):
    """Clients that left in the middle of slow requests must not keep their slots
    while the app finishes: a newcomer takes one of theirs, not a live connection's."""
    server = asgi("-w", "1", "--worker-connections", "3")
    for _ in range(2):
        gone = server.connect(timeout=10)
        gone.sendall(b"GET /sleep?s=2 HTTP/1.1\r\nHost: t\r\n\r\n")
        time.sleep(0.2)  # the request is with the app
        gone.close()
    kept = server.http()
    try:
        kept.request("GET", "/stream")
        assert kept.getresponse().read()
        time.sleep(0.2)
        assert httpx.get(url(server, "/stream")).status_code == 200
        # The idle keep-alive connection kept its slot.
        kept.request("GET", "/stream")
        assert kept.getresponse().status == 200
    finally:
        kept.close()


def test_worker_connections_keeps_a_newcomer_waiting_while_every_connection_is_in_a_request(
    asgi,
):
    """With every slot in a request, a newcomer waits unread, as in the backlog
    (gthread's and Granian's meaning of the bound; --limit-concurrency is the
    503 one), and is served once a slot frees."""
    server = asgi("-w", "1", "--worker-connections", "2")
    statuses: list[int] = []
    slow = [
        threading.Thread(
            target=lambda: statuses.append(
                httpx.get(url(server, "/sleep?s=2"), timeout=10).status_code
            )
        )
        for _ in range(2)
    ]
    for thread in slow:
        thread.start()
    time.sleep(0.5)
    newcomer = server.connect(timeout=10)
    try:
        newcomer.sendall(b"GET /stream HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert not select.select([newcomer], [], [], 1)[0], "served past the bound"
        assert read_until_closed(newcomer).startswith(b"HTTP/1.1 200 ")
    finally:
        newcomer.close()
        for thread in slow:
            thread.join(10)
    assert statuses == [200, 200]


def test_worker_connections_serves_clients_that_connect_first_and_send_later(asgi):
    """A pool that opens its connections, then sends on each: none of them may
    lose its seat before its request was read (a newcomer gives a connection
    a moment on its client before taking its seat)."""
    server = asgi("-w", "1", "--worker-connections", "2")
    heads = [
        f"GET /stream?{i} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode()
        for i in range(8)
    ]
    answers = answers_until_closed(server, heads)
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 8


def test_answers_gathered_across_connections_keep_each_connections_order(asgi):
    """With other connections open, the asgi worker's whole responses wait
    for the end of the loop's turn and leave together: each connection
    still gets its own answers, whole and in its order, and one that asked
    to close (or spoke HTTP/1.0) is closed after its last answer."""
    server = asgi()
    idle = server.connect(timeout=10)  # keeps another connection open throughout
    try:
        heads = []
        for c in range(6):
            pipeline = b"".join(
                f"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n{c}:{i:03d}".encode()
                for i in range(20)
            )
            last = (
                f"POST /echo HTTP/1.0\r\nContent-Length: 5\r\n\r\n{c}:end"
                if c % 2
                else f"POST /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                f"Content-Length: 5\r\n\r\n{c}:end"
            )
            heads.append(pipeline + last.encode())
        answers = answers_until_closed(server, heads)
        for c, data in enumerate(answers):
            bodies = [part.split(b"\r\n\r\n", 1)[1][:5] for part in data.split(b"HTTP/1.")[1:]]
            assert bodies == [f"{c}:{i:03d}".encode() for i in range(20)] + [f"{c}:end".encode()]
        idle.sendall(b"GET /stream HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert read_until_closed(idle).startswith(b"HTTP/1.1 200 OK")
    finally:
        idle.close()


def test_long_pipeline_is_answered_in_full(asgi):
    server = asgi()
    count = 300
    requests = b"GET /stream?n=1&size=1 HTTP/1.1\r\nHost: t\r\n\r\n" * count
    data = raw_exchange(
        server, requests + b"GET /stream HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    assert data.count(b"HTTP/1.1 200 OK") == count + 1


# -- event loops ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "loop",
    [
        "uvloop",
        "asyncio",
        pytest.param(
            "rloop",
            marks=pytest.mark.xfail(
                strict=True,
                reason="rloop 0.5 closes a transport's socket only when the transport is "
                "garbage-collected (the worker warns at start)",
            ),
        ),
    ],
)
def test_connection_close_ends_the_connection_on_every_loop(asgi, loop):
    pytest.importorskip(loop)
    if asgi.worker != "asgi":
        pytest.skip("the engine's sockets are Rust's whatever the loop")
    server = asgi("--loop", loop)
    answer = raw_exchange(server, b"GET /state HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"}")


# The loop each --loop choice runs, as type(loop).__module__ starts.
LOOP_MODULES = {"auto": "uvloop", "asyncio": "asyncio", "uvloop": "uvloop", "rloop": "rloop"}


@pytest.mark.parametrize("loop", ["auto", "asyncio", "uvloop", "rloop"])
def test_every_event_loop_serves(asgi, loop):
    pytest.importorskip(LOOP_MODULES[loop])
    server = asgi("--loop", loop)
    assert httpx.get(url(server, "/loop")).text.startswith(LOOP_MODULES[loop] + ".")
    assert httpx.post(url(server, "/echo"), content=b"on " + loop.encode()).text == f"on {loop}"
    conn = server.http()
    for _ in range(2):
        conn.request("GET", "/stream?n=2&size=2")
        assert conn.getresponse().read() == b"0011"
    conn.close()
    assert server.stop(signal.SIGTERM) == 0
