"""HTTP/2 on the rsgi worker, in clear text (h2c with prior knowledge): what
real HTTP/2 clients (httpx, curl, h2load, and a frame-level client on the
`h2` package) get from the real `supervise -k rsgi`.

TLS (h2 through ALPN) is in test_rsgi_tls.py; h2spec in test_h2spec.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import subprocess

import httpx
import pytest
from conftest import wait_until
from h2_client import H2Client
from hyperframe import frame as hf

ENHANCE_YOUR_CALM = 0xB

APP = "rsgi_apps:app"


def url(server, path: str) -> str:
    return f"http://{server.host}:{server.port}{path}"


def h2c() -> httpx.Client:
    """HTTP/2 with prior knowledge: no HTTP/1.1 at all."""
    return httpx.Client(http1=False, http2=True, timeout=15)


def frames(server) -> H2Client:
    return H2Client(server.connect(), authority=f"{server.host}:{server.port}")


def test_scope_over_http2(rsgi):
    server = rsgi("--access-logfile", "-")
    with h2c() as client:
        r = client.get(url(server, "/scope?a=1"), headers=[("x-dup", "one"), ("x-dup", "two")])
    assert r.http_version == "HTTP/2"
    assert r.status_code == 200
    scope = r.json()
    assert scope["http_version"] == "2"
    assert scope["scheme"] == "http"
    assert scope["method"] == "GET"
    assert scope["path"] == "/scope" and scope["query_string"] == "a=1"
    # :authority stands in for Host, which HTTP/2 clients do not send.
    assert scope["authority"] == f"{server.host}:{server.port}"
    assert scope["x_dup_all"] == ["one", "two"]
    assert not [k for k in scope["keys"] if k.startswith(":")]
    server.wait_for_log(r'"GET /scope\?a=1 HTTP/2" 200')


def test_http1_still_served_next_to_http2(rsgi):
    server = rsgi()
    r = httpx.get(url(server, "/scope"))
    assert (r.http_version, r.json()["http_version"]) == ("HTTP/1.1", "1.1")
    with h2c() as client:
        assert client.get(url(server, "/scope")).json()["http_version"] == "2"


def test_cookie_crumbs_reach_the_app_as_one_field(rsgi):
    # RFC 9113 8.2.3: a client may split the cookie field; the app gets it joined.
    server = rsgi()
    client = frames(server)
    stream = client.request("/scope", headers=[("cookie", "a=1"), ("cookie", "b=2")])
    response = client.finish(stream)
    assert response.ended and response.headers[":status"] == "200"
    items = json.loads(response.body)["items"]
    assert [v for k, v in items if k == "cookie"] == ["a=1; b=2"]


def test_request_bodies_stream_in_over_http2(rsgi):
    server = rsgi()
    # Larger than the 1 MiB stream window: flow control must hand out more.
    payload = bytes(range(256)) * 12_000

    def parts():
        for i in range(0, len(payload), 100_000):
            yield payload[i : i + 100_000]

    with h2c() as client:
        r = client.post(url(server, "/stream-in"), content=parts())
        assert r.http_version == "HTTP/2"
        assert r.json()["total"] == len(payload)
        echoed = client.post(url(server, "/echo"), content=payload)
        assert echoed.content == payload
        assert echoed.headers["x-second-read"] == "refused"


def test_responses_stream_and_files_over_http2(rsgi, tmp_path):
    server = rsgi()
    data = bytes(range(256)) * 20_000
    (tmp_path / "f.bin").write_bytes(data)
    with h2c() as client:
        r = client.get(url(server, "/stream-out?n=50&size=70000"))
        assert len(r.content) == 50 * 70000 + 3 and r.content.endswith(b"end")
        f = client.get(url(server, f"/file?path={tmp_path / 'f.bin'}"))
        assert f.content == data
        assert f.headers["content-length"] == str(len(data))
        part = client.get(url(server, f"/file?path={tmp_path / 'f.bin'}&start=10&end=20"))
        assert (part.status_code, part.content) == (206, data[10:20])
        empty = client.get(url(server, "/empty"))
        assert (empty.status_code, empty.content) == (204, b"")


def test_many_streams_share_one_connection(rsgi):
    server = rsgi()

    async def run() -> list[dict]:
        async with httpx.AsyncClient(http1=False, http2=True, timeout=20) as client:
            rs = await asyncio.gather(
                *(client.get(url(server, f"/scope?i={i}")) for i in range(40))
            )
            return [r.json() for r in rs]

    scopes = asyncio.run(run())
    assert sorted(int(s["query_string"][2:]) for s in scopes) == list(range(40))
    assert len({s["client"] for s in scopes}) == 1  # one connection, 40 streams


def test_app_errors_over_http2(rsgi):
    server = rsgi()
    with h2c() as client:
        r = client.get(url(server, "/raise"))
        assert r.status_code == 500
        assert "connection" not in r.headers
        assert client.get(url(server, "/no-response")).status_code == 500
        # The connection survives a failed stream.
        assert client.get(url(server, "/text")).text == "héllo"
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(url(server, "/raise-after-start"))
        assert client.get(url(server, "/text")).status_code == 201
    server.wait_for_log("boom after the response started")


def test_limits_apply_to_http2_requests(rsgi):
    server = rsgi("--limit-request-body", "1000", "--limit-request-fields", "20")
    with h2c() as client:
        assert client.get(url(server, "/" + "a" * 5000)).status_code == 414
        many = [(f"x-h{i}", "v") for i in range(25)]
        assert client.get(url(server, "/scope"), headers=many).status_code == 431
        big = client.post(url(server, "/echo"), content=b"x" * 2000)
        assert big.status_code == 413
        chunked = client.post(url(server, "/echo"), content=iter([b"x" * 800, b"x" * 800]))
        assert chunked.status_code == 413
        # Each of them failed one stream, not the connection.
        assert client.get(url(server, "/text")).status_code == 201


def test_a_host_that_contradicts_the_authority_is_refused(rsgi):
    server = rsgi()
    client = frames(server)
    stream = client.request("/scope", headers=[("host", "elsewhere.example")])
    assert client.finish(stream).headers[":status"] == "400"


def test_curl_prior_knowledge(rsgi):
    if shutil.which("curl") is None:
        pytest.skip("needs curl")
    server = rsgi()
    out = subprocess.run(
        ["curl", "-sS", "--http2-prior-knowledge", "-w", "\n%{http_version}",
         "-d", "hello curl", url(server, "/echo")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == "hello curl\n2"


def test_h2load(rsgi):
    if shutil.which("h2load") is None:
        pytest.skip("needs h2load (Debian nghttp2-client)")
    server = rsgi()
    out = subprocess.run(
        ["h2load", "-n", "2000", "-c", "4", "-m", "16", url(server, "/text")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Application protocol: h2c" in out.stdout
    assert re.search(r"requests: 2000 total, 2000 started, 2000 done, 2000 succeeded", out.stdout)
    assert "status codes: 0 2xx" not in out.stdout
    assert re.search(r"status codes: 2000 2xx", out.stdout), out.stdout


def test_http_1_only_refuses_the_http2_preface(rsgi):
    server = rsgi("--http", "1")
    with h2c() as client, pytest.raises(httpx.HTTPError):
        client.get(url(server, "/text"))
    assert httpx.get(url(server, "/text")).status_code == 201


def test_http_2_only_refuses_http1(start_server, marks):
    server = start_server("-k", "rsgi", "--http", "2", APP, wait=False)
    with h2c() as client:
        r = wait_until(lambda: _try(client, url(server, "/text")), timeout=20)
    assert r.http_version == "HTTP/2"
    reply = server.raw(b"GET /text HTTP/1.1\r\nHost: t\r\n\r\n")
    assert not reply.startswith(b"HTTP/1.1")


def _try(client: httpx.Client, target: str) -> httpx.Response | None:
    try:
        return client.get(target)
    except httpx.TransportError:
        return None


def test_goaway_on_term_lets_the_stream_in_flight_finish(rsgi, marks):
    server = rsgi("--graceful-timeout", "20")
    client = frames(server)
    stream = client.request("/sleep?s=1.5")
    wait_until(lambda: (marks / "sleeping").exists())
    server.signal(signal.SIGTERM)
    client.until(lambda c: bool(c.goaways))
    # GOAWAY comes while the app still sleeps, and says NO_ERROR: a graceful one
    # that still counts our stream in.
    response = client.streams[stream]
    assert client.goaways and not response.ended
    assert [g.error_code for g in client.goaways] == [0] * len(client.goaways)
    client.until(lambda c: c.closed, timeout=20)
    assert client.goaways[-1].last_stream_id >= stream
    assert response.ended and response.reset is None
    assert (response.headers[":status"], response.body) == ("200", b"slept")
    assert server.proc.wait(20) == 0


def test_idle_http2_connection_gets_goaway(rsgi):
    server = rsgi("--keep-alive", "1")
    client = frames(server)
    stream = client.request("/text")
    assert client.finish(stream).headers[":status"] == "201"
    # Then nothing: the server says GOAWAY and closes (keepalive, 1 to 1.5 s).
    client.until(lambda c: False, timeout=15)
    assert client.closed
    assert client.goaways and client.goaways[-1].error_code == 0


def head_block(client: H2Client, path: str) -> bytes:
    return client.encoder.encode(
        [(":method", "GET"), (":scheme", "http"), (":authority", client.authority), (":path", path)]
    )


def test_rapid_reset_gets_goaway(rsgi):
    # CVE-2023-44487: open streams and cancel them at once, faster than the
    # server can serve them. hyper's pending-accept reset bound answers GOAWAY.
    server = rsgi()
    client = frames(server)
    burst = b""
    for i in range(200):
        head = hf.HeadersFrame(1 + 2 * i)
        head.data = head_block(client, "/sleep?s=1")
        head.flags.add("END_HEADERS")
        head.flags.add("END_STREAM")
        reset = hf.RstStreamFrame(1 + 2 * i)
        reset.error_code = 0x8  # CANCEL
        burst += head.serialize() + reset.serialize()
    client.send(burst)
    client.until(lambda c: bool(c.goaways))
    assert [g.error_code for g in client.goaways] == [ENHANCE_YOUR_CALM]
    assert client.goaways[0].last_stream_id < 199
    assert server.is_serving()


def test_continuation_flood_gets_goaway(rsgi):
    # A header block that never ends (CONTINUATION after CONTINUATION) must not
    # be buffered without bound: http2_max_headers_size stops it.
    server = rsgi()
    client = frames(server)
    head = hf.HeadersFrame(1)
    head.data = head_block(client, "/text")
    client.send(head.serialize())
    sent = 0
    while sent < 16 * 1024 * 1024:
        more = hf.ContinuationFrame(1)
        more.data = client.encoder.encode([(f"x-h{sent}", "v" * 8000)])
        if not client.send(more.serialize()):
            break
        sent += len(more.data)
    client.until(lambda c: False)
    assert sent < 1024 * 1024
    assert [g.error_code for g in client.goaways] == [ENHANCE_YOUR_CALM]
    assert client.streams == {}  # no stream ever reached the app
    assert server.is_serving()


def test_keep_alive_pings_reach_a_quiet_client(rsgi):
    server = rsgi("--keep-alive", "10", "--http2-keep-alive-interval", "1")
    client = frames(server)
    stream = client.request("/text")
    assert client.finish(stream).headers[":status"] == "201"

    def pinged(c: H2Client) -> bool:
        return any(isinstance(f, hf.PingFrame) and "ACK" not in f.flags for f in c.frames)

    client.until(pinged, timeout=8)
    assert pinged(client) and not client.closed  # answered (the client acks), kept open


def test_http2_settings_reach_the_client(rsgi):
    server = rsgi(
        "--http2-max-concurrent-streams", "17", "--http2-initial-stream-window-size", "100000",
        "--http2-max-frame-size", "32768", "--http2-max-headers-size", "20000",
        "--http2-keep-alive-interval", "5",
    )  # fmt: skip
    client = frames(server)
    stream = client.request("/text")
    assert client.finish(stream).headers[":status"] == "201"
    announced = {}
    for frame in client.frames:
        if isinstance(frame, hf.SettingsFrame) and "ACK" not in frame.flags:
            announced.update(frame.settings)
    assert announced[hf.SettingsFrame.MAX_CONCURRENT_STREAMS] == 17
    assert announced[hf.SettingsFrame.INITIAL_WINDOW_SIZE] == 100000
    assert announced[hf.SettingsFrame.MAX_FRAME_SIZE] == 32768
    assert announced[hf.SettingsFrame.MAX_HEADER_LIST_SIZE] == 20000
