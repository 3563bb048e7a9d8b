"""A real nginx in front of supervise, for the tests: the Debian package's
binary, started by the test with a config it wrote into tmp_path.

Nothing of the system's nginx is used or touched: the config, the pid file,
the logs and every temp path live in the test's folder, and nginx listens on
a free port. The config is written from parts, so a test adds what it needs:

    site = Nginx.site(socket_path, f"127.0.0.1:{port}")  # examples/nginx/myapp.conf
    proxy = nginx(port, http=site)                       # the `nginx` fixture (conftest.py)
    proxy = nginx(port, stream=stream_server(f"127.0.0.1:{port}", f"unix:{socket_path}",
                                             proxy_protocol=True))

The site is examples/nginx/myapp.conf (the config docs/operations.md shows)
with its socket path and port replaced, so the docs and the tests cannot
drift apart. .ci/run installs nginx when it is missing; without it these
tests skip, saying so.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import die_with_pytest

SITE_EXAMPLE = Path(__file__).parent.parent / "examples" / "nginx" / "myapp.conf"
# The two lines of the example that name where things are.
EXAMPLE_SOCKET = "unix:/run/myapp.sock"
EXAMPLE_LISTEN = "listen 80;"
MISSING = (
    "nginx is not installed: .ci/run installs it "
    "(apt-get install nginx libnginx-mod-stream, as root on Debian/Ubuntu)"
)


def nginx_binary() -> str | None:
    """nginx from PATH, or /usr/sbin (not on a non-root user's PATH)."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def _modules_path(binary: str) -> Path | None:
    """Where the package keeps dynamic modules (the stream module on Debian)."""
    built = subprocess.run([binary, "-V"], capture_output=True, text=True, timeout=10).stderr
    found = re.search(r"--modules-path=(\S+)", built)
    return Path(found.group(1)) if found else None


def replace_once(text: str, old: str, new: str) -> str:
    """Replace a line of an example the test depends on; fail loudly if the example changed."""
    assert text.count(old) == 1, f"{old!r} should appear once in:\n{text}"
    return text.replace(old, new)


def stream_server(listen: str, upstream: str, *, proxy_protocol: bool) -> str:
    """A stream (TCP) proxy: nginx passes the bytes to ``upstream`` (``unix:PATH`` or
    ``HOST:PORT``), with a PROXY protocol header first when ``proxy_protocol``."""
    return (
        "server {\n"
        f"    listen {listen};\n"
        f"    proxy_pass {upstream};\n"
        f"    proxy_protocol {'on' if proxy_protocol else 'off'};\n"
        "}\n"
    )


class Nginx:
    """A running nginx master (and its worker) started by a test."""

    def __init__(self, proc: subprocess.Popen, prefix: Path, port: int) -> None:
        self.proc = proc
        self.prefix = prefix
        self.host = "127.0.0.1"
        self.port = port

    @staticmethod
    def site(upstream_socket: str, listen: str, extra: str = "") -> str:
        """The example site with supervise at ``upstream_socket`` and nginx at
        ``listen`` (``HOST:PORT``); ``extra`` goes after the listen line (TLS)."""
        text = SITE_EXAMPLE.read_text()
        text = replace_once(text, EXAMPLE_SOCKET, f"unix:{upstream_socket}")
        return replace_once(text, EXAMPLE_LISTEN, f"listen {listen};{extra}")

    def error_log(self) -> str:
        path = self.prefix / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def access_log(self) -> str:
        path = self.prefix / "access.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def connect(self, timeout: float = 10.0, source: str | None = None) -> socket.socket:
        """A connection to nginx, from the loopback address ``source`` when given."""
        src = (source, 0) if source else None
        return socket.create_connection((self.host, self.port), timeout, source_address=src)

    def get(
        self, path: str = "/", headers: dict | None = None, source: str | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request on a fresh connection: (status, headers, body)."""
        src = (source, 0) if source else None
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10, source_address=src)
        try:
            conn.request("GET", path, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def stop(self) -> None:
        """Fast shutdown (TERM), then make sure nothing of it is left."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


def _main_config(prefix: Path, http: str, stream: str, binary: str) -> str:
    lines = []
    if os.geteuid() == 0:
        # nginx's workers would switch to nobody, who cannot enter a mode-700
        # tmp_path to reach supervise's socket: keep them as the test's user.
        lines.append(f"user {pwd.getpwuid(0).pw_name};")
    if stream:
        modules = _modules_path(binary)
        module = modules / "ngx_stream_module.so" if modules else None
        if module is not None and module.exists():
            lines.append(f"load_module {module};")
        # else: built in (no --with-stream=dynamic), or nginx -t says what is wrong.
    lines += [
        "worker_processes 1;",
        f"pid {prefix}/nginx.pid;",
        f"error_log {prefix}/error.log info;",
        "events { worker_connections 1024; }",
    ]
    if http:
        temp = "\n".join(
            f"    {kind}_temp_path {prefix}/{kind}_temp;"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        lines.append(f"http {{\n    access_log {prefix}/access.log;\n{temp}\n{http}\n}}")
    if stream:
        lines.append(f"stream {{\n{stream}\n}}")
    return "\n".join(lines) + "\n"


def start_nginx(
    prefix: Path, port: int, *, http: str = "", stream: str = "", timeout: float = 20.0
) -> Nginx:
    """Start nginx with a config made of ``http`` and ``stream`` context parts and
    wait until it accepts on ``port`` (which the parts must listen on)."""
    binary = nginx_binary()
    if binary is None:
        pytest.skip(MISSING)
    prefix.mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(_main_config(prefix, http, stream, binary))
    check = subprocess.run(
        [binary, "-t", "-q", "-p", f"{prefix}/", "-c", str(conf), "-e", str(prefix / "error.log")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert check.returncode == 0, f"nginx -t refused:\n{check.stderr}\n{conf.read_text()}"
    with open(prefix / "stderr.log", "wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                "-p",
                f"{prefix}/",
                "-c",
                str(conf),
                "-e",
                str(prefix / "error.log"),
                "-g",
                "daemon off;",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_pytest(),  # nginx's master stops its workers on TERM
        )
    nginx = Nginx(proc, prefix, port)
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return nginx
        if proc.poll() is not None or time.monotonic() > deadline:
            nginx.stop()
            pytest.fail(f"nginx did not listen on {port}:\n{nginx.error_log()}")
        time.sleep(0.05)
