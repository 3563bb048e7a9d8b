"""Fixtures that run the real `supervise` command and talk to it over real sockets."""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path
from signal import SIGKILL, SIGQUIT, SIGTERM
from typing import Any

import pytest

from supervise.workers import WORKERS, names_for

TESTS_DIR = Path(__file__).parent
APPS_DIR = TESTS_DIR / "apps"
REPO_DIR = TESTS_DIR.parent
SHARED_DIR = REPO_DIR.parent / "shared"


# -- servers die with the test run ------------------------------------------------
# A server runs in a session of its own (so that a test can signal its whole
# process group), so it outlives a pytest that is killed: left running, it holds
# its port and CPU. Two guards: the kernel sends SIGTERM to each server's master
# when pytest goes (PR_SET_PDEATHSIG, Linux), and a SIGTERM to pytest becomes a
# normal interrupted exit, so the fixtures' teardown stops what they started.
# Workers follow their master: they stop once their parent changes
# (Worker.notify's ppid check).

_PR_SET_PDEATHSIG = 1
# Looked up now: the preexec function runs between fork and exec, where only
# what is already there is safe to use.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None
_PYTEST_PID = os.getpid()


def _die_with_pytest() -> None:
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0)
    if os.getppid() != _PYTEST_PID:  # pytest went before the signal was armed
        os._exit(1)


def die_with_pytest() -> Callable[[], None] | None:
    """The ``preexec_fn`` for a long-running process a test starts: it gets
    SIGTERM when pytest dies. None off the main thread, since the kernel sends
    the signal when the *thread* that started the process ends, and a helper
    thread's end is no reason to stop a server."""
    if os.getpid() != _PYTEST_PID or threading.current_thread() is not threading.main_thread():
        return None
    return _die_with_pytest


def _sigterm_ends_the_run(signum: int, frame: Any) -> None:
    if os.getpid() != _PYTEST_PID:
        # A child forked by a test inherited this handler: die as SIGTERM would.
        signal.signal(SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), SIGTERM)
        return
    pytest.exit("SIGTERM: stopping; the started servers are stopped first", returncode=143)


def pytest_configure(config: pytest.Config) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(SIGTERM, _sigterm_ends_the_run)
    # The default "not long" (pyproject.toml) is for the whole suite: a file
    # or a test named on the command line runs whatever its marks.
    named = any("::" in arg or arg.endswith(".py") for arg in config.args)
    if named and config.option.markexpr == "not long":
        config.option.markexpr = ""


# -- ports --------------------------------------------------------------------------
# Asking the kernel for port 0 and closing the socket is a race: the kernel may
# hand the same port to the next caller (CI once saw a server's --bind and its
# --metrics-bind get the same port). So ports come from below the ephemeral range
# (which bind(0) and outgoing connections draw from), in a slice of their own for
# each xdist worker, never the same one twice in a run of the slice; each is
# checked bindable before it is handed out.
_PORTS_LOW, _PORTS_HIGH = 10_000, 32_000


def _port_slice() -> range:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(name[2:]) if name[2:].isdigit() else 0
    width = (_PORTS_HIGH - _PORTS_LOW) // max(workers, 1)
    start = _PORTS_LOW + (index % max(workers, 1)) * width
    return range(start, start + width)


_port_lock = threading.Lock()
_next_port: list[int] = []


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing holds and no other caller in this
    test run has been given (until the worker's slice wraps round)."""
    ports = _port_slice()
    with _port_lock:
        if not _next_port:
            _next_port.append(ports.start + os.getpid() % len(ports))
        for _ in range(len(ports)):
            port = _next_port[0]
            _next_port[0] = ports.start + (port + 1 - ports.start) % len(ports)
            if _bindable(port):
                return port
    raise RuntimeError(f"no free port in {ports.start}..{ports.stop}")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throw-away CA (trustme) and what it issued, as files: ca.pem;
    server.pem + server.key (127.0.0.1, localhost); client.pem + client.key."""
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    folder = tmp_path_factory.mktemp("pki")
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    server = ca.issue_cert("127.0.0.1", "localhost")
    server.cert_chain_pems[0].write_to_path(str(folder / "server.pem"))
    server.private_key_pem.write_to_path(str(folder / "server.key"))
    client = ca.issue_cert("client@example.com")
    client.cert_chain_pems[0].write_to_path(str(folder / "client.pem"))
    client.private_key_pem.write_to_path(str(folder / "client.key"))
    return folder


def children_of(pid: int) -> list[int]:
    """Direct children of a process, read from /proc (no psutil needed)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] != b"Z":
            kids.append(int(entry))
    return sorted(kids)


