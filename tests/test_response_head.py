"""The native response-head builder (`supervise._native.response_head`): the
framing rules every Python worker writes its responses with."""

from __future__ import annotations

import pytest

from supervise import _native


def head_fields(head: bytes) -> dict[str, list[str]]:
    lines = head.decode("latin-1").split("\r\n")
    fields: dict[str, list[str]] = {}
    for line in lines[1:-2]:
        name, _, value = line.partition(": ")
        fields.setdefault(name.lower(), []).append(value)
    return fields


@pytest.mark.parametrize(
    ("status", "headers", "version", "is_head", "want"),
    [
        ("200 OK", [("Content-Length", "5")], "1.1", False, (5, False, True, None)),
        ("200 OK", [], "1.1", False, (-1, True, True, "chunked")),
        ("200 OK", [], "1.0", False, (-1, False, False, None)),
        ("204 No Content", [], "1.1", False, (0, False, True, None)),
        ("304 Not Modified", [], "1.1", False, (0, False, True, None)),
        ("200 OK", [("Content-Length", "42")], "1.1", True, (0, False, True, None)),
        (
            "200 OK",
            [("Connection", "close"), ("Content-Length", "1")],
            "1.1",
            False,
            (1, False, False, None),
        ),
    ],
    ids=["length", "chunked-11", "close-10", "204", "304", "head", "app-close"],
)
def test_response_head_framing(
    status: str, headers: list, version: str, is_head: bool, want: tuple
) -> None:
    head, length, chunked, keep_alive = _native.response_head(
        status, headers, version, True, is_head
    )
    assert head.startswith(b"HTTP/1.1 " + status.encode() + b"\r\n")
    assert head.endswith(b"\r\n\r\n")
    fields = head_fields(head)
    assert (length, chunked, keep_alive) == want[:3]
    assert fields.get("transfer-encoding", [None])[0] == want[3]
    assert ("close" in fields.get("connection", [])) == (not keep_alive)
    assert len(fields["date"]) == 1 and fields["date"][0].endswith(" GMT")


def test_response_head_drops_hop_by_hop_and_keeps_app_date() -> None:
    head, *_ = _native.response_head(
        "200 OK",
        [("Transfer-Encoding", "chunked"), ("Keep-Alive", "x"), ("Date", "then"), ("X-A", "é")],
        "1.1",
        True,
        False,
    )
    fields = head_fields(head)
    assert fields["transfer-encoding"] == ["chunked"]  # ours, once
    assert "keep-alive" not in fields
    assert fields["date"] == ["then"]
    assert b"X-A: \xe9\r\n" in head


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
    ],
)
def test_response_head_rejects(status: str, headers: list) -> None:
    with pytest.raises(ValueError):
        _native.response_head(status, headers, "1.1", True, False)


def test_server_header_can_be_changed_and_disabled() -> None:
    try:
        _native.set_server_header("custom/1")
        head, *_ = _native.response_head("200 OK", [], "1.1", True, False)
        assert head_fields(head)["server"] == ["custom/1"]
        _native.set_server_header(None)
        head, *_ = _native.response_head("200 OK", [], "1.1", True, False)
        assert "server" not in head_fields(head)
        with pytest.raises(ValueError):
            _native.set_server_header("a\r\nb")
    finally:
        _native.set_server_header("supervise")
