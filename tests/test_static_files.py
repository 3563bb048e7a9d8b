"""Static file serving (--static-map PREFIX=DIR and its companions), black-box,
on every worker class: what a browser, a CDN and curl get back, and what an
attacker does not.

The app behind the server is tests/apps/lifecycle_app.py, which answers
``200 ok`` on any path it is given: a static answer is told from the app's by
its body, so "the app was not called" reads as "the answer is not the app's".
A ``secret.txt`` lies next to the served folder; its content must never come
back from a request that tries to leave the folder.

Servers are started once per worker class for these read-only checks (module
fixtures below). The companion settings are tested in
test_static_files_settings.py, HTTP/2 and TLS in test_static_files_protocols.py;
the folder and the helpers are tests/static_tree.py.
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import (
    Server,
    free_port,
    lifecycle_app,
    read_until_closed,
    shutdown,
    wait_until,
)
from ops_helpers import scrape
from static_tree import (
    APP_ANSWER,
    BIG_SIZE,
    BR,
    DIGITS,
    DIRECTORIES,
    EVERY_WORKER,
    HELLO,
    HIDDEN,
    MTIME,
    NUL,
    PRE,
    SECRET,
    TRAVERSALS,
    TYPES,
    ZST,
    Tree,
    assert_static_refusal,
    build_tree,
    http_date,
    is_strong_etag,
    media,
    start_serving,
    vary_names,
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    return build_tree(tmp_path_factory.mktemp("static"))


# -- one server per worker class for the read-only checks ------------------------


@pytest.fixture(scope="module", params=EVERY_WORKER)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@dataclass
class Served:
    server: Server
    access_log: Path
    metrics: str  # HOST:PORT of --metrics-bind


@pytest.fixture(scope="module")
def served(kind: str, tree: Tree, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The default settings: only --static-map (plus an access log and metrics)."""
    work = tmp_path_factory.mktemp(f"plain-{kind}")
    access = work / "access.log"
    metrics = f"127.0.0.1:{free_port()}"
    args = [lifecycle_app(kind), "-k", kind, "--static-map", f"/static={tree.public}"]
    args += ["--access-logfile", str(access), "--metrics-bind", metrics]
    server = start_serving(args, work / "server.log")
    yield Served(server, access, metrics)
    shutdown(server)


# -- helpers ---------------------------------------------------------------------


class Client:
    """One http.client connection, reopened by http.client when the server
    closes it: a body sent where none belongs (HEAD, 304) breaks the next
    answer on a kept-alive connection, so checks run in a row on one."""

    def __init__(self, server: Server) -> None:
        self.conn = server.http(timeout=30)

    def __call__(
        self, path: str, headers: dict | None = None, method: str = "GET", body=None
    ) -> tuple[int, dict[str, str], bytes]:
        self.conn.request(method, path, body=body, headers=headers or {})
        resp = self.conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def client(served: Served) -> Iterator[Client]:
    c = Client(served.server)
    yield c
    c.close()


# -- GET, HEAD and the other methods ---------------------------------------------


def test_a_file_comes_with_its_headers(client, served, tree):
    status, headers, body = client("/static/hello.txt")
    assert (status, body) == (200, HELLO)
    assert media(headers) == "text/plain;charset=utf-8"
    assert headers["content-length"] == str(len(HELLO))
    assert is_strong_etag(headers.get("etag")), headers.get("etag")
    assert headers["last-modified"] == http_date(MTIME)
    assert email.utils.parsedate_to_datetime(headers["last-modified"]).timestamp() == MTIME
    assert headers["accept-ranges"] == "bytes"
    assert "cache-control" not in headers  # --static-cache-control is unset
    # HEAD: the same head, no body (the next answer on the connection is intact).
    status, head, body = client("/static/hello.txt", method="HEAD")
    assert (status, body) == (200, b"")
    for name in ("content-type", "content-length", "etag", "last-modified", "accept-ranges"):
        assert head.get(name) == headers[name], name
    assert client("/static/hello.txt?v=3")[::2] == (200, HELLO)  # a query changes nothing
    # The same file again: the same validator.
    assert client("/static/hello.txt")[1]["etag"] == headers["etag"]


