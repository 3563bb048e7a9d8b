"""TLS on the rsgi worker (rustls, built in Rust from the TLS settings):
HTTP/2 and HTTP/1.1 chosen by ALPN, client certificates, encrypted keys,
and the start-up errors a wrong setting gives (one line, no boot loop).

Certificates are made at test time by trustme; clients verify the server
against its throw-away CA, as a browser would.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import trustme
from conftest import APPS_DIR, read_until_closed
from cryptography.hazmat.primitives import serialization
from h2_client import H2Client
from ws_raw import H2WebSocket

APP = "rsgi_apps:app"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def pki(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.pem; server.pem + server.key (127.0.0.1, localhost); client.pem + client.key."""
    pki = tmp_path_factory.mktemp("pki")
    ca.cert_pem.write_to_path(str(pki / "ca.pem"))
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.cert_chain_pems[0].write_to_path(str(pki / "server.pem"))
    server.private_key_pem.write_to_path(str(pki / "server.key"))
    server.private_key_and_cert_chain_pem.write_to_path(str(pki / "combined.pem"))
    client = ca.issue_cert("client@example.com")
    client.cert_chain_pems[0].write_to_path(str(pki / "client.pem"))
    client.private_key_pem.write_to_path(str(pki / "client.key"))
    return pki


def client_context(pki: Path, *, cert: bool = False, alpn: list[str] | None = None):
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def url(server, path: str) -> str:
    return f"https://{server.host}:{server.port}{path}"


def handshake(server, ctx: ssl.SSLContext) -> str | None:
    """The protocol ALPN settled on a fresh connection."""
    with (
        socket.create_connection((server.host, server.port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname=server.host) as tls,
    ):
        return tls.selected_alpn_protocol()


@pytest.fixture
def rsgi_tls(start_server, pki):
    """Start `supervise -k rsgi` with the server certificate, plus ARGS; returns
    once it answers over TLS."""

    def start(*args: str, app: str = APP, cert: bool = True, **options):
        server = start_server(
            "-k", "rsgi", "--certfile", str(pki / "server.pem"),
            "--keyfile", str(pki / "server.key"), *args, app, wait=False, **options,
        )  # fmt: skip
        ctx = client_context(pki, cert=cert)
        deadline = time.monotonic() + 20
        while True:
            try:
                handshake(server, ctx)
                return server
            except OSError:
                if server.proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"no TLS service:\n{server.log()}")
                time.sleep(0.1)

    return start


def boot_error(start_server, *args: str) -> str:
    """Start a server that must refuse to start; its log."""
    server = start_server("-k", "rsgi", *args, APP, wait=False)
    assert server.proc.wait(30) == 3  # WORKER_BOOT_ERROR: the arbiter gave up
    return server.log()


def test_h2_negotiated_by_alpn(rsgi_tls, pki):
    server = rsgi_tls()
    assert handshake(server, client_context(pki, alpn=["h2", "http/1.1"])) == "h2"
    assert handshake(server, client_context(pki, alpn=["http/1.1"])) == "http/1.1"
    with httpx.Client(http2=True, verify=client_context(pki), timeout=15) as client:
        r = client.get(url(server, "/scope?x=1"))
    assert r.http_version == "HTTP/2"
    scope = r.json()
    assert (scope["scheme"], scope["http_version"]) == ("https", "2")
    assert scope["query_string"] == "x=1"


def test_a_plain_http_request_on_the_tls_port_gets_a_readable_400(rsgi_tls, pki):
    """As nginx answers it: in plain HTTP, saying why, instead of TLS alert
    bytes; TLS clients on the same port are served as before."""
    server = rsgi_tls()
    answer = server.raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
    assert b"HTTPS" in answer.split(b"\r\n\r\n", 1)[1]
    assert handshake(server, client_context(pki, alpn=["h2", "http/1.1"])) == "h2"


def test_http1_over_tls(rsgi_tls, pki):
    server = rsgi_tls()
    with httpx.Client(verify=client_context(pki), timeout=15) as client:
        r = client.get(url(server, "/scope"))
        assert r.http_version == "HTTP/1.1"
        assert (r.json()["scheme"], r.json()["http_version"]) == ("https", "1.1")
        payload = b"0123456789abcdef" * 40_000  # many TLS records both ways
        assert client.post(url(server, "/echo"), content=payload).content == payload


def test_a_stalled_tls_handshake_gives_its_seat_to_a_newcomer(rsgi_tls, pki):
    """At --worker-connections, a connection that never sends its ClientHello
    waits on its client like an idle one: once it has waited a moment, a
    newcomer takes its seat instead of waiting for its header_timeout."""
    server = rsgi_tls("--worker-connections", "1")
    stalled = socket.create_connection((server.host, server.port), timeout=10)
    try:
        with httpx.Client(verify=client_context(pki), timeout=15) as client:
            assert client.get(url(server, "/text")).status_code == 201
        assert read_until_closed(stalled) == b""
    finally:
        stalled.close()


