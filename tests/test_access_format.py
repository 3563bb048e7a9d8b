"""The native access-line formatter against the Python getters it stands for.

``logs.compile_access_format`` is the reference: one %-template and one getter per
atom. Every format, request and response below must give the same line (or both
raise, when a getter or a spec rejects a value) through ``_native.AccessFormat``,
which reads the common atoms in Rust and calls the getters for the rest.
"""

from __future__ import annotations

import base64
import itertools
import os
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from supervise import _native, logs
from supervise.config import Config

ATOMS = [
    "h",
    "l",
    "u",
    "t",
    "r",
    "m",
    "U",
    "q",
    "H",
    "s",
    "B",
    "b",
    "f",
    "a",
    "T",
    "M",
    "D",
    "L",
    "p",
]

FORMATS = [
    Config({}).access_log_format,  # Gunicorn's default
    " ".join(f"%({a})s" for a in ATOMS),
    *(f"[%({a})s]" for a in ATOMS),
    '%(h)s "%({X-Request-Id}i)s" %({content-type}i)s %({Content-Length}I)s',
    "%({content-type}o)s|%({X-Trace}O)s|%({set-cookie}o)s|%({kEy}o)s",
    "%({HOME}e)s %({SUPERVISE_TEST_VAR}e)s %({PATH_INFO}e)s",
    "%(s)d %(B)5s %(D)06d %(a).3s %(s)r %(h)-12s| %(M)x %(T)+d %(b)a",
    "100%% %(s)s % literal %%(h)s %(h %(nope)s %(h)z %()s %({}i)s",
    "%(h)s%(h)s%(u)s%(u)s",
    "%({stra\u00dfe}i)s %({\u212aey}o)s %({a}}i)s %({a}x)s",
    "",
    "no placeholders at all",
]


class Resp:
    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


class Headers(tuple):
    """Not a plain tuple: the getter iterates it."""


def responses() -> Iterator[Any]:
    yield Resp(status_code=200, status="200 OK", sent=5, headers=[("Content-Type", "text/x")])
    yield Resp(status_code=None, status="404 Not Found", sent=None, headers=None)
    yield Resp(status_code=None, status="", sent=0, headers=())
    yield Resp(status_code=True, sent=False, headers=[])
    yield Resp(status_code=2**70, sent=2**70)
    yield Resp(status_code="201", sent="12")
    yield Resp()  # no attribute at all
    yield Resp(
        status_code=500,
        sent=1,
        headers=[
            ("x-trace", 'a"b\\c\x00\x1f\x7f\xe9'),
            ("X-TRACE", "last"),
            ("Set-Cookie", ""),
            ("\u212aey", "kelvin"),
        ],
    )
    yield Resp(status_code=200, sent=1, headers=(("content-type", "t"),))
    yield Resp(status_code=200, sent=1, headers=Headers([("content-type", "sub")]))
    yield Resp(status_code=200, sent=1, headers=[("content-type", 5)])
    yield Resp(status_code=200, sent=1, headers=[("content-type",)])
    yield Resp(status_code=200, sent=1, headers={"content-type": "dict"})


def basic(credentials: bytes) -> str:
    return "Basic " + base64.b64encode(credentials).decode()


BASE = {
    "REQUEST_METHOD": "GET",
    "RAW_URI": "/p?q=1",
    "PATH_INFO": "/p",
    "QUERY_STRING": "q=1",
    "SERVER_PROTOCOL": "HTTP/1.1",
    "REMOTE_ADDR": "10.1.2.3",
    "HTTP_USER_AGENT": "curl/8.0",
    "HTTP_REFERER": "http://example.com/",
}


class Str(str):
    def __format__(self, spec: str) -> str:
        return "formatted"


class Environ(Mapping[str, Any]):
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


HOSTILE = 'q"u\\o\te\r\n\x00\x1b\x7f\x80\xff caf\xe9 \U0001f600'


