"""The native HTTP/1.1 parser (`supervise._native`) against raw requests.

The request tables are shared with test_raw_requests.py, which sends the
same bytes to the running server: what the parser refuses here, a client
must see refused on the wire.
"""

from __future__ import annotations

import pytest

from supervise import _native

H = b"Host: example.com\r\n"
LONG = 9000  # past every default limit (4094 / 8190)

# (id, raw head, status). Each is refused whatever follows the head.
INVALID_REQUESTS: list[tuple[str, bytes, int]] = [
    # Request smuggling: ambiguous framing.
    (
        "cl-and-te",
        b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
    ),
    (
        "te-and-cl",
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        400,
    ),
    (
        "cl-twice-same",
        b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 3\r\nContent-Length: 3\r\n\r\n",
        400,
    ),
    (
        "cl-twice-differ",
        b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\n",
        400,
    ),
    ("cl-list", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 3, 3\r\n\r\n", 400),
    ("cl-plus", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: +3\r\n\r\n", 400),
    ("cl-minus", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: -1\r\n\r\n", 400),
    ("cl-minus-zero", b"POST / HTTP/1.0\r\nContent-Length: -0\r\n\r\n", 400),
    ("cl-hex", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 0x10\r\n\r\n", 400),
    ("cl-inner-space", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 1 0\r\n\r\n", 400),
    ("cl-underscore", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 1_0\r\n\r\n", 400),
    ("cl-empty", b"POST / HTTP/1.1\r\n" + H + b"Content-Length:\r\n\r\n", 400),
    ("cl-words", b"POST / HTTP/1.0\r\nContent-Length: bla\r\n\r\n", 400),
    (
        "cl-overflow",
        b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 100000000000000000000\r\n\r\n",
        400,
    ),
    ("te-gzip-only", b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip\r\n\r\n", 400),
    (
        "te-chunked-not-last",
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked, gzip\r\n\r\n",
        400,
    ),
    (
        "te-chunked-not-last-lines",
        b"POST / HTTP/1.1\r\n"
        + H
        + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n",
        400,
    ),
    (
        "te-chunked-twice",
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked, chunked\r\n\r\n",
        400,
    ),
    (
        "te-chunked-twice-lines",
        b"POST / HTTP/1.1\r\n"
        + H
        + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
    ),
    (
        "te-chunkedchunked",
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunkedchunked\r\n\r\n",
        400,
    ),
    ("te-empty", b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding:\r\n\r\n", 400),
    ("te-empty-element", b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: , chunked\r\n\r\n", 400),
    ("te-quoted", b"POST / HTTP/1.1\r\n" + H + b'Transfer-Encoding: "chunked"\r\n\r\n', 400),
    ("te-ctl", b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\x01\r\n\r\n", 400),
    ("te-http10", b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    (
        "te-unknown-coding",
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: foo, chunked\r\n\r\n",
        501,
    ),
    (
        "te-space-before-colon",
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding : chunked\r\n\r\n",
        400,
    ),
    # Line structure.
    ("obs-fold", b"GET / HTTP/1.1\r\n" + H + b"Long: one\r\n two\r\n\r\n", 400),
    ("obs-fold-tab", b"GET / HTTP/1.1\r\n" + H + b"Long: one\r\n\ttwo\r\n\r\n", 400),
    ("space-before-first-field", b"GET / HTTP/1.1\r\n Host: example.com\r\n\r\n", 400),
    ("space-before-colon", b"GET / HTTP/1.1\r\n" + H + b"Foo : bar\r\n\r\n", 400),
    ("bare-lf-in-field", b"GET / HTTP/1.1\r\n" + H + b"X: a\nContent-Length: 5\r\n\r\n", 400),
    ("bare-lf-request-line", b"GET / HTTP/1.1\n" + H + b"\r\n", 400),
    ("bare-lf-end", b"GET / HTTP/1.1\r\n" + H + b"\n", 400),
    ("bare-lf-only", b"GET / HTTP/1.1\nHost: x\n\n", 400),
    ("bare-cr-in-field", b"GET / HTTP/1.1\r\n" + H + b"X: a\rY: b\r\n\r\n", 400),
    ("bare-cr-request-line", b"GET / HTTP/1.1\rHost: x\r\n\r\n", 400),
    ("cr-before-body", b"PUT / HTTP/1.1\r\n" + H + b"Content-Length: 3\r\n\rabc", 400),
    # Tokens, values, targets.
    ("method-nul", b"GET\x00 / HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("method-lowercase", b"get / HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("method-colon", b"GET: / HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("method-non-ascii", b"GET\xc3\x9f / HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("name-nul", b"GET / HTTP/1.1\r\n" + H + b"Ba\x00z: v\r\n\r\n", 400),
    ("name-non-ascii", b"GET / HTTP/1.1\r\n" + H + b"Content-Length\xc3\x9f: 3\r\n\r\n", 400),
    ("name-parenthesis", b"GET / HTTP/1.1\r\n" + H + b"X(y): v\r\n\r\n", 400),
    ("name-empty", b"GET / HTTP/1.1\r\n" + H + b": v\r\n\r\n", 400),
    ("value-nul", b"GET / HTTP/1.1\r\n" + H + b"X: a\x00b\r\n\r\n", 400),
    ("value-bel", b"GET / HTTP/1.1\r\n" + H + b"X: a\x07b\r\n\r\n", 400),
    ("value-del", b"GET / HTTP/1.1\r\n" + H + b"X: a\x7fb\r\n\r\n", 400),
    ("value-formfeed", b"GET / HTTP/1.1\r\n" + H + b"X: a\x0cb\r\n\r\n", 400),
    ("target-ctl", b"GET /a\x01b HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("target-del", b"GET /a\x7fb HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("double-space", b"GET  / HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("space-after-version", b"GET / HTTP/1.1 \r\n" + H + b"\r\n", 400),
    ("asterisk-not-options", b"GET * HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("authority-not-connect", b"GET example.com:443 HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("relative-target", b"GET foo/bar HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("connect-origin-form", b"CONNECT / HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("bad-absolute", b"PUT s://]ufd/: HTTP/1.1\r\n" + H + b"\r\n", 400),
    # Versions.
    ("http-2.0", b"GET / HTTP/2.0\r\n" + H + b"\r\n", 505),
    ("http-1.2", b"GET / HTTP/1.2\r\n" + H + b"\r\n", 505),
    ("http-111", b"GET / HTTP/111\r\n" + H + b"\r\n", 400),
    ("http-0.99", b"GET / HTTP/0.99\r\n\r\n", 400),
    ("ftp", b"GET / FTP/1.1\r\n" + H + b"\r\n", 400),
    ("http-0.9-no-version", b"GET /\r\n\r\n", 400),
    # Host.
    ("no-host-1.1", b"GET / HTTP/1.1\r\n\r\n", 400),
    ("two-hosts", b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("two-hosts-1.0", b"GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400),
    ("host-with-slash", b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    ("host-with-at", b"GET / HTTP/1.1\r\nHost: user@evil\r\n\r\n", 400),
    (
        "two-content-types",
        b"GET / HTTP/1.1\r\n" + H + b"Content-Type: a\r\nContent-Type: b\r\n\r\n",
        400,
    ),
    # Limits (defaults: 4094-byte line, 100 fields, 8190-byte field).
    ("line-too-long", b"GET /" + b"a" * LONG + b" HTTP/1.1\r\n" + H + b"\r\n", 414),
    ("field-too-long", b"GET / HTTP/1.1\r\n" + H + b"X: " + b"a" * LONG + b"\r\n\r\n", 431),
    (
        "too-many-fields",
        b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-%d: v\r\n" % i for i in range(101)) + b"\r\n",
        431,
    ),
]

# (id, raw head, what the parser must have seen). `environ` keys are checked
# in wsgi_environ({"SCRIPT_NAME": ""}); `absent` keys must not be there.
VALID_REQUESTS: list[tuple[str, bytes, dict]] = [
    (
        "simple-get",
        b"GET /index.html HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",
        {
            "method": "GET",
            "path": "/index.html",
            "query": "",
            "http_version": "1.1",
            "keep_alive": True,
            "host": "example.com",
            "headers": [(b"host", b"example.com"), (b"accept", b"*/*")],
            "environ": {"REQUEST_METHOD": "GET", "PATH_INFO": "/index.html", "HTTP_ACCEPT": "*/*"},
        },
    ),
    (
        "post-content-length",
        b"POST /form?a=1 HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\n"
        b"Content-Length: 0014\r\n\r\n",
        {
            "method": "POST",
            "query": "a=1",
            "content_length": 14,
            "chunked": False,
            "environ": {
                "CONTENT_TYPE": "text/plain",
                "CONTENT_LENGTH": "0014",
                "QUERY_STRING": "a=1",
            },
            "absent": ["HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"],
        },
    ),
    (
        "chunked",
        b"POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
        {"chunked": True, "content_length": None, "environ": {"HTTP_TRANSFER_ENCODING": "chunked"}},
    ),
    (
        "gzip-then-chunked",
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n",
        {"chunked": True},
    ),
    (
        "identity-chunked-two-lines",
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n",
        {"chunked": True, "environ": {"HTTP_TRANSFER_ENCODING": "identity,chunked"}},
    ),
    (
        "http10-no-host",
        b"GET /old HTTP/1.0\r\n\r\n",
        {
            "http_version": "1.0",
            "keep_alive": False,
            "host": None,
            "environ": {"SERVER_PROTOCOL": "HTTP/1.0"},
        },
    ),
    (
        "http10-keep-alive",
        b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
        {"keep_alive": True},
    ),
    (
        "http11-close",
        b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
        {"keep_alive": False},
    ),
    (
        "absolute-form",
        b"GET http://user:pw@example.com:8080/foo?q=1 HTTP/1.1\r\nHost: other\r\n\r\n",
        {
            "target": "http://user:pw@example.com:8080/foo?q=1",
            "path": "/foo",
            "query": "q=1",
            "host": "example.com:8080",
            "environ": {
                "HTTP_HOST": "example.com:8080",
                "RAW_URI": "http://user:pw@example.com:8080/foo?q=1",
            },
        },
    ),
    (
        "absolute-form-no-path",
        b"GET http://h.example?x=y HTTP/1.1\r\nHost: h.example\r\n\r\n",
        {"path": "/", "raw_path": b"/", "query": "x=y"},
    ),
    (
        "options-asterisk",
        b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
        {"method": "OPTIONS", "target": "*", "path": "*"},
    ),
    (
        "connect-authority",
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
        {"method": "CONNECT", "target": "example.com:443", "path": "", "host": "example.com:443"},
    ),
    (
        "leading-crlf",
        b"\r\n\r\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n",
        {"path": "/x"},
    ),
    (
        "obs-text-and-ows",
        b"GET / HTTP/1.1\r\nHost: h\r\nX-Name: \t caf\xc3\xa9 \t\r\nEmpty:\r\n\r\n",
        {
            "headers": [(b"host", b"h"), (b"x-name", b"caf\xc3\xa9"), (b"empty", b"")],
            "environ": {"HTTP_X_NAME": "caf\xc3\xa9", "HTTP_EMPTY": ""},
        },
    ),
    (
        "repeated-fields-joined",
        b"GET / HTTP/1.1\r\nHost: h\r\nAccept: a\r\nX-Other: o\r\naccept: b\r\n\r\n",
        {"environ": {"HTTP_ACCEPT": "a,b", "HTTP_X_OTHER": "o"}},
    ),
    (
        "underscore-not-in-environ",
        b"GET / HTTP/1.1\r\nHost: h\r\nX_Forwarded_For: 6.6.6.6\r\n"
        b"X-Forwarded-For: 1.2.3.4\r\n\r\n",
        {
            "headers": [
                (b"host", b"h"),
                (b"x_forwarded_for", b"6.6.6.6"),
                (b"x-forwarded-for", b"1.2.3.4"),
            ],
            "environ": {"HTTP_X_FORWARDED_FOR": "1.2.3.4"},
        },
    ),
    (
        "percent-decoded-path",
        b"GET /a%20b/%C3%A9?q=%20 HTTP/1.1\r\nHost: h\r\n\r\n",
        {
            "path": "/a b/\xc3\xa9",
            "raw_path": b"/a%20b/%C3%A9",
            "query": "q=%20",
            "environ": {"PATH_INFO": "/a b/\xc3\xa9", "RAW_URI": "/a%20b/%C3%A9?q=%20"},
        },
    ),
    (
        "fragment-dropped",
        b"GET /forums/1?page=1#posts-17 HTTP/1.1\r\nHost: h\r\n\r\n",
        {"path": "/forums/1", "query": "page=1", "target": "/forums/1?page=1#posts-17"},
    ),
    (
        "quotes-and-pipes-in-target",
        b'GET /with_"quotes"?q=| HTTP/1.1\r\nHost: h\r\n\r\n',
        {"path": '/with_"quotes"', "query": "q=|"},
    ),
    (
        "raw-utf8-target",
        b"GET /\xc3\xa0%20k HTTP/1.0\r\n\r\n",
        {"path": "/\xc3\xa0 k", "raw_path": b"/\xc3\xa0%20k"},
    ),
    (
        "extension-method",
        b"M-SEARCH / HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\n\r\n",
        {"method": "M-SEARCH"},
    ),
    ("dash-method", b"-BLARGH /foo HTTP/1.1\r\nHost: h\r\n\r\n", {"method": "-BLARGH"}),
    (
        "expect-and-upgrade",
        b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n"
        b"Expect: 100-continue\r\n\r\n",
        {"upgrade": "websocket", "expect_continue": True},
    ),
    (
        "upgrade-without-connection",
        b"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n",
        {"upgrade": None, "expect_continue": False},
    ),
    (
        "host-odd-but-valid",
        b"GET / HTTP/1.1\r\nHost: 0.0.0.0=5000\r\n\r\n",
        {"host": "0.0.0.0=5000"},
    ),
    ("host-ipv6", b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", {"host": "[::1]:8080"}),
    ("host-empty", b"GET / HTTP/1.1\r\nHost:\r\n\r\n", {"host": ""}),
]


def ids(cases: list) -> list[str]:
    return [c[0] for c in cases]


@pytest.fixture(scope="module")
def parser() -> _native.RequestParser:
    return _native.RequestParser()


def test_tables_are_big_enough() -> None:
    assert len(INVALID_REQUESTS) >= 40
    assert len(VALID_REQUESTS) >= 15
    assert len(set(ids(INVALID_REQUESTS + VALID_REQUESTS))) == len(
        INVALID_REQUESTS + VALID_REQUESTS
    )


@pytest.mark.parametrize(("name", "raw", "status"), INVALID_REQUESTS, ids=ids(INVALID_REQUESTS))
def test_invalid_request_is_refused(
    parser: _native.RequestParser, name: str, raw: bytes, status: int
) -> None:
    with pytest.raises(_native.ParseError) as info:
        parser.parse(raw + b"body")
    err = info.value
    assert err.status == status
    assert isinstance(err, ValueError)
    assert err.reason and str(err) == err.reason


@pytest.mark.parametrize(("name", "raw", "want"), VALID_REQUESTS, ids=ids(VALID_REQUESTS))
def test_valid_request_is_parsed(
    parser: _native.RequestParser, name: str, raw: bytes, want: dict
) -> None:
    result = parser.parse(raw + b"BODY")
    assert result is not None
    req, head_len = result
    assert head_len == len(raw)
    want = dict(want)
    environ_want = want.pop("environ", {})
    absent = want.pop("absent", [])
    for attr, value in want.items():
        assert getattr(req, attr) == value, attr
    environ = req.wsgi_environ({"SCRIPT_NAME": ""})
    for key, value in environ_want.items():
        assert environ[key] == value, key
    for key in absent:
        assert key not in environ
    # Every str in the environ is latin-1 text, as PEP 3333 wants.
    assert all(v.encode("latin-1") is not None for v in environ.values() if isinstance(v, str))


@pytest.mark.parametrize(("name", "raw", "want"), VALID_REQUESTS, ids=ids(VALID_REQUESTS))
def test_valid_request_byte_by_byte(
    parser: _native.RequestParser, name: str, raw: bytes, want: dict
) -> None:
    """Every proper prefix of a valid head is 'incomplete', never an error."""
    for end in range(len(raw)):
        assert parser.parse(raw[:end]) is None, end
    assert parser.parse(raw) is not None


def test_buffer_types(parser: _native.RequestParser) -> None:
    raw = b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n"
    for buf in (raw, bytearray(raw), memoryview(raw)):
        req, n = parser.parse(buf)
        assert (req.path, n) == ("/b", len(raw))
    with pytest.raises(TypeError):
        parser.parse("GET / HTTP/1.1\r\n\r\n")


# Limits must stop a client that never finishes its head.
@pytest.mark.parametrize(
    ("limits", "raw", "status"),
    [
        ({}, b"GET /" + b"a" * 5000, 414),
        ({}, b"GET / HTTP/1.1\r\nHost: h\r\nX: " + b"a" * 9000, 431),
        ({}, b"GET / HTTP/1.1\r\nHost: h\r\n" + b"X: y\r\n" * 101, 431),
        ({"limit_request_line": 10}, b"GET /0123456789", 414),
        ({"limit_request_field_size": 10}, b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 431),
        ({"limit_request_fields": 2}, b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", 431),
    ],
    ids=[
        "endless-line",
        "endless-field",
        "endless-fields",
        "small-line",
        "small-field",
        "few-fields",
    ],
)
def test_limits(limits: dict, raw: bytes, status: int) -> None:
    with pytest.raises(_native.ParseError) as info:
        _native.RequestParser(**limits).parse(raw)
    assert info.value.status == status


def test_zero_means_unlimited() -> None:
    parser = _native.RequestParser(0, 0, 0)
    raw = b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: h\r\n" + b"X: " + b"v" * 20000 + b"\r\n"
    raw += b"".join(b"Y-%d: v\r\n" % i for i in range(300)) + b"\r\n"
    req, n = parser.parse(raw)
    assert n == len(raw) and len(req.headers) == 302


def test_limits_are_exact() -> None:
    line = b"GET /" + b"a" * 15 + b" HTTP/1.0"  # 29 bytes
    assert _native.RequestParser(limit_request_line=29).parse(line + b"\r\n\r\n") is not None
    with pytest.raises(_native.ParseError):
        _native.RequestParser(limit_request_line=28).parse(line + b"\r\n\r\n")


def test_request_header_lookup_and_repr(parser: _native.RequestParser) -> None:
    req, _ = parser.parse(b"GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a: 2\r\n\r\n")
    assert req.header(b"x-a") == b"1"
    assert req.header(b"X-A") == b"1"
    assert req.header(b"missing") is None
    assert req.headers is req.headers  # built once
    assert "GET /" in repr(req)
    with pytest.raises(AttributeError):
        req.method = "POST"


def test_fields_named_for_the_proxy_rules(parser: _native.RequestParser) -> None:
    """The proxy rules' lookup: any case, repeats joined with ",", None when absent."""
    raw = (
        b"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 10.0.0.1\r\n"
        b"x-forwarded-for: 10.0.0.2\r\nX-Forwarded-Proto: https\r\nAccept: */*\r\n\r\n"
    )
    req, _ = parser.parse(raw)
    names = (b"forwarded", b"x-forwarded-for", b"x-forwarded-proto")
    assert req.fields_named(names) == {
        "x-forwarded-for": "10.0.0.1,10.0.0.2",
        "x-forwarded-proto": "https",
    }
    assert req.fields_named((b"forwarded",)) is None
    assert req.fields_named(()) is None
    with pytest.raises(TypeError):
        req.fields_named(("x-forwarded-for",))


def test_environ_is_a_fresh_copy(parser: _native.RequestParser) -> None:
    req, _ = parser.parse(b"GET /app/x?y=1 HTTP/1.1\r\nHost: h\r\n\r\n")
    base = {"SCRIPT_NAME": "/app", "wsgi.url_scheme": "http", "SERVER_NAME": "h"}
    environ = req.wsgi_environ(base)
    assert environ is not base and "PATH_INFO" not in base
    assert environ["SCRIPT_NAME"] == "/app"
    assert environ["PATH_INFO"] == "/x"
    assert environ["wsgi.url_scheme"] == "http"
    assert environ["REQUEST_URI"] == "/app/x?y=1"


@pytest.mark.parametrize(
    ("script", "path", "path_info"),
    [
        ("/app", "/app", ""),
        ("/app/", "/app/x", "/x"),
        ("/app", "/apple", "/apple"),
        ("", "/a", "/a"),
    ],
)
def test_script_name_prefix(
    parser: _native.RequestParser, script: str, path: str, path_info: str
) -> None:
    req, _ = parser.parse(b"GET %s HTTP/1.0\r\n\r\n" % path.encode())
    assert req.wsgi_environ({"SCRIPT_NAME": script})["PATH_INFO"] == path_info


def test_environ_keys_for_many_distinct_field_names(parser: _native.RequestParser) -> None:
    """Custom field names past the key cache's bound still get their keys."""
    for i in range(700):
        raw = b"GET / HTTP/1.0\r\nX-Custom-%d: v%d\r\n\r\n" % (i, i)
        req, _ = parser.parse(raw)
        assert req.wsgi_environ({})[f"HTTP_X_CUSTOM_{i}"] == f"v{i}"
