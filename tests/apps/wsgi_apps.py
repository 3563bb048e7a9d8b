"""Small WSGI apps the tests serve with the real `supervise` command.

Each app does one thing a test checks from the outside: the response shows
what the app saw (environ, body) or how the server framed what it sent.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
from urllib.parse import parse_qs

HELLO = b"Hello, world!"


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "13")])
    return [HELLO]


def no_length(environ, start_response):
    """A one-block body without Content-Length: the server adds one."""
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [HELLO]


# Keys whose values the environ app reports (everything a str, bool or tuple).
_REPORTED = (
    "REQUEST_METHOD",
    "SCRIPT_NAME",
    "PATH_INFO",
    "QUERY_STRING",
    "RAW_URI",
    "REQUEST_URI",
    "SERVER_PROTOCOL",
    "SERVER_NAME",
    "SERVER_PORT",
    "SERVER_SOFTWARE",
    "REMOTE_ADDR",
    "REMOTE_PORT",
    "CONTENT_TYPE",
    "CONTENT_LENGTH",
    "wsgi.url_scheme",
    "wsgi.multithread",
    "wsgi.multiprocess",
    "wsgi.run_once",
    "wsgi.input_terminated",
    "wsgi.version",
)


def environ_app(environ, start_response):
    """Answers a JSON object of the environ: the keys above plus every HTTP_*."""
    seen = {k: environ[k] for k in _REPORTED if k in environ}
    seen.update({k: v for k, v in environ.items() if k.startswith("HTTP_")})
    # PATH_INFO is a latin-1 "bytes as str": show the code points.
    seen["PATH_INFO_CODEPOINTS"] = [ord(c) for c in environ.get("PATH_INFO", "")]
    seen["has_file_wrapper"] = callable(environ.get("wsgi.file_wrapper"))
    seen["errors_writable"] = hasattr(environ["wsgi.errors"], "write")
    body = json.dumps(seen).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


def echo(environ, start_response):
    """Reads the body the way ?mode= says and answers JSON describing what it got.

    modes: read (all), sized (read(3) in a loop), readline, readlines, iter, none.
    """
    mode = parse_qs(environ["QUERY_STRING"]).get("mode", ["read"])[0]
    stream = environ["wsgi.input"]
    if mode == "read":
        parts = [stream.read()]
    elif mode == "sized":
        parts = []
        while chunk := stream.read(3):
            parts.append(chunk)
    elif mode == "readline":
        parts = []
        while line := stream.readline():
            parts.append(line)
    elif mode == "readline_limit":
        parts = []
        while line := stream.readline(4):
            parts.append(line)
    elif mode == "readlines":
        parts = stream.readlines()
    elif mode == "iter":
        parts = list(stream)
    else:
        parts = []
    body = json.dumps({"parts": [p.decode("latin-1") for p in parts]}).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


def digest(environ, start_response):
    """Reads the body in 64 KiB pieces (?mode=lines: line by line) and answers
    its MD5, its size and the worker's peak memory (VmHWM, KiB) so far."""
    mode = parse_qs(environ["QUERY_STRING"]).get("mode", ["sized"])[0]
    stream = environ["wsgi.input"]
    md5, size, lines = hashlib.md5(), 0, 0
    if mode == "lines":
        pieces = iter(stream.readline, b"")
    else:
        pieces = iter(lambda: stream.read(65536), b"")
    for piece in pieces:
        md5.update(piece)
        size += len(piece)
        lines += 1
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    body = json.dumps({"md5": md5.hexdigest(), "size": size, "lines": lines, "peak_kib": peak})
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body.encode()]


def stream(environ, start_response):
    """Several blocks and no Content-Length: chunked on HTTP/1.1."""
    start_response("200 OK", [("Content-Type", "text/plain")])

    def blocks():
        yield b"one,"
        yield b""
        yield b"two,"
        yield b"three"

    return blocks()


def writer(environ, start_response):
    """The legacy write() callable, then an iterable with one more block."""
    write = start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "11")])
    write(b"hello ")
    write(b"wor")
    return [b"ld"]


def head_aware(environ, start_response):
    body = b"a body that HEAD must not carry"
    start_response("200 OK", [("Content-Length", str(len(body))), ("X-Method", "yes")])
    return [body]


def custom_headers(environ, start_response):
    """Sets its own Server and Date: the server must not add second ones."""
    start_response(
        "200 OK",
        [
            ("Server", "my-app/1.0"),
            ("Date", "Tue, 01 Jan 2030 00:00:00 GMT"),
            ("Content-Length", "2"),
            ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"),
        ],
    )
    return [b"ok"]


