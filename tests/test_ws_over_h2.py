"""WebSockets over HTTP/2 (RFC 8441) on the native server (`-k rsgi` and the
engine's ASGI, `-k native`): a stream opened with an extended CONNECT carries
RFC 6455 frames in its DATA frames, beside the connection's other streams.
Browsers open WebSockets this way on an HTTP/2 connection they already have.

The client is the frame-level one of tests/h2_client.py over a real socket
(h2c with prior knowledge), with masked frames from ws_raw.py: no Python
client library speaks RFC 8441, and this one shows every frame the server sends.
"""

from __future__ import annotations

import json
import struct
from signal import SIGTERM

import pytest
from h2_client import H2Client
from ws_raw import H2WebSocket, close_code

ENABLE_CONNECT_PROTOCOL = 0x8
APPS = {"rsgi": "rsgi_ws_apps:app", "native": "asgi_ws_apps:echo"}


@pytest.fixture(params=sorted(APPS))
def serve(request, start_server):
    def start(*args: str):
        return start_server("-k", request.param, *args, APPS[request.param])

    start.kind = request.param
    return start


def connect(server) -> H2Client:
    client = H2Client(server.connect(), authority=f"{server.host}:{server.port}")
    client.until(lambda c: c.settings())
    return client


@pytest.mark.parametrize("ws", ["auto", "off"])
def test_the_server_offers_extended_connect_unless_websockets_are_off(serve, ws) -> None:
    client = connect(serve("--ws", ws))
    offered = client.settings().get(ENABLE_CONNECT_PROTOCOL, 0)
    client.sock.close()
    assert offered == (1 if ws == "auto" else 0)


def test_echo_on_a_stream_beside_plain_requests(serve) -> None:
    server = serve()
    client = connect(server)
    ws = H2WebSocket(client, "/info" if serve.kind == "rsgi" else "/")
    head = ws.head()
    # RFC 8441 5: a 200, with none of HTTP/1.1's upgrade fields.
    assert head[":status"] == "200"
    assert "sec-websocket-accept" not in head and "upgrade" not in head
    if serve.kind == "rsgi":
        opcode, scope = ws.receive()
        assert opcode == 0x1
        scope = json.loads(scope)
        assert (scope["proto"], scope["http_version"], scope["method"]) == ("ws", "2", "GET")
        assert scope["path"] == "/info"
    ws.send(0x1, "héllo".encode())
    assert ws.receive() == (0x1, "héllo".encode())
    # The connection goes on carrying requests while the session is open.
    plain = client.request("/plain")
    client.until(lambda c: c.streams[plain].ended)
    assert client.streams[plain].headers[":status"] == "200"
    ws.send(0x2, b"\x00\xffbytes")
    assert ws.receive() == (0x2, b"\x00\xffbytes")
    ws.send(0x8, struct.pack("!H", 1000))
    opcode, payload = ws.receive()
    assert opcode == 0x8 and close_code(payload) == 1000
    client.until(lambda c: ws.state.ended or ws.state.reset is not None)
    assert not client.goaways
    client.sock.close()


def test_two_sessions_on_one_connection_stay_apart(serve) -> None:
    server = serve()
    client = connect(server)
    one, two = H2WebSocket(client, "/"), H2WebSocket(client, "/")
    assert one.head()[":status"] == two.head()[":status"] == "200"
    for i in range(20):
        one.send(0x1, f"one {i}".encode())
        two.send(0x1, f"two {i}".encode())
    for i in range(20):
        assert one.receive() == (0x1, f"one {i}".encode())
        assert two.receive() == (0x1, f"two {i}".encode())
    client.sock.close()


def test_a_bad_handshake_is_refused_on_its_stream_only(serve) -> None:
    server = serve()
    client = connect(server)
    missing = client.request(
        "/", method="CONNECT", headers=[(":protocol", "websocket")], open_ended=True
    )
    other = client.request(
        "/",
        method="CONNECT",
        headers=[(":protocol", "websocket"), ("sec-websocket-version", "8")],
        open_ended=True,
    )
    unknown = client.request(
        "/",
        method="CONNECT",
        headers=[(":protocol", "webtransport"), ("sec-websocket-version", "13")],
        open_ended=True,
    )
    client.until(
        lambda c: all(":status" in c.streams[s].headers for s in (missing, other, unknown))
    )
    assert client.streams[missing].headers[":status"] == "400"
    assert client.streams[other].headers[":status"] == "426"
    assert client.streams[other].headers["sec-websocket-version"] == "13"
    assert client.streams[unknown].headers[":status"] == "501"
    ws = H2WebSocket(client, "/")
    assert ws.head()[":status"] == "200"
    ws.send(0x1, b"still here")
    assert ws.receive() == (0x1, b"still here")
    client.sock.close()


def test_term_closes_the_session_with_1012_and_the_server_exits(serve) -> None:
    server = serve()
    client = connect(server)
    ws = H2WebSocket(client, "/")
    assert ws.head()[":status"] == "200"
    ws.send(0x1, b"x")
    assert ws.receive() == (0x1, b"x")
    server.signal(SIGTERM)
    opcode, payload = ws.receive()
    assert opcode == 0x8 and close_code(payload) == 1012
    ws.send(0x8, struct.pack("!H", 1012))
    assert server.proc.wait(30) == 0


def test_subprotocol_and_the_apps_fields_on_the_200(start_server) -> None:
    server = start_server("-k", "native", APPS["native"])
    client = connect(server)
    ws = H2WebSocket(client, "/subprotocol", [("sec-websocket-protocol", "chat, superchat")])
    head = ws.head()
    assert head[":status"] == "200"
    assert head["sec-websocket-protocol"] == "superchat"
    assert head["x-accept"] == "yes"
    ws.send(0x1, b"hi")
    assert ws.receive() == (0x1, b"hi")
    client.sock.close()
