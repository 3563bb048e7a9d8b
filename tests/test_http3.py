"""HTTP/3 (QUIC) on the native server: `--quic-bind`, for every interface the
native server serves (RSGI on -k rsgi; WSGI, ASGI on -k native).

A real HTTP/3 client (aioquic, tests/h3client.py) talks to the real server
over real UDP sockets: requests and bodies both ways, HEAD, concurrent
streams on one connection, the limits, malformed heads, the Alt-Svc that TCP
responses advertise it with, client certificates, clients that read too
slowly (tests/h3_slow_reader.py), and reloads (HUP, TTOU, recycling) under
load with nothing lost.
"""

from __future__ import annotations

import hashlib
import os
import signal
import ssl
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("aioquic")
import httpx
from conftest import free_port, is_gone, wait_until
from h3_slow_reader import read_slowly
from h3client import H3Client, H3ConnectionClosed, H3Error, H3StreamReset

KINDS = [
    pytest.param(("rsgi", "h3_app:rsgi_app"), id="rsgi"),
    pytest.param(("native", "h3_app:app"), id="native-wsgi"),
    pytest.param(("native", "h3_app:asgi_app"), id="native-asgi"),
]


def start_h3(start_server, pki: Path, kind: str, app: str, *args: str, client_cert: bool = False):
    """A server with HTTP/1.1+2 over TLS and HTTP/3 on the same port; returns
    once it answers over HTTP/3."""
    port = free_port()
    server = start_server(
        "-k", kind, "-b", f"127.0.0.1:{port}", "--quic-bind", f"127.0.0.1:{port}",
        "--certfile", str(pki / "server.pem"), "--keyfile", str(pki / "server.key"),
        *args, app, wait=False,
    )  # fmt: skip
    server.port = port
    deadline = time.monotonic() + 30
    while True:
        try:
            with client_for(server, pki, cert=client_cert, timeout=2) as client:
                if client.request("GET", "/", timeout=2).status == 200:
                    return server
        except (H3Error, TimeoutError, OSError):
            pass
        if server.proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"no HTTP/3 service:\n{server.log()}")
        time.sleep(0.2)


def client_for(server, pki: Path, *, cert: bool = False, timeout: float = 10) -> H3Client:
    extra = {"certfile": str(pki / "client.pem"), "keyfile": str(pki / "client.key")}
    return H3Client(
        "127.0.0.1",
        server.port,
        verify=True,
        cafile=str(pki / "ca.pem"),
        **(extra if cert else {}),
    )


@pytest.fixture(params=KINDS)
def served(request, start_server, pki):
    kind, app = request.param
    server = start_h3(
        start_server, pki, kind, app, "--limit-request-body", str(4 << 20), "--access-logfile", "-"
    )
    with client_for(server, pki) as client:
        yield server, client


def test_requests_and_bodies_both_ways(served):
    server, client = served
    assert client.request("GET", "/").body == b"hello"
    for size in (0, 1, 100_000, 3 << 20):
        body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        r = client.request("POST", "/echo", body=body, timeout=30)
        assert r.status == 200
        assert r.body.decode().split() == [str(size), hashlib.sha256(body).hexdigest(), "HTTP/3"]
    head = client.request("HEAD", "/")
    assert (head.status, head.body) == (200, b"")
    streamed = client.request("GET", "/stream?n=16", timeout=30)
    assert streamed.body == b"".join(bytes([97 + i % 26]) * 65536 for i in range(16))
    assert client.connections_opened == 1
    server.wait_for_log(r'"POST /echo HTTP/3" 200')


def test_concurrent_streams_share_one_connection(served):
    _, client = served
    requests = [
        {"method": "POST", "path": "/echo", "body": bytes([i]) * (1000 * i)} for i in range(12)
    ]
    answers = client.gather(requests)
    for i, answer in enumerate(answers):
        assert not isinstance(answer, Exception), answer
        assert answer.body.split()[0] == str(1000 * i).encode()
    assert client.connections_opened == 1


