"""The asgi worker and the engine as an ASGI app sees them: scope, bodies, responses,
errors, disconnects, lifespan, TLS (the connection itself: test_asgi_connections.py).

Every test runs the real `supervise -k asgi` and talks to it with httpx,
http.client or raw sockets.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import assert_framed_by_the_server, read_until_closed, wait_until, websocket_upgrade
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


def test_framing_fields_of_the_app_are_the_servers(asgi):
    """One Content-Length, no Transfer-Encoding from the app, and its
    `Connection: close` ends the connection after the response."""
    server = asgi()
    response = raw_exchange(server, b"GET /framing-fields HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_framed_by_the_server(response)


# -- application errors -----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "logged"),
    [
        ("/raise-before", "boom before start"),
        ("/no-response", "returned without starting a response"),
        ("/bad-event", "Expected ASGI message 'http.response.start'"),
        ("/str-body", "must be bytes"),
        ("/bad-header", "CR, LF or NUL"),
        ("/two-lengths", "conflicting Content-Length"),
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
    seen by the next (each Task runs in a copy of the context). Before 3.12
    every request Task has the one name task_start gives it."""
    server = asgi()
    for n in ("1", "2"):
        seen = httpx.get(url(server, "/task"), params={"n": n}).json()
        assert seen["task"] and "Task" in seen["repr"] and seen["stack"] >= 1
        assert seen["before"] is None and seen["after"] == n
        if sys.version_info < (3, 12):
            assert seen["name"] == "supervise-request"
        else:
            assert seen["name"].startswith("Task-")


def test_max_requests_retires_the_asgi_worker_at_its_number(start_server):
    """Requests are counted in batches at each tick, but the one that reaches
    --max-requests tells the worker at once: it asks for its replacement
    after exactly that many, however fast more come."""
    server = start_server(
        "-k", "asgi", "-w", "1", "--max-requests", "4", "asgi_apps:app", wait=False
    )
    # Not start_server's readiness probe: it would be one of the four.
    server.wait_for_log("Ready: 1 worker")
    (first,) = server.wait_workers(1)
    for _ in range(8):
        assert httpx.get(url(server, "/stream")).status_code == 200
    server.wait_for_log("Worker [0-9]+ served 4 requests")
    wait_until(lambda: (w := server.workers()) and first not in w)
    assert "served 8 requests" not in server.log()


def test_messages_that_are_mappings_but_not_dicts_are_sent(asgi):
    server = asgi()
    response = httpx.get(url(server, "/mapping-messages"))
    assert response.status_code == 201
    assert response.headers["x-kind"] == "view"
    assert response.headers["transfer-encoding"] == "chunked"
    assert response.content == b"read-only views"


def test_the_engine_refuses_a_field_value_http2_could_not_carry(asgi):
    """The engine serves HTTP/2 too, so a value hyper's map refuses (a DEL)
    is refused on every protocol; the asgi worker, HTTP/1.1 only, sends it."""
    server = asgi()
    response = httpx.get(url(server, "/del-header"))
    if asgi.worker != "native":
        assert response.status_code == 200 and response.headers["x-odd"] == "a\x7fb"
        return
    assert response.status_code == 500
    server.wait_for_log("invalid header value")
    assert server.get("/stream")[0] == 200


def test_message_keys_made_at_run_time_are_read(asgi):
    """A key is found by its text, not only as the literal str an app
    usually writes; a key ASGI does not define is ignored."""
    server = asgi()
    response = httpx.get(url(server, "/built-keys"))
    assert response.status_code == 202
    assert response.headers["x-built"] == "yes"
    assert response.content == b"built keys"


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


def test_the_master_imports_the_libraries_every_worker_would(start_server):
    """uvloop and the WebSocket library are imported before the fork: the workers
    share those pages instead of each loading a copy after it."""
    server = start_server("-k", "asgi", "-w", "2", "--loop", "uvloop", "--ws", "websockets", APP)
    mapped = Path(f"/proc/{server.pid}/maps").read_text()
    assert "/uvloop/loop." in mapped
    assert "/websockets/speedups." in mapped
