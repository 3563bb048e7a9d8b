"""--proxy-protocol: PROXY headers (v1 text, v2 binary) from trusted peers, in
every worker class, over real sockets.

The server trusts 127.0.0.1 (--proxy-allow-from); the tests connect from
there as "the proxy", and from 127.0.0.2 as a peer that is not trusted. What
the app saw comes back in its body ("HOST PORT SCHEME", tests/apps/proxy_apps.py)
and in the marks file it appends each request path to.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import shutil
import socket
import ssl
import struct
import time
from pathlib import Path

import pytest
from conftest import interface_of, wait_until
from test_tls import client_context
from test_tls import pki as tls_pki  # noqa: F401 - the fixture, as `tls_pki`

from supervise import _native
from supervise.cli import load_config
from supervise.workers import WORKERS

APPS = {"wsgi": "proxy_apps:app", "asgi": "proxy_apps:asgi_app", "rsgi": "proxy_apps:rsgi_app"}
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def v1(src: str = "192.0.2.1", dst: str = "198.51.100.2", sport: int = 56324, dport: int = 80):
    family = "TCP6" if ":" in src else "TCP4"
    return f"PROXY {family} {src} {dst} {sport} {dport}\r\n".encode()


def tlv(kind: int, value: bytes) -> bytes:
    return struct.pack("!BH", kind, len(value)) + value


def v2(
    src: str = "192.0.2.1",
    dst: str = "198.51.100.2",
    sport: int = 56324,
    dport: int = 80,
    *,
    command: int = 0x21,
    family: int | None = None,
    tlvs: bytes = b"",
    body: bytes | None = None,
) -> bytes:
    if body is None:
        a, b = ipaddress.ip_address(src), ipaddress.ip_address(dst)
        body = a.packed + b.packed + struct.pack("!HH", sport, dport) + tlvs
        if family is None:
            family = 0x11 if a.version == 4 else 0x21
    return V2_SIGNATURE + bytes([command, family or 0]) + struct.pack("!H", len(body)) + body


def get(path: str, *headers: str) -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    return f"GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n".encode()


def connect(server, source: str | None = None) -> socket.socket:
    if server.unix:
        return server.connect(10.0)
    return socket.create_connection(
        (server.host, server.port), timeout=10, source_address=(source, 0) if source else None
    )


def response(sock: socket.socket) -> tuple[int, str]:
    resp = http.client.HTTPResponse(sock)
    resp.begin()
    return resp.status, resp.read().decode()


def ask(server, data: bytes, source: str | None = None) -> tuple[int, str]:
    """Send ``data`` on a new connection and read one response."""
    with connect(server, source) as sock:
        sock.sendall(data)
        return response(sock)


def refused(server, data: bytes) -> bytes:
    """Send ``data`` and read until the server closes: what it wrote back."""
    with connect(server) as sock:
        with contextlib.suppress(OSError):
            sock.sendall(data)
        chunks = []
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)


def seen(marks: Path) -> list[str]:
    path = marks / "seen"
    return path.read_text().split() if path.exists() else []


def start(start_server, worker: str, marks: Path, *args: str, **options):
    """A one-worker server with --proxy-protocol trusting 127.0.0.1, once it
    answers a proxied request."""
    server = start_server(
        "-k", worker, "-w", "1", "--proxy-protocol", "--proxy-allow-from", "127.0.0.1",
        *args, APPS[interface_of(worker)],
        wait=False, env={"PROXY_MARKS": str(marks)}, **options,
    )  # fmt: skip

    def serving() -> bool:
        if server.proc.poll() is not None:
            pytest.fail(f"supervise exited:\n{server.log()}")
        try:
            return ask(server, v1() + get("/ready"))[0] == 200
        except (OSError, http.client.HTTPException):
            return False

    wait_until(serving, timeout=30)
    return server


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    path = tmp_path / "marks"
    path.mkdir()
    return path


def test_native_parser_from_python():
    header = _native.parse_proxy_header(bytearray(v1() + b"GET"))
    assert (header.version, header.family, header.local) == (1, "TCP4", False)
    assert header.source == ("192.0.2.1", 56324)
    assert header.destination == ("198.51.100.2", 80)
    assert header.consumed == len(v1())
    local = _native.parse_proxy_header(memoryview(v2(command=0x20, family=0, body=b"")))
    assert (local.version, local.family, local.source, local.local) == (2, "UNKNOWN", None, True)
    assert _native.parse_proxy_header(v2()[:15]) is None
    with pytest.raises(_native.ProxyHeaderError, match="no PROXY protocol header"):
        _native.parse_proxy_header(b"GET / HTTP/1.1\r\n")
    with pytest.raises(ValueError):  # ProxyHeaderError is a ValueError
        _native.parse_proxy_header(v2(family=0x12))


def test_gunicorn_config_names(tmp_path: Path):
    conf = tmp_path / "gunicorn.conf.py"
    conf.write_text('proxy_protocol = True\nproxy_allow_ips = "10.0.0.0/8, 192.0.2.1"\n')
    cfg = load_config(["-c", str(conf), "app:app"], {})
    assert cfg.proxy_protocol is True
    assert cfg.proxy_allow_ips == ["10.0.0.0/8", "192.0.2.1"]
    assert load_config(["app:app"], {}).proxy_protocol is False


def test_headers_name_the_client(start_server, any_worker, marks):
    server = start(start_server, any_worker, marks)
    assert ask(server, v1() + get("/v1")) == (200, "192.0.2.1 56324 http")
    assert ask(server, v1("2001:db8::7", "2001:db8::8", 8080, 443) + get("/v1-6")) == (
        200,
        "2001:db8::7 8080 http",
    )
    # UNKNOWN and LOCAL keep the connection's own peer.
    status, body = ask(server, b"PROXY UNKNOWN\r\n" + get("/unknown"))
    assert status == 200 and body.startswith("127.0.0.1 ")
    status, body = ask(server, b"PROXY UNKNOWN ffff::1 ::1 1 2\r\n" + get("/unknown2"))
    assert status == 200 and body.startswith("127.0.0.1 ")
    status, body = ask(server, v2(command=0x20, family=0, body=b"") + get("/local"))
    assert status == 200 and body.startswith("127.0.0.1 ")
    # v2 with TLVs (ALPN, authority, SSL, a custom one), skipped.
    tlvs = (
        tlv(0x01, b"h2")
        + tlv(0x02, b"example.com")
        + tlv(0x20, b"\x01\0\0\0\0")
        + tlv(0xE0, b"x" * 300)
    )
    assert ask(server, v2(tlvs=tlvs) + get("/v2")) == (200, "192.0.2.1 56324 http")
    assert ask(server, v2("2001:db8::9", "2001:db8::1", 1, 2) + get("/v2-6")) == (
        200,
        "2001:db8::9 1 http",
    )
    assert {"/v1", "/v1-6", "/unknown", "/unknown2", "/local", "/v2", "/v2-6"} <= set(seen(marks))


def test_header_split_byte_by_byte(start_server, any_worker, marks):
    server = start(start_server, any_worker, marks)
    for header in (v1(), v2(tlvs=tlv(0x04, b""))):
        with connect(server) as sock:
            for byte in header + get("/split"):
                sock.sendall(bytes([byte]))
                time.sleep(0.001)
            assert response(sock) == (200, "192.0.2.1 56324 http")


def test_keep_alive_keeps_the_proxied_client(start_server, any_worker, marks):
    if any_worker == "sync":
        pytest.skip("the sync worker closes the connection after every response")
    server = start(start_server, any_worker, marks)
    with connect(server) as sock:
        sock.sendall(v2("203.0.113.5", "198.51.100.2", 4000, 80) + get("/one"))
        assert response(sock) == (200, "203.0.113.5 4000 http")
        sock.sendall(get("/two"))
        assert response(sock) == (200, "203.0.113.5 4000 http")


INVALID = {
    "no header": get("/bad-none"),
    "v1 LF without CR": v1()[:-2] + b"\n" + get("/bad-lf"),
    "v1 two spaces": v1().replace(b" 192", b"  192") + get("/bad-spaces"),
    "v1 bad address": v1("192.0.2.300") + get("/bad-address"),
    "v1 IPv6 in TCP4": b"PROXY TCP4 ::1 ::1 1 2\r\n" + get("/bad-family"),
    "v1 port out of range": v1(sport=65536) + get("/bad-port"),
    "v1 port leading zero": v1().replace(b" 56324", b" 056324") + get("/bad-zero"),
    "v1 unknown protocol": b"PROXY UDP4 1.2.3.4 1.2.3.5 1 2\r\n" + get("/bad-proto"),
    "v1 over 107 bytes": b"PROXY UNKNOWN " + b"x" * 120 + b"\r\n" + get("/bad-long"),
    "v2 version 1": v2()[:12] + b"\x11" + v2()[13:] + get("/bad-version"),
    "v2 command 2": v2(command=0x22) + get("/bad-command"),
    "v2 UDP": v2(family=0x12) + get("/bad-udp"),
    "v2 length short": v2(family=0x21) + get("/bad-short"),
    "v2 TLV overrun": v2(tlvs=b"\x01\x00\x09ab") + get("/bad-tlv"),
    "TLS first": b"\x16\x03\x01\x00\x05hello",
}


def test_invalid_headers_close_unanswered(start_server, any_worker, marks):
    server = start(start_server, any_worker, marks, "--access-logfile", "-")
    for name, data in INVALID.items():
        assert refused(server, data) == b"", name
    # Cut short: the peer closes in the middle of the header.
    with connect(server) as sock:
        sock.sendall(v1()[:20])
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(100) == b""
    assert not [path for path in seen(marks) if path.startswith("/bad")]
    # The worker is fine.
    assert ask(server, v1() + get("/after")) == (200, "192.0.2.1 56324 http")
    if not WORKERS[any_worker].native_server:  # the native server writes no log lines
        server.wait_for_log("Closed the connection from 127.0.0.1:")


def test_a_silent_proxy_times_out(start_server, any_worker, marks):
    server = start(start_server, any_worker, marks, "--header-timeout", "1")
    with connect(server) as silent, connect(server) as partial:
        partial.sendall(v2()[:10])
        # Closed without a word (each recv would fail after its 10 s timeout instead).
        assert silent.recv(100) == b""
        assert partial.recv(100) == b""
    assert ask(server, v1() + get("/after")) == (200, "192.0.2.1 56324 http")


def test_untrusted_peers_are_plain_clients(start_server, any_worker, marks):
    server = start(start_server, any_worker, marks)
    try:
        status, body = ask(server, get("/plain", "Connection: close"), source="127.0.0.2")
    except OSError as exc:
        pytest.skip(f"cannot connect from 127.0.0.2: {exc}")
    assert (status, body.split()[0]) == (200, "127.0.0.2")
    # Their PROXY line is no header but a bad request line.
    status, _ = ask(server, v1() + get("/spoof"), source="127.0.0.2")
    assert status == 400
    assert "/spoof" not in seen(marks)


def test_forwarded_headers_are_trusted_by_the_proxied_address(start_server, any_worker, marks):
    server = start(start_server, any_worker, marks, "--forwarded-allow-ips", "127.0.0.1")
    xff = "X-Forwarded-For: 198.51.100.7"
    # The socket's peer (127.0.0.1) is trusted, but the client the header named is
    # not: an L4 proxy passes the client's own bytes, so its X-Forwarded-For is ignored.
    assert ask(server, v1() + get("/xff", xff))[1].split()[0] == "192.0.2.1"
    # A header naming a trusted proxy (an L7 proxy behind an L4 one) lets it through.
    assert ask(server, v1("127.0.0.1") + get("/xff2", xff))[1].split()[0] == "198.51.100.7"


def test_access_log_shows_the_proxied_client(start_server, any_worker, marks):
    server = start(start_server, any_worker, marks, "--access-logfile", "-")
    assert ask(server, v1("203.0.113.77") + get("/logged"))[0] == 200
    server.wait_for_log(r'203\.0\.113\.77 .*"GET /logged HTTP/1\.1" 200')


def test_unix_socket_peers_must_send_the_header(start_server, any_worker, marks, tmp_path):
    server = start(start_server, any_worker, marks, unix=str(tmp_path / "app.sock"))
    assert ask(server, v2("192.0.2.44", "198.51.100.2", 1234, 80) + get("/unix")) == (
        200,
        "192.0.2.44 1234 http",
    )
    assert refused(server, get("/bad-unix")) == b""
    assert "/bad-unix" not in seen(marks)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")
def test_header_before_the_tls_handshake(start_server, any_worker, marks, tls_pki):  # noqa: F811
    pki = tls_pki
    server = start_server(
        "-k", any_worker, "-w", "1", "--proxy-protocol", "--proxy-allow-from", "127.0.0.1",
        "--certfile", str(pki / "server.pem"), "--keyfile", str(pki / "server.key"),
        APPS[interface_of(any_worker)], wait=False, env={"PROXY_MARKS": str(marks)},
    )  # fmt: skip
    ctx = client_context(pki)

    def tls_ask(header: bytes, path: str) -> tuple[int, str]:
        raw = connect(server)
        # The header and the ClientHello in one packet: the header must not eat it.
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        raw.sendall(header)
        tls = ctx.wrap_socket(raw, server_hostname="127.0.0.1", do_handshake_on_connect=False)
        with tls:
            with contextlib.suppress(ssl.SSLWantReadError):
                tls.setblocking(False)
                tls.do_handshake()  # writes the ClientHello behind the header
            tls.setblocking(True)
            tls.settimeout(10)
            tls.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
            tls.do_handshake()
            tls.sendall(get(path, "Connection: close"))
            return response(tls)

    def serving() -> bool:
        if server.proc.poll() is not None:
            pytest.fail(f"supervise exited:\n{server.log()}")
        try:
            return tls_ask(v1(), "/ready")[0] == 200
        except (OSError, http.client.HTTPException):
            return False

    wait_until(serving, timeout=30)
    assert tls_ask(v2("203.0.113.9", "198.51.100.2", 999, 443), "/tls") == (
        200,
        "203.0.113.9 999 https",
    )
    # A TLS client that skips the header is closed before its handshake.
    assert refused(server, b"\x16\x03\x01\x00\x05hello") == b""
