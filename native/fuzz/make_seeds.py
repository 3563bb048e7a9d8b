"""Writes the hand-made seeds in seeds/ (committed; rerun after changing them).

Valid messages give the fuzzer a start deep inside each parser instead of
noise it must first learn to get past. HTTP/2 frames come from the h2
package (the test extra). The first byte of a connection or chunked seed is
the target's split control (how the input is cut into writes), not data.
"""

from collections.abc import Callable
from pathlib import Path

from h2.config import H2Configuration
from h2.connection import H2Connection

SEEDS = Path(__file__).resolve().parent / "seeds"
H = b"Host: a\r\n"

HEADS = {
    "get": b"GET /a/b?x=1&y=%20 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",
    "post_length": b"POST /form HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n\r\nhello",
    "post_chunked": b"POST /up HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
    b"5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n",
    "http10": b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "absolute": b"GET http://example.com:8080/p HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
    "options": b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n",
    "connect": b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    "expect": b"PUT /x HTTP/1.1\r\n" + H + b"Expect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "websocket": b"GET /ws HTTP/1.1\r\n" + H + b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    "pipelined": b"GET /1 HTTP/1.1\r\n"
    + H
    + b"\r\nGET /2 HTTP/1.1\r\n"
    + H
    + b"Connection: close\r\n\r\n",
}

# What the differential target (h1 against hyper) starts from besides HEADS:
# the corners where two parsers may part (repeated fields, list-valued
# framing fields, absolute-form targets with userinfo, case and fragments).
DIFFERENTIAL_HEADS = {
    "repeated": b"GET / HTTP/1.1\r\n" + H + b"Accept: a\r\nX-Y: 1\r\naccept: b\r\n"
    b"X-y: 2\r\nCookie: c=1\r\nACCEPT: \r\n\r\n",
    "te_two_lines": b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te_list": b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip ,\tChunked\r\n\r\n",
    "cl_zeros": b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 007\r\n\r\n",
    "absolute_userinfo": b"GET HTTP://u:p@h:8/?q#f HTTP/1.1\r\nHost: h:8\r\n\r\n",
    "absolute_other": b"GET foo+bar.baz-1://[::1]?x HTTP/1.1\r\nHost: a\r\n\r\n",
    "target_chars": b"GET /a%2F{\"}|[\\]^~!$&'()*+,;=:@?q={}|^`~/?%zz HTTP/1.1\r\n" + H + b"\r\n",
    "values": b"GET / HTTP/1.1\r\n" + H + b"X:  spaced\t value \t\r\nY:\r\nZ: \x80\xff\r\n\r\n",
    "http10_connection_list": b"GET / HTTP/1.0\r\nHost: a\r\nConnection: close, keep-alive\r\n\r\n",
    "crlf_first": b"\r\n\r\nPATCH /x HTTP/1.1\r\n" + H + b"Content-Length: 0\r\n\r\n",
}

CHUNKED_BODIES = {
    "simple": b"5\r\nhello\r\n0\r\n\r\n",
    "ext": b'3;a=b;c="q\\"x"\r\nabc\r\n0\r\n\r\n',
    "trailers": b"1\r\nx\r\n0\r\nName: value\r\nOther: v\r\n\r\nGET",
    "hex": b"aF\r\n" + b"x" * 0xAF + b"\r\n0\r\n\r\n",
    "empty": b"0\r\n\r\n",
}

GET = [(":method", "GET"), (":path", "/p?q=1"), (":scheme", "http"), (":authority", "a")]
POST = [(":method", "POST"), (":path", "/up"), (":scheme", "http"), (":authority", "a")]


def _post(c: H2Connection) -> None:
    c.send_headers(1, [*POST, ("content-length", "5")])
    c.send_data(1, b"hello", end_stream=True)


def _many(c: H2Connection) -> None:
    for stream in range(1, 12, 2):
        c.send_headers(stream, GET, end_stream=True)


def _reset(c: H2Connection) -> None:
    c.send_headers(1, GET)
    c.reset_stream(1)


def _misc(c: H2Connection) -> None:
    c.ping(b"12345678")
    c.increment_flow_control_window(1000)
    c.send_headers(1, GET, end_stream=True)
    c.close_connection()


H2_SEQUENCES: dict[str, Callable[[H2Connection], None]] = {
    "get": lambda c: c.send_headers(1, GET, end_stream=True),
    "post": _post,
    "many": _many,
    "reset": _reset,
    "misc": _misc,
}


PROXY_HEADERS = {
    "v1_tcp4": b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n",
    "v1_tcp6": b"PROXY TCP6 2001:db8::1 2001:db8::2 56324 443\r\n",
    "v1_unknown": b"PROXY UNKNOWN\r\n",
    # Version 2, PROXY over TCP4, with one TLV (type 0x04, NOOP, 2 bytes).
    "v2_tcp4_tlv": b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x11"
    + bytes([192, 0, 2, 1, 198, 51, 100, 2, 0xDC, 0x04, 0x01, 0xBB])
    + b"\x04\x00\x02ab",
    "v2_local": b"\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00",
}


def frames(build: Callable[[H2Connection], None]) -> bytes:
    """The frames after the preface and SETTINGS, which the target adds itself."""
    c = H2Connection(config=H2Configuration(client_side=True, header_encoding=None))
    c.initiate_connection()
    c.data_to_send()
    build(c)
    return c.data_to_send()


def write(target: str, name: str, data: bytes) -> None:
    (SEEDS / target).mkdir(parents=True, exist_ok=True)
    (SEEDS / target / name).write_bytes(data)


def main() -> None:
    for name, head in HEADS.items():
        write("request_head", name, head)
        write("connection_h1", name, b"\x07" + head)
        write("connection_h1", f"{name}_bytewise", b"\x01" + head)
    for name, head in {**HEADS, **DIFFERENTIAL_HEADS}.items():
        write("differential_h1", name, head)
    for name, body in CHUNKED_BODIES.items():
        write("chunked", name, b"\x05" + body)
    for name, header in PROXY_HEADERS.items():
        write("proxy_header", name, header)
    for name, build in H2_SEQUENCES.items():
        write("connection_h2", name, b"\x04" + frames(build))


if __name__ == "__main__":
    main()
