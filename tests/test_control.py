"""The control socket (--control-socket) driven by `supervise ctl` as a user
runs it: output, exit status, and what the server does."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from conftest import launch, shutdown, wait_until
from ops_helpers import ctl, ops_app, worker_pids


def _status(sock: Path) -> dict:
    result = ctl("-s", str(sock), "--json", "status")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _ready(sock: Path, count: int) -> dict:
    """The status once exactly ``count`` workers are ready and none is leaving."""

    def check() -> dict | None:
        status = _status(sock)
        states = [w["state"] for w in status["workers"]]
        return status if states.count("ready") == count == len(states) else None

    return wait_until(check, timeout=30)


def _one_line_error(result, text: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], result.stderr


def test_status_as_a_table_and_as_json(start_server, any_worker, tmp_path):
    sock = tmp_path / "ctl.sock"
    server = start_server(
        ops_app(any_worker), "-k", any_worker, "-w", "2", "--control-socket", str(sock)
    )
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    status = _ready(sock, 2)
    for _ in range(3):
        assert server.get("/")[0] == 200
    # rsgi counts finished requests at its tick (0.1 s).
    status = wait_until(
        lambda: (s := _status(sock)) and sum(w["requests"] for w in s["workers"]) >= 4 and s
    )
    master = status["master"]
    assert master["pid"] == server.pid and master["worker_class"] == any_worker
    assert master["binds"] == [f"127.0.0.1:{server.port}"]
    assert master["generation"] == master["serving_generation"] == 1
    assert master["target_workers"] == 2 and master["app"] == ops_app(any_worker)
    pids = sorted(w["pid"] for w in status["workers"])
    assert pids == sorted(worker_pids(server.pid))
    for w in status["workers"]:
        assert w["state"] == "ready" and w["generation"] == 1
        assert w["rss"] > 1_000_000 and w["age"] > 0 and w["heartbeat_age"] >= 0
        assert w["in_flight"] == 0
    table = ctl("-s", str(sock), "status")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith(f"master  pid {server.pid}, supervise ")
    assert f"binds   127.0.0.1:{server.port}" in lines
    header = next(line for line in lines if line.lstrip().startswith("PID"))
    assert header.split() == [
        "PID",
        "GEN",
        "STATE",
        "REQUESTS",
        "IN",
        "FLIGHT",
        "CONNS",
        "RSS",
        "AGE",
        "HEARTBEAT",
    ]
    rows = lines[lines.index(header) + 1 :]
    assert sorted(int(row.split()[0]) for row in rows) == pids
    assert all(row.split()[2] == "ready" and "MiB" in row and row.endswith("ago") for row in rows)


def test_scale_and_retire(start_server, any_worker, tmp_path):
    sock = tmp_path / "ctl.sock"
    server = start_server(
        ops_app(any_worker), "-k", any_worker, "-w", "2", "--control-socket", str(sock)
    )
    _ready(sock, 2)
    result = ctl("-s", str(sock), "scale", "+1")
    assert (result.returncode, result.stdout) == (0, "workers: 2 -> 3\n")
    _ready(sock, 3)
    assert ctl("-s", str(sock), "scale", "-2").stdout == "workers: 3 -> 1\n"
    _ready(sock, 1)
    assert ctl("-s", str(sock), "scale", "2").stdout == "workers: 1 -> 2\n"
    before = [w["pid"] for w in _ready(sock, 2)["workers"]]
    result = ctl("-s", str(sock), "retire", str(before[0]))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"worker {before[0]}: a replacement is starting\n"
    after = wait_until(
        lambda: (s := _ready(sock, 2)) and before[0] not in [w["pid"] for w in s["workers"]] and s
    )
    pids = [w["pid"] for w in after["workers"]]
    assert before[1] in pids and len(pids) == 2
    log = server.wait_for_log(rf"Worker exiting \(pid: {before[0]}\)")
    assert f"Worker {before[0]} replaced (retire): stopping it" in log
    _one_line_error(ctl("-s", str(sock), "scale", "0"), "cannot scale to 0 workers")
    _one_line_error(ctl("-s", str(sock), "scale", "many"), "scale takes N, +N or -N")
    _one_line_error(
        ctl("-s", str(sock), "retire", str(server.pid)), f"no worker with pid {server.pid}"
    )


def _config(path: Path, app: str, sock: Path, workers: int = 1) -> Path:
    path.write_text(f"wsgi_app = {app!r}\nworkers = {workers}\ncontrol_socket = {str(sock)!r}\n")
    return path


def test_reload_answers_how_it_went(tmp_path):
    sock = tmp_path / "ctl.sock"
    conf = _config(tmp_path / "supervise.conf.py", "ops_app:app", sock)
    server = launch(["-c", str(conf)], tmp_path / "log")
    try:
        server.wait_serving()
        result = ctl("-s", str(sock), "reload")
        assert (result.returncode, result.stdout) == (0, "reload complete: generation 2 serving\n")
        # A configuration that does not load: nothing changes.
        conf.write_text("workers = 'many'\n")
        _one_line_error(
            ctl("-s", str(sock), "reload"), "reload failed, configuration kept as it was: "
        )
        # An app that cannot load: its canary fails, the serving generation stays.
        _config(conf, "no_such_module:app", sock)
        _one_line_error(
            ctl("-s", str(sock), "reload"),
            "reload failed: generation 3 cannot boot (app failed to load); "
            "generation 2 keeps serving",
        )
        assert server.get("/")[0] == 200
        status = _status(sock)["master"]
        assert (status["generation"], status["serving_generation"]) == (2, 2)
        # ctl finds the socket through the same configuration file as the server.
        _config(conf, "ops_app:app", sock)
        result = ctl("-c", str(conf), "status")
        assert result.returncode == 0 and f"pid {server.pid}" in result.stdout
        result = ctl("status", cwd=tmp_path)  # ./supervise.conf.py
        assert result.returncode == 0 and f"pid {server.pid}" in result.stdout
    finally:
        shutdown(server)


def test_reopen_logs(start_server, tmp_path):
    sock, log = tmp_path / "ctl.sock", tmp_path / "error.log"
    server = start_server(
        ops_app("sync"), "--control-socket", str(sock), "--error-logfile", str(log)
    )
    _ready(sock, 1)
    os.rename(log, tmp_path / "error.log.1")
    result = ctl("-s", str(sock), "reopen-logs")
    assert (result.returncode, result.stdout) == (0, "log files reopened (master, 1 workers)\n")
    wait_until(log.exists)
    ctl("-s", str(sock), "scale", "2")  # something the master logs
    wait_until(lambda: "Number of workers: 1 -> 2" in log.read_text())
    server.get("/")


def test_stop_gracefully_finishes_requests_in_flight(start_server, any_worker, tmp_path):
    sock = tmp_path / "ctl.sock"
    server = start_server(ops_app(any_worker), "-k", any_worker, "--control-socket", str(sock))
    _ready(sock, 1)
    answers: list[tuple[int, bytes]] = []
    slow = threading.Thread(target=lambda: answers.append(server.get("/sleep?3")[::2]))
    slow.start()
    wait_until(lambda: _status(sock)["workers"][0]["in_flight"] == 1)
    result = ctl("-s", str(sock), "stop", "--graceful")
    slow.join(15)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"master {server.pid} stopping gracefully\nstopped\n"
    assert answers == [(200, b"ok")]
    assert server.proc.wait(10) == 0
    assert not sock.exists()


def test_stop_now(start_server, tmp_path):
    sock = tmp_path / "ctl.sock"
    server = start_server(ops_app("sync"), "--control-socket", str(sock))
    result = ctl("-s", str(sock), "--json", "stop")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"ok": True, "message": f"master {server.pid} stopping now"}
    assert server.proc.wait(10) == 0


def test_errors_are_one_line_and_exit_1(tmp_path):
    missing = tmp_path / "none.sock"
    _one_line_error(ctl("-s", str(missing), "status"), f"no master at {missing}")
    stale = tmp_path / "stale.sock"
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(str(stale))  # bound, never listening: what a killed master leaves
    leftover.close()
    _one_line_error(ctl("-s", str(stale), "status"), f"stale control socket {stale}")
    _one_line_error(ctl("status", cwd=tmp_path), "no control socket")
    usage = ctl("-s", str(stale), "scale")
    assert usage.returncode == 2 and "usage: supervise ctl" in usage.stderr


def _nobody_can_run_python() -> bool:
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "import supervise"], user="nobody", cwd="/", capture_output=True
        )
    except OSError:
        return False
    return probe.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the client as another user")
def test_another_user_is_refused(start_server):
    if not _nobody_can_run_python():
        pytest.skip("user nobody cannot run this checkout's Python (a private directory)")
    # A directory anyone may enter: only the socket's own mode keeps nobody out.
    where = Path(tempfile.mkdtemp(prefix="supervise-ctl-"))
    try:
        where.chmod(0o755)
        sock = where / "ctl.sock"
        start_server(ops_app("sync"), "--control-socket", str(sock))
        result = ctl("-s", str(sock), "status", user="nobody", cwd="/")
        _one_line_error(result, f"permission denied: {sock} is owner-only")
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_a_second_master_on_the_same_socket_is_refused(start_server, tmp_path):
    sock = tmp_path / "ctl.sock"
    start_server(ops_app("sync"), "--control-socket", str(sock))
    second = launch([ops_app("sync"), "--control-socket", str(sock)], tmp_path / "second.log")
    try:
        assert second.proc.wait(30) == 1
    finally:
        shutdown(second)
    assert f"control socket {sock}: another master is listening there" in second.log()
    assert _status(sock)["master"]["pid"] != second.pid


def test_a_silent_client_never_holds_the_master(start_server, tmp_path):
    sock = tmp_path / "ctl.sock"
    server = start_server(ops_app("sync"), "--control-socket", str(sock))
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(str(sock))
    silent.sendall(b'{"command": "sta')  # and nothing more
    garbage = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    garbage.connect(str(sock))
    garbage.sendall(b"hello\n")
    try:
        assert json.loads(garbage.makefile().readline()) == {
            "ok": False,
            "error": "malformed request",
        }
        # Others are served meanwhile, and signals are handled.
        assert _status(sock)["master"]["pid"] == server.pid
        server.signal(signal.SIGHUP)
        server.wait_for_log("Reload complete: generation 2 serving")
        # The silent one is dropped once its time is up.
        silent.settimeout(30)
        assert silent.recv(100) == b""
    finally:
        silent.close()
        garbage.close()


def test_usr2_both_masters_answer_and_the_new_one_takes_the_path_once_serving(
    start_server, tmp_path
):
    sock, pidfile = tmp_path / "ctl.sock", tmp_path / "app.pid"
    flag = tmp_path / "slow-import"
    server = start_server(
        "slow_boot_app:app",
        "--control-socket",
        str(sock),
        "--pid",
        str(pidfile),
        env={"SLOW_BOOT_FLAG": str(flag)},
    )
    old = server.pid
    flag.write_text("3")  # the new master's workers take 3 s to import the app
    server.signal(signal.SIGUSR2)
    new = wait_until(lambda: (p := _read_pid(pidfile)) and p != old and p)
    # Booting: the path still leads to the old master.
    assert _status(sock)["master"]["pid"] == old
    server.wait_for_log("Control socket taken over", timeout=30)
    assert _status(sock)["master"]["pid"] == new
    oldbin = Path(f"{sock}.oldbin")
    assert _status(oldbin)["master"]["pid"] == old
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    # The old master leaves: its name goes with it, the new one's stays.
    result = ctl("-s", str(oldbin), "stop", "--graceful")
    assert result.returncode == 0, result.stderr
    assert server.proc.wait(20) == 0
    assert not oldbin.exists()
    assert _status(sock)["master"]["pid"] == new
    result = ctl("-s", str(sock), "stop")
    assert result.returncode == 0, result.stderr
    wait_until(lambda: not sock.exists())


def _read_pid(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def test_options_go_before_or_after_the_command(start_server, tmp_path):
    """docs/operations.md writes `ctl status --json`; `ctl --json status` works too."""
    sock = tmp_path / "ctl.sock"
    server = start_server(ops_app("sync"), "--control-socket", str(sock))
    _ready(sock, 1)
    for argv in (
        ("-s", str(sock), "--json", "status"),
        ("-s", str(sock), "status", "--json"),
        ("status", "--json", "-s", str(sock), "--timeout", "5"),
    ):
        result = ctl(*argv)
        assert result.returncode == 0, (argv, result.stderr)
        assert json.loads(result.stdout)["master"]["pid"] == server.pid, argv
    table = ctl("status", "-s", str(sock))
    assert table.returncode == 0 and table.stdout.startswith(f"master  pid {server.pid}")
    # -s and -c exclude each other wherever each is written.
    for argv in (("-s", str(sock), "status", "-c", "x.py"), ("status", "-c", "x.py", "-s", "y")):
        usage = ctl(*argv)
        assert usage.returncode == 2 and "not allowed with argument" in usage.stderr, argv
    result = ctl("stop", "--graceful", "--json", "-s", str(sock))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ok"] is True
    assert server.proc.wait(10) == 0


def test_ctl_help_lists_the_commands():
    """`supervise ctl` is the command (an app module named ctl is written ctl:app)."""
    result = ctl("--help")
    assert result.returncode == 0
    for command in ("status", "reload", "scale", "retire", "reopen-logs", "stop"):
        assert command in result.stdout