def is_gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def websocket_upgrade(path: str) -> bytes:
    """A WebSocket handshake request for ``path`` (RFC 6455's sample key)."""
    return (
        f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    ).encode()


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts as closed)."""
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def assert_framed_by_the_server(response: bytes) -> None:
    """The answer of an app's `/framing-fields` route (asgi_apps, rsgi_apps):
    one Content-Length, no Transfer-Encoding from the app, its own field
    kept, and its `Connection: close` honoured."""
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    assert lines[0].startswith(b"http/1.1 200 ")
    assert b"x-mixed-case: v" in lines
    assert lines.count(b"content-length: 2") == 1
    assert not any(line.startswith(b"transfer-encoding") for line in lines)
    assert b"connection: close" in lines
    assert body == b"ok"


def answers_until_closed(server, heads: list[bytes], timeout: float = 20) -> list[bytes]:
    """Each request on a connection of its own, all sent before any is read;
    what each connection got until the server closed it."""
    socks = [server.connect(timeout=timeout) for _ in heads]
    try:
        for sock, head in zip(socks, heads, strict=True):
            sock.sendall(head)
        return [read_until_closed(sock) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def wait_until(predicate: Callable[[], object], timeout: float = 15.0, interval: float = 0.05):
    """Poll until predicate() is truthy; return its value or fail the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)


