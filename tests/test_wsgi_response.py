"""The WSGI response of the Python workers (`supervise.http.wsgi_response.Response`,
native underneath): the head's framing rules, and what start_response, write and
a one-block body send, driven with a parsed request and a connection that records."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from supervise import _native
from supervise.http.wsgi_response import Response


class Recorder:
    """A connection that keeps what it is asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def sendall(self, data: bytes) -> None:
        self.sent.append(("sendall", bytes(data)))

    def send_last(self, data: bytes) -> None:
        self.sent.append(("send_last", bytes(data)))

    def wire(self) -> bytes:
        return b"".join(data for _, data in self.sent)


def respond(
    version: str = "1.1", method: str = "GET", stopping: bool = False, keep_alive: bool = True
) -> tuple[Response, Recorder]:
    raw = f"{method} / HTTP/{version}\r\nHost: x\r\n\r\n".encode()
    req, _ = _native.RequestParser().parse(raw)
    conn = Recorder()
    return Response(conn, SimpleNamespace(stopping=stopping), req, keep_alive), conn


def split(wire: bytes) -> tuple[dict[str, list[str]], bytes]:
    head, _, body = wire.partition(b"\r\n\r\n")
    fields: dict[str, list[str]] = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(": ")
        fields.setdefault(name.lower(), []).append(value)
    return fields, body


@pytest.mark.parametrize(
    ("status", "headers", "version", "method", "want"),
    [
        ("200 OK", [("Content-Length", "5")], "1.1", "GET", (5, False, True, None, b"hello")),
        ("200 OK", [], "1.1", "GET", (-1, True, True, "chunked", b"5\r\nhello\r\n0\r\n\r\n")),
        ("200 OK", [], "1.0", "GET", (-1, False, False, None, b"hello")),
        ("204 No Content", [], "1.1", "GET", (0, False, True, None, b"")),
        ("304 Not Modified", [], "1.1", "GET", (0, False, True, None, b"")),
        ("200 OK", [("Content-Length", "42")], "1.1", "HEAD", (0, False, True, None, b"")),
        (
            "200 OK",
            [("Connection", "close"), ("Content-Length", "5")],
            "1.1",
            "GET",
            (5, False, False, None, b"hello"),
        ),
    ],
    ids=["length", "chunked-11", "close-10", "204", "304", "head", "app-close"],
)
def test_framing_of_a_written_body(
    status: str, headers: list, version: str, method: str, want: tuple
) -> None:
    resp, conn = respond(version, method)
    write = resp.start_response(status, headers)
    write(b"hello")
    resp.finish()
    assert conn.wire().startswith(b"HTTP/1.1 " + status.encode() + b"\r\n")
    fields, body = split(conn.wire())
    assert (resp._length, resp._chunked, resp.keep_alive) == want[:3]
    assert fields.get("transfer-encoding", [None])[0] == want[3]
    assert body == want[4]
    assert ("close" in fields.get("connection", [])) == (not resp.keep_alive)
    assert len(fields["date"]) == 1 and fields["date"][0].endswith(" GMT")
    assert resp.status_code == int(status[:3])


def test_a_whole_body_gets_its_length_and_goes_in_one_send() -> None:
    resp, conn = respond()
    resp.start_response("200 OK", [("Content-Type", "text/plain")])
    resp.send_whole(b"hello")
    assert [how for how, _ in conn.sent] == ["send_last"]
    fields, body = split(conn.wire())
    assert fields["content-length"] == ["5"] and body == b"hello"
    assert (resp.sent, resp.keep_alive, resp.head_sent) == (5, True, True)


def test_a_body_past_its_content_length_is_cut_and_a_short_one_closes() -> None:
    resp, conn = respond()
    resp.start_response("200 OK", [("Content-Length", "3")])
    resp.send_whole(b"hello")
    assert split(conn.wire())[1] == b"hel" and resp.keep_alive
    resp, conn = respond()
    write = resp.start_response("200 OK", [("Content-Length", "9")])
    write(b"hello")
    write(b"!!!!!!!!")  # only 4 of these fit
    resp.finish()
    assert split(conn.wire())[1] == b"hello!!!!" and resp.sent == 9 and resp.keep_alive
    resp, conn = respond()
    resp.start_response("200 OK", [("Content-Length", "9")])
    resp.send_whole(b"hello")
    assert resp.sent == 5 and not resp.keep_alive


