"""The example applications, served by the real `supervise` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from conftest import REPO_DIR
from test_tls import client_context, start_tls
from test_tls import pki as tls_pki  # noqa: F401 - the fixture, as `tls_pki`

EXAMPLES = REPO_DIR / "examples"


def test_hello_example(start_server):
    server = start_server("hello_wsgi:app", cwd=EXAMPLES)
    status, headers, body = server.get("/")
    assert (status, body) == (200, b"Hello, world!\n")
    assert headers["content-type"] == "text/plain; charset=utf-8"


@pytest.mark.parametrize("worker", ["sync", "native"])
def test_flask_app(start_server, worker):
    pytest.importorskip("flask")
    server = start_server("app:app", "-w", "2", "-k", worker, cwd=EXAMPLES / "flask_app")
    assert server.get("/")[2] == b"Hello from Flask"

    status, _, body = server.get("/hello/ada")
    assert status == 200
    assert json.loads(body) == {"greeting": "Hello, ada!", "scheme": "http"}

    status, _, body = server.get(
        "/echo", method="POST", body=b'{"a": [1, 2]}', headers={"Content-Type": "application/json"}
    )
    assert (status, json.loads(body)) == (200, {"json": {"a": [1, 2]}})
    status, _, body = server.get(
        "/echo",
        method="POST",
        body=b"name=ada&lang=en",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert json.loads(body)["form"] == {"name": "ada", "lang": "en"}

    status, headers, body = server.get("/stream")
    assert headers.get("transfer-encoding") == "chunked"
    assert body == b"".join(f"line {i}\n".encode() for i in range(5))

    status, headers, body = server.get("/files/notes.txt")
    assert status == 200
    assert body == (EXAMPLES / "flask_app" / "static" / "notes.txt").read_bytes()
    assert headers["content-length"] == str(len(body))

    assert server.get("/boom")[0] == 500
    assert server.get("/missing")[0] == 404


@pytest.mark.parametrize(
    "args",
    [
        ["mysite.wsgi:application"],
        ["-k", "native", "mysite.wsgi:application"],
        ["-k", "asgi", "mysite.asgi:application"],
    ],
    ids=["wsgi", "native", "asgi"],
)
def test_django_project(start_server, tmp_path, args):
    pytest.importorskip("django")
    project = EXAMPLES / "django_project"
    env = {"DJANGO_DB": str(tmp_path / "db.sqlite3")}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=project,
        env={**_base_env(), **env},
        check=True,
        capture_output=True,
        timeout=120,
    )
    server = start_server(*args, "-w", "2", cwd=project, env=env)

    status, _, body = server.get("/")
    assert status == 200
    assert body == f"Hello from Django at http://127.0.0.1:{server.port}/".encode()

    status, _, body = server.get(
        "/notes/",
        method="POST",
        body=json.dumps({"title": "first", "body": "served by supervise"}),
        headers={"Content-Type": "application/json"},
    )
    assert status == 201
    note = json.loads(body)
    assert note["title"] == "first"

    status, _, body = server.get("/notes/")
    assert json.loads(body) == {"notes": [note]}
    assert json.loads(server.get(f"/notes/{note['id']}/")[2]) == note
    assert server.get("/notes/999/")[0] == 404
    # StreamingHttpResponse: no length given, so chunked on every worker class.
    status, headers, body = server.get("/stream/")
    assert status == 200 and body == b"".join(b"line %d\n" % i for i in range(5))
    assert headers.get("transfer-encoding") == "chunked", headers
    # Behind a trusted proxy, Django builds https URLs without any setting of its own.
    status, _, body = server.get("/", headers={"X-Forwarded-Proto": "https"})
    assert body.startswith(b"Hello from Django at https://")


def _base_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


@pytest.mark.parametrize("worker", ["asgi", "native"])
def test_fastapi_app(start_server, worker):
    pytest.importorskip("fastapi")
    from websockets.sync.client import connect

    server = start_server("-k", worker, "-w", "2", "main:app", cwd=EXAMPLES / "fastapi_app")
    status, _, body = server.get("/")
    assert (status, json.loads(body)) == (200, {"message": "Hello from FastAPI", "scheme": "http"})
    assert json.loads(server.get("/items/7?q=x")[2]) == {"item_id": 7, "q": "x"}
    assert server.get("/items/seven")[0] == 422
    status, _, body = server.get(
        "/echo", method="POST", body=b'{"a": [1, 2]}', headers={"Content-Type": "application/json"}
    )
    assert (status, json.loads(body)) == (200, {"json": {"a": [1, 2]}})

    status, headers, body = server.get("/stream")
    assert headers.get("transfer-encoding") == "chunked"
    assert body == b"".join(f"line {i}\n".encode() for i in range(5))

    status, headers, body = server.get("/files/notes.txt")
    assert status == 200
    assert body == (EXAMPLES / "fastapi_app" / "static" / "notes.txt").read_bytes()
    assert headers["content-length"] == str(len(body))
    assert server.get("/files/missing.txt")[0] == 404

    with connect(f"ws://127.0.0.1:{server.port}/ws", open_timeout=10) as ws:
        ws.send("hi")
        assert ws.recv(timeout=10) == "echo: hi"


def test_rsgi_app(start_server):
    server = start_server("-k", "rsgi", "-w", "2", "app:app", cwd=EXAMPLES / "rsgi_app")
    status, _, body = server.get("/")
    assert (status, body) == (200, b"Hello, world!\n")
    status, _, body = server.get("/json")
    assert (status, json.loads(body)) == (
        200,
        {"method": "GET", "http_version": "1.1", "scheme": "http"},
    )
    status, _, body = server.get("/echo", method="POST", body=b"x" * 100_000)
    assert (status, body) == (200, b"x" * 100_000)
    status, headers, body = server.get("/stream")
    assert headers.get("transfer-encoding") == "chunked"
    assert body == b"".join(f"line {i}\n".encode() for i in range(5))
    status, headers, body = server.get("/files/notes.txt")
    assert (status, body) == (200, (EXAMPLES / "rsgi_app" / "static" / "notes.txt").read_bytes())
    assert headers["content-length"] == str(len(body))
    assert server.get("/files/../app.py")[0] == 404
    assert server.get("/files/missing.txt")[0] == 404

    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{server.port}/ws", open_timeout=10) as ws:
        ws.send("hi")
        assert ws.recv(timeout=10) == "echo: hi"
        ws.send(b"\x00\x01")
        assert ws.recv(timeout=10) == b"\x00\x01"

    # The README's h2c: HTTP/2 with prior knowledge on the same port.
    with httpx.Client(http1=False, http2=True) as h2c:
        r = h2c.get(f"http://127.0.0.1:{server.port}/json")
    assert (r.http_version, r.json()["http_version"]) == ("HTTP/2", "2")


def test_rsgi_app_over_tls_negotiates_h2(start_server, tls_pki):  # noqa: F811
    """The README's `--certfile cert.pem --keyfile key.pem`: h2 by ALPN."""
    server = start_tls(start_server, tls_pki, "-k", "rsgi", "app:app", cwd=EXAMPLES / "rsgi_app")
    context = client_context(tls_pki)
    with httpx.Client(http2=True, verify=context) as client:
        r = client.get(f"https://127.0.0.1:{server.port}/json")
    assert r.http_version == "HTTP/2"
    assert r.json() == {"method": "GET", "http_version": "2", "scheme": "https"}