class _Label(str):
    """A str subclass: CPython keeps its characters outside the object."""


def latin1_fields(environ, start_response):
    """Header values beyond ASCII: latin-1 ones go out as their bytes; with
    ``?wide=1`` one holds a character above U+00FF, which PEP 3333 forbids."""
    fields = [
        ("Content-Length", "2"),
        ("X-Plain", "caf\u00e9"),
        ("X-Label", _Label("na\u00efve \u00ff")),
    ]
    if "wide" in environ.get("QUERY_STRING", ""):
        fields.append(("X-Wide", "10 \u20ac"))
    start_response("200 OK", fields)
    return [b"ok"]


class _Closing:
    """An iterable result whose close() the server must call."""

    def __init__(self, path: str, fail: bool = False) -> None:
        self.path = path
        self.fail = fail

    def __iter__(self):
        yield b"part1,"
        if self.fail:
            raise RuntimeError("failing in the middle of the body")
        yield b"part2"

    def close(self) -> None:
        CLOSED.append(self.path)


CLOSED: list[str] = []


def closing(environ, start_response):
    """/report answers which results got closed; other paths return a closable result."""
    path = environ["PATH_INFO"]
    if path == "/report":
        body = json.dumps(CLOSED).encode()
        start_response("200 OK", [("Content-Length", str(len(body)))])
        return [body]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return _Closing(path, fail=path.startswith("/fail"))


def exc_info_app(environ, start_response):
    """Starts a 200, then replaces it by an error page with exc_info (PEP 3333)."""
    start_response("200 OK", [("Content-Type", "text/plain")])
    try:
        raise ValueError("something broke after start_response")
    except ValueError:
        start_response("503 Service Unavailable", [("Content-Length", "5")], sys.exc_info())
    return [b"oops!"]


def exc_info_late(environ, start_response):
    """exc_info after the head went out: start_response re-raises, the response is cut."""
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(b"first block")
    try:
        raise ValueError("too late to change the status")
    except ValueError:
        start_response("500 Internal Server Error", [], sys.exc_info())
    return [b"never sent"]


def fail_early(environ, start_response):
    raise RuntimeError("fail_early exploded before start_response")


def fail_late(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])

    def blocks():
        yield b"x" * 100
        raise RuntimeError("fail_late exploded mid-body")

    return blocks()


def files(environ, start_response):
    """Serves the file named by ?path= with wsgi.file_wrapper (?offset= seeks first)."""
    query = parse_qs(environ["QUERY_STRING"])
    path = query["path"][0]
    f = open(path, "rb")  # noqa: SIM115 - the server closes it through the wrapper
    if "offset" in query:
        f.seek(int(query["offset"][0]))
    headers = [("Content-Type", "application/octet-stream")]
    if "length" in query:
        headers.append(("Content-Length", query["length"][0]))
    start_response("200 OK", headers)
    return environ["wsgi.file_wrapper"](f, 4096)


class _MarkedStream(io.BytesIO):
    """A file object that is no regular file, whose close() leaves a file behind."""

    def __init__(self, data: bytes, marker: str) -> None:
        super().__init__(data)
        self.marker = marker

    def close(self) -> None:
        open(self.marker, "w").close()
        super().close()


def wrapped_stream(environ, start_response):
    """wsgi.file_wrapper over a BytesIO of ?size= bytes, in 1000-byte blocks; its
    close() creates the file ?marker= names."""
    query = parse_qs(environ["QUERY_STRING"])
    data = bytes(i % 251 for i in range(int(query["size"][0])))
    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    return environ["wsgi.file_wrapper"](_MarkedStream(data, query["marker"][0]), 1000)


def big(environ, start_response):
    """A large body in one block, so the send cannot complete at once."""
    size = int(parse_qs(environ["QUERY_STRING"]).get("size", ["1000000"])[0])
    body = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]


def pid(environ, start_response):
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]


def slow(environ, start_response):
    """Sleeps ?s= seconds (default 0) before answering: a request in flight."""
    import time

    environ["wsgi.errors"].write(f"slow request started: {environ['QUERY_STRING']}\n")
    environ["wsgi.errors"].flush()
    time.sleep(float(parse_qs(environ["QUERY_STRING"]).get("s", ["0"])[0]))
    start_response("200 OK", [("Content-Length", "4")])
    return [b"done"]
