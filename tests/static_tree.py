"""The folder the static-file tests serve (test_static_files*.py), the
settings they start servers with, and what they check answers by.

A ``secret.txt`` lies next to the served folder; its content must never come
back from a request that tries to leave the folder. The app behind the server
is tests/apps/lifecycle_app.py, which answers ``200 ok`` on any path it is
given: a static answer is told from the app's by its body.
"""

from __future__ import annotations

import email.utils
import gzip
import os
import re
from dataclasses import dataclass
from pathlib import Path

from conftest import WSGI_WORKERS, Server, launch, shutdown, worker_params

EVERY_WORKER = WSGI_WORKERS + worker_params("asgi") + worker_params("rsgi")

SECRET = b"TOP-SECRET-must-never-leave-the-server"
MTIME = 1_700_000_000  # Tue, 14 Nov 2023 22:13:20 GMT: whole seconds, as HTTP dates are
HELLO = b"hello, static world\n"
DIGITS = b"0123456789" * 100  # 1000 bytes: ranges are easy to check by eye
PRE = b"precompressed text, " * 200  # has .br, .zst and .gz siblings
BR = b"BR-SIBLING-BYTES-" * 7  # not real brotli: these tests compare bytes only
ZST = b"ZSTD-SIBLING-BYTES-" * 5
BIG_SIZE = 8 * 1024 * 1024
IMMUTABLE = "public, max-age=31536000, immutable"
CACHE_CONTROL = "public, max-age=60"
APP_ANSWER = b"ok"  # lifecycle_app's body on every path it has no route for

TYPES = {
    "index.html": ({"text/html;charset=utf-8"}, b"<!doctype html><title>t</title>\n"),
    "style.css": ({"text/css;charset=utf-8"}, b"body { color: red }\n"),
    "app.js": (
        {"text/javascript;charset=utf-8", "application/javascript;charset=utf-8"},
        b"console.log(1);\n",
    ),
    "notes.txt": ({"text/plain;charset=utf-8"}, b"plain notes\n"),
    # JSON has no charset parameter (RFC 8259: it is UTF-8).
    "data.json": ({"application/json"}, b'{"a": 1}\n'),
    "logo.svg": ({"image/svg+xml;charset=utf-8"}, b'<svg xmlns="http://www.w3.org/2000/svg"/>\n'),
    "pixel.png": ({"image/png"}, b"\x89PNG\r\n\x1a\n" + bytes(range(256))),
    "font.woff2": ({"font/woff2"}, b"wOF2" + bytes(64)),
    "blob.qqzz": ({"application/octet-stream"}, b"\x00\x01\x02unknown extension"),
}


# -- the folder served -----------------------------------------------------------


@dataclass
class Tree:
    root: Path  # holds secret.txt, public/ and assets/
    public: Path  # what /static maps to
    gz: bytes  # public/pre.txt.gz (real gzip of PRE)
    only_gz: bytes  # public/only-gz.txt.gz (real gzip of DIGITS)
    big: bytes  # public/big.bin


