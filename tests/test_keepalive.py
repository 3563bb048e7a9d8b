"""Keep-alive, pipelining and graceful stops for the gthread and gevent workers.

What a client sees on one connection: several requests answered on it, in
order, until it or the server says ``Connection: close``; idle connections
closed after ``--keep-alive`` seconds or when the worker stops.
"""

from __future__ import annotations

import select
import shutil
import signal
import socket
import threading
import time

import pytest
from conftest import wait_until
from test_tls import client_context, start_tls
from test_tls import pki as tls_pki  # noqa: F401 - the fixture, as `tls_pki`

APPS = "concurrency_apps"
# gthread also on poll(), its fallback where there is no epoll (macOS, BSD);
# native: WSGI on the Rust engine's own HTTP/1.1 loop.
KEEPALIVE_WORKERS = ["gthread", "gevent", "concurrency_apps.PollThreadWorker", "native"]


def installed(worker: str) -> str:
    """The worker class, or a skip when its optional dependency is missing."""
    if worker == "gevent":
        pytest.importorskip("gevent")
    return worker


@pytest.fixture(params=KEEPALIVE_WORKERS)
def keepalive_worker(request: pytest.FixtureRequest) -> str:
    return installed(request.param)


class Client:
    """A raw HTTP/1.x client on one socket that reads responses one at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def send(self, path: str, version: str = "1.1", headers: str = "") -> None:
        host = "Host: t\r\n" if version == "1.1" else ""
        self.sock.sendall(f"GET {path} HTTP/{version}\r\n{host}{headers}\r\n".encode())

    def _fill(self) -> bool:
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        self.buf += data
        return bool(data)

    def response(self) -> tuple[int, dict[str, str], bytes]:
        """The next response (Content-Length framed): status, lower-case headers, body."""
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                raise ConnectionError(f"closed before a response; got {self.buf!r}")
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.buf) < length:
            if not self._fill():
                raise ConnectionError("closed in the middle of a body")
        body, self.buf = self.buf[:length], self.buf[length:]
        return int(lines[0].split()[1]), headers, body

    def closed_by_server(self) -> bool:
        """True once the server has closed its side (waits up to the socket timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def has_data(self, seconds: float) -> bool:
        return bool(select.select([self.sock], [], [], seconds)[0])


def test_several_requests_on_one_connection(start_server, keepalive_worker):
    server = start_server("-k", keepalive_worker, f"{APPS}:path")
    with server.connect() as sock:
        client = Client(sock)
        pids = set()
        for n in range(5):
            client.send(f"/{n}")
            status, headers, body = client.response()
            path, pid = body.decode().split()
            assert (status, path) == (200, f"/{n}")
            assert "connection" not in headers
            pids.add(pid)
    assert len(pids) == 1


def test_pipelined_requests_are_answered_in_order(start_server, keepalive_worker):
    server = start_server("-k", keepalive_worker, f"{APPS}:path")
    requests = b"".join(b"GET /%d HTTP/1.1\r\nHost: t\r\n\r\n" % n for n in range(5))
    requests += b"GET /last HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    with server.connect() as sock:
        sock.sendall(requests)  # all in one packet
        client = Client(sock)
        answers = [client.response() for _ in range(6)]
        assert client.closed_by_server()
    assert [body.split()[0] for _, _, body in answers] == [
        b"/0",
        b"/1",
        b"/2",
        b"/3",
        b"/4",
        b"/last",
    ]
    assert [headers.get("connection") for _, headers, _ in answers] == [None] * 5 + ["close"]


def test_requests_arriving_together_on_many_connections_are_answered_in_order(
    start_server, keepalive_worker
):
    # The workers hold a response back until the other requests of the same
    # poll have run (gthread, gevent, native): nothing may be lost, reordered
    # or left behind a close, with pipelined requests and a close in the batch.
    server = start_server("-k", keepalive_worker, "--threads", "4", f"{APPS}:path")
    socks = [server.connect() for _ in range(32)]
    try:
        clients = [Client(sock) for sock in socks]
        for round_ in range(3):
            last = round_ == 2
            for n, sock in enumerate(socks):
                closing = last and n % 2 == 1
                tail = b"Connection: close\r\n" if closing else b""
                sock.sendall(
                    b"GET /%d-%d-a HTTP/1.1\r\nHost: t\r\n\r\n" % (round_, n)
                    + b"GET /%d-%d-b HTTP/1.1\r\nHost: t\r\n%s\r\n" % (round_, n, tail)
                )
            for n, client in enumerate(clients):
                bodies = [client.response()[2].split()[0] for _ in range(2)]
                assert bodies == [b"/%d-%d-a" % (round_, n), b"/%d-%d-b" % (round_, n)]
                if last and n % 2 == 1:
                    assert client.closed_by_server()
    finally:
        for sock in socks:
            sock.close()


def sized_body(path: str, size: int) -> bytes:
    """What concurrency_apps.sized answers for ``path``: the path repeated."""
    unit = path.encode() + b"."
    return (unit * (size // len(unit) + 1))[:size]


def test_a_held_answer_larger_than_the_client_takes_at_once_arrives_whole(
    start_server, keepalive_worker, tmp_path
):
    # A whole response held for the rest of its poll can be more than the
    # client's socket takes: here the slow client reads nothing until its
    # answers are all made, on a unix socket (its buffer does not grow as
    # loopback TCP's does, to 4 MiB), so from the fourth round on its answer
    # does not fit. What the worker could not write when the poll's answers
    # left follows as the client reads, in order, and the other connections'
    # answers do not wait for it. (Rounds: the slow client's unread requests
    # must fit its own socket's buffer, or its writes wait on the server's.)
    path = str(tmp_path / "s.sock")
    server = start_server("-k", keepalive_worker, "--threads", "4", f"{APPS}:sized", unix=path)
    slow = server.connect()
    slow.settimeout(30)
    socks = [server.connect() for _ in range(12)]
    rounds, size = 40, 64000
    try:
        for round_ in range(rounds):
            # In the middle of the batch, so that other events are pending when
            # its answer is made (what makes a worker hold it).
            for n, sock in enumerate(socks):
                if n == len(socks) // 2:
                    slow.sendall(b"GET /slow-%d?%d HTTP/1.1\r\nHost: t\r\n\r\n" % (round_, size))
                sock.sendall(b"GET /%d-%d?1000 HTTP/1.1\r\nHost: t\r\n\r\n" % (round_, n))
            for n, sock in enumerate(socks):
                status, _, body = Client(sock).response()
                assert (status, body) == (200, sized_body(f"/{round_}-{n}", 1000))
        slow_client = Client(slow)
        for round_ in range(rounds):
            status, _, body = slow_client.response()
            assert (status, body) == (200, sized_body(f"/slow-{round_}", size))
    finally:
        slow.close()
        for sock in socks:
            sock.close()


def test_a_quick_answer_does_not_wait_behind_a_slow_one_of_the_same_poll(
    start_server, keepalive_worker
):
    # A response held back for the rest of its poll must still leave when the
    # next request of that poll turns out slow (threads are left to serve).
    server = start_server("-k", keepalive_worker, "--threads", "8", f"{APPS}:sleepy")
    socks = [server.connect() for _ in range(8)]
    try:
        began = time.monotonic()
        for n, sock in enumerate(socks):
            seconds = "3" if n % 3 == 1 else "0"
            sock.sendall(b"GET /%d?%s HTTP/1.1\r\nHost: t\r\n\r\n" % (n, seconds.encode()))
        for n, sock in enumerate(socks):
            if n % 3 != 1:
                assert Client(sock).response()[2] == b"slept /%d" % n
                assert time.monotonic() - began < 2.0, f"answer {n} waited for a slow request"
    finally:
        for sock in socks:
            sock.close()


def test_connection_close_is_honoured(start_server, keepalive_worker):
    server = start_server("-k", keepalive_worker, f"{APPS}:path")
    with server.connect() as sock:
        client = Client(sock)
        client.send("/", headers="Connection: close\r\n")
        status, headers, _ = client.response()
        assert status == 200
        assert headers["connection"] == "close"
        assert client.closed_by_server()


def test_http10_keeps_alive_only_when_asked(start_server, keepalive_worker):
    server = start_server("-k", keepalive_worker, f"{APPS}:path")
    with server.connect() as sock:
        client = Client(sock)
        client.send("/plain", version="1.0")
        status, headers, _ = client.response()
        assert (status, headers["connection"]) == (200, "close")
        assert client.closed_by_server()
    with server.connect() as sock:
        client = Client(sock)
        for path in ("/first", "/second"):
            client.send(path, version="1.0", headers="Connection: keep-alive\r\n")
            status, headers, body = client.response()
            assert (status, headers["connection"]) == (200, "keep-alive")
            assert body.split()[0] == path.encode()


def test_idle_connection_is_closed_after_keepalive(start_server, keepalive_worker):
    server = start_server("-k", keepalive_worker, "--keep-alive", "1", f"{APPS}:path")
    with server.connect(timeout=20) as sock:
        client = Client(sock)
        client.send("/")
        assert client.response()[0] == 200
        assert client.closed_by_server()


def test_each_request_restarts_the_keepalive_wait(start_server, keepalive_worker):
    # Requests 0.6 s apart for 2.4 s stay on one connection under a 1 s
    # keep-alive: the wait is counted from each response (the engine keeps
    # one timer per connection and moves it forward), not from the first.
    server = start_server("-k", keepalive_worker, "--keep-alive", "1", f"{APPS}:path")
    with server.connect(timeout=20) as sock:
        client = Client(sock)
        for n in range(4):
            client.send(f"/{n}")
            status, headers, body = client.response()
            assert (status, body.split()[0]) == (200, f"/{n}".encode())
            assert "connection" not in headers
            assert not client.has_data(0.6), "closed within the keep-alive"
        started = time.monotonic()
        assert client.closed_by_server()
        assert time.monotonic() - started < 5


def test_keepalive_zero_closes_every_connection(start_server, keepalive_worker):
    server = start_server("-k", keepalive_worker, "--keep-alive", "0", f"{APPS}:path")
    with server.connect() as sock:
        client = Client(sock)
        client.send("/")
        status, headers, _ = client.response()
        assert (status, headers["connection"]) == (200, "close")
        assert client.closed_by_server()


def test_worker_connections_bounds_open_connections(start_server, keepalive_worker):
    if keepalive_worker == "native":
        pytest.skip("the engine gives a silent seat away after a moment: the test below")
    server = start_server(
        "-k", keepalive_worker, "-w", "1", "--worker-connections", "2", f"{APPS}:path"
    )
    # Two clients take both slots: connected, their requests not sent yet.
    first = Client(server.connect())
    second = Client(server.connect())
    try:
        third = Client(server.connect())
        third.send("/third")
        assert not third.has_data(0.5), "a third connection was served past the bound"
        # At the bound, keep-alive is not offered: the answer frees a slot.
        first.send("/first")
        status, headers, _ = first.response()
        assert (status, headers["connection"]) == (200, "close")
        status, _, body = third.response()
        assert (status, body.split()[0]) == (200, b"/third")
        second.send("/second")
        assert second.response()[0] == 200
    finally:
        for client in (first, second, third):
            client.sock.close()


def test_worker_connections_on_the_engine_makes_room_for_a_new_client(start_server):
    """WSGI on the engine follows the asgi worker's rule: at the bound a new
    client takes the seat of the waiting connection nearest its deadline
    (here a kept-alive one, 5 s, before a silent new one's header_timeout, 10 s)."""
    server = start_server(
        "-k", "native", "-w", "1", "--worker-connections", "2", "--keep-alive", "5",
        f"{APPS}:path",
    )  # fmt: skip
    clients = [Client(server.connect()), Client(server.connect())]
    idle, silent = clients
    try:
        idle.send("/idle")
        assert idle.response()[0] == 200
        clients.append(third := Client(server.connect()))
        third.send("/third")
        status, _, body = third.response()
        assert (status, body.split()[0]) == (200, b"/third")
        # Long before its keep-alive ran out.
        assert idle.has_data(2) and idle.closed_by_server()
        silent.send("/silent")
        assert silent.response()[0] == 200
    finally:
        for client in clients:
            client.sock.close()


def test_term_finishes_request_in_flight_and_closes_idle_connections(
    start_server, keepalive_worker
):
    server = start_server("-k", keepalive_worker, "-w", "1", f"{APPS}:sleepy")
    idle = Client(server.connect(timeout=20))
    idle.send("/idle?0")
    assert idle.response()[0] == 200
    busy = Client(server.connect(timeout=20))
    busy.send("/busy?1.5")
    server.wait_for_log("sleepy request started: /busy")
    server.signal(signal.SIGTERM)
    status, headers, body = busy.response()
    assert (status, body) == (200, b"slept /busy")
    assert headers["connection"] == "close"
    assert busy.closed_by_server()
    assert idle.closed_by_server()
    assert server.proc.wait(20) == 0
    idle.sock.close()
    busy.sock.close()


def test_max_requests_closes_the_last_kept_alive_response(start_server, keepalive_worker):
    server = start_server(
        "-k", keepalive_worker, "-w", "1", "--max-requests", "3", f"{APPS}:path", wait=False
    )
    # Not start_server's readiness probe: it would be one of the three requests.
    server.wait_for_log("Ready: 1 worker")
    (first_pid,) = server.wait_workers(1)
    with server.connect(timeout=20) as sock:
        client = Client(sock)
        answers = []
        for n in range(3):
            client.send(f"/{n}")
            answers.append(client.response())
        assert [headers.get("connection") for _, headers, _ in answers] == [None, None, "close"]
        assert client.closed_by_server()
    # The replacement takes over.
    wait_until(lambda: (w := server.workers()) and first_pid not in w)
    assert server.get("/")[0] == 200


def test_requests_in_parallel_on_kept_alive_connections(start_server, keepalive_worker):
    """Many clients, each with its own keep-alive connection, all answered right."""
    server = start_server("-k", keepalive_worker, "--threads", "4", f"{APPS}:path")
    failures: list[str] = []

    def run(n: int) -> None:
        try:
            with server.connect() as sock:
                client = Client(sock)
                for i in range(20):
                    client.send(f"/{n}-{i}")
                    status, _, body = client.response()
                    if (status, body.split()[0]) != (200, f"/{n}-{i}".encode()):
                        failures.append(f"{n}-{i}: {status} {body!r}")
        except OSError as exc:
            failures.append(f"{n}: {exc!r}")

    threads = [threading.Thread(target=run, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == []


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")
def test_tls_keep_alive_and_pipelining(start_server, keepalive_worker, request):
    """TLS: bytes decrypted ahead (a pipelined burst over several records) are served
    without waiting for the socket to turn readable again."""
    pki = request.getfixturevalue("tls_pki")
    server = start_tls(start_server, pki, "-k", keepalive_worker, f"{APPS}:path")
    ctx = client_context(pki)
    raw = socket.create_connection((server.host, server.port), timeout=10)
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        client = Client(sock)
        client.send("/first")
        assert client.response()[2].startswith(b"/first ")
        pad = "X-Pad: " + "p" * 3000 + "\r\n"
        sock.sendall(
            b"".join(f"GET /{n} HTTP/1.1\r\nHost: t\r\n{pad}\r\n".encode() for n in range(20))
            + b"GET /last HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        )
        paths = [client.response()[2].split()[0] for _ in range(21)]
        assert paths == [f"/{n}".encode() for n in range(20)] + [b"/last"]
        assert client.closed_by_server()
    raw = socket.create_connection((server.host, server.port), timeout=10)
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        # The body's last bytes and the next request share a TLS record: reading
        # just the body leaves that request decrypted inside the TLS object.
        client = Client(sock)
        sock.sendall(
            b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 20000\r\n\r\n"
            + b"b" * 20000
            + b"GET /after HTTP/1.1\r\nHost: t\r\n\r\n"
        )
        assert client.response()[2].startswith(b"/upload ")
        assert client.response()[2].startswith(b"/after ")


def test_threads_with_the_sync_class_runs_gthread(start_server):
    server = start_server("--threads", "4", f"{APPS}:path")
    assert "Using worker: gthread" in server.log()
    with server.connect() as sock:
        client = Client(sock)
        for path in ("/a", "/b"):
            client.send(path)
            status, headers, _ = client.response()
            assert status == 200 and "connection" not in headers


def test_gevent_missing_is_a_one_line_error(start_server, tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "gevent.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'gevent'\", name='gevent')\n"
    )
    server = start_server("-k", "gevent", f"{APPS}:path", wait=False, env={"PYTHONPATH": str(shim)})
    assert server.proc.wait(30) != 0
    log = server.log()
    assert "pip install 'supervise-server[gevent]'" in log
    assert "Traceback" not in log
    assert len(log.strip().splitlines()) == 1, log
