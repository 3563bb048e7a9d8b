"""systemd integration: sd_notify states and socket activation, with real sockets."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

from conftest import APPS_DIR, Server, free_port, wait_until

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
