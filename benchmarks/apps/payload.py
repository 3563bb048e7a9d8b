"""The bytes every benchmark app serves, shared with the harness that checks them.

Kept in one place so that every server answers with byte-identical bodies and the
harness can verify a response without trusting the app it is measuring.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"


def pattern(size: int) -> bytes:
    """Deterministic printable bytes: a body that compresses badly and is easy to diff."""
    reps = size // len(_ALPHABET) + 1
    return (_ALPHABET * reps)[:size]


BODY_4B = b"PONG"
# The `get-str` body: a str the app hands over as text (RSGI's response_str) or encodes
# per request (ASGI, WSGI: they only take bytes); on the wire, BODY_4B.
TEXT_4B = "PONG"
BODY_1K = pattern(1024)
BODY_10K = pattern(10 * 1024)
FILE_SIZE = 64 * 1024
# The static-file scenarios: files the servers serve from a folder, without the app.
STATIC_ROUTE = "/static"
STATIC_FILES = {"app.css": 1024, "bundle.js": 1024 * 1024}
JSON_OBJECT = {"message": "Hello, World!", "id": 42, "tags": ["fast", "small"], "ok": True}


def json_body() -> bytes:
    """The JSON response; the apps call this per request so serialising is part of the work."""
    return json.dumps(JSON_OBJECT).encode()


def file_path() -> str:
    """Where the file for /file lives (generated, never committed)."""
    override = os.environ.get("BENCH_FILE")
    if override:
        return override
    return str(Path(__file__).resolve().parent.parent / ".work" / "payload-64k.bin")


def file_bytes() -> bytes:
    return pattern(FILE_SIZE)


def ensure_file() -> str:
    """Write the /file payload if missing or stale; returns its path."""
    path = Path(file_path())
    want = file_bytes()
    if not path.exists() or path.read_bytes() != want:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(want)
        tmp.replace(path)
    return str(path)


def static_dir() -> str:
    """The folder served on STATIC_ROUTE (generated, never committed)."""
    override = os.environ.get("BENCH_STATIC_DIR")
    if override:
        return override
    return str(Path(__file__).resolve().parent.parent / ".work" / "static")


def static_bytes(name: str) -> bytes:
    return pattern(STATIC_FILES[name])


def ensure_static() -> str:
    """Write the static folder's files if missing or stale; returns the folder."""
    folder = Path(static_dir())
    folder.mkdir(parents=True, exist_ok=True)
    for name in STATIC_FILES:
        path = folder / name
        want = static_bytes(name)
        if not path.exists() or path.read_bytes() != want:
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(want)
            tmp.replace(path)
    return str(folder)