def test_limits_and_malformed_heads(served):
    _, client = served
    too_big = client.request("POST", "/echo", body=b"x" * (5 << 20), timeout=30)
    assert too_big.status == 413
    # RFC 9114 4.2: a connection-specific field makes a request malformed.
    hop = client.request("GET", "/", headers=[("connection", "keep-alive")])
    assert hop.status == 400
    assert b"Connection-specific" in hop.body
    later = client.request("GET", "/", headers=[("x-a", "1"), ("proxy-connection", "close")])
    assert later.status == 400
    # TE may only say "trailers"; a hop-by-hop field after it is still named.
    te = client.request("GET", "/", headers=[("te", "gzip")])
    assert (te.status, te.body) == (400, b"TE other than trailers")
    both = client.request("GET", "/", headers=[("te", "gzip"), ("upgrade", "h2c")])
    assert (both.status, both.body) == (400, b"Connection-specific header field")
    assert client.request("GET", "/", headers=[("te", "trailers")]).status == 200
    # RFC 9114 4.1.2: a request without :path is a stream error (as on HTTP/2).
    raw = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"127.0.0.1")]
    with pytest.raises((H3StreamReset, H3ConnectionClosed)) as failed:
        client.request("GET", "/", raw_headers=raw, timeout=5)
    assert getattr(failed.value, "code", 0x10E) == 0x10E  # H3_MESSAGE_ERROR
    # The connection (or a new one) goes on serving.
    assert client.request("GET", "/").status == 200


def test_tls_responses_advertise_http3(start_server, pki):
    server = start_h3(start_server, pki, "rsgi", "h3_app:rsgi_app")
    verify = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    for http2 in (False, True):
        with httpx.Client(http2=http2, verify=verify, timeout=10) as tcp:
            r = tcp.get(f"https://127.0.0.1:{server.port}/")
        assert r.headers["alt-svc"] == f'h3=":{server.port}"; ma=86400'


def test_http3_responses_leave_out_http1_fields(start_server, pki):
    # RFC 9114 4.2; aioquic refuses a response that carries them. The server's
    # Alt-Svc, on every TLS response of the other protocols, is left out too.
    server = start_h3(start_server, pki, "rsgi", "h3_app:rsgi_app")
    with client_for(server, pki) as client:
        for path, body in (("/hop", b"hop"), ("/", b"hello")):
            answer = client.request("GET", path)
            assert (answer.status, answer.body) == (200, body)
            names = {name for name, _ in answer.headers}
            assert not names & {"connection", "keep-alive", "alt-svc"}, answer.headers
        assert answer.header("server")
        assert client.request("GET", "/hop").header("x-kept") == "1"
        # The server adds none; an app's own is the app's to send.
        assert client.request("GET", "/alt").header("alt-svc") == 'h3=":9443"; ma=5'


def test_alt_svc_can_be_set_or_switched_off(start_server, pki):
    verify = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    custom = start_h3(start_server, pki, "native", "h3_app:app", "--alt-svc", 'h3=":443"; ma=60')
    off = start_h3(start_server, pki, "native", "h3_app:app", "--alt-svc", "off")
    with httpx.Client(verify=verify, timeout=10) as tcp:
        assert tcp.get(f"https://127.0.0.1:{custom.port}/").headers["alt-svc"] == 'h3=":443"; ma=60'
        assert "alt-svc" not in tcp.get(f"https://127.0.0.1:{off.port}/").headers