def test_bodies_over_h2_and_tls(rsgi_tls, pki, tmp_path):
    server = rsgi_tls()
    data = bytes(range(256)) * 10_000
    (tmp_path / "f.bin").write_bytes(data)
    with httpx.Client(http2=True, verify=client_context(pki), timeout=15) as client:
        echoed = client.post(url(server, "/echo"), content=iter([data[:100_000], data[100_000:]]))
        assert (echoed.http_version, echoed.content) == ("HTTP/2", data)
        assert client.get(url(server, f"/file?path={tmp_path / 'f.bin'}")).content == data


def test_http_1_offers_only_http11_and_http_2_only_h2(rsgi_tls, pki):
    one = rsgi_tls("--http", "1")
    assert handshake(one, client_context(pki, alpn=["h2", "http/1.1"])) == "http/1.1"
    two = rsgi_tls("--http", "2")
    assert handshake(two, client_context(pki, alpn=["h2", "http/1.1"])) == "h2"
    with pytest.raises(ssl.SSLError):  # no protocol in common
        handshake(two, client_context(pki, alpn=["http/1.1"]))


def test_frames_over_tls_with_a_frame_level_client(rsgi_tls, pki):
    server = rsgi_tls()
    ctx = client_context(pki, alpn=["h2"])
    raw = socket.create_connection((server.host, server.port), timeout=10)
    with ctx.wrap_socket(raw, server_hostname=server.host) as tls:
        client = H2Client(tls, authority=f"{server.host}:{server.port}", scheme="https")
        stream = client.request("/echo", method="POST", body=b"over h2 and tls")
        response = client.finish(stream)
    assert (response.headers[":status"], response.body) == ("200", b"over h2 and tls")


def test_plain_http_on_the_tls_port_does_not_hurt(rsgi_tls, pki):
    server = rsgi_tls()
    workers = server.workers()
    reply = server.raw(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    assert not reply.startswith(b"HTTP/1.1 200")
    with httpx.Client(verify=client_context(pki)) as client:
        assert client.get(url(server, "/text")).status_code == 201
    assert server.workers() == workers


def test_client_certificates_required(rsgi_tls, pki):
    server = rsgi_tls("--ca-certs", str(pki / "ca.pem"), "--cert-reqs", "required")
    with httpx.Client(http2=True, verify=client_context(pki, cert=True)) as client:
        assert client.get(url(server, "/text")).status_code == 201
    with (
        pytest.raises((ssl.SSLError, ConnectionResetError, httpx.HTTPError)),
        httpx.Client(http2=True, verify=client_context(pki)) as client,
    ):
        client.get(url(server, "/text"))


def test_client_certificates_optional(rsgi_tls, pki, tmp_path):
    server = rsgi_tls("--ca-certs", str(pki / "ca.pem"), "--cert-reqs", "1")
    for cert in (True, False):
        with httpx.Client(verify=client_context(pki, cert=cert)) as client:
            assert client.get(url(server, "/text")).status_code == 201
    # A certificate from another CA is refused even when optional.
    other = trustme.CA().issue_cert("intruder@example.com")
    other.cert_chain_pems[0].write_to_path(str(tmp_path / "o.pem"))
    other.private_key_pem.write_to_path(str(tmp_path / "o.key"))
    ctx = client_context(pki)
    ctx.load_cert_chain(str(tmp_path / "o.pem"), str(tmp_path / "o.key"))
    with (
        pytest.raises((ssl.SSLError, ConnectionResetError, httpx.HTTPError)),
        httpx.Client(verify=ctx) as client,
    ):
        client.get(url(server, "/text"))


def test_key_inside_the_certfile(start_server, pki):
    server = start_server(
        "-k", "rsgi", "--certfile", str(pki / "combined.pem"), APP, wait=False
    )  # fmt: skip
    ctx = client_context(pki)
    deadline = time.monotonic() + 20
    while True:
        try:
            with httpx.Client(verify=ctx) as client:
                assert client.get(url(server, "/text")).status_code == 201
            break
        except httpx.TransportError:
            assert server.proc.poll() is None, server.log()
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.1)


def encrypted_key(pki: Path, tmp_path: Path, password: bytes) -> Path:
    key = serialization.load_pem_private_key((pki / "server.key").read_bytes(), None)
    path = tmp_path / "encrypted.key"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password),
        )
    )
    return path


