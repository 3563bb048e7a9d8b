"""PEP 3333 as a user sees it: real `supervise -k sync` and `-k native`
processes, real sockets (sync stands for the Python workers, which share one
WSGIHandler; native is the Rust engine, whose rules must be the same).

The apps are in tests/apps/wsgi_apps.py; most answer with what they saw, so
each test sends a request and checks the environ, the body the app read, or
the bytes the server framed around what the app sent.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import re
import socket

import httpx
import pytest
from conftest import free_port, read_until_closed, wait_until

APP = "wsgi_apps"


@pytest.fixture(params=["sync", "native"])
def start_server(request: pytest.FixtureRequest, start_server):
    """conftest's start_server, with the worker class of this run."""

    def start(*args: str, **options):
        return start_server(*args, "-k", request.param, **options)

    start.worker = request.param  # type: ignore[attr-defined]
    return start


def split_response(raw: bytes) -> tuple[str, dict[str, list[str]], bytes]:
    """(status line, {lower name: [values]}, body as sent on the wire)."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep, f"no complete response head in {raw[:200]!r}"
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return lines[0], headers, body


def dechunk(body: bytes) -> tuple[bytes, bool]:
    """Decode a chunked body; (payload, whether the last chunk arrived)."""
    out = []
    while body:
        size_line, sep, rest = body.partition(b"\r\n")
        if not sep:
            return b"".join(out), False
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return b"".join(out), rest.startswith(b"\r\n")
        out.append(rest[:size])
        body = rest[size + 2 :]
    return b"".join(out), False


def get_json(server, path: str = "/", headers: dict | None = None) -> dict:
    status, _, body = server.get(path, headers=headers)
    assert status == 200, body
    return json.loads(body)


# --------------------------------------------------------------------------- environ


def test_server_name_on_a_wildcard_bind_is_the_address_reached(start_server):
    """Bound to 0.0.0.0, SERVER_NAME is where the client connected (as ASGI's
    ``server``), the same on the Python workers and the engine."""
    port = free_port()
    server = start_server(f"{APP}:environ_app", "-b", f"0.0.0.0:{port}", config_port=port)
    env = get_json(server)
    assert (env["SERVER_NAME"], env["SERVER_PORT"]) == ("127.0.0.1", str(port))


def test_environ_basics(start_server):
    server = start_server(f"{APP}:environ_app")
    with server.connect() as sock:
        client_port = sock.getsockname()[1]
        sock.sendall(
            b"GET /some/path?x=1&y=%20 HTTP/1.1\r\nHost: example.test:8080\r\n"
            b"User-Agent: tester\r\n\r\n"
        )
        raw = read_until_closed(sock)
    status, _, body = split_response(raw)
    assert status == "HTTP/1.1 200 OK"
    env = json.loads(body)
    assert env["REQUEST_METHOD"] == "GET"
    assert env["SCRIPT_NAME"] == ""
    assert env["PATH_INFO"] == "/some/path"
    assert env["QUERY_STRING"] == "x=1&y=%20"
    assert env["RAW_URI"] == "/some/path?x=1&y=%20"
    assert env["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert env["SERVER_NAME"] == "127.0.0.1"
    assert env["SERVER_PORT"] == str(server.port)
    assert env["SERVER_SOFTWARE"].startswith("supervise/")
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["REMOTE_PORT"] == str(client_port)
    assert env["HTTP_HOST"] == "example.test:8080"
    assert env["HTTP_USER_AGENT"] == "tester"
    assert env["wsgi.url_scheme"] == "http"
    assert env["wsgi.version"] == [1, 0]
    assert env["wsgi.multithread"] is False
    assert env["wsgi.multiprocess"] is False
    assert env["wsgi.run_once"] is False
    assert env["wsgi.input_terminated"] is True
    assert env["has_file_wrapper"] and env["errors_writable"]
    assert "CONTENT_LENGTH" not in env and "CONTENT_TYPE" not in env


def test_root_path_becomes_script_name(start_server):
    server = start_server(f"{APP}:environ_app", "--root-path", "/api/")
    env = get_json(server, "/api/users/7")
    assert (env["SCRIPT_NAME"], env["PATH_INFO"]) == ("/api", "/users/7")
    # A path outside the prefix is passed through whole.
    env = get_json(server, "/apixyz")
    assert (env["SCRIPT_NAME"], env["PATH_INFO"]) == ("/api", "/apixyz")


def test_path_info_is_percent_decoded_as_latin1(start_server):
    server = start_server(f"{APP}:environ_app")
    env = get_json(server, "/caf%C3%A9/a%2Fb")
    # PEP 3333: the decoded bytes, each as one code point (latin-1), never UTF-8 decoded.
    assert env["PATH_INFO_CODEPOINTS"] == [ord(c) for c in "/caf"] + [0xC3, 0xA9] + [
        ord(c) for c in "/a/b"
    ]
    assert env["RAW_URI"] == "/caf%C3%A9/a%2Fb"


def test_headers_joined_and_content_headers(start_server):
    server = start_server(f"{APP}:environ_app")
    raw = server.raw(
        b"POST /form HTTP/1.1\r\nHost: t\r\nX-Multi: a\r\nX-Multi: b\r\n"
        b"X_Spoofed: nope\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nbody"
    )
    status, _, body = split_response(raw)
    assert status.startswith("HTTP/1.1 200")
    env = json.loads(body)
    assert env["HTTP_X_MULTI"] == "a,b"
    assert env["CONTENT_TYPE"] == "text/plain"
    assert env["CONTENT_LENGTH"] == "4"
    assert "HTTP_CONTENT_TYPE" not in env and "HTTP_CONTENT_LENGTH" not in env
    # Names with "_" could pose as a proxy's dashed header: dropped.
    assert "HTTP_X_SPOOFED" not in env


# --------------------------------------------------------------------------- wsgi.input

BODY = b"line one\nline two\nlast line"
EXPECTED_PARTS = {
    "read": [BODY.decode()],
    "sized": [BODY[i : i + 3].decode() for i in range(0, len(BODY), 3)],
    "readline": ["line one\n", "line two\n", "last line"],
    "readline_limit": ["line", " one", "\n", "line", " two", "\n", "last", " lin", "e"],
    "readlines": ["line one\n", "line two\n", "last line"],
    "iter": ["line one\n", "line two\n", "last line"],
}


def _chunked(body: bytes, sizes: tuple[int, ...] = (5, 1, 9)) -> bytes:
    out, pos, i = [], 0, 0
    while pos < len(body):
        size = sizes[i % len(sizes)]
        piece = body[pos : pos + size]
        out.append(b"%x\r\n%s\r\n" % (len(piece), piece))
        pos += size
        i += 1
    out.append(b"0\r\nX-Trailer: yes\r\n\r\n")
    return b"".join(out)


@pytest.mark.parametrize("mode", sorted(EXPECTED_PARTS))
def test_input_with_content_length(start_server, mode):
    server = start_server(f"{APP}:echo")
    status, _, body = server.get(f"/?mode={mode}", method="POST", body=BODY)
    assert status == 200
    assert json.loads(body)["parts"] == EXPECTED_PARTS[mode]


@pytest.mark.parametrize("mode", sorted(EXPECTED_PARTS))
def test_input_with_chunked_body(start_server, mode):
    server = start_server(f"{APP}:echo")
    raw = server.raw(
        f"POST /?mode={mode} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        + _chunked(BODY)
    )
    status, _, body = split_response(raw)
    assert status == "HTTP/1.1 200 OK"
    assert json.loads(body)["parts"] == EXPECTED_PARTS[mode]


def test_large_body_in_pieces(start_server):
    server = start_server(f"{APP}:echo")
    payload = os.urandom(300_000).hex().encode()  # 600 kB, arrives in many recvs
    status, _, body = server.get("/?mode=read", method="POST", body=payload)
    assert status == 200
    assert json.loads(body)["parts"] == [payload.decode()]


def test_expect_100_continue(start_server):
    server = start_server(f"{APP}:echo")
    with server.connect() as sock:
        sock.sendall(
            b"POST /?mode=read HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        interim = sock.recv(1024)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"hello")
        raw = read_until_closed(sock)
    status, _, body = split_response(raw)
    assert status == "HTTP/1.1 200 OK"
    assert json.loads(body)["parts"] == ["hello"]


def test_expect_100_continue_not_sent_when_body_unread(start_server):
    if start_server.worker == "native":
        pytest.skip("the engine reads the body before the app runs (next test)")
    server = start_server(f"{APP}:hello")
    raw = server.raw(
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
    )
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"100 Continue" not in raw


def test_engine_reads_the_body_first_and_times_out_a_stalled_one(start_server):
    """-k native reads a body whole before calling the app, so it asks for it
    (100 Continue) whether the app reads it or not; a client that stops
    sending gets 408 after --body-timeout, without the app being called."""
    if start_server.worker != "native":
        pytest.skip("the Python workers read the body when the app does")
    server = start_server(f"{APP}:hello", "--body-timeout", "1")
    with server.connect() as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
        )
        assert sock.recv(1024) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"he")
        raw = read_until_closed(sock)
    assert raw.startswith(b"HTTP/1.1 408 "), raw


def test_limit_request_body(start_server):
    server = start_server(f"{APP}:echo", "--limit-request-body", "10")
    status, _, body = server.get("/", method="POST", body=b"0123456789")
    assert status == 200 and json.loads(body)["parts"] == ["0123456789"]
    status, _, _ = server.get("/", method="POST", body=b"0123456789ABC")
    assert status == 413
    # A chunked body is stopped once it grows past the limit.
    raw = server.raw(
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        + _chunked(b"x" * 30, (8,))
    )
    assert raw.startswith(b"HTTP/1.1 413 ")
    assert server.get("/", method="POST", body=b"ok")[0] == 200


@pytest.mark.parametrize("framing", ["length", "chunked", "http2"])
def test_a_large_upload_costs_the_worker_little_memory(start_server, framing):
    """A 32 MiB body, read by the app in pieces and line by line, arrives
    intact while the worker's peak memory grows by far less than the body:
    the Python workers stream it from the socket, the engine (which reads a
    body before the call) keeps a large one in a temporary file."""
    if framing == "http2" and start_server.worker != "native":
        pytest.skip("HTTP/2 is served by the engine only")
    server = start_server(f"{APP}:digest")
    line = b"x" * 99 + b"\n"
    body = line * (32 * 1024 * 1024 // len(line))
    expected = hashlib.md5(body).hexdigest()

    def upload(mode: str) -> dict:
        if framing == "http2":
            with httpx.Client(http1=False, http2=True, timeout=30) as client:
                response = client.post(
                    f"http://{server.host}:{server.port}/?mode={mode}", content=body
                )
            assert response.http_version == "HTTP/2"
            return response.json()
        if framing == "length":
            payload = body
        else:
            payload = (body[i : i + 1_000_000] for i in range(0, len(body), 1_000_000))
        status, _, answer = server.get(f"/?mode={mode}", method="POST", body=payload)
        assert status == 200
        return json.loads(answer)

    baseline = json.loads(server.get("/", method="POST", body=b"warm")[2])["peak_kib"]
    for mode, pieces in (("sized", -(-len(body) // 65536)), ("lines", len(body) // len(line))):
        seen = upload(mode)
        assert (seen["md5"], seen["size"], seen["lines"]) == (expected, len(body), pieces)
        assert seen["peak_kib"] - baseline < 12 * 1024, (mode, seen["peak_kib"], baseline)


# --------------------------------------------------------------------------- responses


def test_start_response_with_exc_info_replaces_the_status(start_server):
    server = start_server(f"{APP}:exc_info_app")
    status, _, body = server.get("/")
    assert (status, body) == (503, b"oops!")


def test_exc_info_after_head_cuts_the_response(start_server):
    server = start_server(f"{APP}:exc_info_late")
    status, _, body = split_response(server.raw(b"GET /late HTTP/1.1\r\nHost: t\r\n\r\n"))
    assert status == "HTTP/1.1 200 OK"
    payload, complete = dechunk(body)
    assert payload == b"first block"
    assert not complete
    log = server.wait_for_log(r"ValueError: too late to change the status")
    assert "GET /late HTTP/1.1" in log


def test_write_callable(start_server):
    server = start_server(f"{APP}:writer")
    status, headers, body = server.get("/")
    assert (status, body) == (200, b"hello world")
    assert headers["content-length"] == "11"


def test_close_is_called_on_the_result(start_server):
    server = start_server(f"{APP}:closing")
    assert server.get("/first")[2] == b"part1,part2"
    # An app failing mid-body still gets close() called.
    server.raw(b"GET /fail-here HTTP/1.1\r\nHost: t\r\n\r\n")
    status, _, body = server.get("/report")
    assert status == 200
    # (the start-up probe's "/" may come first)
    assert json.loads(body)[-2:] == ["/first", "/fail-here"]


def test_head_request_has_no_body(start_server):
    server = start_server(f"{APP}:head_aware")
    status, headers, body = split_response(server.raw(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n"))
    assert status == "HTTP/1.1 200 OK"
    assert headers["content-length"] == ["31"]
    assert body == b""


def test_chunked_response_without_content_length(start_server):
    server = start_server(f"{APP}:stream")
    status, headers, body = split_response(server.raw(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"))
    assert status == "HTTP/1.1 200 OK"
    assert headers["transfer-encoding"] == ["chunked"]
    assert "content-length" not in headers
    assert dechunk(body) == (b"one,two,three", True)
    # HTTP/1.0 has no chunked framing: the body ends with the connection.
    status, headers, body = split_response(server.raw(b"GET / HTTP/1.0\r\n\r\n"))
    assert "transfer-encoding" not in headers
    assert body == b"one,two,three"


def test_content_length_added_for_a_single_block(start_server):
    server = start_server(f"{APP}:no_length")
    _, headers, body = split_response(server.raw(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"))
    assert headers["content-length"] == ["13"]
    assert "transfer-encoding" not in headers
    assert body == b"Hello, world!"


def test_date_server_and_connection_headers(start_server):
    server = start_server(f"{APP}:hello")
    _, headers, _ = split_response(server.raw(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"))
    assert headers["server"] == ["supervise"]
    assert email.utils.parsedate_to_datetime(headers["date"][0]) is not None
    # sync closes after every response; the engine keeps the connection.
    assert headers.get("connection") == (["close"] if start_server.worker == "sync" else None)


def test_no_server_header(start_server):
    server = start_server(f"{APP}:hello", "--no-server-header")
    _, headers, _ = split_response(server.raw(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"))
    assert "server" not in headers
    assert "date" in headers


def test_app_headers_are_kept(start_server):
    server = start_server(f"{APP}:custom_headers")
    _, headers, body = split_response(server.raw(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"))
    assert headers["server"] == ["my-app/1.0"]
    assert headers["date"] == ["Tue, 01 Jan 2030 00:00:00 GMT"]
    assert headers["set-cookie"] == ["a=1", "b=2"]
    assert body == b"ok"


def test_latin1_header_values_go_out_as_their_bytes(start_server):
    """A value's characters up to U+00FF are its bytes on the wire (PEP 3333),
    from a plain str and from a str subclass alike; one above U+00FF makes
    start_response raise, so the client gets a 500 and the worker goes on."""
    server = start_server(f"{APP}:latin1_fields")
    raw = server.raw(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert b"\r\nX-Plain: caf\xe9\r\n" in raw
    assert b"\r\nX-Label: na\xefve \xff\r\n" in raw
    assert raw.endswith(b"\r\n\r\nok")
    status, _, _ = server.get("/?wide=1")
    assert status == 500
    server.wait_for_log(r"X-Wide|not latin-1|latin-1")
    assert server.get("/")[0] == 200


def test_large_response(start_server):
    server = start_server(f"{APP}:big")
    status, _, body = server.get("/?size=3000001")
    assert status == 200
    assert len(body) == 3000001
    assert body[:256] == bytes(range(256)) and body.endswith(b"z" * (3000001 % 256))


@pytest.mark.parametrize("sendfile", [True, False], ids=["sendfile", "no-sendfile"])
def test_file_wrapper(start_server, tmp_path, sendfile):
    data = os.urandom(200_000)
    path = tmp_path / "payload.bin"
    path.write_bytes(data)
    args = [f"{APP}:files"] + ([] if sendfile else ["--no-sendfile"])
    server = start_server(*args)
    status, headers, body = server.get(f"/?path={path}")
    assert status == 200
    assert headers["content-length"] == str(len(data))
    assert body == data
    # From the file's current position, and only as much as the app announced.
    status, headers, body = server.get(f"/?path={path}&offset=1000&length=5000")
    assert (status, body) == (200, data[1000:6000])
    _, headers, body = split_response(
        server.raw(f"HEAD /?path={path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    )
    assert headers["content-length"] == [str(len(data))]
    assert body == b""
    # A Content-Length past the file's end: what the file has, then the close
    # (kept alive, the client would wait for the rest; a timeout fails here).
    with server.connect(5.0) as sock:
        sock.sendall(
            f"GET /?path={path}&length={len(data) + 10} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
        )
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    assert got.endswith(b"\r\n\r\n" + data)


def test_file_wrapper_over_a_stream_is_iterated_then_closed(start_server, tmp_path):
    """Not a regular file: the server iterates the wrapper (reads of its blksize)
    and, once the response is over, calls its close(), which closes the file
    object (PEP 3333)."""
    server = start_server(f"{APP}:wrapped_stream")
    marker = tmp_path / "closed"
    status, _, body = server.get(f"/?size=10500&marker={marker}")
    assert status == 200
    assert body == bytes(i % 251 for i in range(10500))
    wait_until(marker.exists)


# --------------------------------------------------------------------------- errors


def test_error_before_the_response_is_a_500(start_server):
    server = start_server(f"{APP}:fail_early")
    status, _, body = server.get("/explode?now=1")
    assert status == 500
    assert b"Internal Server Error" in body
    log = server.wait_for_log(r"RuntimeError: fail_early exploded")
    assert "Error handling request GET /explode?now=1 HTTP/1.1" in log
    assert server.get("/again")[0] == 500  # the worker lives on


def test_error_after_the_head_cuts_the_connection(start_server):
    server = start_server(f"{APP}:fail_late")
    status, _, body = split_response(server.raw(b"GET /late HTTP/1.1\r\nHost: t\r\n\r\n"))
    assert status == "HTTP/1.1 200 OK"
    payload, complete = dechunk(body)
    assert payload == b"x" * 100 and not complete
    log = server.wait_for_log(r"RuntimeError: fail_late exploded mid-body")
    assert "Error handling request GET /late HTTP/1.1" in log


# --------------------------------------------------------------------------- proxies


def test_proxy_headers_from_a_trusted_peer(start_server):
    server = start_server(f"{APP}:environ_app")  # default: 127.0.0.1 is trusted
    env = get_json(
        server, "/", {"X-Forwarded-For": "203.0.113.7, 127.0.0.1", "X-Forwarded-Proto": "https"}
    )
    assert env["REMOTE_ADDR"] == "203.0.113.7"
    assert env["wsgi.url_scheme"] == "https"
    env = get_json(server, "/", {"Forwarded": 'for="[2001:db8::17]:4711";proto=https'})
    assert env["REMOTE_ADDR"] == "2001:db8::17"
    assert env["wsgi.url_scheme"] == "https"


def test_proxy_headers_from_an_untrusted_peer_are_ignored(start_server):
    server = start_server(f"{APP}:environ_app", "--forwarded-allow-ips", "10.9.8.7")
    env = get_json(server, "/", {"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"})
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["wsgi.url_scheme"] == "http"
    assert env["HTTP_X_FORWARDED_FOR"] == "203.0.113.7"  # still visible, not believed


def test_contradictory_scheme_headers_are_refused(start_server):
    server = start_server(f"{APP}:environ_app")
    status, _, _ = server.get("/", headers={"X-Forwarded-Proto": "https", "X-Forwarded-Ssl": "off"})
    assert status == 400


# --------------------------------------------------------------------------- hooks and logs


def test_pre_and_post_request_hooks(start_server, tmp_path):
    conf = tmp_path / "hooks.conf.py"
    conf.write_text(
        "def pre_request(worker, req):\n"
        "    worker.log.info('PRE %s %s', req.method, req.path)\n"
        "\n"
        "def post_request(worker, req, environ, resp):\n"
        "    worker.log.info('POST %s %s %s', req.path, resp.status_code, environ['REMOTE_ADDR'])\n"
    )
    server = start_server(f"{APP}:hello", "-c", str(conf))
    assert server.get("/hooked")[0] == 200
    log = server.wait_for_log(r"POST /hooked 200 127\.0\.0\.1")
    assert "PRE GET /hooked" in log
    assert log.index("PRE GET /hooked") < log.index("POST /hooked")


def test_access_log_default_format(start_server):
    server = start_server(f"{APP}:hello", "--access-logfile", "-")
    server.get("/logged?x=1", headers={"User-Agent": "probe/1.0", "Referer": "http://ref/"})
    log = server.wait_for_log(r"GET /logged")
    line = next(x for x in log.splitlines() if "GET /logged" in x)
    expected = (
        r'127\.0\.0\.1 - - \[[^\]]+\] "GET /logged\?x=1 HTTP/1\.1" 200 13 '
        r'"http://ref/" "probe/1\.0"'
    )
    assert re.fullmatch(expected, line), line


def test_unix_socket_peer(start_server, tmp_path):
    path = str(tmp_path / "app.sock")
    start_server(f"{APP}:environ_app", unix=path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        sock.sendall(b"GET /u HTTP/1.1\r\nHost: local\r\n\r\n")
        raw = read_until_closed(sock)
    status, _, body = split_response(raw)
    assert status == "HTTP/1.1 200 OK"
    env = json.loads(body)
    assert env["REMOTE_ADDR"] == ""
    assert env["PATH_INFO"] == "/u"