def environs() -> Iterator[Any]:
    yield dict(BASE)
    yield {}
    yield dict(BASE, RAW_URI=None)
    yield dict(BASE, RAW_URI=None, QUERY_STRING="")
    yield dict(BASE, RAW_URI=None, QUERY_STRING=None, PATH_INFO=None)
    yield {"PATH_INFO": "/only", "QUERY_STRING": "x"}
    yield {key: HOSTILE for key in BASE}
    yield dict(BASE, HTTP_X_REQUEST_ID=HOSTILE, CONTENT_TYPE="text/plain", CONTENT_LENGTH="3")
    yield dict(BASE, REMOTE_ADDR="", HTTP_USER_AGENT="", HTTP_REFERER=None)
    yield dict(BASE, REMOTE_ADDR=5)
    yield dict(BASE, REQUEST_METHOD=None)
    yield dict(BASE, RAW_URI=Str("/sub"), REMOTE_ADDR=Str("sub"))
    yield dict(BASE, RAW_URI=b"/bytes")
    for auth in (
        basic(b"alice:secret"),
        basic(b"alice"),
        basic(b":nouser"),
        basic('us"er\n:x'.encode("latin-1")),
        basic(b"\xe9t\xe9:x"),
        "basic  " + base64.b64encode(b"bob:x").decode() + " ",
        "BASIC " + base64.b64encode(b"carol:x").decode(),
        "Basic !!!not base64",
        "Basic",
        "Bearer token",
        "",
        "B\xe4sic x",
        "\u212asic x",
    ):
        yield dict(BASE, HTTP_AUTHORIZATION=auth)
    yield dict(BASE, HTTP_AUTHORIZATION=None)
    yield dict(BASE, HTTP_AUTHORIZATION=7)
    yield Environ(dict(BASE, HTTP_AUTHORIZATION=basic(b"dave:x")))


TIMES = [0.0, 1.5, 0.0000014, 123456.789, 2, -0.5, 1e30, float("inf"), float("nan")]


def outcome(make_line: Any, resp: Any, environ: Any, rt: Any) -> tuple[str, Any]:
    try:
        return "line", make_line(resp, environ, rt)
    except Exception:
        # Which exception may differ: Python runs every getter before formatting.
        return "raises", None


def reference(fmt: str) -> Any:
    template, getters = logs.compile_access_format(fmt)
    return lambda resp, environ, rt: template % tuple([g(resp, environ, rt) for g in getters])


def native(fmt: str) -> Any:
    pieces, tail = logs.access_pieces(fmt)
    return _native.AccessFormat(pieces, tail, logs.time_text)


@pytest.fixture(autouse=True)
def process_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPERVISE_TEST_VAR", HOSTILE.replace("\x00", ""))


@pytest.mark.parametrize("fmt", FORMATS)
def test_native_lines_match_the_getters(fmt: str) -> None:
    python_line, native_line = reference(fmt), native(fmt)
    cases = itertools.product(list(responses()), list(environs()), TIMES)
    for resp, environ, rt in cases:
        before = outcome(python_line, resp, environ, rt)
        got = outcome(native_line, resp, environ, rt)
        # The reference runs again after: a second may have turned for %(t)s.
        expected = {before, outcome(python_line, resp, environ, rt)}
        assert got in expected, (fmt, vars(resp), environ, rt)


def test_common_atoms_cost_no_python_call() -> None:
    calls: list[str] = []

    def counted(key: str, getter: Any) -> Any:
        def get(resp: Any, environ: Mapping[str, Any], rt: float) -> Any:
            calls.append(key)
            return getter(resp, environ, rt)

        return get

    fmt = " ".join(f"%({a})s" for a in ATOMS if a != "L") + " %({X-Id}i)s %({content-type}o)s"
    pieces, tail = logs.access_pieces(fmt)
    pieces = [(lit, key, spec, counted(key, g)) for lit, key, spec, g in pieces]
    seconds: list[int] = []

    def time_text(now: int) -> str:
        seconds.append(now)
        return logs.time_text(now)

    make_line = _native.AccessFormat(pieces, tail, time_text)
    resp = next(responses())
    environ = dict(BASE, HTTP_X_ID="7", HTTP_AUTHORIZATION="Bearer t")
    lines = [make_line(resp, environ, 0.25) for _ in range(1000)]
    assert calls == []
    assert len(seconds) == len(set(seconds)) <= 3  # once per second turned
    assert lines[-1].startswith("10.1.2.3 - - [")
    assert lines[-1].endswith(
        "] GET /p?q=1 HTTP/1.1 GET /p q=1 HTTP/1.1 200 5 5 http://example.com/ curl/8.0 "
        f"0 250 250000 <{os.getpid()}> 7 text/x"
    )


def test_credentials_are_decoded_by_python() -> None:
    environ = dict(BASE, HTTP_AUTHORIZATION=basic(b"al\x01ce:pw"))
    assert native("%(u)s")(Resp(), environ, 0.0) == "al\\x01ce"


