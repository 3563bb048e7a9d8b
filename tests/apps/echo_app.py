"""Echo app for the HTTP/1.1 conformance tests: the response body tells what
the server handed the app (method, target, path, query, body length), so a
test can check the parser's view from outside."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable


def app(environ: dict, start_response: Callable) -> Iterable[bytes]:
    body = environ["wsgi.input"].read()
    payload = {
        "method": environ["REQUEST_METHOD"],
        "uri": environ.get("RAW_URI", ""),
        "path": environ["PATH_INFO"],
        "query": environ["QUERY_STRING"],
        "body_len": len(body),
    }
    data = json.dumps(payload).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    )
    return [data]