def test_encrypted_key_with_its_password(start_server, pki, tmp_path):
    key = encrypted_key(pki, tmp_path, b"s3cret")
    server = start_server(
        "-k", "rsgi", "--certfile", str(pki / "server.pem"), "--keyfile", str(key),
        "--keyfile-password", "s3cret", APP, wait=False,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while True:
        try:
            with httpx.Client(http2=True, verify=client_context(pki)) as client:
                assert client.get(url(server, "/text")).http_version == "HTTP/2"
            break
        except httpx.TransportError:
            assert server.proc.poll() is None, server.log()
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.1)


def one_error(log: str, pattern: str) -> str:
    """The one ERROR line of a refused start matches ``pattern``; it."""
    errors = [line for line in log.splitlines() if "[ERROR]" in line and "Traceback" not in line]
    assert "Traceback" not in log, log
    assert any(re.search(pattern, line) for line in errors), log
    assert len(re.findall(r"Booting worker", log)) == 1, log  # no boot loop
    return log


def test_encrypted_key_without_or_with_a_wrong_password(start_server, pki, tmp_path):
    key = encrypted_key(pki, tmp_path, b"s3cret")
    cert = ("--certfile", str(pki / "server.pem"), "--keyfile", str(key))
    one_error(boot_error(start_server, *cert), r"encrypted: set keyfile_password")
    log = boot_error(start_server, *cert, "--keyfile-password", "wrong")
    one_error(log, r"cannot decrypt it with keyfile_password")


def test_bad_certificate_is_one_line_and_no_boot_loop(start_server, pki, tmp_path):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    log = boot_error(start_server, "--certfile", str(garbage), "--keyfile", str(pki / "server.key"))
    one_error(log, rf'cannot load certfile "{re.escape(str(garbage))}": no PEM certificate')
    assert "worker failed to boot" in log


def refused_start(*args: str) -> str:
    """Start a server that the configuration check refuses before it binds;
    its one line of stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "supervise", "-k", "rsgi", "-b", "127.0.0.1:0", *args, APP],
        capture_output=True, text=True, timeout=60, cwd=APPS_DIR,
    )  # fmt: skip
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def test_key_that_does_not_match_the_certificate(pki, tmp_path):
    # Refused at start for every worker class (tests/test_tls.py), before rustls sees it.
    other = trustme.CA().issue_cert("127.0.0.1")
    other.private_key_pem.write_to_path(str(tmp_path / "other.key"))
    key = tmp_path / "other.key"
    error = refused_start("--certfile", str(pki / "server.pem"), "--keyfile", str(key))
    assert re.match(r"Error: keyfile .*other\.key' is not the key of the certificate", error)


def test_keyfile_without_a_key(pki):
    error = refused_start("--certfile", str(pki / "server.pem"), "--keyfile", str(pki / "ca.pem"))
    assert re.match(r"Error: keyfile .*ca\.pem' holds no private key", error), error


def test_client_certificates_need_ca_certs(start_server, pki):
    log = boot_error(
        start_server, "--certfile", str(pki / "server.pem"), "--keyfile", str(pki / "server.key"),
        "--cert-reqs", "2",
    )  # fmt: skip
    one_error(log, r"cert_reqs asks for client certificates but ca_certs is not set")


def test_settings_rustls_cannot_honour_are_refused(start_server, pki, tmp_path):
    cert = ("--certfile", str(pki / "server.pem"), "--keyfile", str(pki / "server.key"))
    log = boot_error(start_server, *cert, "--ciphers", "ECDHE+AESGCM")
    one_error(log, r"rustls.*cannot take an OpenSSL cipher list: unset ciphers")
    conf = tmp_path / "hook.conf.py"
    conf.write_text(
        "def ssl_context(config, default_ssl_context_factory):\n"
        "    return default_ssl_context_factory()\n"
    )
    log = boot_error(start_server, *cert, "-c", str(conf))
    one_error(log, r"cannot use the ssl_context hook")


def test_websocket_over_h2_and_tls_as_browsers_open_it(rsgi_tls, pki):
    # Browsers use RFC 8441 only over TLS: an extended CONNECT on the h2
    # connection ALPN chose, the frames in that stream's DATA.
    server = rsgi_tls(app="rsgi_ws_apps:app")
    ctx = client_context(pki, alpn=["h2"])
    raw = socket.create_connection((server.host, server.port), timeout=10)
    with ctx.wrap_socket(raw, server_hostname=server.host) as tls:
        client = H2Client(tls, authority=f"{server.host}:{server.port}", scheme="https")
        ws = H2WebSocket(client, "/info")
        assert ws.head()[":status"] == "200"
        opcode, scope = ws.receive()
        assert opcode == 0x1
        scope = json.loads(scope)
        assert (scope["proto"], scope["http_version"], scope["scheme"]) == ("ws", "2", "https")
        ws.send(0x1, b"through tls")
        assert ws.receive() == (0x1, b"through tls")
