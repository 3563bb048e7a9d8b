"""The rsgi worker as an RSGI app sees it: scope, headers, body reads, every
response method, streaming both ways, disconnects, errors, limits, the
app's init/del hooks and a graceful stop.

Every test runs the real `supervise -k rsgi` and talks to it with httpx,
http.client or raw sockets.
"""

from __future__ import annotations

import concurrent.futures
import json
import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import read_until_closed, wait_until, websocket_upgrade


def url(server, path: str) -> str:
    return f"http://{server.host}:{server.port}{path}"


# -- scope and headers -------------------------------------------------------------


def test_scope_attributes(rsgi):
    server = rsgi()
    headers = [("X-Dup", "one"), ("X-Dup", "two"), ("User-Agent", "t")]
    r = httpx.get(url(server, "/scope?a=1&b=%20"), headers=headers)
    assert r.status_code == 200, r.text
    scope = r.json()
    assert scope["proto"] == "http"
    assert scope["rsgi_version"] == "1.5"
    assert scope["http_version"] == "1.1"
    assert scope["scheme"] == "http"
    assert scope["method"] == "GET"
    assert scope["path"] == "/scope"
    assert scope["query_string"] == "a=1&b=%20"
    assert scope["authority"] == f"{server.host}:{server.port}"
    host, _, port = scope["client"].rpartition(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert scope["server"] == f"127.0.0.1:{server.port}"


def test_proxy_headers_from_trusted_peers_only(rsgi):
    """As the other workers (forwarded_allow_ips); RSGI's client keeps its
    "addr:port" form, with port 0 as ASGI's ``(addr, 0)``."""
    headers = {"X-Forwarded-For": "203.0.113.7, 127.0.0.1", "X-Forwarded-Proto": "https"}
    scope = httpx.get(url(trusted := rsgi(), "/scope"), headers=headers).json()
    assert (scope["client"], scope["scheme"]) == ("203.0.113.7:0", "https")
    forwarded = {"Forwarded": 'for="[2001:db8::17]:4711";proto=https'}
    scope = httpx.get(url(trusted, "/scope"), headers=forwarded).json()
    assert (scope["client"], scope["scheme"]) == ("[2001:db8::17]:0", "https")
    contradictory = {"X-Forwarded-Proto": "https", "X-Forwarded-Ssl": "off"}
    assert httpx.get(url(trusted, "/scope"), headers=contradictory).status_code == 400
    untrusted = rsgi("--forwarded-allow-ips", "10.9.8.7")
    scope = httpx.get(url(untrusted, "/scope"), headers=headers).json()
    assert scope["client"].startswith("127.0.0.1:") and scope["scheme"] == "http"
    switched_off = rsgi("--forwarded-allow-ips", "*", "--no-proxy-headers")
    scope = httpx.get(url(switched_off, "/scope"), headers=headers).json()
    assert scope["client"].startswith("127.0.0.1:") and scope["scheme"] == "http"


def test_headers_mapping(rsgi):
    server = rsgi()
    headers = [("X-Dup", "one"), ("X-Dup", "two"), ("User-Agent", "t")]
    scope = httpx.get(url(server, "/scope"), headers=headers).json()
    assert scope["x_dup_get"] == "one"
    assert scope["x_dup_get_upper"] == "one"
    assert scope["x_dup_all"] == ["one", "two"]
    assert scope["missing"] == "default"
    assert scope["contains"] is True and scope["not_contains"] is False
    assert all(k == k.lower() for k in scope["keys"])
    assert "x-dup" in scope["keys"] and "user-agent" in scope["keys"]
    assert ["x-dup", "two"] in scope["items"] and ["user-agent", "t"] in scope["items"]
    assert "t" in scope["values"]
    assert scope["len"] == len(scope["items"])


def test_path_is_percent_decoded(rsgi):
    server = rsgi()
    r = httpx.get(url(server, "/scope"))
    assert r.json()["path"] == "/scope"
    status, _, body = server.get("/sc%6Fpe?q=%C3%A8")
    scope = json.loads(body)
    assert status == 200 and scope["path"] == "/scope" and scope["query_string"] == "q=%C3%A8"


def test_rsgi_init_and_del_run_once_on_the_serving_loop(rsgi, marks):
    server = rsgi("--loop", "asyncio")
    wait_until(lambda: (marks / "init").exists())
    for _ in range(3):
        assert httpx.get(url(server, "/text")).status_code == 201
    assert (marks / "init").read_text().endswith("EventLoop x1")
    assert not (marks / "del").exists()
    assert server.stop() == 0
    assert (marks / "del").read_text() == "yes x1"


@pytest.mark.parametrize("interface", ["auto", "rsgi"])
def test_the_engine_serves_rsgi_apps(start_server, marks, interface):
    """-k native runs an RSGI app as -k rsgi does, told from __rsgi__ or named."""
    server = start_server(
        "-k", "native", "--interface", interface, "rsgi_apps:app",
        env={"RSGI_MARKS": str(marks)},
    )  # fmt: skip
    r = httpx.get(url(server, "/text"))
    assert (r.status_code, r.text) == (201, "héllo")
    assert httpx.get(url(server, "/scope")).json()["rsgi_version"] == "1.5"
    assert (marks / "init").read_text().endswith("x1")


def test_plain_coroutine_function_app(rsgi):
    server = rsgi(app="rsgi_apps:plain")
    r = httpx.post(url(server, "/"), content=b"x")
    assert (r.status_code, r.text) == (200, "plain POST")


# -- request bodies ----------------------------------------------------------------


def test_read_whole_body_once(rsgi):
    server = rsgi()
    payload = bytes(range(256)) * 4096  # 1 MiB, several reads on the wire
    r = httpx.post(url(server, "/echo"), content=payload)
    assert r.status_code == 200 and r.content == payload
    assert r.headers["x-second-read"] == "refused"


def test_read_empty_body(rsgi):
    server = rsgi()
    r = httpx.get(url(server, "/echo"))
    assert r.status_code == 200 and r.content == b""


def test_stream_request_body_chunked(rsgi):
    server = rsgi()

    def gen():
        for _ in range(5):
            yield b"y" * 1000
            time.sleep(0.05)

    r = httpx.post(url(server, "/stream-in"), content=gen())
    assert r.json()["total"] == 5000
    assert r.json()["chunks"] >= 2  # arrived in pieces, handed over in pieces


def test_chunks_that_arrived_together_are_iterated_as_one(rsgi):
    # A million one-byte chunks in one write: handed to the app one by one,
    # they cost a loop turn each (29 CPU-seconds for 6 MB); what is buffered
    # comes up joined.
    server = rsgi()
    body = b"1\r\nz\r\n" * 200_000 + b"0\r\n\r\n"
    head = b"POST /stream-in HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
    raw = server.raw(head + b"Connection: close\r\n\r\n" + body, timeout=60)
    seen = json.loads(raw.split(b"\r\n\r\n", 1)[1])
    assert seen["total"] == 200_000
    assert seen["chunks"] < 2_000, seen


def test_stream_empty_request_body(rsgi):
    server = rsgi()
    assert httpx.get(url(server, "/stream-in")).json() == {"chunks": 0, "total": 0}


# -- responses ----------------------------------------------------------------------


def test_response_empty(rsgi):
    server = rsgi()
    r = httpx.get(url(server, "/empty"))
    assert r.status_code == 204 and r.content == b"" and r.headers["x-empty"] == "yes"


def test_response_str_with_repeated_headers(rsgi):
    server = rsgi()
    status, headers, body = server.get("/text")
    assert status == 201 and body == "héllo".encode()
    assert headers["content-length"] == str(len("héllo".encode()))
    r = httpx.get(url(server, "/text"))
    assert r.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert r.headers["server"] == "supervise" and "date" in r.headers


def test_response_file_and_range(rsgi, tmp_path):
    server = rsgi()
    data = bytes(range(256)) * 1200  # > one read chunk
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    r = httpx.get(url(server, f"/file?path={path}"))
    assert r.status_code == 200 and r.content == data
    assert r.headers["content-length"] == str(len(data))
    r = httpx.get(url(server, f"/file?path={path}&start=10&end=300000"))
    assert r.status_code == 206 and r.content == data[10:300000]
    r = httpx.get(url(server, f"/file?path={tmp_path}/missing"))
    assert r.status_code == 404
    assert httpx.get(url(server, f"/file?path={tmp_path}")).status_code == 404  # a directory


def test_response_stream_is_chunked(rsgi):
    server = rsgi()
    with server.connect() as sock:
        sock.sendall(b"GET /stream-out?n=3&size=4 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        data = read_until_closed(sock)
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    assert body == b"4\r\naaaa\r\n4\r\nbbbb\r\n4\r\ncccc\r\n3\r\nend\r\n0\r\n\r\n"


def test_only_the_first_response_counts(rsgi):
    server = rsgi()
    r = httpx.get(url(server, "/twice"))
    assert (r.status_code, r.text) == (200, "first")


def test_an_interim_status_is_no_response(rsgi):
    """A 1xx would leave the client waiting for the real answer: the call
    raises, so the app's error is a 500 with the reason in the log."""
    server = rsgi()
    assert httpx.get(url(server, "/status?code=204")).status_code == 204
    assert httpx.get(url(server, "/status?code=103")).status_code == 500
    assert "invalid status 103" in server.wait_for_log("Error handling request GET /status")


def test_keep_alive_and_pipelining(rsgi):
    server = rsgi()
    request = b"GET /empty HTTP/1.1\r\nHost: t\r\n\r\n"
    last = b"GET /text HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    with server.connect() as sock:
        sock.sendall(request * 3 + last)
        data = read_until_closed(sock)
    assert data.count(b"HTTP/1.1 204") == 3 and data.count(b"HTTP/1.1 201") == 1


@pytest.mark.parametrize("kind", ["rsgi", "native-asgi"])
def test_one_connection_moves_to_hyper_mid_stream(start_server, kind):
    """Plain requests are served without hyper (direct_http1.rs) until one needs
    it (here a chunked upload, then a 100-continue one): hyper takes the
    connection from that request on, with the requests pipelined behind it,
    and nothing is lost or answered twice."""
    worker, app = ("rsgi", "rsgi_apps:app") if kind == "rsgi" else ("native", "asgi_apps:app")
    server = start_server("-k", worker, "-w", "1", app)
    plain = b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nplain"
    chunked = (
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nchu\r\n4\r\nnked\r\n0\r\n\r\n"
    )
    expects = (
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 7\r\n"
        b"Expect: 100-continue\r\n\r\nexpects"
    )
    last = b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nConnection: close\r\n\r\nlast"
    with server.connect() as sock:
        sock.sendall(plain * 2 + chunked + plain + expects + last)
        data = read_until_closed(sock)
    answers = data.replace(b"HTTP/1.1 100 Continue\r\n\r\n", b"").split(b"HTTP/1.1 ")[1:]
    assert [a[:3] for a in answers] == [b"200"] * 6, data
    bodies = [a.split(b"\r\n\r\n", 1)[1] for a in answers]
    sent = [b"plain", b"plain", b"chunked", b"plain", b"expects", b"last"]
    assert [body in got for body, got in zip(sent, bodies, strict=True)] == [True] * 6, data


# -- backpressure and disconnects -------------------------------------------------


def test_stream_send_waits_for_a_slow_client(rsgi, marks):
    server = rsgi()
    sock = server.connect()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.sendall(b"GET /backpressure HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(lambda: (marks / "sent").exists())
    time.sleep(1.0)
    stalled = int((marks / "sent").read_text())
    # 64 MiB to send; without backpressure it would all be queued by now.
    assert stalled < 16 * 1024 * 1024
    # Reading lets the app go on. How much must be read first depends on the
    # kernel's send buffer, which it sizes itself (a writer wakes only once
    # a good part of it is free): read until the app moved, well short of 64 MiB.
    received = 0
    sock.settimeout(10)
    while int((marks / "sent").read_text()) <= stalled:
        received += len(sock.recv(1 << 20))
        assert received < 48 * 1024 * 1024, "the app did not go on as the client read"
    sock.close()
    wait_until(lambda: (marks / "closed").exists())  # the send raised RSGIProtocolClosed


def test_client_disconnect_resolves_when_the_client_leaves(rsgi, marks):
    server = rsgi()
    sock = server.connect()
    sock.sendall(b"GET /disconnect HTTP/1.1\r\nHost: t\r\n\r\n")
    assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    time.sleep(0.3)
    assert not (marks / "disconnected").exists()
    sock.close()
    wait_until(lambda: (marks / "disconnected").exists())


# -- errors ---------------------------------------------------------------------------


def test_return_without_response_is_500_and_logged(rsgi):
    server = rsgi()
    r = httpx.get(url(server, "/no-response"))
    assert r.status_code == 500
    server.wait_for_log(r"returned without a response: GET /no-response HTTP/1.1")


def test_exception_before_response_is_500_with_traceback(rsgi):
    server = rsgi()
    r = httpx.get(url(server, "/raise?x=1"))
    assert r.status_code == 500
    log = server.wait_for_log(r"Error handling request GET /raise\?x=1 HTTP/1.1")
    assert "RuntimeError: boom before the response" in log


def test_exception_after_response_start_cuts_the_connection(rsgi):
    server = rsgi()
    with server.connect() as sock:
        sock.sendall(b"GET /raise-after-start HTTP/1.1\r\nHost: t\r\n\r\n")
        data = read_until_closed(sock)
    assert data.startswith(b"HTTP/1.1 200")
    assert b"partial" in data and not data.endswith(b"0\r\n\r\n")  # no clean last chunk
    log = server.wait_for_log(r"response cut off")
    assert "boom after the response started" in log


def test_exception_after_a_whole_response_is_logged(rsgi):
    server = rsgi()
    r = httpx.get(url(server, "/raise-after-response"))
    assert (r.status_code, r.text) == (200, "answered")
    log = server.wait_for_log(r"Error handling request GET /raise-after-response HTTP/1.1")
    assert "boom after the response was sent" in log


def test_a_second_response_stream_does_not_write_into_the_first(rsgi):
    server = rsgi()
    r = httpx.get(url(server, "/stream-twice"))
    assert (r.status_code, r.text) == (200, "abc")


# -- limits ---------------------------------------------------------------------------


def _concurrently(server, n: int, path: str) -> list[httpx.Response]:
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        calls = [pool.submit(httpx.get, url(server, path), timeout=20) for _ in range(n)]
        return [call.result() for call in calls]


def test_backpressure_holds_requests_back_instead_of_refusing_them(rsgi):
    server = rsgi("--backpressure", "2")
    # Idle keep-alive connections hold no permit: two of them, each past
    # its first request, do not keep the requests below from the app.
    with httpx.Client() as idle_a, httpx.Client() as idle_b:
        for client in (idle_a, idle_b):
            assert client.get(url(server, "/concurrent?s=0")).status_code == 200
        answers = _concurrently(server, 5, "/concurrent?s=0.3")
    assert [r.status_code for r in answers] == [200] * 5
    # Never more than two with the app, though five came at once.
    assert max(int(r.text) for r in answers) == 2


def test_without_backpressure_requests_reach_the_app_together(rsgi):
    """The counterpart of the test above: the bound is what held them back."""
    answers = _concurrently(rsgi(), 5, "/concurrent?s=0.5")
    assert max(int(r.text) for r in answers) >= 3


def test_limit_concurrency_answers_503(rsgi, marks):
    server = rsgi("--limit-concurrency", "1")
    slow = threading.Thread(target=lambda: httpx.get(url(server, "/sleep?s=1.5"), timeout=10))
    slow.start()
    wait_until(lambda: (marks / "sleeping").exists())
    assert httpx.get(url(server, "/text")).status_code == 503
    slow.join()
    assert httpx.get(url(server, "/text")).status_code == 201


def test_limit_request_line_is_414(rsgi):
    server = rsgi("--limit-request-line", "100")
    status, _, _ = server.get("/echo?" + "a" * 200)
    assert status == 414
    assert server.get("/echo?" + "a" * 20)[0] == 200


def test_limit_request_field_size_is_431(rsgi):
    server = rsgi("--limit-request-field-size", "100")
    assert server.get("/echo", headers={"X-Big": "v" * 200})[0] == 431
    assert server.get("/echo", headers={"X-Small": "v" * 20})[0] == 200


def test_limit_request_fields_is_431(rsgi):
    server = rsgi("--limit-request-fields", "5")
    many = {f"X-F{i}": "v" for i in range(10)}
    assert server.get("/echo", headers=many)[0] == 431


def test_limit_request_body_content_length_is_413(rsgi):
    server = rsgi("--limit-request-body", "1000")
    assert httpx.post(url(server, "/echo"), content=b"x" * 2000).status_code == 413
    assert httpx.post(url(server, "/echo"), content=b"x" * 1000).status_code == 200


def test_limit_request_body_chunked_is_413(rsgi):
    server = rsgi("--limit-request-body", "1000")

    def gen():
        for _ in range(4):
            yield b"x" * 600

    assert httpx.post(url(server, "/echo"), content=gen()).status_code == 413


def test_header_timeout_closes_a_silent_client(rsgi):
    server = rsgi("--header-timeout", "1")
    with server.connect(timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n")
        started = time.monotonic()
        read_until_closed(sock)
        assert time.monotonic() - started < 4


def test_keepalive_timeout_closes_an_idle_connection(rsgi):
    server = rsgi("--keep-alive", "1")
    with server.connect(timeout=5) as sock:
        sock.sendall(b"GET /empty HTTP/1.1\r\nHost: t\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 204")
        started = time.monotonic()
        assert read_until_closed(sock) == b""
        assert 0.8 < time.monotonic() - started < 3


# -- process ----------------------------------------------------------------------------


def test_term_finishes_the_request_in_flight(rsgi, marks):
    server = rsgi("--graceful-timeout", "10")
    result: dict[str, object] = {}

    def slow() -> None:
        r = httpx.get(url(server, "/sleep?s=1.5"), timeout=20)
        result["status"], result["body"] = r.status_code, r.text
        result["connection"] = r.headers.get("connection")

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.5)
    server.signal(signal.SIGTERM)
    thread.join(20)
    assert result == {"status": 200, "body": "slept", "connection": "close"}
    assert server.proc.wait(20) == 0
    assert (marks / "del").read_text() == "yes x1"


def test_unix_socket_and_runtime_threads(rsgi, tmp_path):
    sock_path = str(tmp_path / "s.sock")
    rsgi("--runtime-threads", "2", "--runtime-mode", "mt", unix=sock_path)
    transport = httpx.HTTPTransport(uds=sock_path)
    with httpx.Client(transport=transport) as client:
        scope = client.get("http://t/scope").json()
    assert scope["client"] == "" and scope["server"] == sock_path


def thread_names(pid: int) -> list[str]:
    tasks = Path(f"/proc/{pid}/task")
    return sorted((task / "comm").read_text().strip() for task in tasks.iterdir())


@pytest.mark.parametrize(
    ("mode", "threads", "expected"),
    [
        ("st", "1", {"supervise-rt-0": 1}),
        ("st", "3", {"supervise-rt-0": 1, "supervise-rt-1": 1, "supervise-rt-2": 1}),
        # One thread drives the runtime; tokio runs the connections on its own.
        ("mt", "3", {"supervise-rt-0": 1, "supervise-tokio": 3}),
    ],
)
def test_runtime_threads_are_what_the_flags_ask(rsgi, mode, threads, expected):
    server = rsgi("-w", "1", "--runtime-mode", mode, "--runtime-threads", threads)
    for _ in range(5):
        assert httpx.get(url(server, "/text")).status_code == 201
    (worker,) = server.wait_workers(1)
    names = thread_names(worker)
    runtime = {n: names.count(n) for n in set(names) if n.startswith("supervise-")}
    assert runtime == expected, names
    # Made after the fork, in the worker: the arbiter has no runtime thread.
    assert not [n for n in thread_names(server.pid) if n.startswith("supervise-")]


def test_st_mode_with_two_threads_serves(rsgi):
    server = rsgi("--runtime-threads", "2")
    with httpx.Client() as client:
        for _ in range(20):
            assert client.get(url(server, "/text")).status_code == 201


def test_max_requests_retires_the_worker(rsgi):
    server = rsgi("-w", "1", "--max-requests", "10")
    (first,) = server.wait_workers(1)
    with httpx.Client() as client:
        for _ in range(30):
            assert client.get(url(server, "/empty")).status_code == 204
    wait_until(lambda: first not in server.workers())
    assert "max_requests" in server.log()


@pytest.mark.parametrize("kind", ["rsgi", "native-asgi"])
def test_max_requests_the_last_response_closes_its_connection(start_server, kind):
    """As with the Python workers: the response that reaches --max-requests
    says Connection: close, so the retiring worker's clients reconnect to
    its replacement instead of idling on a connection about to close."""
    worker, app = ("rsgi", "rsgi_apps:app") if kind == "rsgi" else ("native", "asgi_apps:app")
    server = start_server("-k", worker, "-w", "1", "--max-requests", "3", app, wait=False)
    # Not start_server's readiness probe: it would be one of the three requests.
    server.wait_for_log("Ready: 1 worker")
    (first,) = server.wait_workers(1)
    with httpx.Client() as client:
        said = [client.get(url(server, "/")).headers.get("connection") for _ in range(3)]
    assert said == [None, None, "close"]
    wait_until(lambda: (w := server.workers()) and first not in w)
    assert httpx.get(url(server, "/")).status_code < 500


def test_access_log_line(rsgi, tmp_path):
    log = tmp_path / "access.log"
    server = rsgi("--access-logfile", str(log))
    assert httpx.get(url(server, "/text?x=1"), headers={"User-Agent": "probe"}).status_code == 201
    wait_until(lambda: log.exists() and "GET /text?x=1 HTTP/1.1" in log.read_text())
    line = log.read_text()
    assert '" 201 ' in line and "probe" in line


def test_access_log_has_body_sizes_and_response_headers(rsgi, tmp_path):
    log = tmp_path / "access.log"
    data = tmp_path / "data.bin"
    data.write_bytes(bytes(1000))
    fmt = "%(U)s %(s)s %(b)s %({set-cookie}o)s"
    server = rsgi("--access-logfile", str(log), "--access-logformat", fmt)
    paths = [
        "/text",  # "héllo": 6 bytes of UTF-8, the last set-cookie wins
        "/stream-out?n=3&size=4",  # aaaa bbbb cccc end
        f"/file?path={data}",
        f"/file?path={data}&start=10&end=110",
        "/empty",
    ]
    for path in paths:
        assert httpx.get(url(server, path)).status_code < 300

    def lines() -> list[str]:  # the start-up probe's GET / aside
        text = log.read_text() if log.exists() else ""
        return [line for line in text.splitlines() if not line.startswith("/ ")]

    wait_until(lambda: len(lines()) == len(paths))
    assert lines() == [
        "/text 201 6 b=2",
        "/stream-out 200 15 -",
        "/file 200 1000 -",
        "/file 206 100 -",
        "/empty 204 0 -",
    ]


def test_websocket_upgrade_with_ws_off_gets_a_plain_http_answer(rsgi):
    server = rsgi("--ws", "off")
    with server.connect() as sock:
        sock.sendall(websocket_upgrade("/text"))
        data = sock.recv(65536)
    assert data.startswith(b"HTTP/1.1 201 ")  # served as HTTP: no 101, no WebSocket