def build_tree(root: Path) -> Tree:
    """The served folder, with a file next to it that must stay unreachable."""
    (root / "secret.txt").write_bytes(SECRET)
    (root / "outside").mkdir()
    (root / "outside" / "secret.txt").write_bytes(SECRET)
    public = root / "public"
    public.mkdir()
    (public / "hello.txt").write_bytes(HELLO)
    for name, (_, content) in TYPES.items():
        (public / name).write_bytes(content)
    (public / "digits.txt").write_bytes(DIGITS)
    (public / "a b.txt").write_bytes(b"a space in the name\n")
    (public / "a%20b.txt").write_bytes(b"a literal percent sign in the name\n")
    (public / "café.txt").write_bytes(b"utf-8 name\n")
    (public / "sub").mkdir()
    (public / "sub" / "nested.txt").write_bytes(b"nested\n")
    (public / "sub" / ".hidden").write_bytes(b"HIDDEN-FILE\n")
    (public / ".env").write_bytes(b"DOTFILE-CONTENT\n")
    (public / ".git").mkdir()
    (public / ".git" / "config").write_bytes(b"DOTDIR-CONTENT\n")
    (public / "pre.txt").write_bytes(PRE)
    gz = gzip.compress(PRE, mtime=0)
    (public / "pre.txt.gz").write_bytes(gz)
    (public / "pre.txt.br").write_bytes(BR)
    (public / "pre.txt.zst").write_bytes(ZST)
    (public / "pre2.txt").write_bytes(PRE)  # zstd and gzip only
    (public / "pre2.txt.gz").write_bytes(gz)
    (public / "pre2.txt.zst").write_bytes(ZST)
    only_gz = gzip.compress(DIGITS, mtime=0)
    (public / "only-gz.txt").write_bytes(DIGITS)
    (public / "only-gz.txt.gz").write_bytes(only_gz)
    for name in (
        "app.3f2a9c1b.js",
        "app-3f2a9c1b8d0e.css",
        "app.3f2a9c1.js",  # 7 hex digits: no hash
        "app.3g2a9c1b.js",  # not hex: no hash
    ):
        (public / name).write_bytes(b"/* " + name.encode() + b" */\n")
    big = os.urandom(BIG_SIZE)
    (public / "big.bin").write_bytes(big)
    (public / "link-inside.txt").symlink_to("hello.txt")
    (public / "link-outside.txt").symlink_to(root / "secret.txt")
    (public / "linkdir").symlink_to(root / "outside", target_is_directory=True)
    assets = root / "assets"
    assets.mkdir()
    (assets / "x.txt").write_bytes(b"from assets\n")
    for path in (*public.rglob("*"), *assets.rglob("*")):
        if not path.is_symlink():
            os.utime(path, (MTIME, MTIME))
    return Tree(root, public, gz, only_gz, big)


def start_serving(args: list[str], log: Path, **options) -> Server:
    server = launch(args, log, **options)
    try:
        server.wait_serving()
    except BaseException:
        shutdown(server)
        raise
    return server


def media(headers: dict[str, str]) -> str:
    """The Content-Type without blanks, lowercased: text/css;charset=utf-8."""
    return headers.get("content-type", "").replace(" ", "").lower()


def http_date(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


def is_strong_etag(value: str | None) -> bool:
    return value is not None and re.fullmatch(r'"[\x21\x23-\x7e\x80-\xff]*"', value) is not None


def vary_names(headers: dict[str, str]) -> set[str]:
    return {part.strip().lower() for part in headers.get("vary", "").split(",")}


def assert_static_refusal(status: int, body: bytes, path: str, allowed=(404,)) -> None:
    """Not served, not the app, nothing from outside the folder."""
    assert status in allowed, (path, status, body[:200])
    assert body != APP_ANSWER, path
    assert SECRET not in body, path


# What is never served.
TRAVERSALS = [
    "/static/../secret.txt",
    "/static/%2e%2e/secret.txt",
    "/static/%2E%2E/secret.txt",
    "/static/..%2fsecret.txt",
    "/static/%2e%2e%2fsecret.txt",
    "/static/sub/../../secret.txt",
    "/static/sub/%2e%2e/%2e%2e/secret.txt",
    "/static/.%2e/secret.txt",
    "/static/..\\secret.txt",
    "/static/..%5csecret.txt",
    "/static/sub\\..\\..\\secret.txt",
    "/static/%2e%2e%5csecret.txt",
    "/static/%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc/passwd",
]
NUL = ["/static/hello.txt%00", "/static/%00", "/static/hello.txt%00.png"]
HIDDEN = [
    "/static/.env",
    "/static/%2eenv",
    "/static/.git/config",
    "/static/.git/",
    "/static/sub/.hidden",
]
DIRECTORIES = ["/static/sub", "/static/sub/", "/static/.git"]
