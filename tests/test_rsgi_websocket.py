"""WebSockets on `supervise -k rsgi`: RSGI's websocket protocol, the real
server, real sockets.

The websockets client where it shows what a user sees; raw sockets where a
client library would hide the behaviour (invalid handshakes, dropped
connections, pings, frames pipelined behind the upgrade). What the app
observed is read from the server log (tests/apps/rsgi_ws_apps.py prints it).
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from signal import SIGTERM

import pytest
import websockets
from conftest import read_until_closed, wait_until
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from ws_raw import KEY, close_code, frame, handshake, read_frame

APP = "rsgi_ws_apps:app"


@pytest.fixture
def serve(start_server):
    """serve(*extra_args, app=APP) -> a running `supervise -k rsgi` server."""

    def start(*args: str, app: str = APP):
        return start_server("-k", "rsgi", *args, app)

    return start


def url(server, path: str = "/") -> str:
    return f"ws://{server.host}:{server.port}{path}"


def upgrade_head(path: str = "/", version: str = "13", key: str = KEY) -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: {version}\r\n\r\n"
    ).encode()


# -- messages ------------------------------------------------------------------------


def test_echo_text_and_bytes_and_the_scope(serve) -> None:
    server = serve()
    with connect(url(server, "/info?a=1"), open_timeout=10) as ws:
        scope = json.loads(ws.recv(timeout=10))
        ws.send("héllo")
        assert ws.recv(timeout=10) == "héllo"
        ws.send(b"\x00\xffbytes")
        assert ws.recv(timeout=10) == b"\x00\xffbytes"
    assert scope["proto"] == "ws"
    assert scope["rsgi_version"] == "1.5"
    assert scope["http_version"] == "1.1"
    assert scope["scheme"] == "http"
    assert scope["method"] == "GET"
    assert scope["path"] == "/info"
    assert scope["query_string"] == "a=1"
    assert scope["authority"] == f"{server.host}:{server.port}"
    assert scope["headers"]["upgrade"] == "websocket"
    assert scope["server"] == f"127.0.0.1:{server.port}"


def test_plain_echo_function_app(serve) -> None:
    server = serve(app="rsgi_ws_apps:echo")
    with connect(url(server), open_timeout=10) as ws:
        ws.send("one")
        ws.send(b"two")
        assert ws.recv(timeout=10) == "one"
        assert ws.recv(timeout=10) == b"two"
    # The same app still answers plain HTTP requests on the same server.
    assert server.get("/")[2] == b"ws echo"


def test_send_bytes_takes_a_bytearray(serve) -> None:
    server = serve()
    with connect(url(server, "/bytearray"), open_timeout=10) as ws:
        assert ws.recv(timeout=10) == b"from a bytearray"


def test_large_fragmented_message_is_reassembled(serve) -> None:
    server = serve()
    sock, head = handshake(server)
    with sock:
        assert head.startswith(b"HTTP/1.1 101")
        part = b"p" * 70000
        sock.sendall(frame(0x2, part, fin=False) + frame(0x0, part, fin=False) + frame(0x0, part))
        assert read_frame(sock) == (0x2, part * 3)


def test_many_messages_both_ways_in_order(serve) -> None:
    server = serve()

    async def run() -> list[str]:
        async with websockets.connect(url(server), open_timeout=10) as ws:

            async def send_all() -> None:
                for i in range(3000):
                    await ws.send(f"m{i}")

            sender = asyncio.create_task(send_all())
            got = [await asyncio.wait_for(ws.recv(), 10) for _ in range(3000)]
            await sender
            return got

    assert asyncio.run(run()) == [f"m{i}" for i in range(3000)]


@pytest.mark.parametrize("mode", ["st", "mt"])
def test_sessions_on_two_runtime_threads(serve, mode: str) -> None:
    server = serve("--runtime-threads", "2", "--runtime-mode", mode)

    async def session(i: int) -> list[str]:
        async with websockets.connect(url(server), open_timeout=10) as ws:
            for j in range(50):
                await ws.send(f"{i}.{j}")
            return [await asyncio.wait_for(ws.recv(), 10) for _ in range(50)]

    async def run() -> list[list[str]]:
        return await asyncio.gather(*(session(i) for i in range(20)))

    for i, got in enumerate(asyncio.run(run())):
        assert got == [f"{i}.{j}" for j in range(50)]


def test_slow_reader_gets_every_message(serve) -> None:
    """send_bytes waits while the client does not read; nothing is lost."""
    server = serve()
    with connect(url(server, "/stream?n=64&size=65536"), open_timeout=10, max_size=None) as ws:
        time.sleep(1)  # the server's queue and the socket buffers fill up
        total = 0
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                total += len(ws.recv(timeout=10))
    assert total == 64 * 65536
    assert closed.value.rcvd.code == 1000  # the app returned after accepting


def test_frames_sent_with_the_handshake_are_kept(serve) -> None:
    """A client that pipelines its first frame behind the upgrade request loses nothing."""
    server = serve()
    with server.connect() as sock:
        sock.sendall(upgrade_head() + frame(0x1, b"early"))
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101")
        assert read_frame(sock) == (0x1, b"early")


# -- closing ---------------------------------------------------------------------------


def test_client_close_reaches_the_app_once(serve) -> None:
    server = serve()
    with connect(url(server), open_timeout=10) as ws:
        ws.send("x")
        ws.recv(timeout=10)
        ws.close(4000, "client bye")
        assert ws.protocol.close_rcvd.code == 4000  # echoed
    log = server.wait_for_log(r"APP: receive after close raised RSGIProtocolClosed")
    assert "APP: closed 0 None" in log


def test_app_close_code_reaches_the_client(serve) -> None:
    server = serve()
    with connect(url(server, "/close?code=4001"), open_timeout=10) as ws:
        ws.send("go")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 4001
    log = server.wait_for_log(r"APP: send after close raised RSGIProtocolClosed")
    assert "APP: after close kind 0" in log


def test_close_frame_without_code_is_echoed_and_tcp_closed(serve) -> None:
    server = serve()
    sock, head = handshake(server)
    with sock:
        assert head.startswith(b"HTTP/1.1 101")
        sock.sendall(frame(0x8))
        assert read_frame(sock) == (0x8, b"")  # echoed as sent
        assert read_frame(sock) == (-1, b"")  # then the server closes TCP
    server.wait_for_log(r"APP: closed 0 None")


def test_dropped_connection_gives_the_app_a_close_message(serve) -> None:
    server = serve()
    sock, head = handshake(server)
    assert head.startswith(b"HTTP/1.1 101")
    sock.sendall(frame(0x1, b"hi"))
    assert read_frame(sock) == (0x1, b"hi")
    sock.close()  # no close frame
    server.wait_for_log(r"APP: closed 0 None")


def test_client_close_reaches_an_app_that_only_sends(serve) -> None:
    # Raw frames: a client library stops reading while its own queue is full.
    server = serve()
    sock, head = handshake(server, "/push")
    with sock:
        assert head.startswith(b"HTTP/1.1 101")
        for _ in range(200):
            assert read_frame(sock) == (0x1, b"ping")
        sock.sendall(frame(0x8, struct.pack("!H", 1000)))
        while (received := read_frame(sock))[0] == 0x1:
            pass  # what the app queued before the server saw the close
        assert received[0] == 0x8 and close_code(received[1]) == 1000
    server.wait_for_log(r"APP: push stopped by RSGIProtocolClosed after True")


def test_term_closes_with_1012_and_the_server_exits(serve) -> None:
    server = serve()
    with connect(url(server), open_timeout=10) as ws:
        ws.send("x")
        ws.recv(timeout=10)
        server.signal(SIGTERM)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=15)
    assert closed.value.rcvd.code == 1012
    assert server.proc.wait(30) == 0
    assert "APP: closed 0 None" in server.log()


def test_term_before_accept_answers_503(serve) -> None:
    server = serve()
    with server.connect() as sock:
        sock.sendall(upgrade_head("/slow-start"))
        time.sleep(0.5)  # the app is now waiting before accepting
        server.signal(SIGTERM)
        assert read_until_closed(sock).startswith(b"HTTP/1.1 503")
    assert server.proc.wait(30) == 0
    assert "APP: late accept raised RSGIProtocolClosed" in server.log()


# -- before accept --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/refuse?status=401", 401),
        ("/refuse?status=503", 503),
        ("/refuse", 403),  # close() with no status
        ("/refuse?status=1008", 403),  # a close code is no HTTP status
        ("/return", 403),  # returned without accepting
        ("/nowhere", 404),
    ],
)
def test_close_before_accept_answers_an_http_status(serve, path: str, status: int) -> None:
    server = serve()
    with pytest.raises(InvalidStatus) as refused:
        connect(url(server, path), open_timeout=10)
    assert refused.value.response.status_code == status


def test_app_error_before_accept_is_500_and_logged(serve) -> None:
    server = serve()
    with pytest.raises(InvalidStatus) as refused:
        connect(url(server, "/raise-before"), open_timeout=10)
    assert refused.value.response.status_code == 500
    log = server.wait_for_log(r"Error handling request GET /raise-before HTTP/1\.1")
    assert "boom before accept" in log


def test_invalid_handshakes_never_reach_the_app(serve) -> None:
    server = serve()
    bad_key = server.raw(upgrade_head("/raise-before", key="not-a-key"))
    assert bad_key.startswith(b"HTTP/1.1 400")
    bad_version = server.raw(upgrade_head("/raise-before", version="8"))
    assert bad_version.startswith(b"HTTP/1.1 426")
    assert b"\r\nsec-websocket-version: 13\r\n" in bad_version.lower()
    time.sleep(0.3)
    assert "boom before accept" not in server.log()


def test_ws_off_serves_upgrades_as_plain_http(serve) -> None:
    server = serve("--ws", "off")
    answer = server.raw(upgrade_head("/info"))
    assert answer.startswith(b"HTTP/1.1 200")
    assert answer.endswith(b"not a websocket")


# -- errors and misuse -------------------------------------------------------------------


def test_app_error_after_accept_is_1011_and_logged(serve) -> None:
    server = serve()
    with connect(url(server, "/raise-after"), open_timeout=10) as ws:
        ws.send("x")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 1011
    log = server.wait_for_log(
        r"Error handling request GET /raise-after HTTP/1\.1 \(WebSocket closed with 1011\)"
    )
    assert "boom after accept" in log


def test_protocol_misuse_raises_the_spec_errors(serve) -> None:
    server = serve()
    with connect(url(server, "/misuse"), open_timeout=10) as ws:
        assert ws.recv(timeout=10) == "ready"
        ws.send("hi")
        assert ws.recv(timeout=10) == "got hi"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 4003
    log = server.wait_for_log(r"APP: close\(1005\) raised ValueError")
    assert "APP: second accept raised RSGIProtocolError" in log
    assert "APP: concurrent receive raised RSGIProtocolError" in log


def test_a_cancelled_receive_loses_no_message(serve) -> None:
    server = serve()
    with connect(url(server, "/cancelled-receive"), open_timeout=10) as ws:
        assert ws.recv(timeout=10) == "cancelled"
        ws.send("kept")
        assert ws.recv(timeout=10) == "next receive got kept"


# -- limits, pings, counting -------------------------------------------------------------


def test_message_over_max_size_is_1009(serve) -> None:
    server = serve("--ws-max-size", "1000")
    with connect(url(server), open_timeout=10, compression=None) as ws:
        ws.send(b"x" * 1000)
        assert ws.recv(timeout=10) == b"x" * 1000
        ws.send(b"x" * 1001)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 1009
    server.wait_for_log(r"APP: closed 0 None")


def test_pings_keep_an_idle_connection_alive(serve) -> None:
    server = serve("--ws-ping-interval", "0.5", "--ws-ping-timeout", "1.5")
    sock, _ = handshake(server)
    with sock:
        deadline = time.monotonic() + 3.5
        pings = 0
        while time.monotonic() < deadline:
            opcode, payload = read_frame(sock)
            assert opcode == 0x9, (opcode, payload)
            pings += 1
            sock.sendall(frame(0xA, payload))
        assert pings >= 2
        sock.sendall(frame(0x1, b"still here"))
        while (received := read_frame(sock))[0] == 0x9:
            pass
        assert received == (0x1, b"still here")


def test_unanswered_ping_closes_with_1011(serve) -> None:
    server = serve("--ws-ping-interval", "0.5", "--ws-ping-timeout", "1")
    sock, _ = handshake(server, "/idle")
    with sock:
        opcodes = []
        while (received := read_frame(sock))[0] not in (0x8, -1):
            opcodes.append(received[0])
        assert received[0] == 0x8 and close_code(received[1]) == 1011
        assert 0x9 in opcodes
    server.wait_for_log(r"APP: idle got kind 0")


def test_a_session_counts_as_one_request_for_max_requests(serve) -> None:
    # One request is the start-up probe's; then sessions alone retire the worker.
    server = serve("-w", "1", "--max-requests", "4")
    (first,) = server.wait_workers(1)
    with connect(url(server, "/info"), open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["pid"] == first
        for i in range(20):  # messages within a session are not requests
            ws.send(str(i))
            ws.recv(timeout=10)
    time.sleep(0.5)
    assert server.workers() == [first]
    for _ in range(3):
        with connect(url(server, "/info"), open_timeout=10) as ws:
            ws.recv(timeout=10)
    wait_until(lambda: first not in server.workers())
    assert "max_requests" in server.log()


def test_access_log_shows_101(serve, tmp_path) -> None:
    log = tmp_path / "access.log"
    server = serve("--access-logfile", str(log))
    with connect(url(server, "/?x=1"), open_timeout=10) as ws:
        ws.send("x")
        ws.recv(timeout=10)
    wait_until(lambda: log.exists() and "GET /?x=1 HTTP/1.1" in log.read_text())
    assert '" 101 ' in log.read_text()
