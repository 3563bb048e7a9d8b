"""The keep-alive side of the WSGIHandler the Python workers share, run
in-process on a socketpair: the sync worker closes after every response, but
gthread and gevent drive the same handler with keep_alive=True, so these pin
down what they do between requests on one connection.
"""

from __future__ import annotations

import json
import re
import socket

import pytest
from test_wsgi import dechunk, split_response

from supervise.http.state import ServeState


@pytest.fixture
def apps(monkeypatch: pytest.MonkeyPatch):
    """The tests/apps/wsgi_apps module, imported in this process."""
    import importlib

    from conftest import APPS_DIR

    monkeypatch.syspath_prepend(str(APPS_DIR))
    return importlib.import_module("wsgi_apps")


class _Log:
    """Swallows log calls: these tests look at the wire, not at the log."""

    def _ignore(self, *args, **kwargs) -> None:
        pass

    debug = info = warning = error = exception = access = _ignore
    access_enabled = False


class _Worker:
    """What WSGIHandler needs from a worker."""

    def __init__(self, app, *args: str) -> None:
        from supervise.cli import load_config

        self.cfg = load_config([*args, "wsgi_apps:hello"], {})
        self.log = _Log()
        self.app = app
        self.ssl_context = None
        self.state = ServeState()
        self.requests = 0
        self.record = None  # no metrics
        self.statics = None  # no --static-map

    def request_finished(self, status: int, seconds: float, sent: int) -> None:
        self.requests += 1


def _keep_alive_pair(app, *args: str):
    from supervise.http.wsgi import WSGIHandler

    class _Listener:
        server_name, server_port = "127.0.0.1", "8000"

    worker = _Worker(app, *args)
    handler = WSGIHandler(worker)
    server_sock, client = socket.socketpair()
    server_sock.setblocking(False)
    client.settimeout(10)
    conn = handler.connection(server_sock, ("127.0.0.1", 5555), handler.base_environ(_Listener()))
    return handler, conn, client, worker


def _responses(client: socket.socket, count: int) -> list[tuple[str, bytes]]:
    """Read ``count`` Content-Length framed responses: [(status line, body)]."""
    data = b""
    out = []
    while len(out) < count:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
            if len(rest) >= length:
                out.append((head.split(b"\r\n")[0].decode(), rest[:length]))
                data = rest[length:]
                continue
        chunk = client.recv(65536)
        assert chunk, f"connection closed after {out}"
        data += chunk
    return out


def test_keep_alive_pipelined_requests_with_unread_bodies(apps):
    handler, conn, client, worker = _keep_alive_pair(apps.hello)
    client.sendall(
        b"GET /1 HTTP/1.1\r\nHost: t\r\n\r\n"
        b"POST /2 HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nabcde"
        b"POST /3 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\n"
        b"GET /4 HTTP/1.1\r\nHost: t\r\n\r\n"
    )
    # Every request leaves the connection reusable: unread bodies were drained.
    for _ in range(4):
        assert handler.handle(conn, keep_alive=True)
    responses = _responses(client, 4)
    assert [r[0] for r in responses] == ["HTTP/1.1 200 OK"] * 4
    assert all(body == b"Hello, world!" for _, body in responses)
    assert worker.requests == 4
    # The client closes: the next handle() says the connection is done.
    client.close()
    assert not handler.handle(conn, keep_alive=True, idle_timeout=5)
    conn.close()


def test_keep_alive_ends_when_a_large_body_is_left_unread(apps):
    handler, conn, client, _ = _keep_alive_pair(apps.hello)
    client.sendall(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000\r\n\r\n" + b"x" * 1000)
    assert not handler.handle(conn, keep_alive=True)
    ((status, body),) = _responses(client, 1)
    assert (status, body) == ("HTTP/1.1 200 OK", b"Hello, world!")
    conn.close()
    client.close()


def test_keep_alive_echo_and_chunked_response(apps):
    handler, conn, client, _ = _keep_alive_pair(apps.echo)
    client.sendall(b"POST /?mode=read HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc")
    assert handler.handle(conn, keep_alive=True)
    ((status, body),) = _responses(client, 1)
    assert json.loads(body)["parts"] == ["abc"]
    assert "Connection: close" not in status
    handler.app = apps.stream
    client.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    assert handler.handle(conn, keep_alive=True)
    client.settimeout(5)
    raw = b""
    while not raw.endswith(b"0\r\n\r\n"):
        raw += client.recv(65536)
    _, headers, payload = split_response(raw)
    assert headers["transfer-encoding"] == ["chunked"]
    assert dechunk(payload) == (b"one,two,three", True)
    conn.close()
    client.close()


def test_keep_alive_idle_timeout_closes_quietly(apps):
    handler, conn, client, _ = _keep_alive_pair(apps.hello)
    assert not handler.handle(conn, keep_alive=True, idle_timeout=0.2)
    conn.close()
    assert client.recv(100) == b""  # closed without a response
    client.close()
