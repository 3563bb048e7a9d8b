"""RSGI's fields as an app sees them: `scope.headers` over a request's fields,
and the checks on the fields an app answers with (refused in the app, or
framed by the server). The rest of the RSGI surface: test_rsgi.py."""

from __future__ import annotations

import httpx
import pytest
from conftest import assert_framed_by_the_server, read_until_closed


def url(server, path: str) -> str:
    return f"http://{server.host}:{server.port}{path}"


def test_headers_mapping_of_repeated_and_latin1_fields(rsgi):
    """A name repeated apart from itself is one key, its values in the order
    sent; a value byte over 0x7f reads as latin-1."""
    server = rsgi()
    headers = [("X-Dup", "one"), ("Accept", "*/*"), ("x-dup", "two"), ("X-Text", b"caf\xe9")]
    scope = httpx.get(url(server, "/scope"), headers=headers).json()
    assert scope["x_dup_all"] == ["one", "two"]
    assert scope["keys"].count("x-dup") == 1
    assert ["x-text", "caf\u00e9"] in scope["items"]
    assert scope["len"] == len(scope["items"]) == len(scope["values"])


def test_invalid_header_value_is_refused_to_the_app(rsgi):
    server = rsgi()
    assert httpx.get(url(server, "/bad-header")).text == "refused"


@pytest.mark.parametrize(
    ("n", "reason"),
    [
        (0, "conflicting Content-Length"),
        (1, "invalid value for header x-control"),
        (2, "invalid header name"),
        (3, "invalid Content-Length"),
    ],
)
def test_fields_no_protocol_could_send_are_refused_to_the_app(rsgi, n, reason):
    server = rsgi()
    text = httpx.get(url(server, "/refused-fields"), params={"n": n}).text
    assert text.startswith("refused: ") and reason in text


def test_framing_fields_of_the_app_are_the_servers(rsgi):
    """One Content-Length, no Transfer-Encoding from the app, and its
    `Connection: close` ends the connection after the response."""
    server = rsgi()
    with server.connect(5.0) as sock:
        sock.sendall(b"GET /framing-fields HTTP/1.1\r\nHost: t\r\n\r\n")
        response = read_until_closed(sock)
    assert_framed_by_the_server(response)
