"""RSGI apps for tests/test_rsgi.py, written the way Granian's docs show them:
an object with ``__rsgi__(scope, protocol)`` plus ``__rsgi_init__`` /
``__rsgi_del__``, and a plain ``async def app(scope, protocol)``."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from supervise.rsgi import RSGIProtocolClosed, RSGIProtocolError

# Where the app leaves marks a test can look at (set by the test through env).
MARKS = Path(os.environ.get("RSGI_MARKS", "/nonexistent"))

JSON = [("content-type", "application/json")]


def mark(name: str, text: str = "") -> None:
    """Write a mark atomically (a test may read it while it is rewritten)."""
    if MARKS.is_dir():
        tmp = MARKS / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(MARKS / name)


def params(scope) -> dict[str, str]:
    return dict(p.split("=", 1) for p in scope.query_string.split("&") if "=" in p)


def scope_fields(scope) -> dict:
    """Every attribute of an RSGI scope but the headers, as JSON-ready values."""
    names = ("proto", "rsgi_version", "http_version", "scheme", "method", "path")
    more = ("query_string", "authority", "client", "server")
    return {name: getattr(scope, name) for name in names + more}


async def scope_view(scope, proto):
    h = scope.headers
    view = {
        **scope_fields(scope),
        "x_dup_get": h.get("x-dup"),
        "x_dup_get_upper": h.get("X-Dup"),
        "x_dup_all": h.get_all("x-dup"),
        "missing": h.get("x-missing", "default"),
        "keys": list(h.keys()),
        "values": list(h.values()),
        "items": [list(kv) for kv in h.items()],
        "contains": "user-agent" in h,
        "not_contains": "x-missing" in h,
        "len": len(h),
    }
    proto.response_str(200, JSON, json.dumps(view))


async def echo(scope, proto):
    body = await proto()
    try:
        await proto()
    except RSGIProtocolError:
        second = "refused"
    else:
        second = "allowed"
    proto.response_bytes(200, [("x-second-read", second)], body)


async def stream_in(scope, proto):
    sizes = [len(chunk) async for chunk in proto]
    proto.response_str(200, JSON, json.dumps({"chunks": len(sizes), "total": sum(sizes)}))


async def stream_out(scope, proto):
    p = params(scope)
    count, size = int(p.get("n", "3")), int(p.get("size", "5"))
    transport = proto.response_stream(200, [("content-type", "text/plain")])
    for i in range(count):
        await transport.send_bytes(bytes([97 + i % 26]) * size)
    await transport.send_str("end")


async def backpressure(scope, proto):
    """Sends 64 MiB; records how far it got, so a test can see it wait for a
    client that does not read."""
    transport = proto.response_stream(200, [("content-type", "application/octet-stream")])
    chunk = b"x" * 65536
    sent = 0
    try:
        for _ in range(1024):
            await transport.send_bytes(chunk)
            sent += len(chunk)
            mark("sent", str(sent))
    except RSGIProtocolClosed:
        mark("closed", str(sent))


async def disconnect(scope, proto):
    """Streams until the client is gone; client_disconnect() resolves then."""

    async def watch():
        await proto.client_disconnect()
        mark("disconnected", "yes")

    watcher = asyncio.ensure_future(watch())
    transport = proto.response_stream(200, [])
    try:
        while True:
            await transport.send_bytes(b"tick\n")
            await asyncio.sleep(0.05)
    except RSGIProtocolClosed:
        await asyncio.wait_for(watcher, 5)


async def file_response(scope, proto):
    p = params(scope)
    headers = [("content-type", "application/octet-stream")]
    if "start" in p:
        proto.response_file_range(206, headers, p["path"], int(p["start"]), int(p["end"]))
    else:
        proto.response_file(200, headers, p["path"])


async def empty(scope, proto):
    proto.response_empty(204, [("x-empty", "yes")])


async def text(scope, proto):
    proto.response_str(201, [("set-cookie", "a=1"), ("set-cookie", "b=2")], "héllo")


async def twice(scope, proto):
    proto.response_str(200, [], "first")
    proto.response_str(500, [], "second")  # only the first response call counts


async def stream_twice(scope, proto):
    """A second response_stream must not write into the first response."""
    first = proto.response_stream(200, [])
    await first.send_bytes(b"a")
    second = proto.response_stream(500, [])
    try:
        await second.send_bytes(b"X")
    except RSGIProtocolClosed:
        await first.send_bytes(b"b")
    await first.send_str("c")


async def raises_after_response(scope, proto):
    proto.response_str(200, [], "answered")
    raise RuntimeError("boom after the response was sent")


async def status(scope, proto):
    proto.response_empty(int(params(scope)["code"]), [])


async def no_response(scope, proto):
    return None


async def raises(scope, proto):
    raise RuntimeError("boom before the response")


async def raises_after_start(scope, proto):
    transport = proto.response_stream(200, [])
    await transport.send_bytes(b"partial")
    await asyncio.sleep(0.05)
    raise RuntimeError("boom after the response started")


async def sleep(scope, proto):
    mark("sleeping", "yes")
    await asyncio.sleep(float(params(scope).get("s", "1")))
    proto.response_str(200, [], "slept")


_with_app = {"now": 0, "most": 0}


async def concurrent(scope, proto):
    """Sleeps; answers how many requests were with the app at once, at most."""
    _with_app["now"] += 1
    _with_app["most"] = max(_with_app["most"], _with_app["now"])
    try:
        await asyncio.sleep(float(params(scope).get("s", "0.3")))
    finally:
        _with_app["now"] -= 1
    proto.response_str(200, [], str(_with_app["most"]))


async def bad_header(scope, proto):
    try:
        proto.response_str(200, [("x-bad", "a\r\nb")], "never")
    except ValueError:
        proto.response_str(200, [], "refused")


async def refused_fields(scope, proto):
    """Each field list the server must refuse to the app, by the query's `n`."""
    lists = [
        [("content-length", "2"), ("Content-Length", "3")],
        [("x-control", "a\x01b")],
        [("x bad", "v")],
        [("content-length", "two")],
    ]
    try:
        proto.response_str(200, lists[int(params(scope)["n"])], "ok")
    except ValueError as err:
        proto.response_str(200, [], f"refused: {err}")


