"""A keep-alive connection's environ values, request after request.

Every WSGI worker keeps the str values of a connection's last request and
gives them again to the next one where the bytes are the same
(native/src/py/repeats.rs). Seen from the app that must change nothing:
each request's environ holds exactly its own values, whether they repeat,
change, move, grow past what is kept, or come and go.
"""

from __future__ import annotations

import json

import pytest

APP = "wsgi_apps:environ_app"

LONG = "v" * 400  # past the longest value kept
# (target, [(name, value)]) in the order sent, all on one connection.
REQUESTS: list[tuple[str, list[tuple[str, str]]]] = [
    ("/a?x=1", [("Host", "one"), ("User-Agent", "ua/1"), ("X-A", "1")]),
    ("/a?x=1", [("Host", "one"), ("User-Agent", "ua/1"), ("X-A", "1")]),
    ("/b", [("Host", "two"), ("User-Agent", "ua/1")]),
    ("/b", [("Host", "two"), ("X-New", "first"), ("User-Agent", "ua/1")]),
    ("/b", [("Host", "two"), ("X-Long", LONG), ("User-Agent", "ua/2"), ("X-A", "1")]),
    ("/caf%C3%A9", [("Host", "two"), ("X-Long", LONG + "w"), ("User-Agent", "ua/2")]),
    ("/caf%C3%A9", [("Host", "two"), ("User-Agent", "ua/2"), ("X-A", "\xe9t\xe9")]),
    ("/a?x=1", [("Host", "one"), ("User-Agent", "ua/1"), ("X-A", "1")]),
]


def _expected(target: str, fields: list[tuple[str, str]]) -> dict[str, object]:
    path, _, query = target.partition("?")
    decoded = path.replace("%C3%A9", "\xc3\xa9")
    http = {"HTTP_" + name.upper().replace("-", "_"): value for name, value in fields}
    return {"PATH_INFO": decoded, "QUERY_STRING": query, "RAW_URI": target, "HTTP": http}


@pytest.mark.parametrize("rounds", [1, 3])
def test_each_request_on_a_connection_sees_its_own_values(wsgi_worker, start_server, rounds):
    server = start_server("-k", wsgi_worker, APP)
    conn = server.http()
    first_socket = None
    for target, fields in REQUESTS * rounds:
        conn.putrequest("GET", target, skip_host=True, skip_accept_encoding=True)
        for name, value in fields:
            conn.putheader(name, value.encode("latin-1"))
        conn.endheaders()
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == 200, body
        env = json.loads(body)
        got = {
            "PATH_INFO": "".join(map(chr, env["PATH_INFO_CODEPOINTS"])),
            "QUERY_STRING": env["QUERY_STRING"],
            "RAW_URI": env["RAW_URI"],
            "HTTP": {k: v for k, v in env.items() if k.startswith("HTTP_")},
        }
        assert got == _expected(target, fields), (target, fields)
        if resp.will_close:
            # sync answers one request a connection: each is a new one.
            conn.close()
            continue
        first_socket = first_socket or conn.sock
        assert conn.sock is first_socket, "the connection was not kept"