@pytest.mark.parametrize("name", sorted(TYPES))
def test_content_types_follow_the_extension(served, name):
    types, content = TYPES[name]
    status, headers, body = served.server.get(f"/static/{name}")
    assert (status, body) == (200, content)
    assert media(headers) in types, headers.get("content-type")


def test_other_methods_are_refused_with_allow(client):
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, headers, body = client("/static/hello.txt", method=method, body=b"x")
        assert status == 405, method
        assert headers.get("allow", "").replace(" ", "") == "GET,HEAD", method
        assert body != APP_ANSWER
    assert client("/static/hello.txt")[::2] == (200, HELLO)


def test_the_body_of_a_refused_request_is_never_a_request(served):
    """A 405 answered before the app must still read the request's body: left on
    the connection, its bytes would be parsed as the next request (here one the
    client never sent, to the app)."""
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"
    head = b"POST /static/hello.txt HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n"
    for _ in range(10):
        with served.server.connect() as sock:
            # The body a moment after the head, as http.client sends them: it
            # arrives after the answer has been decided.
            sock.sendall(head % len(smuggled))
            time.sleep(0.02)
            sock.sendall(smuggled)
            first = b""
            while b"\r\n\r\n" not in first:
                chunk = sock.recv(65536)
                assert chunk, first
                first += chunk
            closing = re.search(rb"(?im)^connection: *close\r$", first.split(b"\r\n\r\n")[0])
            if not closing:
                sock.sendall(
                    b"GET /static/hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
                )
            answer = first + read_until_closed(sock)
        statuses = re.findall(rb"HTTP/1\.1 (\d{3})", answer)
        want = [b"405"] if closing else [b"405", b"200"]
        assert statuses == want, answer[:600]  # nothing answered for /smuggled
        assert closing or answer.endswith(HELLO), answer[-200:]


def test_paths_are_percent_decoded_once(client):
    assert client("/static/a%20b.txt")[::2] == (200, b"a space in the name\n")
    assert client("/static/a%2520b.txt")[::2] == (200, b"a literal percent sign in the name\n")
    assert client("/static/caf%C3%A9.txt")[::2] == (200, b"utf-8 name\n")
    assert client("/static/sub/nested.txt")[::2] == (200, b"nested\n")


def test_paths_outside_the_prefix_go_to_the_app(client):
    for path in ("/staticx/hello.txt", "/staticx", "/STATIC/hello.txt", "/hello.txt", "/"):
        assert client(path)[::2] == (200, APP_ANSWER), path


# -- conditional requests and ranges ---------------------------------------------


def test_conditional_requests(client):
    status, headers, _ = client("/static/hello.txt")
    etag = headers["etag"]
    for condition in (
        {"If-None-Match": etag},
        {"If-None-Match": "*"},
        {"If-None-Match": f'"nope", {etag}'},
        {"If-Modified-Since": http_date(MTIME)},
        {"If-Modified-Since": http_date(MTIME + 3600)},
        # If-None-Match decides when both are there.
        {"If-None-Match": etag, "If-Modified-Since": http_date(MTIME - 3600)},
    ):
        status, got, body = client("/static/hello.txt", headers=condition)
        assert (status, body) == (304, b""), condition
        assert got.get("etag") == etag, condition
    for condition in (
        {"If-None-Match": '"nope"'},
        {"If-Modified-Since": http_date(MTIME - 1)},
        {"If-None-Match": '"nope"', "If-Modified-Since": http_date(MTIME + 3600)},
    ):
        assert client("/static/hello.txt", headers=condition)[::2] == (200, HELLO), condition
    # The connection survived every 304: no body was sent after any of them.
    assert client("/static/digits.txt")[::2] == (200, DIGITS)


def _range(client: Client, spec: str, path: str = "/static/digits.txt", **more: str):
    return client(path, headers={"Range": spec, **more})