def test_a_large_whole_body_is_not_copied_behind_its_head() -> None:
    resp, conn = respond()
    resp.start_response("200 OK", [])
    body = b"x" * (64 * 1024 + 1)
    resp.send_whole(body)
    assert [how for how, _ in conn.sent] == ["sendall", "send_last"]
    assert conn.sent[1][1] == body


def test_a_stopping_worker_closes_after_the_response() -> None:
    resp, conn = respond(stopping=True)
    resp.start_response("200 OK", [])
    resp.send_whole(b"bye")
    assert split(conn.wire())[0]["connection"] == ["close"] and not resp.keep_alive


def test_start_response_rules() -> None:
    resp, conn = respond()
    with pytest.raises(TypeError, match="status must be a str"):
        resp.start_response(200, [])
    resp.start_response("200 OK", [])
    with pytest.raises(AssertionError, match="called again without exc_info"):
        resp.start_response("500 Oops", [])
    # With exc_info before the head left: the new status replaces the old one.
    try:
        raise RuntimeError("app failed")
    except RuntimeError:
        resp.start_response("500 Internal Server Error", [], sys.exc_info())
    resp.send_whole(b"")
    assert conn.wire().startswith(b"HTTP/1.1 500 ")
    # After it left, PEP 3333 says re-raise.
    try:
        raise KeyError("late")
    except KeyError:
        info = sys.exc_info()
    with pytest.raises(KeyError, match="late"):
        resp.start_response("500 Internal Server Error", [], info)


def test_bodies_must_be_bytes() -> None:
    resp, conn = respond()
    write = resp.start_response("200 OK", [])
    write(bytearray(b"ab"))
    write(memoryview(b"cd"))
    with pytest.raises(TypeError, match="must send bytes, not str"):
        write("text")
    write("")  # an empty block sends nothing, whatever its type
    resp.finish()
    assert split(conn.wire())[1] == b"2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n"


def test_no_start_response_is_the_apps_error() -> None:
    resp, _ = respond()
    with pytest.raises(AssertionError, match="did not call start_response"):
        resp.send_whole(b"x")


def test_hop_by_hop_fields_are_dropped_and_the_apps_date_kept() -> None:
    resp, conn = respond()
    write = resp.start_response(
        "200 OK",
        [("Transfer-Encoding", "chunked"), ("Keep-Alive", "x"), ("Date", "then"), ("X-A", "é")],
    )
    write(b"x")
    fields, _ = split(conn.wire())
    assert fields["transfer-encoding"] == ["chunked"]  # ours, once
    assert "keep-alive" not in fields
    assert fields["date"] == ["then"]
    assert b"X-A: \xe9\r\n" in conn.wire()


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        ("OK", []),
        ("20 OK", []),
        ("200 O\r\nK", []),
        ("200 OK", [("X-Bad Name", "v")]),
        ("200 OK", [("X", "a\r\nSet-Cookie: evil")]),
        ("200 OK", [("X", "a\nb")]),
        ("200 OK", [("X", "a\x00b")]),
        ("200 OK", [("X", "snowman \u2603")]),
        ("200 OK", [("Content-Length", "abc")]),
        ("200 OK", [("X", b"bytes")]),
        ("200 OK", [("X",)]),
    ],
)
def test_an_invalid_head_is_refused_before_anything_is_sent(status: str, headers: list) -> None:
    resp, conn = respond()
    resp.start_response(status, headers)
    with pytest.raises((ValueError, TypeError)):
        resp.send_whole(b"x")
    assert conn.sent == [] and not resp.head_sent


def test_server_header_can_be_changed_and_disabled() -> None:
    def server_fields() -> list[str]:
        resp, conn = respond()
        resp.start_response("200 OK", [])
        resp.send_whole(b"")
        return split(conn.wire())[0].get("server", [])

    try:
        _native.set_server_header("custom/1")
        assert server_fields() == ["custom/1"]
        _native.set_server_header(None)
        assert server_fields() == []
        with pytest.raises(ValueError):
            _native.set_server_header("a\r\nb")
    finally:
        _native.set_server_header("supervise")
