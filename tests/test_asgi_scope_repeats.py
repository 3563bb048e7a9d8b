"""A keep-alive connection's scope values, request after request.

Both ASGI servers build a request's scope from what its connection's scopes
share, and give it the path, raw_path, query_string and header pairs of the
connection's last request again where the bytes are the same
(native/src/asgi/conn_scope.rs, native/src/py/repeats.rs). Seen from the
app that must change nothing: each request's scope holds exactly its own
values, whether they repeat, change, move, grow past what is kept or come
and go, and a proxy's client and scheme are each request's own.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

LONG = "v" * 400  # past the longest value kept
# (target, [(name, value)]) in the order sent, all on one connection.
REQUESTS: list[tuple[str, list[tuple[str, str]]]] = [
    ("/scope/a?x=1", [("Host", "one"), ("User-Agent", "ua/1"), ("X-A", "1")]),
    ("/scope/a?x=1", [("Host", "one"), ("User-Agent", "ua/1"), ("X-A", "1")]),
    ("/scope/b", [("Host", "two"), ("User-Agent", "ua/1")]),
    ("/scope/b", [("Host", "two"), ("X-New", "first"), ("User-Agent", "ua/1")]),
    ("/scope/b?" + LONG, [("Host", "two"), ("X-Long", LONG), ("User-Agent", "ua/2")]),
    ("/scope/caf%C3%A9", [("Host", "two"), ("X-Long", LONG + "w"), ("User-Agent", "ua/2")]),
    ("/scope/caf%C3%A9", [("Host", "two"), ("User-Agent", "ua/2"), ("X-A", "\xe9t\xe9")]),
    ("/scope/caf%E9", [("Host", "two"), ("User-Agent", "ua/2"), ("X-A", "\xe9t\xe9")]),
    ("/scope/a?x=1", [("Host", "one"), ("User-Agent", "ua/1"), ("X-A", "1")]),
]


def _expected(target: str, fields: list[tuple[str, str]]) -> dict[str, object]:
    raw, _, query = target.partition("?")
    # The test app's JSON gives bytes as latin-1 text; the path is UTF-8
    # decoded, an invalid sequence as U+FFFD.
    path = raw.replace("%C3%A9", "\xe9").replace("%E9", "\ufffd")
    headers = [[name.lower(), value] for name, value in fields]
    return {"path": path, "raw_path": raw, "query_string": query, "headers": headers}


def _exchange(conn, target: str, fields: list[tuple[str, str]]) -> dict:
    conn.putrequest("GET", target, skip_host=True, skip_accept_encoding=True)
    for name, value in fields:
        conn.putheader(name, value.encode("latin-1"))
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read()
    assert resp.status == 200, body
    assert not resp.will_close
    return json.loads(body)


@pytest.mark.parametrize("rounds", [1, 3])
def test_each_request_on_a_connection_sees_its_own_values(asgi, rounds):
    server = asgi()
    conn = server.http()
    first_socket = None
    for target, fields in REQUESTS * rounds:
        scope = _exchange(conn, target, fields)
        got = {key: scope[key] for key in ("path", "raw_path", "query_string", "headers")}
        assert got == _expected(target, fields), (target, fields)
        first_socket = first_socket or conn.sock
        assert conn.sock is first_socket, "the connection was not kept"


def test_a_proxied_client_is_each_requests_own(asgi):
    """Behind a proxy one connection carries many clients: each request's
    client and scheme come from its own headers, and a request without
    them gets the connection's."""
    server = asgi("--forwarded-allow-ips", "127.0.0.1")
    conn = server.http()
    sent = [
        [("X-Forwarded-For", "203.0.113.7"), ("X-Forwarded-Proto", "https")],
        [("X-Forwarded-For", "203.0.113.8")],
        [],
        [("X-Forwarded-For", "203.0.113.7"), ("X-Forwarded-Proto", "https")],
        [],
    ]
    for fields in sent:
        scope = _exchange(conn, "/scope/p", [("Host", "h"), *fields])
        forwarded = dict(fields)
        if "X-Forwarded-For" in forwarded:
            assert scope["client"] == [forwarded["X-Forwarded-For"], 0]
        else:
            assert scope["client"][0] == "127.0.0.1"
            assert scope["client"][1] == conn.sock.getsockname()[1]
        assert scope["scheme"] == forwarded.get("X-Forwarded-Proto", "http")
        assert scope["server"] == ["127.0.0.1", server.port]
        assert "state" in scope and scope["type"] == "http"


def test_concurrent_http2_streams_see_their_own_values(start_server):
    """The engine's HTTP/2 streams share their connection's kept values while
    they are in flight at once."""
    server = start_server("-k", "native", "asgi_apps:app")
    base = f"http://{server.host}:{server.port}"
    targets = [f"/scope/s{i % 5}?q={i % 3}" for i in range(40)]

    async def fetch_all() -> list[tuple[str, httpx.Response]]:
        async with httpx.AsyncClient(http1=False, http2=True, timeout=30) as client:

            async def one(target: str) -> tuple[str, httpx.Response]:
                headers = {"x-n": target[-1] * (1 + len(target) % 4)}
                return target, await client.get(base + target, headers=headers)

            return await asyncio.gather(*(one(t) for t in targets))

    for target, response in asyncio.run(fetch_all()):
        assert response.http_version == "HTTP/2"
        scope = response.json()
        path, _, query = target.partition("?")
        assert (scope["path"], scope["raw_path"], scope["query_string"]) == (path, path, query)
        assert ["x-n", target[-1] * (1 + len(target) % 4)] in scope["headers"]