def test_single_ranges(client):
    size = len(DIGITS)
    for spec, first, last in (
        ("bytes=0-9", 0, 9),
        ("bytes=10-10", 10, 10),
        ("bytes=990-", 990, size - 1),
        ("bytes=-5", size - 5, size - 1),
        ("bytes=995-5000", 995, size - 1),  # an end past the file stops at its end
        ("bytes=0-", 0, size - 1),
    ):
        status, headers, body = _range(client, spec)
        assert status == 206, spec
        assert headers["content-range"] == f"bytes {first}-{last}/{size}", spec
        assert body == DIGITS[first : last + 1], spec
        assert headers["content-length"] == str(last - first + 1), spec
        assert media(headers) == "text/plain;charset=utf-8", spec
    for spec in ("bytes=1000-", "bytes=5000-6000"):
        status, headers, body = _range(client, spec)
        assert status == 416, spec
        assert headers["content-range"] == f"bytes */{size}", spec
        assert DIGITS not in body
    # Several ranges: the whole file.
    assert _range(client, "bytes=0-1,5-6")[::2] == (200, DIGITS)
    assert client("/static/hello.txt")[::2] == (200, HELLO)


def test_if_range(client):
    etag = client("/static/digits.txt")[1]["etag"]
    status, headers, body = _range(client, "bytes=0-3", **{"If-Range": etag})
    assert (status, body, headers["content-range"]) == (206, b"0123", f"bytes 0-3/{len(DIGITS)}")
    for stale in ('"not-the-etag"', http_date(MTIME - 86400)):
        status, headers, body = _range(client, "bytes=0-3", **{"If-Range": stale})
        assert (status, body) == (200, DIGITS), stale
        assert "content-range" not in headers


# -- precompressed siblings ------------------------------------------------------


def test_precompressed_siblings(client, tree):
    plain_type = "text/plain;charset=utf-8"
    for accept, coding, content in (
        ("gzip, deflate, br, zstd", "br", BR),
        ("zstd, gzip, br", "br", BR),
        ("gzip, zstd", "zstd", ZST),
        ("gzip", "gzip", tree.gz),
        ("br;q=0, zstd;q=0, gzip", "gzip", tree.gz),
        ("br;q=0, gzip;q=0.5, zstd;q=0.8", "zstd", ZST),
    ):
        status, headers, body = client("/static/pre.txt", headers={"Accept-Encoding": accept})
        assert (status, headers.get("content-encoding"), body) == (200, coding, content), accept
        assert headers["content-length"] == str(len(content)), accept
        assert media(headers) == plain_type, accept
        assert "accept-encoding" in vary_names(headers), accept
    # No acceptable sibling: the file itself, still varying on Accept-Encoding.
    for accept in (None, "identity", "deflate", "br;q=0, zstd;q=0, gzip;q=0"):
        status, headers, body = client(
            "/static/pre.txt", headers={"Accept-Encoding": accept} if accept else {}
        )
        assert (status, body) == (200, PRE), accept
        assert headers.get("content-encoding", "identity") == "identity", accept
        assert headers["content-length"] == str(len(PRE)), accept
        assert "accept-encoding" in vary_names(headers), accept
    # br is preferred, but only where there is one.
    status, headers, body = client(
        "/static/pre2.txt", headers={"Accept-Encoding": "br, gzip, zstd"}
    )
    assert (status, headers.get("content-encoding"), body) == (200, "zstd", ZST)
    status, headers, body = client("/static/only-gz.txt", headers={"Accept-Encoding": "br, zstd"})
    assert (status, body) == (200, DIGITS)
    assert "content-encoding" not in headers


def test_ranges_apply_to_the_bytes_sent(client, tree):
    status, headers, body = client(
        "/static/pre.txt", headers={"Accept-Encoding": "gzip", "Range": "bytes=0-3"}
    )
    assert (status, headers.get("content-encoding"), body) == (206, "gzip", tree.gz[:4])
    assert headers["content-range"] == f"bytes 0-3/{len(tree.gz)}"
    status, headers, body = client("/static/pre.txt", headers={"Range": "bytes=-6"})
    assert (status, body) == (206, PRE[-6:])
    assert headers["content-range"] == f"bytes {len(PRE) - 6}-{len(PRE) - 1}/{len(PRE)}"


