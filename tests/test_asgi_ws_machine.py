"""The ASGI WebSocket machine alone (http/asgi_ws_machine.py): the rules both
the asgi worker and the engine follow, with no socket. The servers themselves:
test_asgi_websocket.py."""

from __future__ import annotations

import pytest

from supervise.http.asgi_ws_machine import (
    CLOSED,
    CLOSING,
    DENYING,
    HANDSHAKE,
    OPEN,
    Abort,
    Accept,
    Close,
    Deny,
    Refuse,
    WebSocketMachine,
)
from supervise.http.errors import ClientDisconnected

ACCEPT = {"type": "websocket.accept"}


def opened() -> WebSocketMachine:
    machine = WebSocketMachine()
    assert machine.next_event() == {"type": "websocket.connect"}
    machine.app_sent(ACCEPT)
    return machine


def disconnect(code: int, reason: str = "") -> dict:
    return {"type": "websocket.disconnect", "code": code, "reason": reason}


def test_receive_gives_connect_then_messages_then_the_end_again_and_again() -> None:
    machine = WebSocketMachine()
    assert machine.received("a") == 2  # behind the connect
    assert machine.received(b"b") == 3
    machine.ended(4000, "bye")
    machine.ended(1006)  # the first end reported counts
    assert machine.queued == 3
    assert machine.next_event() == {"type": "websocket.connect"}
    assert machine.next_event() == {"type": "websocket.receive", "text": "a"}
    assert machine.next_event() == {"type": "websocket.receive", "bytes": b"b"}
    assert machine.next_event() == machine.next_event() == disconnect(4000, "bye")


def test_nothing_to_receive_until_the_transport_says() -> None:
    machine = opened()
    assert machine.next_event() is None


def test_accept_checks_its_fields_and_opens() -> None:
    machine = WebSocketMachine()
    action = machine.app_sent(
        {"type": "websocket.accept", "subprotocol": "two", "headers": [(b"x-a", b"1")]}
    )
    assert action == Accept("two", [(b"x-a", b"1")]) and machine.state is OPEN
    with pytest.raises(RuntimeError, match="invalid header"):
        WebSocketMachine().app_sent({"type": "websocket.accept", "headers": [(b"x a", b"1")]})


def test_a_failed_accept_leaves_the_handshake_unanswered() -> None:
    machine = WebSocketMachine()
    machine.app_sent(ACCEPT)
    machine.accept_failed()
    assert machine.state is HANDSHAKE
    assert machine.app_ended(failed=True) == Refuse(500)


def test_close_before_accept_refuses_with_403() -> None:
    machine = WebSocketMachine()
    assert machine.app_sent({"type": "websocket.close"}) == Refuse(403)
    assert machine.state is CLOSED and machine.over
    assert machine.next_event()["type"] == "websocket.connect"
    assert machine.next_event() == disconnect(1006)


def test_only_an_answer_fits_the_handshake() -> None:
    with pytest.raises(RuntimeError, match="before the handshake"):
        WebSocketMachine().app_sent({"type": "websocket.send", "text": "x"})


def test_denial_head_goes_with_the_first_part_and_the_last_ends_the_session() -> None:
    machine = WebSocketMachine()
    start = {"type": "websocket.http.response.start", "status": 401, "headers": [(b"a", b"b")]}
    assert machine.app_sent(start) is None and machine.state is DENYING
    part = {"type": "websocket.http.response.body", "body": b"go ", "more_body": True}
    assert machine.app_sent(part) == Deny(401, [(b"a", b"b")], b"go ", True, False)
    with pytest.raises(RuntimeError, match=r"websocket\.http\.response\.body"):
        machine.app_sent(ACCEPT)
    last = machine.app_sent({"type": "websocket.http.response.body", "body": b"away"})
    assert last == Deny(401, [(b"a", b"b")], b"away", False, True)
    assert machine.state is CLOSED
    machine.denial_failed()  # the I/O side could not send it: still denying, no end yet
    assert machine.state is DENYING and machine.app_ended(failed=True) == Abort()


def test_open_sends_and_closes() -> None:
    machine = opened()
    assert machine.app_sent({"type": "websocket.send", "bytes": bytearray(b"x")}) == b"x"
    assert machine.app_sent({"type": "websocket.send", "text": "x"}) == "x"
    with pytest.raises(RuntimeError, match="exactly one"):
        machine.app_sent({"type": "websocket.send"})
    with pytest.raises(RuntimeError, match="not a close code"):
        machine.app_sent({"type": "websocket.close", "code": 1005})
    with pytest.raises(RuntimeError, match=r"Expected 'websocket\.send'"):
        machine.app_sent({"type": "http.response.start"})
    assert machine.app_sent({"type": "websocket.close", "reason": "r"}) == Close(1000, "r")
    assert machine.state is CLOSING and machine.over


def test_sends_once_over_raise_client_disconnected() -> None:
    machine = opened()
    machine.closed(1001)
    with pytest.raises(ClientDisconnected):
        machine.app_sent({"type": "websocket.send", "text": "late"})
    with pytest.raises(RuntimeError, match="Unexpected ASGI message"):
        machine.app_sent({"type": "http.response.body"})


def test_a_session_gone_still_waits_for_how_it_ended() -> None:
    machine = opened()
    machine.gone()
    assert machine.over and machine.next_event() is None
    machine.ended(1001, "away")
    assert machine.next_event() == disconnect(1001, "away")


@pytest.mark.parametrize(
    ("accepted", "failed", "action"),
    [
        (False, False, Refuse(403)),
        (False, True, Refuse(500)),
        (True, False, Close(1000, "")),
        (True, True, Close(1011, "")),
    ],
)
def test_what_the_apps_end_leaves_to_do(accepted: bool, failed: bool, action) -> None:
    machine = opened() if accepted else WebSocketMachine()
    assert machine.app_ended(failed=failed) == action
    assert machine.app_ended(failed=failed) is None  # nothing left the second time


def test_graceful_stop() -> None:
    machine = WebSocketMachine()
    machine.next_event()
    assert machine.stopping() == Refuse(503)
    assert machine.next_event() == disconnect(1012, "service restart")
    assert opened().stopping() == Close(1012, "service restart")


def test_the_server_answers_only_an_unanswered_handshake() -> None:
    machine = WebSocketMachine()
    assert machine.server_refuses(503) == Refuse(503)
    assert machine.server_refuses(503) is None
    assert machine.server_closes(1011, "ping") is None
    assert opened().server_closes(1011, "ping") == Close(1011, "ping")
