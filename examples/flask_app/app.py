"""A Flask application served by supervise.

cd examples/flask_app
supervise -w 2 app:app
"""

from __future__ import annotations

from pathlib import Path

from flask import Flask, Response, jsonify, request, send_from_directory, stream_with_context

STATIC = Path(__file__).parent / "static"

app = Flask(__name__)


@app.get("/")
def index() -> str:
    return "Hello from Flask"


@app.get("/hello/<name>")
def hello(name: str) -> Response:
    return jsonify(greeting=f"Hello, {name}!", scheme=request.scheme)


@app.post("/echo")
def echo() -> Response:
    """Echoes a JSON body, or a form's fields."""
    if request.is_json:
        return jsonify(json=request.get_json())
    return jsonify(form=request.form.to_dict(), files=sorted(request.files))


@app.get("/stream")
def stream() -> Response:
    """A streamed body: no Content-Length, so supervise sends it chunked."""

    def lines():
        for i in range(5):
            yield f"line {i}\n"

    return Response(stream_with_context(lines()), mimetype="text/plain")


@app.get("/files/<path:name>")
def files(name: str) -> Response:
    """Files go out through wsgi.file_wrapper, that is with sendfile()."""
    return send_from_directory(STATIC, name)


@app.get("/boom")
def boom() -> str:
    raise RuntimeError("an error Flask turns into a 500 page")