def test_traversal_never_leaves_the_folder(client):
    answers = {path: client(path)[::2] for path in [*TRAVERSALS, *NUL]}
    wrong = {
        path: got
        for path, got in answers.items()
        if got[0] not in (400, 404) or got[1] == APP_ANSWER or SECRET in got[1]
        or b"root:" in got[1]
    }  # fmt: skip
    assert not wrong, f"not refused: {wrong}"
    # The connection is fine (or reopened) and serving afterwards.
    assert client("/static/hello.txt")[::2] == (200, HELLO)


def test_traversal_in_raw_requests(served):
    """Request targets a client library would tidy up, sent as bytes."""
    for target in (b"/static/../secret.txt", b"/static/./../secret.txt", b"/static//../secret.txt"):
        answer = served.server.raw(
            b"GET " + target + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        )
        assert answer.startswith((b"HTTP/1.1 400", b"HTTP/1.1 404", b"HTTP/1.0 400")), answer[:200]
        assert SECRET not in answer


def test_pipelined_static_and_app_requests_are_answered_in_order(served, kind):
    """One write, six requests: a loop that answers files itself and hands
    the app its own must keep their order and their bytes apart."""
    if kind == "sync":
        pytest.skip("the sync worker answers one request per connection")
    requests = b"".join(
        b"GET " + target + b" HTTP/1.1\r\nHost: t\r\n\r\n"
        for target in (b"/static/hello.txt", b"/", b"/static/digits.txt", b"/static/nope", b"/")
    )
    answer = served.server.raw(requests + b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    bodies = [HELLO, APP_ANSWER, DIGITS, None, APP_ANSWER, APP_ANSWER]
    for body in bodies:
        head, _, answer = answer.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
        got, answer = answer[:length], answer[length:]
        if body is None:
            assert head.startswith(b"HTTP/1.1 404"), head
        else:
            assert head.startswith(b"HTTP/1.1 200"), head
            assert got == body
    assert answer == b""


def test_hidden_files_directories_and_missing_files_are_404(client):
    paths = [*HIDDEN, *DIRECTORIES, "/static/nope.txt", "/static/sub/nope.txt"]
    answers = {path: client(path)[::2] for path in paths}
    leaks = (SECRET, b"CONTENT", b"HIDDEN-FILE", b"nested.txt")  # no listing either
    wrong = {
        path: got
        for path, got in answers.items()
        if got[0] != 404 or got[1] == APP_ANSWER or any(leak in got[1] for leak in leaks)
    }
    assert not wrong, f"not a plain 404: {wrong}"


def test_symlinks(client):
    assert client("/static/link-inside.txt")[::2] == (200, HELLO)
    for path in ("/static/link-outside.txt", "/static/linkdir/secret.txt"):
        status, _, body = client(path)
        assert_static_refusal(status, body, path)


# -- the file on disk is the truth ---------------------------------------------------


def test_a_changed_file_is_served_at_once(client, tree, kind):
    name = f"changing-{kind}-{kind.interface}.txt"
    path = tree.public / name
    url = f"/static/{name}"
    assert_static_refusal(*client(url)[::2], url)  # not there yet

    path.write_bytes(b"first")
    os.utime(path, (MTIME, MTIME))
    status, headers, body = client(url)
    assert (status, body) == (200, b"first")
    first = headers["etag"]

    path.write_bytes(b"second!")  # another size, the same mtime
    os.utime(path, (MTIME, MTIME))
    status, headers, body = client(url)
    assert (status, body) == (200, b"second!")
    second = headers["etag"]
    assert second != first

    os.utime(path, (MTIME + 100, MTIME + 100))  # the same size, another mtime
    status, headers, body = client(url)
    assert (status, body) == (200, b"second!")
    third = headers["etag"]
    assert third not in (first, second)
    assert headers["last-modified"] == http_date(MTIME + 100)
    assert client(url, headers={"If-None-Match": second})[::2] == (200, b"second!")
    assert client(url, headers={"If-None-Match": third})[0] == 304

    path.unlink()
    assert_static_refusal(*client(url)[::2], url)


def test_a_large_file_is_byte_identical(client, tree):
    status, headers, body = client("/static/big.bin")
    assert status == 200
    assert headers["content-length"] == str(BIG_SIZE)
    assert hashlib.sha256(body).digest() == hashlib.sha256(tree.big).digest()
    # A range from the middle (an offset into the file), then the connection goes on.
    status, headers, body = _range(client, "bytes=4000000-4999999", path="/static/big.bin")
    assert status == 206
    assert body == tree.big[4_000_000:5_000_000]
    assert client("/static/hello.txt")[::2] == (200, HELLO)


# -- static answers are requests -----------------------------------------------------


def _settled_requests(address: str) -> float:
    """supervise_requests_total once it stops moving (workers publish about once a second)."""
    last = [-1.0]

    def settled() -> float | None:
        now = scrape(address)["supervise_requests_total"]
        if now == last[0]:
            return now
        last[0] = now
        time.sleep(1.2)
        return None

    return wait_until(settled, timeout=30)


def test_static_answers_are_logged_and_counted(served):
    server = served.server
    before = _settled_requests(served.metrics)
    marker = f"m{time.monotonic_ns()}"
    assert server.get(f"/static/hello.txt?{marker}")[0] == 200
    assert server.get(f"/static/nope-{marker}.txt")[0] == 404
    for _ in range(3):
        assert server.get("/static/digits.txt", headers={"Range": "bytes=0-0"})[0] == 206
    wait_until(lambda: f"/static/nope-{marker}.txt" in served.access_log.read_text())
    log = served.access_log.read_text()
    assert re.search(rf'"GET /static/hello\.txt\?{marker} HTTP/1\.1" 200 ', log), log[-2000:]
    assert re.search(rf'"GET /static/nope-{marker}\.txt HTTP/1\.1" 404 ', log), log[-2000:]
    wait_until(lambda: scrape(served.metrics)["supervise_requests_total"] >= before + 5)


def test_without_immutable_a_hashed_name_gets_no_cache_control(served):
    status, headers, _ = served.server.get("/static/app.3f2a9c1b.js")
    assert status == 200
    assert "cache-control" not in headers


# -- a real client ---------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_curl(served, tree, tmp_path):
    base = f"http://{served.server.host}:{served.server.port}"

    def curl(*args: str) -> tuple[str, bytes]:
        out = tmp_path / "body"
        out.unlink(missing_ok=True)  # curl writes no file for an answer without a body
        done = subprocess.run(
            ["curl", "-sS", "-o", str(out), "-w", "%{http_code}", *args],
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.decode(), out.read_bytes() if out.exists() else b""

    # --compressed asks for every coding curl decodes; only a gzip sibling is there.
    headers = tmp_path / "headers"
    code, body = curl("--compressed", "-D", str(headers), f"{base}/static/only-gz.txt")
    assert (code, body) == ("200", DIGITS)
    assert re.search(r"(?im)^content-encoding: *gzip\r?$", headers.read_text())
    assert curl("-r", "10-19", f"{base}/static/digits.txt") == ("206", DIGITS[10:20])
    assert curl("-r", "-3", f"{base}/static/digits.txt") == ("206", DIGITS[-3:])
    assert curl("-z", http_date(MTIME + 60), f"{base}/static/hello.txt") == ("304", b"")
    assert curl("-z", http_date(MTIME - 60), f"{base}/static/hello.txt") == ("200", HELLO)
    assert curl(f"{base}/static/big.bin") == ("200", tree.big)
    assert curl(f"{base}/static/..%2fsecret.txt")[1].find(SECRET) == -1
