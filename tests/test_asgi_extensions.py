"""The ASGI extensions as an app uses them: `http.response.pathsend`,
`http.response.trailers` (over HTTP/1.1 and HTTP/2) and
`http.response.early_hint`, on the asgi worker and the engine.
"""

from __future__ import annotations

import os
import socket
import time

import httpx
import pytest
from conftest import read_until_closed
from h2_client import H2Client
from test_asgi import APP, raw_exchange, url


def test_pathsend_sends_the_file(asgi, tmp_path):
    data = bytes(range(256)) * 4096
    path = tmp_path / "file.bin"
    path.write_bytes(data)
    server = asgi()
    response = httpx.get(url(server, "/pathsend"), params={"path": str(path)})
    assert response.headers["content-length"] == str(len(data))
    assert response.content == data


@pytest.mark.parametrize("loop", ["uvloop", "asyncio", "rloop"])
def test_pathsend_of_a_file_larger_than_the_socket_takes(asgi, tmp_path, loop):
    """The part sendfile(2) could not hand over at once goes out through the
    transport, in order: the bytes are exact and the connection carries the
    next response. A HEAD gets the length and no body."""
    pytest.importorskip(loop)
    if loop == "rloop" and asgi.worker == "asgi":
        pytest.xfail("rloop 0.5 leaves a closed connection open: see test_asgi_connections")
    data = os.urandom(8 * 1024 * 1024)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    server = asgi("--loop", loop)
    target = f"/pathsend?path={path}"
    with server.connect(timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        time.sleep(0.5)  # a slow reader: the server's socket fills meanwhile
        sock.sendall(f"HEAD {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
        raw = read_until_closed(sock)
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert f"content-length: {len(data)}".encode() in head.lower()
    assert rest[: len(data)] == data
    second, _, after = rest[len(data) :].partition(b"\r\n\r\n")
    assert second.startswith(b"HTTP/1.1 200 ") and after == b""
    assert f"content-length: {len(data)}".encode() in second.lower()


def test_trailers_follow_a_chunked_body(asgi):
    server = asgi()
    data = raw_exchange(
        server, b"GET /trailers HTTP/1.1\r\nHost: t\r\nTE: trailers\r\nConnection: close\r\n\r\n"
    )
    assert b"transfer-encoding: chunked" in data.lower()
    assert data.endswith(b"4\r\ndata\r\n0\r\nx-checksum: abc\r\n\r\n")


@pytest.mark.parametrize(
    ("query", "end"),
    [
        ("whole=1", b"4\r\ndata\r\n0\r\nx-checksum: abc\r\n\r\n"),
        ("split=1", b"4\r\ndata\r\n0\r\nx-checksum: abc\r\nx-count: 2\r\n\r\n"),
    ],
)
def test_trailers_with_a_whole_body_and_in_two_messages(asgi, query, end):
    """Announced trailers make the body chunked even when it comes in one message,
    and trailers sent in several messages go out as one section."""
    server = asgi()
    request = f"GET /trailers?{query} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    data = raw_exchange(server, request.encode())
    assert b"transfer-encoding: chunked" in data.lower()
    assert data.endswith(end)


def test_trailers_never_sent_cut_the_response(asgi):
    """An app that announced trailers and returned without them did not finish its
    response: the client must not see a complete body."""
    server = asgi()
    data = raw_exchange(server, b"GET /trailers?missing=1 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200")
    assert b"4\r\ndata\r\n" in data
    assert not data.endswith(b"0\r\n\r\n")
    server.wait_for_log("returned without completing its response")


@pytest.mark.parametrize("bad", ["crlf", "del"])
def test_a_trailer_value_the_response_could_not_carry_raises_in_the_app(asgi, bad):
    """A CR or LF would split the trailer section: refused by both servers. A
    DEL is refused by the engine, which serves HTTP/2 too and so takes only
    what hyper's map holds (as for the head's fields); the asgi worker,
    HTTP/1.1 only, sends it. The app can still finish its response."""
    server = asgi()
    request = f"GET /trailers?bad={bad} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    data = raw_exchange(server, request.encode())
    assert b"x-injected" not in data
    if bad == "del" and asgi.worker != "native":
        assert data.endswith(b"0\r\nx-bad: a\x7fb\r\nx-checksum: abc\r\n\r\n")
        return
    assert data.endswith(b"4\r\ndata\r\n0\r\nx-refused: ValueError\r\n\r\n")


def test_trailers_over_http2(start_server):
    server = start_server("-k", "native", APP)
    client = H2Client(server.connect(), authority=f"{server.host}:{server.port}")
    stream = client.finish(client.request("/trailers?split=1"))
    assert stream.headers[":status"] == "200"
    assert stream.body == b"data"
    assert stream.headers["x-checksum"] == "abc" and stream.headers["x-count"] == "2"


def test_early_hint_leaves_while_the_app_still_works(asgi):
    server = asgi()
    with server.connect(timeout=10) as sock:
        sock.sendall(b"GET /early-hint?wait=3 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        # Within the app's 3 s wait: the 103 is out, the response is not.
        sock.settimeout(2)
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 103 Early Hints\r\n") and b" 200 " not in first
        sock.settimeout(10)
        assert read_until_closed(sock).startswith(b"HTTP/1.1 200 OK")


def test_early_hint_is_dropped_for_http10(asgi):
    server = asgi()
    data = raw_exchange(server, b"GET /early-hint HTTP/1.0\r\nHost: t\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200 OK") or data.startswith(b"HTTP/1.0 200 OK")
    assert b" 103 " not in data
    assert data.endswith(b"after the hint")


def test_early_hint_is_a_103_before_the_response(asgi):
    server = asgi()
    data = raw_exchange(server, b"GET /early-hint HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert data.startswith(
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"
        b"HTTP/1.1 200 OK"
    )
    assert data.endswith(b"after the hint")