def test_client_certificates(start_server, pki):
    server = start_h3(
        start_server, pki, "rsgi", "h3_app:rsgi_app",
        "--ca-certs", str(pki / "ca.pem"), "--cert-reqs", "2", client_cert=True,
    )  # fmt: skip
    with client_for(server, pki, cert=True) as client:
        assert client.request("GET", "/").status == 200
    with client_for(server, pki) as client, pytest.raises((H3Error, TimeoutError)):
        client.request("GET", "/", timeout=5)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["-k", "asgi"], "HTTP/3 is served by -k rsgi and -k native"),
        (["-k", "native"], "HTTP/3 needs TLS: set certfile"),
    ],
)
def test_a_setting_that_cannot_serve_http3_is_one_line(start_server, args, expected):
    port = free_port()
    server = start_server(*args, "--quic-bind", f"127.0.0.1:{port}", "h3_app:app", wait=False)
    assert server.proc.wait(30) != 0
    assert expected in server.log()
    assert "Traceback" not in server.log()


class Load:
    """Clients requesting over HTTP/3 without a pause until stopped: each a
    connection of its own, kept while the server keeps it. A request is failed
    when it gets no 200; one the server did not process (GOAWAY's rule, RFC
    9114 5.2) is retried on a new connection, as browsers do, and counted."""

    def __init__(self, server, pki: Path, clients: int) -> None:
        self.server, self.pki = server, pki
        self.ok = 0
        self.failed: list[str] = []
        self.connections = 0
        self.retries = 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(clients)]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(60)

    def _run(self, i: int) -> None:
        with client_for(self.server, self.pki) as client:
            n = 0
            while not self.stopping.is_set():
                n += 1
                body = f"{i}-{n}".encode()
                try:
                    r = client.request("POST", "/echo", body=body, timeout=15)
                    good = r.status == 200 and r.body.split()[0] == str(len(body)).encode()
                    problem = None if good else f"status {r.status}: {r.body[:80]!r}"
                except (H3Error, TimeoutError) as exc:
                    problem = repr(exc)
                with self.lock:
                    if problem:
                        self.failed.append(problem)
                    else:
                        self.ok += 1
            with self.lock:
                self.connections += client.connections_opened
                self.retries += client.retries

    def wait_for(self, more: int) -> None:
        start = self.ok
        wait_until(lambda: self.ok >= start + more, timeout=30)


@pytest.mark.parametrize("kind", KINDS)
def test_reloads_lose_no_request(start_server, pki, kind):
    kind, app = kind
    server = start_h3(
        start_server, pki, kind, app, "-w", "2", "--max-requests", "300",
        "--max-requests-jitter", "100", "--graceful-timeout", "20",
    )  # fmt: skip
    with Load(server, pki, clients=4) as load:
        load.wait_for(200)
        for sig in (signal.SIGHUP, signal.SIGTTIN, signal.SIGHUP, signal.SIGTTOU):
            server.signal(sig)
            time.sleep(1.0)
            load.wait_for(200)
    log = server.log()
    assert load.failed == [], f"{len(load.failed)} failed of {load.ok}: {load.failed[:5]}\n{log}"
    # Every reload and recycling made the clients move: new connections, to new workers.
    assert load.connections > 4
    assert log.count("Reloading: starting worker generation") == 2
    assert "Traceback" not in log


def test_usr2_upgrade_loses_no_request(start_server, pki, tmp_path):
    pidfile = tmp_path / "supervise.pid"
    server = start_h3(
        start_server, pki, "rsgi", "h3_app:rsgi_app", "-w", "2", "--pid", str(pidfile)
    )
    old_master = server.pid

    def master_in_pidfile() -> str:
        # USR2 renames the file (.oldbin) and the new master writes its own.
        try:
            return pidfile.read_text().strip()
        except FileNotFoundError:
            return ""

    wait_until(lambda: master_in_pidfile() == str(old_master))
    with Load(server, pki, clients=4) as load:
        load.wait_for(200)
        server.signal(signal.SIGUSR2)
        new_master = int(
            wait_until(
                lambda: master_in_pidfile() not in ("", str(old_master)) and master_in_pidfile()
            )
        )
        # Its workers serve (and take the new QUIC connections) once it says so.
        wait_until(lambda: "Ready:" in server.log().split("USR2: started a new master")[-1])
        load.wait_for(200)
        server.signal(signal.SIGTERM)
        assert server.proc.wait(30) == 0
        load.wait_for(300)
    try:
        assert load.failed == [], f"{len(load.failed)} failed of {load.ok}: {load.failed[:5]}"
        assert load.connections > 4
    finally:
        os.kill(new_master, signal.SIGTERM)
        wait_until(lambda: is_gone(new_master))


