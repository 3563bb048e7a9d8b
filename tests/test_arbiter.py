"""The arbiter as a user drives it: signals, worker counts, reloads, timeouts."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from conftest import APPS_DIR, free_port, is_gone, lifecycle_app, wait_until

APP = "lifecycle_app:app"


def test_serves_with_two_workers(start_server, any_worker):
    server = start_server("-k", any_worker, "-w", "2", lifecycle_app(any_worker))
    pids = server.wait_workers(2)
    status, headers, body = server.get("/")
    assert (status, body) == (200, b"ok")
    assert headers["server"].startswith("supervise")
    seen = {server.get("/pid")[2] for _ in range(40)}
    assert {int(p) for p in seen} <= set(pids)


def test_ttin_ttou_change_worker_count(start_server, any_worker):
    server = start_server("-k", any_worker, "-w", "2", lifecycle_app(any_worker))
    server.wait_workers(2)
    server.signal(signal.SIGTTIN)
    server.wait_workers(3)
    server.signal(signal.SIGTTOU)
    server.wait_workers(2)
    assert server.get("/")[0] == 200
    assert "Number of workers: 2 -> 3" in server.log()


class RequestLoop:
    """Keeps sending requests on fresh connections and records every failure."""

    def __init__(self, server, path: str = "/pid") -> None:
        self.server = server
        self.path = path
        self.ok = 0
        self.failures: list[str] = []
        self.answers: set[bytes] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                status, _, body = self.server.get(self.path)
            except Exception as exc:
                self.failures.append(repr(exc))
                continue
            if status != 200:
                self.failures.append(f"status {status}")
            else:
                self.ok += 1
                self.answers.add(body)

    def __enter__(self) -> RequestLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def test_hup_replaces_every_worker_without_failed_requests(start_server, any_worker):
    server = start_server("-k", any_worker, "-w", "2", lifecycle_app(any_worker))
    old = set(server.wait_workers(2))
    with RequestLoop(server) as loop:
        time.sleep(0.3)
        server.signal(signal.SIGHUP)
        wait_until(lambda: (w := set(server.workers())) and len(w) == 2 and not (w & old))
        server.wait_for_log("Reload complete")
        time.sleep(0.3)
    assert loop.failures == [], server.log()
    assert loop.ok > 10
    assert server.proc.poll() is None


def _copy_app(tmp_path: Path) -> Path:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    shutil.copy(APPS_DIR / "lifecycle_app.py", app_dir / "lifecycle_app.py")
    return app_dir


def _set_version(app_dir: Path, text: str) -> None:
    source = app_dir / "lifecycle_app.py"
    content = source.read_text()
    start = content.index("VERSION = ")
    end = content.index("\n", start)
    source.write_text(content[:start] + text + content[end:])


def test_hup_loads_changed_code(start_server, any_worker, tmp_path):
    app_dir = _copy_app(tmp_path)
    server = start_server("-k", any_worker, "-w", "2", lifecycle_app(any_worker), cwd=app_dir)
    assert server.get("/version")[2] == b"1"
    old = set(server.wait_workers(2))
    _set_version(app_dir, 'VERSION = "2"')
    server.signal(signal.SIGHUP)
    server.wait_for_log("Reload complete")
    wait_until(lambda: not set(server.workers()) & old)  # the old generation has stopped
    assert {server.get("/version")[2] for _ in range(10)} == {b"2"}


def test_hup_with_broken_app_keeps_old_workers(start_server, any_worker, tmp_path):
    app_dir = _copy_app(tmp_path)
    server = start_server("-k", any_worker, "-w", "2", lifecycle_app(any_worker), cwd=app_dir)
    old = set(server.wait_workers(2))
    server.wait_for_log("Ready: 2 worker")  # both imported the good code before it breaks
    _set_version(app_dir, "VERSION = (")  # a syntax error
    with RequestLoop(server, "/version") as loop:
        server.signal(signal.SIGHUP)
        log = server.wait_for_log("Reload failed")
        time.sleep(0.5)
    assert "SyntaxError" in log
    assert log.count("Traceback") <= 1  # the error is printed once, not per worker
    assert loop.failures == [], server.log()
    assert loop.answers == {b"1"}
    assert set(server.wait_workers(2)) == old
    # Fixing the code and reloading again works.
    _set_version(app_dir, 'VERSION = "3"')
    server.signal(signal.SIGHUP)
    server.wait_for_log("Reload complete")
    wait_until(lambda: not set(server.workers()) & old)
    assert server.get("/version")[2] == b"3"


def test_killed_worker_is_replaced(start_server, any_worker):
    server = start_server("-k", any_worker, "-w", "2", lifecycle_app(any_worker))
    first, _second = server.wait_workers(2)
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: (w := server.workers()) and len(w) == 2 and first not in w)
    assert server.get("/")[0] == 200
    assert "SIGKILL" in server.log()


def test_hanging_request_gets_worker_aborted_and_replaced(start_server, any_worker):
    server = start_server("-k", any_worker, "-w", "1", "--timeout", "2", lifecycle_app(any_worker))
    (pid,) = server.wait_workers(1)
    with pytest.raises(Exception):  # noqa: B017 - the connection is cut when the worker dies
        conn = server.http(timeout=20)
        conn.request("GET", "/hang")
        conn.getresponse().read()
    log = server.wait_for_log("WORKER TIMEOUT")
    wait_until(lambda: (w := server.workers()) and w[0] != pid)
    server.wait_serving()
    log = server.log()
    assert f"WORKER TIMEOUT (pid:{pid})" in log
    assert "lifecycle_app.py" in log  # the stack of the stuck worker was logged


def test_term_lets_slow_request_finish(start_server, any_worker):
    server = start_server(
        "-k", any_worker, "-w", "1", "--graceful-timeout", "10", lifecycle_app(any_worker)
    )
    result: dict[str, object] = {}

    def slow() -> None:
        conn = server.http(timeout=20)
        conn.request("GET", "/sleep?1.5")
        resp = conn.getresponse()
        result["status"], result["body"] = resp.status, resp.read()

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.5)
    server.signal(signal.SIGTERM)
    thread.join(20)
    assert result.get("status") == 200 and result.get("body") == b"slept"
    assert server.proc.wait(20) == 0


def test_term_reaching_a_booting_worker_is_not_lost(start_server, any_worker, tmp_path):
    # post_fork runs before the worker has its own signal handlers. A TERM sent
    # then was caught by the arbiter's inherited handler and dropped: the worker
    # served on until the arbiter gave up waiting and SIGKILLed it.
    conf = tmp_path / "conf.py"
    conf.write_text("import time\n\n\ndef post_fork(server, worker):\n    time.sleep(1.0)\n")
    server = start_server(
        "-k",
        any_worker,
        "-w",
        "1",
        "--graceful-timeout",
        "5",
        "-c",
        str(conf),
        lifecycle_app(any_worker),
        wait=False,
    )
    server.wait_for_log("Booting worker with pid")
    server.signal(signal.SIGTERM)
    assert server.proc.wait(20) == 0
    assert "Worker exiting" in server.log(), server.log()  # a SIGKILLed worker says nothing


def test_quit_stops_at_once(start_server, any_worker):
    server = start_server("-k", any_worker, "-w", "2", lifecycle_app(any_worker))
    workers = server.wait_workers(2)
    assert server.stop(signal.SIGQUIT) == 0
    for pid in workers:
        wait_until(lambda pid=pid: not os.path.exists(f"/proc/{pid}"))


def test_max_requests_recycles_without_losing_requests(start_server, any_worker):
    server = start_server(
        "-k",
        any_worker,
        "-w",
        "1",
        "--max-requests",
        "20",
        "--max-requests-jitter",
        "5",
        lifecycle_app(any_worker),
    )
    (first,) = server.wait_workers(1)
    with RequestLoop(server) as loop:
        wait_until(lambda: len(loop.answers) >= 4, timeout=60)  # several workers took turns
    assert loop.failures == [], server.log()
    assert str(first).encode() in loop.answers
    # Retired: it finishes what it has, then exits (while its successors serve).
    wait_until(lambda: first not in server.workers(), timeout=30)
    assert "max_requests" in server.log()


def test_usr2_starts_new_master_and_old_can_stop(start_server, any_worker, tmp_path):
    pidfile = tmp_path / "supervise.pid"
    server = start_server(
        "-k", any_worker, "-w", "1", "--pid", str(pidfile), lifecycle_app(any_worker)
    )
    old_master = server.pid
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() == str(old_master))
    with RequestLoop(server) as loop:
        server.signal(signal.SIGUSR2)
        oldbin = tmp_path / "supervise.pid.oldbin"
        wait_until(lambda: oldbin.exists())
        new_master = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip()))
        assert new_master != old_master
        wait_until(lambda: len(server.workers()) == 2)  # old worker + the new master
        time.sleep(1.0)
        server.signal(signal.SIGTERM)
        assert server.proc.wait(20) == 0
        time.sleep(0.5)
        assert server.is_serving()
    assert loop.failures == [], server.log()
    assert os.path.exists(f"/proc/{new_master}")
    os.kill(new_master, signal.SIGTERM)
    wait_until(lambda: is_gone(new_master))


def test_config_file_sets_workers_and_runs_hooks(start_server, any_worker, tmp_path):
    marker = tmp_path / "hooks.log"
    conf = tmp_path / "conf.py"
    conf.write_text(
        f"""
