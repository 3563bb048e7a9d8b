"""The native chunked decoder (`supervise._native.ChunkedDecoder`): every
WSGI and ASGI worker reads chunked request bodies through it."""

from __future__ import annotations

import pytest

from supervise import _native

VALID_CHUNKED: list[tuple[bytes, bytes]] = [
    (b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", b"hello world"),
    (b"A\r\n0123456789\r\n000\r\n\r\n", b"0123456789"),
    (b"0005\r\nhello\r\n0\r\n\r\n", b"hello"),
    (b"5; some; parameters=stuff\r\nhello\r\n0\r\n\r\n", b"hello"),
    (b'5;foo="bar \\"baz\\""\r\nhello\r\n0\r\n\r\n', b"hello"),
    (b"5\r\nhello\r\n0\r\nVary: *\r\n\r\n", b"hello"),
]

INVALID_CHUNKED: list[tuple[bytes, int]] = [
    (b"0x5\r\nhello\r\n0\r\n\r\n", 400),
    (b"-5\r\nhello\r\n0\r\n\r\n", 400),
    (b"+5\r\nhello\r\n0\r\n\r\n", 400),
    (b" 5\r\nhello\r\n0\r\n\r\n", 400),
    (b"5 \r\nhello\r\n0\r\n\r\n", 400),
    (b"6_0\r\nhello\r\n0\r\n\r\n", 400),
    (b"\r\nhello\r\n0\r\n\r\n", 400),
    (b"5\nhello\r\n0\r\n\r\n", 400),
    (b"5;\r\nhello\r\n0\r\n\r\n", 400),
    (b"5;a=val\rue\r\nhello\r\n0\r\n\r\n", 400),
    (b'5;a="open\r\nhello\r\n0\r\n\r\n', 400),
    (b"5\r\nhelloXX0\r\n\r\n", 400),
    (b"3\r\nfoo\r\n\r\n", 400),
    (b"fffffffffffffffffff\r\n", 400),
    (b"0\r\nContent-Length: 5\r\n\r\n", 400),
    (b"0\r\nHost: evil\r\n\r\n", 400),
    (b"0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    (b"0\r\n folded: x\r\n\r\n", 400),
    (b"0\r\nX: a\x00b\r\n\r\n", 400),
]


@pytest.mark.parametrize(("raw", "payload"), VALID_CHUNKED)
@pytest.mark.parametrize("step", [1, 3, 1000])
def test_chunked_valid(raw: bytes, payload: bytes, step: int) -> None:
    dec = _native.ChunkedDecoder()
    got = b"".join(dec.feed(raw[i : i + step]) for i in range(0, len(raw), step))
    assert got == payload
    assert dec.done and dec.leftover == b""


@pytest.mark.parametrize(("raw", "status"), INVALID_CHUNKED)
@pytest.mark.parametrize("step", [1, 1000])
def test_chunked_invalid(raw: bytes, status: int, step: int) -> None:
    dec = _native.ChunkedDecoder()
    with pytest.raises(_native.ParseError) as info:
        for i in range(0, len(raw), step):
            dec.feed(raw[i : i + step])
    assert info.value.status == status


def test_chunked_trailers_leftover_and_buffers() -> None:
    dec = _native.ChunkedDecoder()
    assert dec.feed(bytearray(b"3\r\nabc\r\n0\r\n")) == b"abc"
    assert not dec.done
    assert dec.feed(memoryview(b"X-Sum: 1\r\n\r\nGET / HTTP/1.1\r\n")) == b""
    assert dec.done
    assert dec.trailers == [(b"x-sum", b"1")]
    assert dec.leftover == b"GET / HTTP/1.1\r\n"


def test_chunked_limit_body() -> None:
    dec = _native.ChunkedDecoder(limit_body=10)
    assert dec.feed(b"5\r\nhello\r\n") == b"hello"
    with pytest.raises(_native.ParseError) as info:
        dec.feed(b"6\r\n")
    assert info.value.status == 413
    # The decoder stays failed: the connection must be closed.
    with pytest.raises(_native.ParseError):
        dec.feed(b"0\r\n\r\n")
