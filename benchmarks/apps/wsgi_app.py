"""WSGI benchmark app: every scenario by path, the same bytes as the ASGI and RSGI apps."""

from __future__ import annotations

import time

from apps import payload

_TEXT = "text/plain"
_FILE_PATH = payload.ensure_file()
_FILE_BYTES = payload.file_bytes()


def _fixed(body: bytes, ctype: str = _TEXT):
    headers = [("Content-Type", ctype), ("Content-Length", str(len(body)))]
    chunks = [body]

    def handler(environ, start_response):
        start_response("200 OK", headers)
        return chunks

    return handler


def _str(environ, start_response):
    body = payload.TEXT_4B.encode()
    start_response("200 OK", [("Content-Type", _TEXT), ("Content-Length", str(len(body)))])
    return [body]


def _json(environ, start_response):
    body = payload.json_body()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


def _echo(environ, start_response):
    # Read in chunks rather than read(): the scenario measures an app that iterates the body.
    stream = environ["wsgi.input"]
    remaining = int(environ.get("CONTENT_LENGTH") or 0)
    parts = []
    while remaining > 0:
        chunk = stream.read(min(remaining, 65536))
        if not chunk:
            break
        parts.append(chunk)
        remaining -= len(chunk)
    body = b"".join(parts)
    start_response("200 OK", [("Content-Type", _TEXT), ("Content-Length", str(len(body)))])
    return [body]


def _file(environ, start_response):
    start_response(
        "200 OK",
        [("Content-Type", "application/octet-stream"), ("Content-Length", str(payload.FILE_SIZE))],
    )
    f = open(_FILE_PATH, "rb")  # noqa: SIM115 - the server closes it via the wrapper
    wrapper = environ.get("wsgi.file_wrapper")
    if wrapper is not None:
        return wrapper(f, 65536)
    try:
        return [f.read()]
    finally:
        f.close()


def _sleeper(seconds: float):
    body = [payload.BODY_4B]
    headers = [("Content-Type", _TEXT), ("Content-Length", "4")]

    def handler(environ, start_response):
        time.sleep(seconds)
        start_response("200 OK", headers)
        return body

    return handler


def _not_found(environ, start_response):
    start_response("404 Not Found", [("Content-Type", _TEXT), ("Content-Length", "9")])
    return [b"not found"]


ROUTES = {
    "/4b": _fixed(payload.BODY_4B),
    "/1k": _fixed(payload.BODY_1K),
    "/10k": _fixed(payload.BODY_10K),
    "/str": _str,
    "/json": _json,
    "/echo": _echo,
    "/file": _file,
    "/filebytes": _fixed(_FILE_BYTES, "application/octet-stream"),
    "/io10": _sleeper(0.010),
    "/io100": _sleeper(0.100),
}


def app(environ, start_response):
    return ROUTES.get(environ["PATH_INFO"], _not_found)(environ, start_response)


application = app
