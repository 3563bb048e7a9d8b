"""supervise behind a real nginx on a unix socket, with the site config that
docs/operations.md shows (examples/nginx/myapp.conf): proxy headers reach the
app as the client's address and scheme, WebSockets pass, and HUP and
`supervise ctl reload` under load through nginx lose no request.

The test client connects to nginx from 127.0.0.2, an address outside
--forwarded-allow-ips, so the app can only learn it from nginx's
X-Forwarded-For (a unix-socket peer has no address at all).
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import socket
import ssl
import threading
from pathlib import Path

import pytest
import trustme
from conftest import REPO_DIR, free_port, interface_of, wait_until, worker_params
from keepalive_client import run_load
from nginx import SITE_EXAMPLE, Nginx, stream_server
from ops_helpers import ctl
from ws_raw import frame, read_frame

CLIENT = "127.0.0.2"  # not trusted: the client nginx reports
TRUSTED = "127.0.0.1,::1"  # a balancer in front of nginx would be listed here


def proxy_app(worker: str) -> str:
    attr = {"wsgi": "app", "asgi": "asgi_app", "rsgi": "rsgi_app"}[interface_of(worker)]
    return f"proxy_app:{attr}"


def _serve(start_server, tmp_path: Path, worker: str, *args: str):
    sock = tmp_path / "myapp.sock"
    server = start_server(
        "-k", worker, "--forwarded-allow-ips", TRUSTED, *args, proxy_app(worker), unix=str(sock)
    )
    return server, sock


def _tls_lines(tmp_path: Path) -> tuple[str, int, trustme.CA]:
    """An HTTPS listener next to the plain one, with a certificate made for the test."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "nginx.pem"))
    port = free_port()
    pem = tmp_path / "nginx.pem"
    lines = (
        f"\n    listen 127.0.0.1:{port} ssl;"
        f"\n    ssl_certificate {pem};\n    ssl_certificate_key {pem};"
    )
    return lines, port, ca


def _seen(response: tuple[int, dict, bytes]) -> dict:
    status, _, body = response
    assert status == 200, response
    return json.loads(body)


def _https_get(port: int, ca: trustme.CA, headers: dict[str, str]) -> dict:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    conn = http.client.HTTPSConnection(
        "127.0.0.1", port, timeout=10, context=ctx, source_address=(CLIENT, 0)
    )
    try:
        conn.request("GET", "/", headers=headers)
        resp = conn.getresponse()
        return _seen((resp.status, {}, resp.read()))
    finally:
        conn.close()


def test_proxy_headers_reach_the_app(start_server, nginx, any_worker, tmp_path):
    _, sock = _serve(start_server, tmp_path, any_worker)
    port = free_port()
    tls, tls_port, ca = _tls_lines(tmp_path)
    proxy = nginx(port, http=Nginx.site(str(sock), f"127.0.0.1:{port}", tls))
    # Straight to the socket, the app sees no address; through nginx, the client's.
    assert _seen(_unix_get(sock))["client"] == ""
    spoofed = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https", "Host": "a.test"}
    seen = _seen(proxy.get("/", headers=spoofed, source=CLIENT))
    # nginx appends the address it saw; the client's own entry and its scheme
    # header are not believed (nginx overwrites X-Forwarded-Proto).
    assert seen["client"] == CLIENT and seen["scheme"] == "http" and seen["host"] == "a.test"
    # From a trusted balancer in front of nginx, the address it forwarded counts.
    seen = _seen(proxy.get("/", headers={"X-Forwarded-For": "203.0.113.9"}, source="127.0.0.1"))
    assert seen["client"] == "203.0.113.9"
    # HTTPS ends at nginx; the app is told through X-Forwarded-Proto.
    seen = _https_get(tls_port, ca, {"Host": "b.test"})
    assert seen == {**seen, "client": CLIENT, "scheme": "https", "host": "b.test"}
    assert _upstream_errors(proxy) == []


def _unix_get(sock: Path) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("localhost", timeout=10)
    conn.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.sock.connect(str(sock))
    try:
        conn.request("GET", "/")
        resp = conn.getresponse()
        return resp.status, {}, resp.read()
    finally:
        conn.close()


# nginx's own word for a request it could not pass: it retries a failed
# kept-alive upstream connection, so the client alone would not see them.
UPSTREAM_ERROR = re.compile(r"\[(error|crit|alert|emerg)\]")


def _upstream_errors(proxy: Nginx) -> list[str]:
    return [line for line in proxy.error_log().splitlines() if UPSTREAM_ERROR.search(line)]


def _serving_generation(sock: Path) -> int:
    result = ctl("-s", str(sock), "--json", "status")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["master"]["serving_generation"]


class _Reloads(threading.Thread):
    """Once the load runs, HUP, then (generation 2 serving) `supervise ctl reload`;
    done once some requests were served after both."""

    AFTER = 300  # responses under load before, between and after the reloads

    def __init__(self, server, control: Path) -> None:
        super().__init__(daemon=True)
        self.server, self.control = server, control
        self.responses = 0
        self.done = threading.Event()
        self.ctl_result = None
        self.error: BaseException | None = None

    def progress(self, responses: int) -> None:
        self.responses = responses

    def _wait_responses(self, count: int) -> None:
        wait_until(lambda: self.responses >= count or self.done.is_set(), timeout=60)

    def run(self) -> None:
        try:
            self._wait_responses(self.AFTER)
            self.server.signal(signal.SIGHUP)
            wait_until(lambda: _serving_generation(self.control) == 2, timeout=60, interval=0.2)
            mark = self.responses
            self._wait_responses(mark + self.AFTER)
            self.ctl_result = ctl("-s", str(self.control), "reload")
            mark = self.responses
            self._wait_responses(mark + self.AFTER)
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc
        finally:
            self.done.set()