async def framing_fields(scope, proto):
    """Fields a server frames itself, beside the app's own."""
    headers = [
        ("X-Mixed-Case", "v"),
        ("content-length", "2"),
        ("Content-Length", "2"),
        ("transfer-encoding", "chunked"),
        ("connection", "keep-alive, close"),
    ]
    proto.response_bytes(200, headers, b"ok")


ROUTES = {
    "/scope": scope_view,
    "/refused-fields": refused_fields,
    "/framing-fields": framing_fields,
    "/echo": echo,
    "/stream-in": stream_in,
    "/stream-out": stream_out,
    "/backpressure": backpressure,
    "/disconnect": disconnect,
    "/file": file_response,
    "/empty": empty,
    "/text": text,
    "/status": status,
    "/twice": twice,
    "/stream-twice": stream_twice,
    "/raise-after-response": raises_after_response,
    "/no-response": no_response,
    "/raise": raises,
    "/raise-after-start": raises_after_start,
    "/sleep": sleep,
    "/concurrent": concurrent,
    "/bad-header": bad_header,
}


class App:
    """The object form: RSGI calls ``__rsgi__`` (preferred over ``__call__``)."""

    calls = {"init": 0, "del": 0}  # per worker process: "once" is a count

    def __rsgi_init__(self, loop):
        self.loop = loop
        self.calls["init"] += 1
        mark("init", f"{type(loop).__name__} x{self.calls['init']}")

    def __rsgi_del__(self, loop):
        self.calls["del"] += 1
        mark("del", f"{'yes' if loop is self.loop else 'another loop'} x{self.calls['del']}")

    async def __rsgi__(self, scope, proto):
        handler = ROUTES.get(scope.path)
        if handler is None:
            proto.response_str(404, [], "not found")
            return
        await handler(scope, proto)

    async def __call__(self, scope, proto):  # pragma: no cover - must not be used
        proto.response_str(500, [], "__call__ used instead of __rsgi__")


app = App()


async def plain(scope, proto):
    """A bare coroutine function is an RSGI app too."""
    proto.response_str(200, [("content-type", "text/plain")], f"plain {scope.method}")


async def read_then_hello(scope, proto):
    """Reads the whole request body, then answers 13 bytes: h2spec's app (its
    flow-control cases need a body to send, and a stream still open while
    they send their frames)."""
    await proto()
    proto.response_str(200, [("content-type", "text/plain")], "Hello, world!")
