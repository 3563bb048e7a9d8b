"""Static files over HTTP/2 (h2c, prior knowledge) on the native server,
and over TLS (rustls on rsgi, Python's ssl on gthread, where no sendfile
applies).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time

import httpx
import pytest
from conftest import (
    Server,
)
from static_tree import (
    APP_ANSWER,
    BIG_SIZE,
    DIGITS,
    HELLO,
    PRE,
    SECRET,
    Tree,
    build_tree,
    is_strong_etag,
    media,
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    return build_tree(tmp_path_factory.mktemp("static"))


# -- HTTP/2 (h2c, prior knowledge) on the native server -----------------------------------

NATIVE_HTTP2 = [
    pytest.param(("rsgi", "lifecycle_app:rsgi_app"), id="rsgi"),
    pytest.param(("native", "lifecycle_app:app"), id="native-wsgi"),
    pytest.param(("native", "lifecycle_app:asgi_app"), id="native-asgi"),
]


@pytest.mark.parametrize("worker_app", NATIVE_HTTP2)
def test_http2_prior_knowledge(start_server, tree, worker_app):
    worker, app = worker_app
    server = start_server(app, "-k", worker, "--static-map", f"/static={tree.public}")
    base = f"http://{server.host}:{server.port}"
    with httpx.Client(http1=False, http2=True, timeout=30) as h2:
        r = h2.get(f"{base}/static/hello.txt")
        assert r.http_version == "HTTP/2"
        assert (r.status_code, r.content) == (200, HELLO)
        assert media(dict(r.headers)) == "text/plain;charset=utf-8"
        assert is_strong_etag(r.headers.get("etag"))
        etag = r.headers["etag"]
        assert (
            h2.get(f"{base}/static/hello.txt", headers={"If-None-Match": etag}).status_code == 304
        )
        r = h2.get(f"{base}/static/digits.txt", headers={"Range": "bytes=100-199"})
        assert (r.status_code, r.content) == (206, DIGITS[100:200])
        assert r.headers["content-range"] == f"bytes 100-199/{len(DIGITS)}"
        r = h2.head(f"{base}/static/big.bin")
        assert (r.status_code, r.headers["content-length"], r.content) == (200, str(BIG_SIZE), b"")
        r = h2.get(f"{base}/static/big.bin")
        assert r.content == tree.big
        r = h2.get(f"{base}/static/pre.txt", headers={"Accept-Encoding": "gzip"})
        assert r.headers.get("content-encoding") == "gzip"
        assert r.content == PRE  # httpx decodes it
        r = h2.get(f"{base}/static/%2e%2e/secret.txt")
        assert r.status_code in (400, 404) and SECRET not in r.content
        assert h2.get(f"{base}/other").content == APP_ANSWER


# -- TLS -----------------------------------------------------------------------------------


def _wait_tls(server: Server, ctx: ssl.SSLContext, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with (
                socket.create_connection((server.host, server.port), timeout=5) as raw,
                ctx.wrap_socket(raw, server_hostname=server.host),
            ):
                return
        except OSError:
            if server.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no TLS service:\n{server.log()}")
            time.sleep(0.1)


@pytest.mark.parametrize(
    "worker_app",
    [("rsgi", "lifecycle_app:rsgi_app"), ("gthread", "lifecycle_app:app")],
    ids=["rsgi", "gthread"],
)
def test_over_tls(start_server, tree, pki, worker_app):
    worker, app = worker_app
    server = start_server(
        app, "-k", worker, "--static-map", f"/static={tree.public}",
        "--certfile", str(pki / "server.pem"), "--keyfile", str(pki / "server.key"), wait=False,
    )  # fmt: skip
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    _wait_tls(server, ctx)
    conn = http.client.HTTPSConnection(server.host, server.port, context=ctx, timeout=30)
    try:
        for path, headers, want_status, want in (
            ("/static/hello.txt", {}, 200, HELLO),
            ("/static/digits.txt", {"Range": "bytes=-10"}, 206, DIGITS[-10:]),
            ("/static/big.bin", {}, 200, tree.big),  # no sendfile under TLS: encrypted bytes
            ("/static/pre.txt", {"Accept-Encoding": "gzip"}, 200, tree.gz),
            ("/static/hello.txt", {}, 200, HELLO),
        ):
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (want_status, want), path
    finally:
        conn.close()
    if worker == "rsgi":
        with httpx.Client(http2=True, verify=ctx, timeout=30) as client:
            r = client.get(f"https://{server.host}:{server.port}/static/big.bin")
            assert r.http_version == "HTTP/2"
            assert r.content == tree.big