def test_hup_and_ctl_reload_under_load_lose_nothing(start_server, nginx, any_worker, tmp_path):
    control = tmp_path / "ctl.sock"
    server, sock = _serve(
        start_server, tmp_path, any_worker, "-w", "2", "--control-socket", str(control)
    )
    port = free_port()
    proxy = nginx(port, http=Nginx.site(str(sock), f"127.0.0.1:{port}"))
    reloads = _Reloads(server, control)
    reloads.start()
    result = run_load(
        proxy.host,
        port,
        connections=16,
        requests=10**9,  # until the reloads are done (or the time limit)
        time_limit=90,
        progress=reloads.progress,
        stop=reloads.done.is_set,
    )
    reloads.join(10)
    assert reloads.error is None, f"{reloads.error}\n{server.log()}"
    assert reloads.ctl_result is not None and reloads.ctl_result.returncode == 0, reloads.ctl_result
    assert reloads.ctl_result.stdout == "reload complete: generation 3 serving\n"
    assert result.error_count == 0, f"{result.errors}: {result.samples}\n{server.log()}"
    assert result.non_2xx == 0, f"{result.non_2xx} of {result.requests}\n{proxy.error_log()}"
    assert result.requests >= 3 * _Reloads.AFTER
    assert _upstream_errors(proxy) == [], server.log()


@pytest.mark.parametrize("worker", worker_params("asgi") + worker_params("rsgi"))
def test_websocket_through_nginx(start_server, nginx, worker, tmp_path):
    _, sock = _serve(start_server, tmp_path, worker)
    port = free_port()
    proxy = nginx(port, http=Nginx.site(str(sock), f"127.0.0.1:{port}"))
    conn = proxy.connect(source=CLIENT)
    with conn:
        conn.sendall(
            b"GET /ws HTTP/1.1\r\nHost: c.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(1)
            assert chunk, head
            head += chunk
        assert head.startswith(b"HTTP/1.1 101 "), head
        assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head  # RFC 6455's example key and accept
        opcode, payload = read_frame(conn)
        assert opcode == 1
        seen = json.loads(payload)
        # ASGI names the WebSocket scheme "ws"; RSGI keeps "http" (its proto says "ws").
        scheme = "ws" if interface_of(worker) == "asgi" else "http"
        assert (seen["client"], seen["scheme"], seen["host"]) == (CLIENT, scheme, "c.test")
        conn.sendall(frame(1, b"through nginx"))
        assert read_frame(conn) == (1, b"through nginx")
        conn.sendall(frame(8, b"\x03\xe8"))
        assert read_frame(conn)[0] == 8
    assert _upstream_errors(proxy) == []


def test_stream_proxy_passes_bytes(start_server, nginx, tmp_path):
    """The fixture's stream part (the one PROXY protocol tests build on): a plain
    TCP pass-through to the unix socket, so the app sees a unix-socket peer."""
    _, sock = _serve(start_server, tmp_path, "sync")
    port = free_port()
    proxy = nginx(
        port, stream=stream_server(f"127.0.0.1:{port}", f"unix:{sock}", proxy_protocol=False)
    )
    seen = _seen(proxy.get("/", headers={"X-Forwarded-For": "203.0.113.9"}, source=CLIENT))
    # No proxy in HTTP terms: the client's own header is all there is, from a
    # trusted peer (the unix socket), so it is believed. That is why a stream
    # proxy needs PROXY protocol, not headers.
    assert seen["client"] == "203.0.113.9"


def test_proxy_protocol_from_nginx_names_the_client(start_server, nginx, any_worker, tmp_path):
    """nginx's stream module with `proxy_protocol on` in front of
    `--proxy-protocol` on a unix socket: the app sees the address nginx saw,
    for every request of a kept-alive connection; a spoofed X-Forwarded-For
    from that client is not believed (the client is not a trusted proxy)."""
    sock = tmp_path / "myapp.sock"
    server = start_server(
        "-k", any_worker, "--proxy-protocol", proxy_app(any_worker), unix=str(sock), wait=False
    )  # fmt: skip
    port = free_port()
    proxy = nginx(
        port, stream=stream_server(f"127.0.0.1:{port}", f"unix:{sock}", proxy_protocol=True)
    )

    def serving() -> bool:
        # Only through nginx: a unix-socket peer must open with the header.
        if server.proc.poll() is not None:
            pytest.fail(f"supervise exited:\n{server.log()}")
        try:
            return proxy.get("/ready", source=CLIENT)[0] == 200
        except (OSError, http.client.HTTPException):
            return False

    wait_until(serving, timeout=30)
    refused_while_starting = len(_upstream_errors(proxy))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(CLIENT, 0))
    try:
        for path in ("/one", "/two"):
            conn.request("GET", path, headers={"X-Forwarded-For": "203.0.113.9"})
            resp = conn.getresponse()
            seen = _seen((resp.status, {}, resp.read()))
            assert seen["client"] == CLIENT, seen
    finally:
        conn.close()
    assert _upstream_errors(proxy)[refused_while_starting:] == []


def test_the_docs_show_the_tested_site():
    docs = (REPO_DIR / "docs" / "operations.md").read_text()
    assert SITE_EXAMPLE.read_text() in docs
