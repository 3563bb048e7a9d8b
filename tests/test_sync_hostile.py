"""The sync worker against connections that stall before their request head:
silent TCP, a ClientHello or a PROXY header cut short, a TLS handshake left
half done, a head cut short. None of them may hold the worker (it serves one
request at a time): a normal client keeps being answered, and each stalled
connection is closed once --header-timeout has passed since its accept.

Until 2026-11 the sync worker waited on the TLS handshake and on the PROXY
header blocking: ten silent connections to a TLS port left 1 probe of 8
answered over 40 s. And an answered 408 lingered for its client blocking, up
to a second each: ten heads timing out together held the worker ten seconds.
"""

from __future__ import annotations

import contextlib
import http.client
import shutil
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import wait_until
from hostile import PROBE_BOUND, Prober
from test_proxy_protocol import v1
from test_tls import client_context
from test_tls import pki as tls_pki  # noqa: F401 - the fixture, as `tls_pki`

# Soaks, hostile clients and external suites: `pytest -m long` (CI runs it too).
pytestmark = pytest.mark.long

APP = "hostile_app:app"  # "ok" on GET /
PARTIAL_HEAD = b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: "
ATTACKERS = 10  # of each kind
PROBE_SECONDS = 6.0
PROBE_INTERVAL = 0.5

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def client_hello() -> bytes:
    """The first flight of a real TLS client."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    out = ssl.MemoryBIO()
    tls = ctx.wrap_bio(ssl.MemoryBIO(), out, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return out.read()


class Setup:
    """One way of serving (plain, TLS, PROXY protocol, both): how to start
    it, how a normal client asks, and the stalled connections to throw at it."""

    def __init__(self, name: str, pki: Path) -> None:
        self.name = name
        self.tls = "tls" in name
        self.proxy = "proxy" in name
        self.ctx = client_context(pki)
        self.args: list[str] = []
        if self.tls:
            self.args += ["--certfile", str(pki / "server.pem")]
            self.args += ["--keyfile", str(pki / "server.key")]
        if self.proxy:
            self.args += ["--proxy-protocol", "--proxy-allow-from", "127.0.0.1"]

    def start(self, start_server: Callable, *args: str):
        server = start_server("-k", "sync", *self.args, *args, APP, wait=False)

        def serving() -> bool:
            if server.proc.poll() is not None:
                pytest.fail(f"supervise exited:\n{server.log()}")
            try:
                return self.ask(server) == (200, b"ok")
            except (OSError, http.client.HTTPException):
                return False

        wait_until(serving, timeout=30)
        return server

    def open(self, server, timeout: float = PROBE_BOUND) -> socket.socket:
        """A connection as a client would make it: PROXY header sent, TLS done."""
        sock = socket.create_connection((server.host, server.port), timeout=timeout)
        if self.proxy:
            sock.sendall(v1())
        if self.tls:
            sock = self.ctx.wrap_socket(sock, server_hostname=server.host)
        return sock

    def ask(self, server) -> tuple[int, bytes]:
        """A normal client's GET / on a connection of its own."""
        with self.open(server) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            resp = http.client.HTTPResponse(sock)
            resp.begin()
            return resp.status, resp.read()

    def stalled(self, server) -> dict[str, list[socket.socket]]:
        """ATTACKERS connections of each kind this setup can meet, by kind."""
        hello = client_hello()
        kinds: dict[str, Callable[[socket.socket], socket.socket]] = {"silent": _nothing}
        if self.proxy:
            kinds["partial PROXY header"] = _sending(v1()[:20])
        before_tls = v1() if self.proxy else b""
        if self.tls:
            kinds["partial ClientHello"] = _sending(before_tls + hello[: len(hello) // 2])
            # The server's flight is answered by nothing.
            kinds["stalled handshake"] = _sending(before_tls + hello)
        kinds["partial head"] = lambda sock: self._partial_head(sock, server)
        raw = {kind: [server.connect(timeout=30) for _ in range(ATTACKERS)] for kind in kinds}
        return {kind: [kinds[kind](sock) for sock in socks] for kind, socks in raw.items()}

    def _partial_head(self, sock: socket.socket, server) -> socket.socket:
        if self.proxy:
            sock.sendall(v1())
        if self.tls:
            sock = self.ctx.wrap_socket(sock, server_hostname=server.host)
        sock.sendall(PARTIAL_HEAD)
        return sock


def _nothing(sock: socket.socket) -> socket.socket:
    return sock


def _sending(data: bytes) -> Callable[[socket.socket], socket.socket]:
    def send(sock: socket.socket) -> socket.socket:
        sock.sendall(data)
        return sock

    return send


def closed_after(sock: socket.socket) -> bytes:
    """What the server wrote until it closed the connection."""
    chunks = []
    with contextlib.suppress(ConnectionResetError, ssl.SSLError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


SETUPS = [
    pytest.param("tls", [], marks=needs_openssl, id="tls"),
    pytest.param("tls", ["-w", "2"], marks=needs_openssl, id="tls-w2"),
    pytest.param("proxy", [], marks=needs_openssl, id="proxy"),
    pytest.param("proxy+tls", [], marks=needs_openssl, id="proxy+tls"),
    pytest.param("plain", [], marks=needs_openssl, id="plain"),
]


@pytest.mark.parametrize(("name", "args"), SETUPS)
def test_stalled_connections_do_not_hold_the_worker(start_server, tls_pki, name, args):  # noqa: F811
    setup = Setup(name, tls_pki)
    # The default header_timeout (10 s): every stalled connection stays for
    # all of the probing.
    server = setup.start(start_server, *args)
    stalled = setup.stalled(server)
    try:
        with Prober(interval=PROBE_INTERVAL, ask=lambda: setup.ask(server)) as prober:
            time.sleep(PROBE_SECONDS)
        probes = prober.result
        assert probes.total >= PROBE_SECONDS / PROBE_INTERVAL / 2, "the probe client hardly ran"
        assert not probes.failures, (
            f"{len(probes.failures)} of {probes.total}: {probes.failures[:5]}\n{server.log()}"
        )
    finally:
        for socks in stalled.values():
            for sock in socks:
                sock.close()


@pytest.mark.parametrize(("name", "args"), [p for p in SETUPS if p.id != "tls-w2"])
def test_stalled_connections_are_closed_after_header_timeout(
    start_server,
    tls_pki,  # noqa: F811
    name,
    args,
):
    setup = Setup(name, tls_pki)
    server = setup.start(start_server, "--header-timeout", "2", *args)
    opened = time.monotonic()
    stalled = setup.stalled(server)
    # All of them time out at once, while a normal client keeps asking.
    try:
        with Prober(interval=PROBE_INTERVAL, ask=lambda: setup.ask(server)) as prober:
            for kind, socks in stalled.items():
                for sock in socks:
                    sock.settimeout(15)
                    got = closed_after(sock)
                    took = time.monotonic() - opened
                    # Generous bounds: not at once, and not much past the timeout.
                    assert 1.0 < took < 12, f"{kind}: closed after {took:.1f}s"
                    if kind == "partial head":
                        assert got.startswith(b"HTTP/1.1 408 "), (kind, got[:100])
                    else:
                        assert b"HTTP/" not in got, (kind, got[:100])
            time.sleep(1)  # a probe or two once they are all gone
        probes = prober.result
        assert probes.total >= 2, "the probe client hardly ran"
        assert not probes.failures, (
            f"{len(probes.failures)} of {probes.total}: {probes.failures[:5]}\n{server.log()}"
        )
    finally:
        for socks in stalled.values():
            for sock in socks:
                sock.close()
    assert setup.ask(server) == (200, b"ok")