workers = 3
worker_class = {any_worker!r}

def _mark(name):
    with open({str(marker)!r}, "a") as f:
        f.write(name + "\\n")

def on_starting(server):
    _mark("on_starting")

def when_ready(server):
    _mark("when_ready")

def pre_fork(server, worker):
    _mark("pre_fork")

def post_fork(server, worker):
    _mark("post_fork")

def post_worker_init(worker):
    _mark("post_worker_init")

def on_reload(server):
    _mark("on_reload")

def nworkers_changed(server, new_value, old_value):
    _mark(f"nworkers_changed:{{old_value}}->{{new_value}}")

def child_exit(server, worker):
    _mark("child_exit")

def worker_exit(server, worker):
    _mark("worker_exit")

def worker_int(worker):
    _mark("worker_int")

def on_exit(server):
    _mark("on_exit")
"""
    )
    server = start_server("-c", str(conf), lifecycle_app(any_worker))
    server.wait_workers(3)
    wait_until(lambda: marker.read_text().count("post_worker_init") == 3)
    server.signal(signal.SIGTTIN)
    server.wait_workers(4)
    server.signal(signal.SIGHUP)
    server.wait_for_log("Reload complete")
    wait_until(lambda: marker.read_text().count("child_exit") == 4)  # the old generation
    assert server.stop(signal.SIGQUIT) == 0
    calls = marker.read_text().split()
    assert calls[:2] == ["on_starting", "when_ready"]
    assert calls.count("pre_fork") == 3 + 1 + 3  # start, TTIN, the new generation
    assert calls.count("post_fork") == calls.count("pre_fork")
    assert "nworkers_changed:3->4" in calls
    # HUP re-reads the file: back to its 3 workers.
    assert "nworkers_changed:4->3" in calls and "on_reload" in calls
    assert calls.count("worker_exit") == 7 and calls.count("child_exit") == 7
    assert calls.count("worker_int") == 3  # QUIT reached the 3 workers left
    assert calls[-1] == "on_exit"


def test_missing_app_module_exits_with_clear_error(start_server, any_worker):
    server = start_server("-k", any_worker, "-w", "3", "no_such_module:app", wait=False)
    code = server.proc.wait(30)
    assert code != 0
    log = server.log()
    assert "No module named 'no_such_module'" in log
    assert log.count("No module named 'no_such_module'") == 1
    assert server.workers() == []


def test_app_raising_at_import_prints_traceback_once(start_server, tmp_path):
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom at import')\n")
    server = start_server("-w", "4", "broken:app", cwd=tmp_path, wait=False)
    assert server.proc.wait(30) != 0
    log = server.log()
    assert log.count("RuntimeError: boom at import") == 1
    assert "Traceback" in log


def test_port_zero_logs_the_port(start_server):
    server = start_server("-b", "127.0.0.1:0", APP, wait=False)
    log = server.wait_for_log(r"Listening at: http://127\.0\.0\.1:\d+")
    import re

    server.port = int(re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", log).group(1))
    assert server.port != 0
    server.wait_serving()


def test_unix_socket_bind(start_server, tmp_path):
    path = str(tmp_path / "app.sock")
    server = start_server(APP, unix=path, wait=False)
    wait_until(lambda: os.path.exists(path))
    wait_until(lambda: server.is_serving())
    assert server.raw(b"GET / HTTP/1.0\r\n\r\n").endswith(b"ok")
    server.stop()
    assert not os.path.exists(path)


def test_address_in_use_is_a_clear_error(start_server):
    first = start_server(APP)
    second = start_server("-b", f"127.0.0.1:{first.port}", APP, wait=False)
    assert second.proc.wait(90) != 0  # after its retries
    assert "in use" in second.log().lower()
    assert first.is_serving()


def test_timeout_zero_disables_the_heartbeat_check(start_server):
    server = start_server("-w", "1", "--timeout", "0", APP)
    (pid,) = server.wait_workers(1)
    assert server.get("/sleep?1.5")[2] == b"slept"
    assert server.workers() == [pid]
    assert "WORKER TIMEOUT" not in server.log()


def test_hup_applies_a_changed_bind(start_server, tmp_path):
    first_port, second_port = free_port(), free_port()
    conf = tmp_path / "conf.py"
    conf.write_text(f"bind = ['127.0.0.1:{first_port}']\nworkers = 2\n")
    server = start_server("-c", str(conf), APP, config_port=first_port)
    conf.write_text(f"bind = ['127.0.0.1:{second_port}']\nworkers = 2\n")
    server.signal(signal.SIGHUP)
    server.wait_for_log(f"No longer listening at: http://127.0.0.1:{first_port}")
    server.port = second_port
    assert server.get("/")[2] == b"ok"
    server.port = first_port
    wait_until(lambda: not server.is_serving())  # once the old generation has gone

    # An address that cannot be bound fails the reload and changes nothing.
    blocker = socket.create_server(("127.0.0.1", 0))
    taken = blocker.getsockname()[1]
    conf.write_text(f"bind = ['127.0.0.1:{taken}']\nworkers = 2\n")
    server.signal(signal.SIGHUP)
    server.wait_for_log("Reload failed, configuration kept")
    server.port = second_port
    assert server.get("/")[2] == b"ok"
    blocker.close()
