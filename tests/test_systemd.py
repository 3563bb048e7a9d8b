"""systemd integration: sd_notify states and socket activation, with real sockets."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    APPS_DIR,
    REPO_DIR,
    Server,
    die_with_pytest,
    free_port,
    read_until_closed,
    supervise_command,
    wait_until,
)
from ops_helpers import ctl

APP = "lifecycle_app:app"


class NotifySocket:
    """Plays systemd's part: a datagram socket collecting sd_notify messages."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.setblocking(False)
        self.messages: list[str] = []

    def poll(self) -> list[str]:
        while True:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                return self.messages

    def wait_for(self, text: str, count: int = 1) -> list[str]:
        return wait_until(
            lambda: sum(text in m for m in self.poll()) >= count and self.messages, timeout=20
        )


def test_ready_only_once_workers_serve_and_reload_states(start_server, tmp_path):
    notify = NotifySocket(str(tmp_path / "notify.sock"))
    server = start_server("-w", "2", APP, env={"NOTIFY_SOCKET": notify.path}, wait=False)
    notify.wait_for("READY=1")
    # READY=1 was sent only after the workers were up: they answer at once.
    assert server.is_serving()
    assert len(server.workers()) == 2
    server.signal(signal.SIGHUP)
    messages = notify.wait_for("READY=1", count=2)
    reload_index = next(i for i, m in enumerate(messages) if "RELOADING=1" in m)
    assert "MONOTONIC_USEC=" in messages[reload_index]
    assert any("READY=1" in m for m in messages[reload_index + 1 :])
    server.stop()
    assert any("STOPPING=1" in m for m in notify.poll())


def test_usr2_reports_the_new_main_pid(start_server, tmp_path):
    notify = NotifySocket(str(tmp_path / "notify.sock"))
    server = start_server("-w", "1", APP, env={"NOTIFY_SOCKET": notify.path})
    notify.wait_for("READY=1")
    server.signal(signal.SIGUSR2)
    messages = notify.wait_for("MAINPID=")
    new_pid = int(next(m for m in messages if m.startswith("MAINPID=")).split("=")[1].split()[0])
    assert new_pid != server.pid
    wait_until(lambda: new_pid in server.workers())
    server.stop()
    wait_until(lambda: server.is_serving())  # the new master keeps the port open
    os.kill(new_pid, signal.SIGTERM)


def test_socket_activation_uses_fd_3(tmp_path):
    port = free_port()
    listener = socket.create_server(("127.0.0.1", port))
    # systemd passes the socket as fd 3 and names the receiving pid in LISTEN_PID.
    script = (
        "import os, sys\n"
        "os.dup2(int(sys.argv[1]), 3)\n"
        "os.environ['LISTEN_PID'] = str(os.getpid())\n"
        "os.environ['LISTEN_FDS'] = '1'\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'supervise', *sys.argv[2:]])\n"
    )
    log = tmp_path / "server.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(listener.fileno()), APP],
            cwd=APPS_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            pass_fds=[listener.fileno()],
            start_new_session=True,
            preexec_fn=die_with_pytest(),
        )
    listener.close()
    server = Server(proc, "127.0.0.1", port, None, log)
    try:
        server.wait_serving()
        assert "from systemd" in server.log()
        assert server.get("/")[2] == b"ok"
    finally:
        server.stop()
        os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None


# -- the example units (examples/systemd/), run as systemd would run them ------

UNITS = REPO_DIR / "examples" / "systemd"
SOCKET_ACTIVATE = shutil.which("systemd-socket-activate")
EXAMPLE_BINARY = "/srv/myapp/venv/bin/supervise"
EXAMPLE_RUN = "/run/myapp"


def unit(name: str) -> dict[str, str]:
    """``Key: value`` of an example unit (the last one wins; sections merged)."""
    keys = {}
    for line in (UNITS / name).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith(("#", "[")):
            keys[key.strip()] = value.strip()
    return keys