class Server:
    """A running `supervise` process tree started by a test."""

    def __init__(
        self, proc: subprocess.Popen, host: str, port: int | None, unix: str | None, log: Path
    ):
        self.proc = proc
        self.host = host
        self.port = port
        self.unix = unix
        self.log_path = log

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, pattern: str, timeout: float = 15.0, count: int = 1) -> str:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while len(regex.findall(self.log())) < count:
            if time.monotonic() > deadline:
                pytest.fail(f"{pattern!r} not logged within {timeout}s; the log:\n{self.log()}")
            time.sleep(0.05)
        return self.log()

    def connect(self, timeout: float = 10.0) -> socket.socket:
        if self.unix:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(self.unix)
            return sock
        return socket.create_connection((self.host, self.port), timeout=timeout)

    def http(self, timeout: float = 10.0) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def get(
        self, path: str = "/", headers: dict | None = None, method: str = "GET", body=None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request on a fresh connection: (status, headers, body)."""
        conn = self.http()
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def raw(self, data: bytes, timeout: float = 5.0) -> bytes:
        """Send raw bytes, read until the server closes (or the timeout)."""
        with self.connect(timeout) as sock:
            sock.sendall(data)
            chunks = []
            with contextlib.suppress(socket.timeout, ConnectionResetError):
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
            return b"".join(chunks)

    def workers(self) -> list[int]:
        return children_of(self.proc.pid)

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def is_serving(self) -> bool:
        try:
            with self.connect(2.0) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                return sock.recv(16).startswith(b"HTTP/1.")
        except OSError:
            return False

    def wait_serving(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.is_serving():
            if self.proc.poll() is not None:
                pytest.fail(f"supervise exited with {self.proc.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                pytest.fail(f"supervise did not serve within {timeout}s:\n{self.log()}")
            time.sleep(0.05)

    def wait_workers(self, n: int, timeout: float = 20.0) -> list[int]:
        return wait_until(lambda: (w := self.workers()) and len(w) == n and w, timeout)

    def stop(self, sig: int = SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def supervise_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "supervise", *args]


def launch(
    args: list[str],
    log: Path,
    cwd: Path | str = APPS_DIR,
    env: dict[str, str] | None = None,
    unix: str | None = None,
    config_port: int | None = None,
) -> Server:
    """Start `supervise ARGS` (not waiting for it), its output going to ``log``.

    Binds a free 127.0.0.1 port unless the args contain -b/--bind, ``unix`` is
    given, or ``config_port`` says the config file binds that port; runs in
    tests/apps so the test apps import by module name.
    """
    args = list(args)
    port = config_port
    if unix:
        args[:0] = ["-b", f"unix:{unix}"]
    elif port is None and not any(a in ("-b", "--bind") or a.startswith("--bind=") for a in args):
        port = free_port()
        args[:0] = ["-b", f"127.0.0.1:{port}"]
    full_env = dict(os.environ)
    full_env.pop("SUPERVISE_CMD_ARGS", None)
    full_env.pop("GUNICORN_CMD_ARGS", None)  # read too, below SUPERVISE_CMD_ARGS
    full_env.pop("WEB_CONCURRENCY", None)
    full_env["PYTHONUNBUFFERED"] = "1"
    full_env.update(env or {})
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            supervise_command(*args),
            cwd=cwd,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_pytest(),
        )
    return Server(proc, "127.0.0.1", port, unix, log)


def shutdown(server: Server) -> None:
    """Stop a server and never leave workers behind, whatever the test did to it."""
    if server.proc.poll() is None:
        server.stop(SIGQUIT, timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.proc.pid, SIGKILL)


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Factory: start_server("echo_app:app", "-w", "2") -> a serving Server.

    See launch() for the arguments; with wait=True (the default) it returns
    once the server answers. Every server is stopped at teardown.
    """
    servers: list[Server] = []

    def start(*args: str, wait: bool = True, **options: Any) -> Server:
        server = launch(list(args), tmp_path / f"server-{len(servers)}.log", **options)
        servers.append(server)
        if wait:
            server.wait_serving()
        return server

    yield start
    for server in servers:
        shutdown(server)


class Kind(str):
    """A ``-k`` value as the tests pass it, with the interface its app speaks:
    ``-k native`` serves several (it tells which from the app)."""

    interface: str

    def __new__(cls, name: str, interface: str) -> Kind:
        kind = super().__new__(cls, name)
        kind.interface = interface
        return kind


def interface_of(worker: str) -> str:
    """The interface of the app a test runs under ``worker``."""
    return getattr(worker, "interface", None) or WORKERS[worker].interface


def worker_params(interface: str) -> list[Any]:
    """The registry's worker classes for ``interface`` as test parameters (a class
    serving it besides its default one gets the id ``NAME-INTERFACE``); one
    whose optional dependency is missing is skipped, with the reason."""
    params = []
    for name in names_for(interface):
        spec = WORKERS[name]
        missing = bool(spec.extra) and not find_spec(spec.extra)
        reason = f"{spec.extra} is not installed"
        own = spec.interface == interface
        params.append(
            pytest.param(
                Kind(name, interface),
                id=name if own else f"{name}-{interface}",
                marks=pytest.mark.skipif(missing, reason=reason),
            )
        )
    return params


# The WSGI worker classes the process-lifecycle suite runs against: a new worker
# class joins the registry (supervise/workers/__init__.py), not a copy of the tests.
WSGI_WORKERS = worker_params("wsgi")


@pytest.fixture(params=WSGI_WORKERS)
def wsgi_worker(request: pytest.FixtureRequest) -> str:
    return request.param


# The process-lifecycle suite runs for every worker class, each with the
# lifecycle app of its interface (tests/apps/lifecycle_app.py).
@pytest.fixture(params=WSGI_WORKERS + worker_params("asgi") + worker_params("rsgi"))
def any_worker(request: pytest.FixtureRequest) -> str:
    return request.param


LIFECYCLE_APPS = {"wsgi": "app", "asgi": "asgi_app", "rsgi": "rsgi_app"}


def lifecycle_app(worker: str) -> str:
    return f"lifecycle_app:{LIFECYCLE_APPS[interface_of(worker)]}"


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """A folder the test apps write marks into (RSGI_MARKS), for a test to see how far they got."""
    path = tmp_path / "marks"
    path.mkdir()
    return path


@pytest.fixture
def rsgi(start_server, marks):
    """Start `supervise -k rsgi ARGS APP` (extra args before the app; rsgi_apps:app by default)."""

    def start(*args: str, app: str = "rsgi_apps:app", **options):
        options.setdefault("env", {"RSGI_MARKS": str(marks)})
        return start_server("-k", "rsgi", *args, app, **options)

    return start


@pytest.fixture(params=["asgi", "native"])
def asgi(request: pytest.FixtureRequest, start_server):
    """Start `supervise -k WORKER ARGS asgi_apps:app` (extra args before the app),
    for each worker class that serves ASGI apps: the asgi worker, and the engine
    (`-k native`, which tells the interface from the app)."""
    worker = request.param

    def start(*args: str, app: str = "asgi_apps:app", **options):
        return start_server("-k", worker, *args, app, **options)

    start.worker = worker
    return start


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Factory: nginx(port, http=..., stream=...) -> a running nginx (tests/nginx.py)
    with that config, stopped at teardown; the test skips when nginx is missing."""
    from nginx import start_nginx

    started: list[Any] = []

    def start(port: int, *, http: str = "", stream: str = "") -> Any:
        proc = start_nginx(tmp_path / f"nginx-{len(started)}", port, http=http, stream=stream)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