def test_an_idle_connection_is_closed_after_keep_alive(start_server, pki):
    server = start_h3(start_server, pki, "rsgi", "h3_app:rsgi_app", "--keep-alive", "1")
    with client_for(server, pki) as client:
        assert client.request("GET", "/").status == 200
        # Closed by the server (GOAWAY, then H3_NO_ERROR) once quiet for the keep-alive.
        wait_until(lambda: not client.connected, timeout=10)
        assert client.closed_by is not None and client.closed_by[0] == 0x100, client.closed_by
        # The next request opens a new connection.
        assert client.request("GET", "/").status == 200
        assert client.connections_opened == 2


def test_past_half_the_connections_a_new_client_proves_its_address(start_server, pki):
    # Handshakes from spoofed addresses must not hold every seat: past half of
    # --worker-connections the server answers a new client with Retry first.
    server = start_h3(start_server, pki, "rsgi", "h3_app:rsgi_app", "--worker-connections", "4")
    with (
        client_for(server, pki) as first,
        client_for(server, pki) as second,
        client_for(server, pki) as third,
    ):
        assert first.request("GET", "/").status == 200
        assert second.request("GET", "/").status == 200
        assert third.request("GET", "/").status == 200
        assert third.handshake_retried


@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_whose_client_grants_no_credit_is_given_up(start_server, pki, kind):
    # A client that takes 16 KiB of a 4 MiB response and never grants more
    # flow-control credit: the stream is reset at --send-timeout, logged once,
    # and the server goes on serving others.
    server = start_h3(start_server, pki, *kind, "--send-timeout", "2")
    slow = read_slowly(
        "127.0.0.1", server.port, str(pki / "ca.pem"), "/stream?n=64",
        credit=16 * 1024, rate=0, seconds=20,
    )  # fmt: skip
    assert slow.status == 200 and not slow.ended
    assert slow.received <= 16 * 1024
    assert slow.reset_code == 0x10C, slow  # H3_REQUEST_CANCELLED: not a whole response
    server.wait_for_log(r"Dropped 127\.0\.0\.1:\d+: it read nothing within send_timeout \(HTTP/3")
    with client_for(server, pki) as client:
        assert client.request("GET", "/").status == 200


def test_a_stream_read_under_send_min_rate_is_given_up_and_one_over_it_served(start_server, pki):
    server = start_h3(
        start_server, pki, "rsgi", "h3_app:rsgi_app",
        "--send-timeout", "4", "--send-min-rate", "32768",
    )  # fmt: skip
    ca = str(pki / "ca.pem")
    # 8 KiB a second: no send waits for --send-timeout (16 KiB pieces), but
    # against a floor of 32 KiB it is given up after a window or two.
    trickle = read_slowly(
        "127.0.0.1", server.port, ca, "/stream?n=64", credit=16 * 1024, rate=8192, seconds=20
    )
    assert trickle.status == 200 and not trickle.ended, trickle
    assert trickle.reset_code == 0x10C, trickle
    server.wait_for_log(r"it read slower than send_min_rate \(HTTP/3 stream\)")
    # 2 MiB a second, well over the floor, reads 2 MiB whole.
    brisk = read_slowly(
        "127.0.0.1", server.port, ca, "/stream?n=32", credit=64 * 1024, rate=2 << 20, seconds=20
    )
    assert brisk.ended and brisk.received == 32 * 65536, brisk