def test_an_undecodable_process_variable_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPERVISE_TEST_VAR", "bad\udcff")
    line = native("%({SUPERVISE_TEST_VAR}e)s")(Resp(), {}, 0.0)
    assert line.startswith("bad\ufffd")
    line.encode()  # no surrogate left to fail the writer


# A parsed head is read in place of the environ it would make (AccessFormat.for_request).
RAW_REQUESTS = [
    b"GET /p?q=1 HTTP/1.1\r\nHost: a.example\r\nUser-Agent: curl/8\r\nReferer: http://r/\r\n\r\n",
    b"GET / HTTP/1.0\r\n\r\n",
    b"GET http://over.example:8080/x?y=2 HTTP/1.1\r\nHost: a.example\r\n\r\n",
    b"CONNECT over.example:443 HTTP/1.1\r\nHost: over.example:443\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /a%20b%22c%e9/%2F%5C?x=%22y%22&z=%e9 HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /r HTTP/1.1\r\nHost: a\r\nX-Request-Id: one\r\nx-request-id: two\r\n"
    b"User-Agent: a\r\nUser-Agent: b\r\nContent-Type: t/1\r\n"
    b"Content-Length: 0\r\nX_Request_Id: spoof\r\nX-Empty:\r\n\r\n",
    b'POST /u HTTP/1.1\r\nHost: a\r\nUser-Agent: caf\xe9 "q" \\ \t\x80\xff\r\n'
    b"Referer: \r\nContent-Length: 3\r\n\r\n",
    *(
        b"GET / HTTP/1.1\r\nHost: a\r\nAuthorization: " + auth + b"\r\n\r\n"
        for auth in (
            basic(b"alice:secret").encode(),
            basic(b"\xe9t\xe9:x").encode(),
            b"Bearer token",
            b"B\xe4sic x",
            b"basic  " + base64.b64encode(b"bob:x"),
            b"Basic !!!",
        )
    ),
    b"GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer a\r\nAuthorization: Basic b\r\n\r\n",
]

FIELD_FORMAT = (
    "%({x-request-id}i)s|%({x_request_id}i)s|%({host}i)s|%({content-type}i)s|"
    "%({content-length}i)s|%({authorization}i)s|%({User-Agent}i)s|%({missing}i)s|"
    "%({}i)s|%({-x}i)s|%({x-empty}i)s|%({Content_Type}i)s|%(U)s|%(q)s|%(r)s|%(h)s|%(u)s"
)
REMOTES = ["10.0.0.1", "", "::1", "caf\xe9", "bad\udcff"]


def parsed_requests() -> Iterator[Any]:
    parser = _native.RequestParser()
    for raw in RAW_REQUESTS:
        parsed = parser.parse(raw)
        assert parsed is not None, raw
        yield parsed[0]


@pytest.mark.parametrize("fmt", [*FORMATS, FIELD_FORMAT])
def test_a_parsed_head_logs_as_its_environ(fmt: str) -> None:
    python_line, native_line = reference(fmt), native(fmt)
    cases = itertools.product(list(responses())[:3], list(parsed_requests()), REMOTES, TIMES[:3])
    for resp, request, remote, rt in cases:
        environ = request.wsgi_environ({"REMOTE_ADDR": remote})
        expected = {
            outcome(python_line, resp, environ, rt),
            outcome(native_line, resp, environ, rt),
        }
        try:
            got = "line", native_line.for_request(resp, request, remote, rt)
        except Exception:
            got = "raises", None
        expected.add(outcome(python_line, resp, environ, rt))
        assert got in expected, (fmt, request, remote, rt)


def test_a_parsed_head_costs_no_python_call() -> None:
    calls: list[str] = []

    def counted(key: str, getter: Any) -> Any:
        def get(resp: Any, environ: Mapping[str, Any], rt: float) -> Any:
            calls.append(key)
            return getter(resp, environ, rt)

        return get

    pieces, tail = logs.access_pieces(Config({}).access_log_format + " " + FIELD_FORMAT)
    pieces = [(lit, key, spec, counted(key, g)) for lit, key, spec, g in pieces]
    make_line = _native.AccessFormat(pieces, tail, logs.time_text)
    for request in parsed_requests():
        make_line.for_request(Resp(status_code=200, sent=4), request, "10.0.0.1", 0.5)
    # Only credentials are the getter's: four Basic ones and one scheme that is not
    # ASCII, each read twice by the format (u and the default format's u).
    assert calls == ["u"] * 10
