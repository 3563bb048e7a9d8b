"""Concurrency for the gthread and gevent workers (and -k native's threads):
long I/O, slow and idle clients.

The one bound on elapsed time here is a proof of concurrency, not a speed
claim: 100 requests that each sleep 0.1 s take 10 s one after another, and
must finish in a fraction of that.
"""

from __future__ import annotations

import select
import signal
import socket
import threading
import time

import pytest
from conftest import APPS_DIR, read_until_closed, wait_until
from test_keepalive import APPS, KEEPALIVE_WORKERS, Client, installed

SLOWLORIS_HEAD = b"GET / HTTP/1.1\r\nHost: t\r\n"


@pytest.fixture(params=KEEPALIVE_WORKERS)
def keepalive_worker(request: pytest.FixtureRequest) -> str:
    return installed(request.param)


def concurrent_requests(server, n: int, query: str) -> tuple[float, list[bytes]]:
    """Send n requests at once on n connections; (seconds until the last answer, bodies)."""
    socks = [server.connect(timeout=30) for _ in range(n)]
    try:
        started = time.monotonic()
        for i, sock in enumerate(socks):
            sock.sendall(
                f"GET /{i}?{query} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode()
            )
        pending = {sock: b"" for sock in socks}
        answers: dict[socket.socket, bytes] = {}
        deadline = started + 60
        while pending and time.monotonic() < deadline:
            ready, _, _ = select.select(list(pending), [], [], 1.0)
            for sock in ready:
                data = sock.recv(65536)
                if data:
                    pending[sock] += data
                else:
                    answers[sock] = pending.pop(sock)
        elapsed = time.monotonic() - started
        assert not pending, f"{len(pending)} requests never answered"
        return elapsed, [answers[sock].split(b"\r\n\r\n", 1)[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.parametrize(
    ("worker", "args", "bound"),
    [
        ("gthread", ("--threads", "25"), 5.0),
        ("gevent", (), 3.0),
        ("native", ("--threads", "25"), 5.0),
    ],
)
def test_long_io_requests_run_concurrently(start_server, worker, args, bound):
    server = start_server("-k", installed(worker), "-w", "1", *args, f"{APPS}:sleepy")
    elapsed, bodies = concurrent_requests(server, 100, "0.1")
    assert bodies == [f"slept /{i}".encode() for i in range(100)]
    # One after another: 100 x 0.1 s = 10 s.
    assert elapsed < bound, f"100 requests sleeping 0.1 s took {elapsed:.1f}s"


@pytest.mark.parametrize("worker", KEEPALIVE_WORKERS)
def test_heartbeat_goes_on_while_every_thread_is_busy(start_server, worker):
    """Requests keep all the threads (or greenlets) busy longer than the timeout;
    each finishes well within it, so the worker is healthy and stays."""
    server = start_server(
        "-k",
        installed(worker),
        "-w",
        "1",
        "--threads",
        "2",
        "--worker-connections",
        "2",
        "--timeout",
        "2",
        f"{APPS}:sleepy",
    )
    (pid,) = server.wait_workers(1)
    elapsed, bodies = concurrent_requests(server, 12, "0.5")
    assert bodies == [f"slept /{i}".encode() for i in range(12)]
    assert elapsed > 2  # the test did keep the worker busy past its timeout
    assert server.workers() == [pid]
    assert "WORKER TIMEOUT" not in server.log()


def test_idle_and_slowloris_clients_do_not_block_a_new_client(start_server, keepalive_worker):
    # gthread with its default single thread: parked connections cost no thread.
    server = start_server(
        "-k", keepalive_worker, "-w", "1", "--header-timeout", "3", f"{APPS}:path"
    )
    idle = [server.connect(timeout=30) for _ in range(200)]
    slow = [server.connect(timeout=30) for _ in range(50)]
    try:
        for sock in slow:
            sock.sendall(SLOWLORIS_HEAD)
        for sock in slow:
            sock.sendall(b"X-Trickle: 1\r\n")  # a little more, never the end of the head
        status, _, body = server.get("/new")
        assert status == 200 and body.startswith(b"/new ")
        # header_timeout closes them all: silently for the idle ones, with a 408
        # for those that started a request.
        for sock in idle:
            assert read_until_closed(sock) == b""
        for sock in slow:
            assert read_until_closed(sock).startswith(b"HTTP/1.1 408 ")
    finally:
        for sock in idle + slow:
            sock.close()
    assert server.get("/after")[0] == 200


def test_slow_body_is_cut_off_by_body_timeout(start_server, keepalive_worker):
    server = start_server(
        "-k", keepalive_worker, "-w", "1", "--body-timeout", "1", f"{APPS}:upload"
    )
    with server.connect(timeout=30) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789")
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert server.get("/", method="POST", body=b"x" * 1000)[2] == b"1000"


def test_hup_with_kept_alive_clients_drops_no_request(start_server, keepalive_worker):
    """Clients on keep-alive connections through a reload: every request answered."""
    server = start_server("-k", keepalive_worker, "-w", "2", f"{APPS}:path")
    old = set(server.wait_workers(2))
    stop = threading.Event()
    failures: list[str] = []
    answered = [0]

    def client_loop() -> None:
        while not stop.is_set():
            try:
                with server.connect() as sock:
                    client = Client(sock)
                    while not stop.is_set():
                        client.send("/x")
                        status, headers, _ = client.response()
                        if status != 200:
                            failures.append(f"status {status}")
                        answered[0] += 1
                        if headers.get("connection") == "close":
                            break
            except ConnectionError:
                # The server closed an idle kept-alive connection between two
                # requests: a client retries on a new one, as HTTP clients do.
                continue
            except OSError as exc:
                failures.append(repr(exc))

    threads = [threading.Thread(target=client_loop) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.3)
        server.signal(signal.SIGHUP)
        wait_until(lambda: (w := set(server.workers())) and len(w) == 2 and not (w & old))
        server.wait_for_log("Reload complete")
        time.sleep(0.3)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert failures == [], server.log()
    assert answered[0] > 10


def test_gevent_with_preload_patches_in_the_master_when_told(start_server, tmp_path):
    """--preload imports the app in the master: unpatched, the worker warns; patched
    by the config file, as documented, requests run concurrently and nothing warns."""
    installed("gevent")
    warning = "--preload with -k gevent"
    server = start_server("-k", "gevent", "--preload", f"{APPS}:sleepy")
    assert warning in server.log()
    conf = tmp_path / "gevent_conf.py"
    conf.write_text("from gevent import monkey\n\nmonkey.patch_all()\n")
    server = start_server("-c", str(conf), "-k", "gevent", "--preload", f"{APPS}:sleepy")
    elapsed, bodies = concurrent_requests(server, 50, "0.1")
    assert bodies == [f"slept /{i}".encode() for i in range(50)]
    assert elapsed < 3.0, f"50 requests sleeping 0.1 s took {elapsed:.1f}s"
    assert warning not in server.log()


def test_gevent_with_reload_serves_and_reloads(start_server, tmp_path):
    """The file watcher blocks in native code: it must not block the hub with it."""
    installed("gevent")
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    source = app_dir / "reloadable.py"
    source.write_text((APPS_DIR / "concurrency_apps.py").read_text())
    server = start_server("-k", "gevent", "--reload", "reloadable:path", cwd=app_dir)
    assert server.get("/before")[0] == 200

    def edit_until_reloaded() -> bool:
        source.write_text(source.read_text() + "\n")
        return "Reload complete" in server.log()

    wait_until(edit_until_reloaded, interval=1.0)
    assert server.get("/after")[0] == 200
