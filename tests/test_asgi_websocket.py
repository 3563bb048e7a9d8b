"""WebSocket on `supervise -k asgi` (both --ws libraries) and on the engine (`-k native`):
the real server, real sockets.

The websockets client where it shows what a user sees; raw sockets where a
client library would hide the behaviour (dropped connections, bare close
frames, unanswered pings). What the app observed is read from the server log
(tests/apps/asgi_ws_apps.py prints it).
"""

from __future__ import annotations

import asyncio
import http.client
import logging
import os
import struct
import time
import types
from signal import SIGTERM
from typing import Any

import pytest
from conftest import read_until_closed
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from ws_raw import KEY, close_code, frame, handshake, read_frame

from supervise.http import asgi_ws

IMPLEMENTATIONS = ["websockets", "wsproto"]
# The engine (-k native) runs the same suite: its frames are tungstenite's, in Rust.
SERVERS = [*IMPLEMENTATIONS, "native"]


@pytest.fixture(params=SERVERS)
def ws_impl(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def serve(start_server, ws_impl):
    """serve(*extra_args, app="asgi_ws_apps:echo") -> a running server: the asgi
    worker with one --ws library, or the engine."""

    def start(*args: str, app: str = "asgi_ws_apps:echo"):
        if ws_impl == "native":
            return start_server("-k", "native", *args, app)
        return start_server("-k", "asgi", "--ws", ws_impl, *args, app)

    return start


def url(server, path: str = "/") -> str:
    return f"ws://{server.host}:{server.port}{path}"


# -- messages ------------------------------------------------------------------------


def test_echo_text_and_bytes(serve) -> None:
    server = serve()
    with connect(url(server), open_timeout=10) as ws:
        ws.send("héllo")
        assert ws.recv(timeout=10) == "héllo"
        ws.send(b"\x00\x01\xff")
        assert ws.recv(timeout=10) == b"\x00\x01\xff"


def test_echo_on_the_standard_asyncio_loop(serve) -> None:
    server = serve("--loop", "asyncio")
    with connect(url(server), open_timeout=10) as ws:
        ws.send("asyncio")
        assert ws.recv(timeout=10) == "asyncio"


def test_large_fragmented_message_is_reassembled(serve) -> None:
    server = serve()
    parts = [os.urandom(256 * 1024) for _ in range(8)]
    with connect(url(server), open_timeout=10, max_size=None) as ws:
        ws.send(iter(parts))  # one binary message in 8 fragments
        assert ws.recv(timeout=20) == b"".join(parts)
        ws.send(iter(["ab", "cé", "d" * 70000]))
        assert ws.recv(timeout=20) == "abcé" + "d" * 70000


def test_subprotocol_and_accept_headers(serve) -> None:
    server = serve()
    with connect(url(server, "/subprotocol"), subprotocols=["one", "two"], open_timeout=10) as ws:
        assert ws.subprotocol == "two"
        assert ws.response.headers["x-accept"] == "yes"
        ws.send("x")
        assert ws.recv(timeout=10) == "x"


def test_per_message_deflate_negotiated(serve, ws_impl) -> None:
    if ws_impl == "native":
        pytest.skip("the engine's WebSockets (tungstenite, as -k rsgi) have no permessage-deflate")
    server = serve()
    with connect(url(server), open_timeout=10) as ws:
        assert "permessage-deflate" in ws.response.headers["sec-websocket-extensions"]
        ws.send("z" * 100000)
        assert ws.recv(timeout=10) == "z" * 100000


def test_per_message_deflate_off(serve) -> None:
    server = serve("--no-ws-per-message-deflate")
    with connect(url(server), open_timeout=10) as ws:
        assert "sec-websocket-extensions" not in ws.response.headers
        ws.send("plain")
        assert ws.recv(timeout=10) == "plain"


# -- closing -------------------------------------------------------------------------


def test_client_close_code_and_reason_reach_the_app(serve) -> None:
    server = serve()
    with connect(url(server), open_timeout=10) as ws:
        ws.send("x")
        ws.recv(timeout=10)
        ws.close(4000, "client bye")
        assert ws.protocol.close_rcvd.code == 4000  # echoed
    server.wait_for_log(r"APP: disconnect 4000 'client bye'")


def test_app_close_code_and_reason_reach_the_client(serve) -> None:
    server = serve()
    with connect(url(server, "/close?code=4001&reason=app+bye"), open_timeout=10) as ws:
        ws.send("go")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 4001
    assert closed.value.rcvd.reason == "app bye"
    log = server.wait_for_log(r"APP: send after close raised ClientDisconnected")
    assert "APP: after close websocket.disconnect" in log


def test_close_frame_without_code_is_1005(serve) -> None:
    server = serve()
    sock, head = handshake(server)
    with sock:
        assert head.startswith(b"HTTP/1.1 101")
        sock.sendall(frame(0x8))
        opcode, payload = read_frame(sock)
        assert opcode == 0x8 and payload == b""  # echoed as sent
        assert read_frame(sock) == (-1, b"")  # then the server closes TCP
    server.wait_for_log(r"APP: disconnect 1005 ''")


def test_dropped_connection_is_1006(serve) -> None:
    server = serve()
    sock, head = handshake(server)
    assert head.startswith(b"HTTP/1.1 101")
    sock.sendall(frame(0x1, b"hi"))
    assert read_frame(sock) == (0x1, b"hi")
    sock.close()  # no close frame
    server.wait_for_log(r"APP: disconnect 1006 ''")


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
    assert "APP: disconnect 1012 'service restart'" in server.log()


# -- before accept ------------------------------------------------------------------


def upgrade_request(server, path: str) -> http.client.HTTPResponse:
    conn = server.http()
    conn.request(
        "GET",
        path,
        headers={
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": KEY,
            "Sec-WebSocket-Version": "13",
        },
    )
    return conn.getresponse()


def test_denial_response(serve) -> None:
    server = serve()
    resp = upgrade_request(server, "/deny")
    assert resp.status == 401
    assert resp.getheader("x-deny") == "1"
    assert resp.getheader("content-type") == "text/plain"
    assert resp.read() == b"go away"


@pytest.mark.parametrize("path", ["/reject", "/return"])
def test_close_or_return_before_accept_is_403(serve, path: str) -> None:
    server = serve()
    with pytest.raises(InvalidStatus) as refused:
        connect(url(server, path), open_timeout=10)
    assert refused.value.response.status_code == 403


def test_app_error_before_accept_is_500(serve) -> None:
    server = serve()
    with pytest.raises(InvalidStatus) as refused:
        connect(url(server, "/raise-before"), open_timeout=10)
    assert refused.value.response.status_code == 500
    log = server.wait_for_log("Exception in ASGI application for WebSocket /raise-before")
    assert "boom before accept" in log


def test_invalid_handshake_is_400_without_the_app(serve) -> None:
    server = serve()
    sock, head = handshake(server, "/raise-before", key="not-a-key")
    with sock:
        assert head.startswith(b"HTTP/1.1 400")
    time.sleep(0.3)
    assert "boom before accept" not in server.log()


# -- app errors -------------------------------------------------------------------------


def test_app_error_after_accept_is_1011(serve) -> None:
    server = serve()
    with connect(url(server, "/raise-after"), open_timeout=10) as ws:
        ws.send("x")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 1011
    server.wait_for_log("Exception in ASGI application for WebSocket /raise-after")


def test_wrong_event_type_is_an_error_not_a_hang(serve) -> None:
    server = serve()
    with (
        connect(url(server, "/wrong-event"), open_timeout=10) as ws,
        pytest.raises(ConnectionClosed) as closed,
    ):
        ws.recv(timeout=10)
    assert closed.value.rcvd.code == 1011
    log = server.wait_for_log("Exception in ASGI application for WebSocket /wrong-event")
    assert "APP: wrong event raised RuntimeError" in log


# -- limits and keep-alive -------------------------------------------------------------


def test_message_over_max_size_is_1009(serve) -> None:
    server = serve("--ws-max-size", "1000")
    with connect(url(server), open_timeout=10, compression=None) as ws:
        ws.send(b"x" * 1000)
        assert ws.recv(timeout=10) == b"x" * 1000
        ws.send(b"x" * 1001)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 1009
    server.wait_for_log(r"APP: disconnect 1009")


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
    server.wait_for_log(r"APP: idle got websocket.disconnect 1011")


def test_slow_reader_gets_every_message(serve) -> None:
    """send() waits while the transport's buffer is full; nothing is lost."""
    server = serve()
    with connect(url(server, "/stream?n=64&size=65536"), open_timeout=10, max_size=None) as ws:
        time.sleep(1)  # let the server's buffer fill up
        total = 0
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                total += len(ws.recv(timeout=10))
    assert total == 64 * 65536
    assert closed.value.rcvd.code == 1000


# -- the --ws setting -------------------------------------------------------------------


def test_protocol_class_choice(monkeypatch) -> None:
    assert asgi_ws.protocol_class("off") is None
    assert asgi_ws.protocol_class("auto").__name__ == "WebsocketsProtocol"
    assert asgi_ws.protocol_class("wsproto").__name__ == "WsprotoProtocol"
    monkeypatch.setattr(asgi_ws, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match="pip install websockets"):
        asgi_ws.protocol_class("websockets")
    assert asgi_ws.protocol_class("auto") is None


def test_term_before_accept_answers_503(serve) -> None:
    server = serve(app="asgi_ws_apps:slow_start")
    with server.connect() as sock:
        sock.sendall(
            (
                "GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        time.sleep(0.5)  # the app is now waiting before accepting
        server.signal(SIGTERM)
        assert read_until_closed(sock).startswith(b"HTTP/1.1 503")
    assert server.proc.wait(30) == 0
    assert "APP: waiting websocket.disconnect" in server.log()


# -- the protocol object alone (a fake transport): flow control and deadlines ---------------


class FakeTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.closing = False
        self.paused = False
        self.aborted = False
        self.buffered = 0  # what a real transport would still hold unsent

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = self.aborted = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_write_buffer_size(self) -> int:
        return self.buffered


def fake_session(ws_impl: str, app) -> tuple[asyncio.AbstractEventLoop, Any, FakeTransport]:
    loop = asyncio.new_event_loop()
    cfg = types.SimpleNamespace(
        ws_max_size=1 << 20,
        ws_per_message_deflate=False,
        ws_ping_interval=0,
        ws_ping_timeout=0,
    )
    done = []
    ctx = types.SimpleNamespace(
        state=types.SimpleNamespace(stopping=False),
        app=app,
        cfg=cfg,
        log=logging.getLogger("t"),
        loop=loop,
        connections=set(),
        request_done=lambda: done.append(1),
        send_timeout=30.0,
        send_min_rate=0,
    )
    ctx.leave = ctx.connections.discard
    head = (
        "GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()
    headers = [
        (b"host", b"t"),
        (b"sec-websocket-key", KEY.encode()),
        (b"sec-websocket-version", b"13"),
    ]
    scope = {"type": "websocket", "path": "/", "headers": headers, "subprotocols": []}
    cls = asgi_ws.protocol_class(ws_impl)
    proto = cls(ctx=ctx, info=None, scope=scope, head=head)
    transport = FakeTransport()
    proto.connection_made(transport)
    return loop, proto, transport


def test_reading_pauses_while_the_app_lags(ws_impl: str) -> None:
    if ws_impl == "native":
        pytest.skip("the asgi worker's protocol class; the engine's session: test_rsgi_websocket")
    gate = asyncio.Event()
    received = []

    async def app(scope, receive, send):
        await receive()
        await send({"type": "websocket.accept"})
        await gate.wait()
        while (message := await receive())["type"] == "websocket.receive":
            received.append(message["text"])

    loop, proto, transport = fake_session(ws_impl, app)
    try:
        loop.run_until_complete(asyncio.sleep(0.01))
        assert transport.written.startswith(b"HTTP/1.1 101")
        proto.data_received(b"".join(frame(0x1, b"m%d" % i) for i in range(40)))
        assert transport.paused  # 40 queued messages: over QUEUE_HIGH
        gate.set()
        loop.run_until_complete(asyncio.sleep(0.01))
        assert not transport.paused and len(received) == 40
        proto.data_received(frame(0x8, struct.pack("!H", 1000)))
        loop.run_until_complete(asyncio.sleep(0.01))
        assert transport.closing
        proto.connection_lost(None)
        assert proto not in proto.ctx.connections
    finally:
        loop.close()


def test_handshake_timeout_answers_503(ws_impl: str) -> None:
    if ws_impl == "native":
        pytest.skip("the asgi worker's protocol class; the engine's session: test_rsgi_websocket")

    async def app(scope, receive, send):
        await receive()
        await asyncio.sleep(3600)

    loop, proto, transport = fake_session(ws_impl, app)
    try:
        loop.run_until_complete(asyncio.sleep(0.01))
        proto.sweep(time.monotonic() + asgi_ws.HANDSHAKE_TIMEOUT + 1)
        assert transport.written.startswith(b"HTTP/1.1 503") and transport.closing
        proto.sweep(time.monotonic() + asgi_ws.HANDSHAKE_TIMEOUT + asgi_ws.CLOSE_TIMEOUT + 2)
        assert transport.aborted  # the 503 never drained: the connection is dropped
    finally:
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


def test_frames_sent_with_the_handshake_are_kept(serve) -> None:
    """A client that pipelines its first frame behind the upgrade request loses nothing."""
    server = serve()
    with server.connect() as sock:
        sock.sendall(
            (
                "GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
            + frame(0x1, b"early")
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101")
        assert read_frame(sock) == (0x1, b"early")
