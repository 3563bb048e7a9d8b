"""Raw requests against the real `supervise` server: what the parser refuses
(the tables of test_parser.py and test_chunked_decoder.py) a client sees
refused on the wire, with the connection closed after the 4xx, and nothing
smuggled gets answered."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import http1_corpus
import pytest
from conftest import (
    WSGI_WORKERS,
    Server,
    interface_of,
    launch,
    shutdown,
    worker_params,
)
from http1_corpus import seen_target, split_responses
from test_chunked_decoder import INVALID_CHUNKED
from test_parser import INVALID_REQUESTS, VALID_REQUESTS, ids

from supervise import _native

# The HTTP workers these tests run against; a new worker class joins the list.
HTTP_WORKERS = WSGI_WORKERS + worker_params("asgi") + worker_params("rsgi")
ECHO_APPS = {"wsgi": "app", "asgi": "asgi_app", "rsgi": "rsgi_app"}
READ_TIMEOUT = 5.0


@contextlib.contextmanager
def serve_echo(worker: str, log_dir: Path) -> Iterator[Server]:
    """One server for a whole module: starting one per case would dominate the run."""
    app = f"echo_app:{ECHO_APPS[interface_of(worker)]}"
    server = launch(["-k", worker, app], log_dir / "server.log")
    try:
        server.wait_serving()
        server.boot_workers = server.workers()  # type: ignore[attr-defined]
        server.interface = interface_of(worker)  # type: ignore[attr-defined]
        # Whether upgrades go to a WebSocket handshake (the WSGI servers answer
        # them as plain requests).
        server.websockets = server.interface in ("asgi", "rsgi")  # type: ignore[attr-defined]
        yield server
    finally:
        shutdown(server)


@pytest.fixture(scope="module", params=HTTP_WORKERS)
def echo_server(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[Server]:
    with serve_echo(request.param, tmp_path_factory.mktemp(request.param)) as server:
        yield server


def exchange(server: Server, raw: bytes, half_close: bool = True) -> tuple[bytes, bool]:
    """Send `raw`, read until the server closes; (bytes, closed_by_server)."""
    return http1_corpus.exchange(server.connect, raw, half_close=half_close)


@pytest.mark.parametrize(("name", "raw", "status"), INVALID_REQUESTS, ids=ids(INVALID_REQUESTS))
def test_invalid_request_refused_and_closed(
    echo_server: Server, name: str, raw: bytes, status: int
) -> None:
    data, closed = exchange(echo_server, raw + b"body", half_close=False)
    responses = split_responses(data)
    assert [r[0] for r in responses] == [status], data[:200]
    assert closed, "the connection must be closed after a refused request"
    assert responses[0][1].get("connection") == "close"


@pytest.mark.parametrize(("raw", "status"), INVALID_CHUNKED)
def test_invalid_chunked_body_refused_and_closed(
    echo_server: Server, raw: bytes, status: int
) -> None:
    head = b"POST /upload HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
    data, closed = exchange(echo_server, head + raw, half_close=False)
    assert [r[0] for r in split_responses(data)] == [status], data[:200]
    assert closed


def body_for(raw: bytes) -> tuple[bytes, int]:
    """A body matching the framing the head announces, and its payload length."""
    req, _ = _native.RequestParser().parse(raw)
    if req.chunked:
        return b"3\r\nabc\r\n0\r\n\r\n", 3
    n = req.content_length or 0
    return b"x" * n, n


SERVED = [c for c in VALID_REQUESTS if not c[1].lstrip().startswith(b"CONNECT")]


@pytest.mark.parametrize(("name", "raw", "want"), SERVED, ids=ids(SERVED))
def test_valid_request_served(echo_server: Server, name: str, raw: bytes, want: dict) -> None:
    body, payload_len = body_for(raw)
    data, closed = exchange(echo_server, raw + body)
    responses = split_responses(data)
    if name == "expect-and-upgrade" and echo_server.websockets:  # type: ignore[attr-defined]
        # A WebSocket handshake without Sec-WebSocket-Key: RFC 6455 4.2.1 says 400.
        assert responses and responses[0][0] == 400, data[:300]
        return
    assert responses and responses[0][0] == 200, data[:300]
    seen = json.loads(responses[0][2])
    assert seen["body_len"] == payload_len
    for key in ("method", "path", "query"):
        if key in want:
            assert seen[key] == want[key], key
    if "target" in want:
        assert seen["uri"] == seen_target(want["target"], seen)
    assert closed


SMUGGLING = [
    (
        "cl-te",
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    ),
    (
        "te-cl",
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n"
        b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    ),
    (
        "te-obfuscated",
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\nContent-Length: 4\r\n\r\n"
        b"5c\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    ),
    (
        "http10-te",
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        b"GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    ),
    (
        "double-cl",
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nContent-Length: 38\r\n\r\n"
        b"GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    ),
    (
        "bare-lf-field",
        b"POST / HTTP/1.1\r\nHost: h\r\nX: y\nTransfer-Encoding: chunked\r\n"
        b"Content-Length: 5\r\n\r\n"
        b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    ),
    (
        "chunk-size-garbage",
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"0x0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n",
    ),
]


@pytest.mark.parametrize(("name", "raw"), SMUGGLING, ids=ids(SMUGGLING))
def test_smuggled_request_never_answered(echo_server: Server, name: str, raw: bytes) -> None:
    data, closed = exchange(echo_server, raw)
    responses = split_responses(data)
    assert len(responses) == 1, data[:400]
    assert b"/smuggled" not in data
    assert responses[0][0] == 400
    assert closed


@pytest.mark.parametrize(
    ("start", "filler", "status"),
    [
        (b"GET /", b"a", 414),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX-Endless: ", b"a", 431),
        (b"GET / HTTP/1.1\r\nHost: h\r\n", b"X-Many: v\r\n", 431),
    ],
    ids=["endless-line", "endless-field", "endless-fields"],
)
def test_endless_head_is_cut_off(
    echo_server: Server, start: bytes, filler: bytes, status: int
) -> None:
    """A client that never ends its head is answered once it passes a limit."""
    with echo_server.connect(READ_TIMEOUT) as sock:
        sock.sendall(start)
        piece = filler * (1024 // len(filler))
        sent = 0
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            # 1 MiB is far past every default limit; the server must stop us first.
            while sent < 1 << 20:
                sock.sendall(piece)
                sent += len(piece)
        data = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                data += chunk
    assert data.startswith(b"HTTP/1.1 %d " % status), data[:100]


def test_server_still_healthy_after_abuse(echo_server: Server) -> None:
    """Runs last in the module: the workers that booted served everything."""
    status, _, body = split_responses(exchange(echo_server, b"GET /ok HTTP/1.0\r\n\r\n")[0])[0]
    assert status == 200 and json.loads(body)["path"] == "/ok"
    assert echo_server.workers() == echo_server.boot_workers  # type: ignore[attr-defined]
    assert "Traceback" not in echo_server.log()
