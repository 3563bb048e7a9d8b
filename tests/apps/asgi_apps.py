"""ASGI apps for the asgi worker's tests: each route pins one rule of the spec."""

import asyncio
import contextvars
import json
import os
import types
from urllib.parse import parse_qs

MIB = 1024 * 1024


def _jsonable(value):
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


async def _respond(send, body, status=200, headers=()):
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive):
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        await _lifespan(scope, receive, send)
        return
    query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
    path = scope["path"].removeprefix(scope["root_path"])
    handler = scope_route if path.startswith("/scope/") else ROUTES.get(path, _not_found)
    await handler(scope, receive, send, query)


async def _lifespan(scope, receive, send):
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            scope["state"]["started"] = "yes"
            await send({"type": "lifespan.startup.complete"})
        else:
            marker = os.environ.get("LIFESPAN_MARKER")
            if marker:
                with open(marker, "a") as f:
                    f.write("shutdown\n")
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _not_found(scope, receive, send, query):
    await _respond(send, b"not found", 404)


async def scope_route(scope, receive, send, query):
    await _read_body(receive)
    await _respond(send, json.dumps(_jsonable(scope)).encode())


async def echo(scope, receive, send, query):
    body = await _read_body(receive)
    await _respond(send, body or b"")


async def stream_echo(scope, receive, send, query):
    """Echo each request chunk as a response chunk, as it arrives."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    while True:
        message = await receive()
        body = message.get("body", b"")
        if body:
            await send({"type": "http.response.body", "body": body, "more_body": True})
        if not message.get("more_body"):
            break
    await send({"type": "http.response.body", "body": b""})


async def stream(scope, receive, send, query):
    count, size = int(query.get("n", "3")), int(query.get("size", "5"))
    await send({"type": "http.response.start", "status": 200, "headers": []})
    for i in range(count):
        piece = str(i % 10).encode() * size
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def big(scope, receive, send, query):
    """A streamed body of `size` MiB, for backpressure: send awaits a slow reader."""
    size = int(query.get("mib", "64"))
    chunk = b"x" * (64 * 1024)
    headers = [(b"content-length", str(size * MIB).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for _ in range(size * MIB // len(chunk)):
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def slow_upload(scope, receive, send, query):
    """Reads nothing for a while, then counts the body: the upload must wait meanwhile."""
    await asyncio.sleep(float(query.get("wait", "2")))
    total = 0
    while True:
        message = await receive()
        total += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    await _respond(send, str(total).encode())


async def rss(scope, receive, send, query):
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmRSS:"))
    await _respond(send, line.split()[1].encode())  # kB


async def raise_before(scope, receive, send, query):
    raise RuntimeError("boom before start")


async def raise_after(scope, receive, send, query):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"partial", "more_body": True})
    raise RuntimeError("boom after start")


async def no_response(scope, receive, send, query):
    return None


async def incomplete(scope, receive, send, query):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"partial", "more_body": True})


async def bad_event(scope, receive, send, query):
    await send({"type": "http.response.body", "body": b"no start first"})


async def str_body(scope, receive, send, query):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": "text, not bytes"})


async def bad_header(scope, receive, send, query):
    headers = [(b"x-evil", b"a\r\nInjected: 1")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"never"})


async def del_header(scope, receive, send, query):
    """A DEL byte: no head splitting, but not a value HTTP/2 could carry."""
    headers = [(b"x-odd", b"a\x7fb")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"never"})


async def two_lengths(scope, receive, send, query):
    headers = [(b"content-length", b"2"), (b"content-length", b"3")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


async def framing_fields(scope, receive, send, query):
    """Fields a server frames itself, beside the app's own."""
    headers = [
        (b"X-Mixed-Case", b"v"),
        (b"content-length", b"2"),
        (b"Content-Length", b"2"),
        (b"transfer-encoding", b"chunked"),
        (b"connection", b"keep-alive, close"),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


async def status(scope, receive, send, query):
    code = int(query.get("code", "200"))
    await send({"type": "http.response.start", "status": code, "headers": []})
    await send({"type": "http.response.body", "body": b"body that must not be sent"})


async def disconnect(scope, receive, send, query):
    """Waits for http.disconnect and writes what it received to the marker file."""
    message = await receive()  # the (empty) request body
    message = await receive()
    with open(query["marker"], "w") as f:
        f.write(message["type"])


async def after_response(scope, receive, send, query):
    """receive() after the response is complete says http.disconnect at once."""
    await _respond(send, b"done")
    message = await receive()
    with open(query["marker"], "w") as f:
        f.write(message["type"])


async def send_after_disconnect(scope, receive, send, query):
    await receive()
    await receive()  # http.disconnect
    try:
        await send({"type": "http.response.start", "status": 200, "headers": []})
    except OSError as exc:
        outcome = f"OSError: {type(exc).__name__}"
    else:
        outcome = "no error"
    with open(query["marker"], "w") as f:
        f.write(outcome)


async def pathsend(scope, receive, send, query):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.pathsend", "path": query["path"]})


async def trailers(scope, receive, send, query):
    """?whole=1: the body in one message; ?split=1: the trailers in two;
    ?missing=1: the app returns without sending them; ?bad=crlf or ?bad=del:
    a trailer value with that byte (its error is caught and named in the
    trailers, so a test sees which server refused it)."""
    start = {"type": "http.response.start", "status": 200, "headers": [], "trailers": True}
    await send(start)
    if query.get("whole"):
        await send({"type": "http.response.body", "body": b"data"})
    else:
        await send({"type": "http.response.body", "body": b"data", "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    if query.get("missing"):
        return
    fields = [(b"x-checksum", b"abc")]
    bad = {"crlf": b"a\r\nx-injected: 1", "del": b"a\x7fb"}.get(query.get("bad", ""))
    if bad is not None:
        try:
            more = {"type": "http.response.trailers", "more_trailers": True}
            await send({**more, "headers": [(b"x-bad", bad)]})
        except ValueError as exc:
            fields = [(b"x-refused", type(exc).__name__.encode())]
    if query.get("split"):
        more = {"type": "http.response.trailers", "headers": fields, "more_trailers": True}
        await send(more)
        fields = [(b"x-count", b"2")]
    await send({"type": "http.response.trailers", "headers": fields, "more_trailers": False})


async def early_hint(scope, receive, send, query):
    links = [b"</style.css>; rel=preload; as=style"]
    await send({"type": "http.response.early_hint", "links": links})
    await asyncio.sleep(float(query.get("wait", "0")))
    await _respond(send, b"after the hint")


async def sleep(scope, receive, send, query):
    if "marker" in query:  # for a test that must know the request is with the app
        with open(query["marker"], "w") as f:
            f.write("sleeping")
    await asyncio.sleep(float(query.get("s", "1")))
    await _respond(send, b"slept")


async def state(scope, receive, send, query):
    """?set=KEY: sets KEY in this request's state first (the next request
    must not see it: each gets a shallow copy of the lifespan state)."""
    if "set" in query:
        scope["state"][query["set"]] = "set by a request"
    await _respond(send, json.dumps(scope.get("state", {})).encode())


async def loop_type(scope, receive, send, query):
    loop = asyncio.get_running_loop()
    await _respond(send, f"{type(loop).__module__}.{type(loop).__name__}".encode())


_REQUEST_VAR: contextvars.ContextVar[str | None] = contextvars.ContextVar("request", default=None)


async def task(scope, receive, send, query):
    """What the app sees of the Task it runs in: a real one, with a repr and
    a stack, and a context of its own."""
    current = asyncio.current_task()
    before = _REQUEST_VAR.get()
    _REQUEST_VAR.set(query.get("n"))
    await asyncio.sleep(0)
    seen = {
        "task": current is not None,
        "repr": repr(current),
        "name": current.get_name() if current is not None else None,
        "stack": len(current.get_stack()) if current is not None else 0,
        "before": before,
        "after": _REQUEST_VAR.get(),
    }
    await _respond(send, json.dumps(seen).encode())


async def mapping_messages(scope, receive, send, query):
    """Messages that are mappings but not dicts (the spec asks for a dict;
    a read-only view of one is taken all the same), a streamed body in two."""
    view = types.MappingProxyType
    head = {"type": "http.response.start", "status": 201, "headers": [(b"x-kind", b"view")]}
    await send(view(head))
    await send(view({"type": "http.response.body", "body": b"read-only ", "more_body": True}))
    await send(view({"type": "http.response.body", "body": b"views"}))


async def built_keys(scope, receive, send, query):
    """Messages whose keys are made at run time, not literals (so not the
    interned strs a literal is), and which carry a key ASGI does not define."""

    def message(**fields: object) -> dict:
        return {"".join(name.split("_x_")): value for name, value in fields.items()}

    head = message(ty_x_pe="http.response.start", sta_x_tus=202, head_x_ers=[(b"x-built", b"yes")])
    await send({**head, "extra": "ignored"})
    await send(message(ty_x_pe="http.response.body", bo_x_dy=b"built ", more_x__body=True))
    await send(message(ty_x_pe="http.response.body", bo_x_dy=b"keys"))


ROUTES = {
    "/task": task,
    "/built-keys": built_keys,
    "/mapping-messages": mapping_messages,
    "/scope": scope_route,
    "/echo": echo,
    "/stream-echo": stream_echo,
    "/stream": stream,
    "/big": big,
    "/slow-upload": slow_upload,
    "/rss": rss,
    "/raise-before": raise_before,
    "/raise-after": raise_after,
    "/no-response": no_response,
    "/incomplete": incomplete,
    "/bad-event": bad_event,
    "/str-body": str_body,
    "/bad-header": bad_header,
    "/del-header": del_header,
    "/framing-fields": framing_fields,
    "/two-lengths": two_lengths,
    "/status": status,
    "/disconnect": disconnect,
    "/after-response": after_response,
    "/send-after-disconnect": send_after_disconnect,
    "/pathsend": pathsend,
    "/trailers": trailers,
    "/early-hint": early_hint,
    "/sleep": sleep,
    "/state": state,
    "/loop": loop_type,
}


async def failing_startup(scope, receive, send):
    """Lifespan startup fails when the file named by STARTUP_FAIL exists."""
    if scope["type"] == "lifespan":
        message = await receive()
        flag = os.environ.get("STARTUP_FAIL", "")
        if message["type"] == "lifespan.startup" and flag and os.path.exists(flag):
            await send({"type": "lifespan.startup.failed", "message": "database unreachable"})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    await _respond(send, str(os.getpid()).encode())


async def http_only(scope, receive, send):
    """An app written without lifespan support: it raises on any other scope."""
    if scope["type"] != "http":
        raise ValueError(f"unsupported scope type {scope['type']!r}")
    await _respond(send, b"http only")


def create_app():
    """For --factory."""
    return app
