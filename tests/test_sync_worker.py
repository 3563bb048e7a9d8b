"""The sync worker: one request per connection, robust against bad and slow clients."""

from __future__ import annotations

import signal
import threading
import time

from conftest import answers_until_closed, read_until_closed

APP = "wsgi_apps"


def test_two_workers_serve(start_server):
    server = start_server(f"{APP}:pid", "-w", "2")
    workers = server.wait_workers(2)
    pids = set()
    for _ in range(20):
        status, headers, body = server.get("/")
        assert status == 200
        assert headers["connection"] == "close"
        pids.add(int(body))
    assert pids <= set(workers)


def test_every_response_closes_the_connection(start_server):
    server = start_server(f"{APP}:hello")
    with server.connect() as sock:
        # Two pipelined requests: the sync worker answers the first and closes.
        sock.sendall(b"GET /1 HTTP/1.1\r\nHost: t\r\n\r\nGET /2 HTTP/1.1\r\nHost: t\r\n\r\n")
        raw = read_until_closed(sock)
    assert raw.count(b"HTTP/1.1 200 OK") == 1
    assert b"Connection: close\r\n" in raw


def test_header_timeout_closes_a_slowloris(start_server):
    server = start_server(f"{APP}:hello", "--header-timeout", "1")
    worker = server.wait_workers(1)
    with server.connect(timeout=20) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        # Never finish the head: the server gives up and says so.
        raw = read_until_closed(sock)
    assert raw.startswith(b"HTTP/1.1 408 ")
    # A client that connects and sends nothing is dropped silently.
    with server.connect(timeout=20) as sock:
        assert read_until_closed(sock) == b""
    assert server.get("/")[0] == 200
    assert server.workers() == worker


def test_body_timeout_answers_408(start_server):
    server = start_server(f"{APP}:echo", "--body-timeout", "1")
    with server.connect(timeout=20) as sock:
        sock.sendall(b"POST /?mode=read HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
        raw = read_until_closed(sock)
    assert raw.startswith(b"HTTP/1.1 408 ")
    assert server.get("/?mode=read", method="POST", body=b"abc")[0] == 200


def test_bad_request_gets_400_and_the_worker_survives(start_server):
    server = start_server(f"{APP}:hello")
    worker = server.wait_workers(1)
    for bad in (
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        b"GET / HTTP/1.1\r\nBad Header Name: x\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
    ):
        raw = server.raw(bad)
        assert raw.startswith(b"HTTP/1.1 400 "), (bad, raw)
        assert b"Connection: close" in raw
    assert server.get("/")[0] == 200
    assert server.workers() == worker


def test_oversized_heads_get_414_and_431(start_server):
    server = start_server(f"{APP}:hello", "--limit-request-line", "100")
    assert server.raw(b"GET /" + b"a" * 200 + b" HTTP/1.1\r\nHost: t\r\n\r\n").startswith(
        b"HTTP/1.1 414 "
    )
    big_header = b"X-Big: " + b"b" * 9000 + b"\r\n"
    assert server.raw(b"GET / HTTP/1.1\r\nHost: t\r\n" + big_header + b"\r\n").startswith(
        b"HTTP/1.1 431 "
    )
    assert server.get("/")[0] == 200


def test_client_gone_mid_request_does_not_hurt(start_server):
    server = start_server(f"{APP}:echo")
    with server.connect() as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\npartial")
    assert server.get("/?mode=read", method="POST", body=b"abc")[0] == 200


def test_graceful_stop_finishes_the_request_in_flight(start_server):
    server = start_server(f"{APP}:slow")
    result = {}

    def request():
        result["response"] = server.get("/?s=2")

    thread = threading.Thread(target=request)
    thread.start()
    # Once the app has started on it, ask everything to stop.
    server.wait_for_log("slow request started: s=2")
    server.signal(signal.SIGTERM)
    thread.join(30)
    assert result["response"][0] == 200
    assert result["response"][2] == b"done"
    assert server.proc.wait(30) == 0


def test_graceful_stop_serves_a_head_still_on_its_way(start_server):
    # The worker accepted the connection before the whole head arrived (the
    # usual race when a stop meets a request): the head is still served.
    server = start_server(f"{APP}:hello", "--header-timeout", "10")
    server.wait_workers(1)
    with server.connect(timeout=20) as sock, server.connect(timeout=20) as silent:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n")
        assert server.get("/")[0] == 200  # both connections are accepted by now
        server.signal(signal.SIGTERM)
        threading.Event().wait(0.5)
        sock.sendall(b"X-Late: yes\r\n\r\n")
        raw = read_until_closed(sock)
        # A connection that never sent a byte is closed, not waited for.
        assert read_until_closed(silent) == b""
    assert raw.startswith(b"HTTP/1.1 200 ")
    assert server.proc.wait(30) == 0


def test_worker_connections_serves_clients_that_connect_first_and_send_later(start_server):
    """A pool that opens its connections, then sends on each: at
    worker_connections heads on their way, the worker stops accepting (the
    rest wait in the backlog) rather than close a connection that connected
    a moment ago, whose request may be on the wire. Only a head that has
    waited 1 s may go to make room (the asgi worker's and the engine's rule)."""
    server = start_server(f"{APP}:hello", "-w", "1", "--worker-connections", "2")
    heads = [f"GET /{i} HTTP/1.1\r\nHost: t\r\n\r\n".encode() for i in range(8)]
    answers = answers_until_closed(server, heads)
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 8


def test_worker_connections_still_makes_room_against_a_slowloris(start_server):
    """Heads that have waited past the grace do give their place to a newcomer."""
    server = start_server(f"{APP}:hello", "-w", "1", "--worker-connections", "2")
    idle = [server.connect(timeout=20) for _ in range(2)]
    try:
        for sock in idle:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        time.sleep(1.5)
        assert server.get("/")[0] == 200  # one slow head closed for it
    finally:
        for sock in idle:
            sock.close()
