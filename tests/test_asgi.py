"""The asgi worker as an ASGI app sees it: scope, events, errors, flow control, lifespan.

Every test runs the real `supervise -k asgi` and talks to it with httpx,
http.client or raw sockets.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import ssl
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import read_until_closed, wait_until, websocket_upgrade
from test_tls import client_context, https_get, start_tls
from test_tls import pki as tls_pki  # noqa: F401 - the fixture, as `tls_pki`

APP = "asgi_apps:app"
# What both servers advertise (the engine: early hints only on HTTP/1.1
# connections that hyper does not serve, as in these tests).
EXTENSIONS = {"http.response.pathsend", "http.response.trailers", "http.response.early_hint"}


def url(server, path: str) -> str:
    return f"http://{server.host}:{server.port}{path}"


def scope_of(server, path: str = "/scope", **kwargs) -> dict:
    response = httpx.get(url(server, path), **kwargs)
    assert response.status_code == 200, response.text
    return response.json()


def raw_exchange(server, data: bytes, timeout: float = 5.0) -> bytes:
    with server.connect(timeout) as sock:
        sock.sendall(data)
        return read_until_closed(sock)


# -- scope ------------------------------------------------------------------------


def test_http_scope_keys(asgi):
    server = asgi()
    headers = [("X-Dup", "one"), ("X-Dup", "two"), ("User-Agent", "t")]
    scope = scope_of(server, "/scope?a=1&b=%20", headers=headers)
    assert scope["type"] == "http"
    assert scope["asgi"] == {"version": "3.0", "spec_version": "2.4"}
    assert scope["http_version"] == "1.1"
    assert scope["method"] == "GET"
    assert scope["scheme"] == "http"
    assert scope["path"] == "/scope"
    assert scope["raw_path"] == "/scope"
    assert scope["query_string"] == "a=1&b=%20"
    assert scope["root_path"] == ""
    names = [name for name, _ in scope["headers"]]
    assert names == [name.lower() for name in names]
    assert [v for n, v in scope["headers"] if n == "x-dup"] == ["one", "two"]
    assert scope["client"][0] == "127.0.0.1" and isinstance(scope["client"][1], int)
    assert scope["server"] == ["127.0.0.1", server.port]
    assert scope["state"] == {"started": "yes"}  # a copy of the lifespan state
    assert set(scope["extensions"]) == EXTENSIONS
    assert "tls" not in scope["extensions"]


def test_path_is_percent_decoded_utf8_and_raw_path_is_not(asgi):
    server = asgi()
    scope = scope_of(server, "/scope/sc%C3%A8ne%2Fx?q=%C3%A8")
    assert scope["path"] == "/scope/scène/x"
    assert scope["raw_path"] == "/scope/sc%C3%A8ne%2Fx"
    assert scope["query_string"] == "q=%C3%A8"


def test_root_path_prefixes_path(asgi):
    server = asgi("--root-path", "/api")
    scope = scope_of(server, "/scope")
    assert scope["root_path"] == "/api"
    assert scope["path"] == "/api/scope"
    assert scope["raw_path"] == "/api/scope"


def test_unix_socket_scope_has_no_addresses(asgi, tmp_path):
    path = str(tmp_path / "s.sock")
    server = asgi(unix=path, wait=False)
    transport = httpx.HTTPTransport(uds=path)
    wait_until(lambda: Path(path).exists())
    with httpx.Client(transport=transport, base_url="http://x") as client:
        scope = wait_until(lambda: _get_or_none(client, "/scope"))
    assert scope["client"] is None and scope["server"] is None
    server.stop()


def _get_or_none(client: httpx.Client, path: str):
    try:
        return client.get(path).json()
    except httpx.TransportError:
        return None


def test_proxy_headers_only_from_trusted_peers(asgi):
    headers = {"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"}
    trusted = asgi("--forwarded-allow-ips", "127.0.0.1")
    scope = scope_of(trusted, headers=headers)
    assert scope["client"] == ["203.0.113.7", 0]
    assert scope["scheme"] == "https"
    untrusted = asgi("--forwarded-allow-ips", "10.9.9.9")
    scope = scope_of(untrusted, headers=headers)
    assert scope["client"][0] == "127.0.0.1"
    assert scope["scheme"] == "http"


def test_no_proxy_headers_ignores_them_from_every_peer(asgi):
    headers = {"X-Forwarded-For": "203.0.113.7", "Forwarded": "for=203.0.113.8;proto=https"}
    server = asgi("--forwarded-allow-ips", "*", "--no-proxy-headers")
    scope = scope_of(server, headers=headers)
    assert (scope["client"][0], scope["scheme"]) == ("127.0.0.1", "http")


def test_forwarded_header_sets_client_and_scheme(asgi):
    server = asgi("--forwarded-allow-ips", "*")
    scope = scope_of(server, headers={"Forwarded": 'for="[2001:db8::1]:4711";proto=https'})
    assert scope["client"] == ["2001:db8::1", 0]
    assert scope["scheme"] == "https"


def test_factory_flag_calls_the_app_factory(asgi):
    server = asgi("--factory", app="asgi_apps:create_app")
    assert scope_of(server)["type"] == "http"


# -- request bodies -----------------------------------------------------------------


def test_echo_with_content_length_and_chunked(asgi):
    server = asgi()
    assert httpx.post(url(server, "/echo"), content=b"hello").content == b"hello"

    def pieces():
        yield b"one,"
        yield b"two,"
        yield b"three"

    response = httpx.post(url(server, "/echo"), content=pieces())
    assert response.content == b"one,two,three"
    # Large bodies (the engine shares rather than copies those): every byte
    # in place, kept-alive requests one after the other.
    with httpx.Client() as client:
        for size in (4095, 4096, 100_000, 1_000_000):
            data = os.urandom(size)
            assert client.post(url(server, "/echo"), content=data).content == data


def test_request_body_streams_to_the_app_as_it_arrives(asgi):
    server = asgi()
    with server.connect() as sock:
        sock.sendall(
            b"POST /stream-echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nfirst\r\n"
        )
        head = sock.recv(65536)
        # The first chunk comes back before the request body is complete.
        while b"first" not in head:
            head += sock.recv(65536)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"transfer-encoding: chunked" in head.lower()
        sock.sendall(b"6\r\nsecond\r\n0\r\n\r\n")
        rest = b""
        while not rest.endswith(b"0\r\n\r\n"):
            rest += sock.recv(65536)
        assert b"second" in rest


def test_expect_100_continue(asgi):
    server = asgi()
    with server.connect() as sock:
        sock.sendall(
            b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"
        )
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"body")
        response = sock.recv(65536)
        assert response.startswith(b"HTTP/1.1 200 OK") and response.endswith(b"body")


def test_body_larger_than_limit_is_413(asgi):
    server = asgi("--limit-request-body", "10")
    response = raw_exchange(
        server, b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\n01234567890"
    )
    assert response.startswith(b"HTTP/1.1 413 ")
    chunked = raw_exchange(
        server,
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"b\r\n01234567890\r\n0\r\n\r\n",
    )
    assert chunked.startswith(b"HTTP/1.1 413 ")


def test_malformed_request_is_400(asgi):
    server = asgi()
    response = raw_exchange(
        server, b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
    )
    assert response.startswith(b"HTTP/1.1 400 ")


# -- responses ----------------------------------------------------------------------


def test_single_body_message_gets_content_length(asgi):
    server = asgi()
    response = httpx.get(url(server, "/scope"))
    assert response.headers["content-length"] == str(len(response.content))
    assert "transfer-encoding" not in response.headers
    assert response.headers["server"] == "supervise"
    assert "date" in response.headers


def test_streamed_response_is_chunked(asgi):
    server = asgi()
    response = httpx.get(url(server, "/stream?n=4&size=3"))
    assert response.headers["transfer-encoding"] == "chunked"
    assert response.content == b"000111222333"


def test_head_and_bodiless_statuses_send_no_body(asgi):
    server = asgi()
    head = raw_exchange(server, b"HEAD /scope HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and head.endswith(b"\r\n\r\n")
    for code in (204, 304):
        response = raw_exchange(
            server,
            f"GET /status?code={code} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode(),
        )
        assert response.startswith(f"HTTP/1.1 {code} ".encode())
        assert response.endswith(b"\r\n\r\n"), response
        assert b"must not" not in response


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


# -- application errors -----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "logged"),
    [
        ("/raise-before", "boom before start"),
        ("/no-response", "returned without starting a response"),
        ("/bad-event", "Expected ASGI message 'http.response.start'"),
        ("/str-body", "must be bytes"),
        ("/bad-header", "CR, LF or NUL"),
    ],
)
def test_app_errors_before_the_head_are_500_and_logged(asgi, path, logged):
    server = asgi()
    response = httpx.get(url(server, path))
    assert response.status_code == 500
    log = server.wait_for_log(logged)
    assert f"GET {path} HTTP/1.1" in log
    assert server.get("/stream")[0] == 200  # the worker goes on


def test_the_app_runs_in_a_task_of_its_own(asgi):
    """current_task() is the request's Task (anyio's cancel scopes need it),
    with a repr and a stack, and a contextvar set by one request is not
    seen by the next (each Task runs in a copy of the context)."""
    server = asgi()
    for n in ("1", "2"):
        seen = httpx.get(url(server, "/task"), params={"n": n}).json()
        assert seen["task"] and "Task" in seen["repr"] and seen["stack"] >= 1
        assert seen["before"] is None and seen["after"] == n


@pytest.mark.parametrize(
    ("path", "logged"),
    [("/raise-after", "boom after start"), ("/incomplete", "without completing its response")],
)
def test_app_errors_after_the_head_cut_the_connection(asgi, path, logged):
    server = asgi()
    data = raw_exchange(server, f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    assert data.startswith(b"HTTP/1.1 200 OK")
    assert not data.endswith(b"0\r\n\r\n")  # truncated: no last chunk
    server.wait_for_log(logged)


# -- disconnects ----------------------------------------------------------------------


def test_client_disconnect_reaches_the_app(asgi, tmp_path):
    marker = tmp_path / "marker"
    server = asgi()
    with server.connect() as sock:
        sock.sendall(f"GET /disconnect?marker={marker} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        time.sleep(0.2)
    wait_until(lambda: marker.exists() and marker.read_text() == "http.disconnect")


def test_receive_after_the_response_is_disconnect(asgi, tmp_path):
    marker = tmp_path / "marker"
    server = asgi()
    assert httpx.get(url(server, "/after-response"), params={"marker": str(marker)}).text == "done"
    wait_until(lambda: marker.exists() and marker.read_text() == "http.disconnect")


def test_send_after_disconnect_raises_oserror(asgi, tmp_path):
    marker = tmp_path / "marker"
    server = asgi()
    with server.connect() as sock:
        sock.sendall(
            f"GET /send-after-disconnect?marker={marker} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
        )
        time.sleep(0.2)
    wait_until(lambda: marker.exists() and marker.read_text().startswith("OSError"))


# -- flow control ---------------------------------------------------------------------


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
    socks = [server.connect(timeout=20) for _ in range(8)]
    try:
        for i, sock in enumerate(socks):
            head = f"GET /stream?{i} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
            sock.sendall(head.encode())
        answers = [read_until_closed(sock) for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 8


# -- lifespan -------------------------------------------------------------------------


def test_lifespan_shutdown_runs_on_term(asgi, tmp_path):
    marker = tmp_path / "marker"
    server = asgi(env={"LIFESPAN_MARKER": str(marker)})
    assert scope_of(server, "/state") == {"started": "yes"}
    assert server.stop(signal.SIGTERM) == 0
    assert marker.read_text() == "shutdown\n"
    assert "Application startup complete" in server.log()


def test_each_request_gets_its_own_copy_of_the_state(asgi):
    server = asgi()
    assert scope_of(server, "/state?set=mine") == {"started": "yes", "mine": "set by a request"}
    assert scope_of(server, "/state") == {"started": "yes"}


def test_lifespan_on_runs_startup_before_serving(asgi):
    server = asgi("--lifespan", "on")
    assert scope_of(server, "/state") == {"started": "yes"}


def test_lifespan_on_refuses_an_app_without_lifespan(asgi):
    server = asgi("--lifespan", "on", app="asgi_apps:http_only", wait=False)
    assert server.proc.wait(20) != 0
    assert "unsupported scope type 'lifespan'" in server.log()


def test_lifespan_auto_goes_on_without_an_app_that_lacks_it(asgi):
    server = asgi(app="asgi_apps:http_only")
    assert httpx.get(url(server, "/")).text == "http only"


def test_lifespan_off_sends_no_lifespan_events(asgi):
    server = asgi("--lifespan", "off")
    assert scope_of(server, "/state") == {}


def test_failed_startup_stops_the_server_with_the_message_once(asgi, tmp_path):
    flag = tmp_path / "fail"
    flag.write_text("1")
    server = asgi(
        "-w", "3", app="asgi_apps:failing_startup", wait=False, env={"STARTUP_FAIL": str(flag)}
    )
    assert server.proc.wait(20) == 4
    log = server.log()
    assert log.count("Application startup failed: database unreachable") == 1


def test_failed_startup_on_hup_keeps_the_old_workers(asgi, tmp_path):
    flag = tmp_path / "fail"
    server = asgi("-w", "2", app="asgi_apps:failing_startup", env={"STARTUP_FAIL": str(flag)})
    old = set(server.wait_workers(2))
    server.wait_for_log("Ready: 2 worker")  # both started up before startup breaks
    flag.write_text("1")
    server.signal(signal.SIGHUP)
    server.wait_for_log("Reload failed")
    assert set(server.wait_workers(2)) == old
    assert int(httpx.get(url(server, "/")).text) in old


# -- TLS and logs ---------------------------------------------------------------------


@pytest.mark.parametrize("worker", ["asgi", "native"])
def test_tls_scope_has_https_and_the_tls_extension(start_server, tls_pki, worker):  # noqa: F811
    verify = ("--ca-certs", str(tls_pki / "ca.pem"), "--cert-reqs", "1")
    server = start_tls(start_server, tls_pki, "-k", worker, *verify, APP)
    status, _, body = https_get(server, client_context(tls_pki, cert=True), "/scope")
    scope = json.loads(body)
    assert status == 200 and scope["scheme"] == "https"
    tls = scope["extensions"]["tls"]
    assert tls["tls_version"] in (0x0303, 0x0304)
    # The IANA number, as the spec says (0x1301 is TLS_AES_128_GCM_SHA256), not a name.
    assert type(tls["cipher_suite"]) is int and 0 < tls["cipher_suite"] <= 0xFFFF
    # The client's certificate first (the engine also gives what followed it).
    client = tls["client_cert_chain"][0]
    leaf = (tls_pki / "client.pem").read_text().split("-----END CERTIFICATE-----")[0]
    expected = ssl.PEM_cert_to_DER_cert(leaf + "-----END CERTIFICATE-----\n")
    assert ssl.PEM_cert_to_DER_cert(client) == expected
    assert tls["client_cert_error"] is None
    # RFC 4514: the last RDN first, its specials escaped.
    assert tls["client_cert_name"] == r"CN=client,O=Acme\, Inc.,C=FR"
    assert tls["server_cert"] == (tls_pki / "server.pem").read_text()
    # Without a client certificate (optional here): an empty chain.
    status, _, body = https_get(server, client_context(tls_pki), "/scope")
    assert json.loads(body)["extensions"]["tls"]["client_cert_chain"] == []


def test_access_log_line(asgi):
    server = asgi("--access-logfile", "-")
    httpx.get(url(server, "/stream?n=2&size=2"), headers={"User-Agent": "probe/1"})
    log = server.wait_for_log(r'"GET /stream\?n=2&size=2 HTTP/1.1" 200')
    assert "probe/1" in log


def test_long_pipeline_is_answered_in_full(asgi):
    server = asgi()
    count = 300
    requests = b"GET /stream?n=1&size=1 HTTP/1.1\r\nHost: t\r\n\r\n" * count
    data = raw_exchange(
        server, requests + b"GET /stream HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    assert data.count(b"HTTP/1.1 200 OK") == count + 1


def test_ws_off_answers_an_upgrade_as_plain_http(asgi):
    server = asgi("--ws", "off")
    with server.connect() as sock:
        sock.sendall(websocket_upgrade("/stream"))
        data = sock.recv(65536)
    assert data.startswith(b"HTTP/1.1 200 ")  # no 101: the app answered it as HTTP


@pytest.mark.parametrize("code", [100, 103, 199])
def test_an_interim_status_is_not_a_response(asgi, code):
    """A 1xx as the response would leave the client waiting for the real
    one: an invalid event, answered 500 and logged with the reason."""
    server = asgi()
    assert httpx.get(url(server, f"/status?code={code}")).status_code == 500
    assert f"invalid status {code}" in server.wait_for_log(f"invalid status {code}")


def test_server_and_date_headers_can_be_left_out(asgi):
    server = asgi("--no-server-header", "--no-date-header")
    response = httpx.get(url(server, "/stream"))
    assert "server" not in response.headers and "date" not in response.headers


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


def test_the_master_imports_the_libraries_every_worker_would(start_server):
    """uvloop and the WebSocket library are imported before the fork: the workers
    share those pages instead of each loading a copy after it."""
    server = start_server("-k", "asgi", "-w", "2", "--loop", "uvloop", "--ws", "websockets", APP)
    mapped = Path(f"/proc/{server.pid}/maps").read_text()
    assert "/uvloop/loop." in mapped
    assert "/websockets/speedups." in mapped