@pytest.mark.skipif(SOCKET_ACTIVATE is None, reason="systemd-socket-activate is not installed")
def test_the_example_units_under_socket_activation(tmp_path):
    """supervise.socket and supervise.service as systemd runs them: the socket
    passed as LISTEN_FDS by systemd-socket-activate, the service's ExecStart,
    READY=1 on NOTIFY_SOCKET once the workers serve, ExecReload, and a stop
    the KillMode=mixed way (TERM to the master alone)."""
    socket_unit, service = unit("supervise.socket"), unit("supervise.service")
    assert service["Type"] == "notify" and service["KillMode"] == "mixed"
    run = tmp_path / "run"
    run.mkdir()
    (run / Path(EXAMPLE_RUN).name).mkdir()  # RuntimeDirectory=
    listen = socket_unit["ListenStream"].replace("/run", str(run), 1)
    argv = shlex.split(service["ExecStart"].replace(EXAMPLE_RUN, str(run / "myapp")))
    assert argv[0] == EXAMPLE_BINARY
    workers = int(argv[argv.index("-w") + 1])
    control = argv[argv.index("--control-socket") + 1]
    argv = [*supervise_command(*argv[1:-1]), APP]  # the test's app instead of myapp's
    notify = NotifySocket(str(tmp_path / "notify.sock"))
    env = [f"-E{service['Environment']}", f"-ENOTIFY_SOCKET={notify.path}"]
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [SOCKET_ACTIVATE, "-l", listen, *env, *argv],
            cwd=APPS_DIR,  # WorkingDirectory=
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_pytest(),
        )
    server = Server(proc, "", None, listen, log)
    try:
        # systemd-socket-activate starts the service on the first connection,
        # which waits in the backlog and is answered once a worker serves.
        wait_until(lambda: os.path.exists(listen))
        with server.connect(timeout=60) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            assert read_until_closed(sock).endswith(b"\r\n\r\nok"), server.log()
        first = next(m for m in notify.wait_for("READY=1") if "READY=1" in m)
        assert f"STATUS=generation 1: {workers} workers serving" in first
        ready = _ctl_status(control)
        assert [w["state"] for w in ready["workers"]] == ["ready"] * workers, ready
        assert "Using 1 socket(s) from systemd" in server.log()
        # ExecReload=, with $MAINPID as systemd fills it in.
        reload = shlex.split(service["ExecReload"].replace("$MAINPID", str(server.pid)))
        subprocess.run(reload, check=True, timeout=10)
        messages = notify.wait_for("READY=1", count=2)
        assert any("RELOADING=1" in m for m in messages)
        wait_until(lambda: _ctl_status(control)["master"]["serving_generation"] == 2)
        old = server.workers()
        # KillMode=mixed: TERM to the master only; it must be done well within TimeoutStopSec.
        assert server.stop(signal.SIGTERM, timeout=float(service["TimeoutStopSec"])) == 0
        assert any("STOPPING=1" in m for m in notify.poll())
        assert not [pid for pid in old if os.path.exists(f"/proc/{pid}")]
        # The socket is systemd's (supervise.socket): it stays for the next start.
        assert os.path.exists(listen) and not os.path.exists(control)
    finally:
        server.stop()
        os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None


def _ctl_status(control: str) -> dict:
    result = ctl("-s", control, "--json", "status")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is missing")
def test_the_example_units_parse(tmp_path):
    """`systemd-analyze verify` finds nothing to say (it insists that ExecStart's
    program exists, so the example's path points at this supervise)."""
    for name in ("supervise.socket", "supervise.service"):
        text = (UNITS / name).read_text()
        binary = shutil.which("supervise", path=os.path.dirname(sys.executable))
        (tmp_path / name).write_text(text.replace(EXAMPLE_BINARY, binary or EXAMPLE_BINARY))
    result = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            str(tmp_path / "supervise.socket"),
            str(tmp_path / "supervise.service"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_the_docs_show_the_tested_units():
    docs = (REPO_DIR / "docs" / "operations.md").read_text()
    for name in ("supervise.socket", "supervise.service"):
        assert (UNITS / name).read_text() in docs, name
