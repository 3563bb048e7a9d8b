"""File modes: the app, the log files (at start and recreated on USR1), the pid
file, the control socket and the unix listener, started from a shell whose umask
is 0 (the worst case: every file would be world-writable)."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

from conftest import wait_until


@contextlib.contextmanager
def inherited_umask(mask: int) -> Iterator[None]:
    """The umask the server is started with (it inherits the test's at fork)."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def start(start_server, tmp_path: Path, mask: int, *args: str):
    files = tmp_path / "files"
    files.mkdir()
    with inherited_umask(mask):
        return start_server(
            "--pid",
            str(tmp_path / "app.pid"),
            "--access-logfile",
            str(tmp_path / "access.log"),
            "--error-logfile",
            str(tmp_path / "error.log"),
            "--control-socket",
            str(tmp_path / "ctl.sock"),
            "--metrics-bind",
            f"unix:{tmp_path / 'metrics.sock'}",
            *args,
            "logs_app:app",
            unix=str(tmp_path / "app.sock"),
            env={"FILES_DIR": str(files)},
        )


def made_modes(server) -> tuple[int, int]:
    """The modes of a file and a folder the app creates, as the app sees them."""
    with server.connect() as sock:
        sock.sendall(b"GET /files HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        response = b""
        while chunk := sock.recv(4096):
            response += chunk
    file_mode, dir_mode = response.split(b"\r\n\r\n", 1)[1].split()
    return int(file_mode, 8), int(dir_mode, 8)


def test_modes_under_umask_0(start_server, tmp_path):
    server = start(start_server, tmp_path, 0)
    # What the app creates: no write for group and others.
    assert made_modes(server) == (0o644, 0o755)
    assert mode(tmp_path / "error.log") == 0o644
    assert mode(tmp_path / "access.log") == 0o644
    assert mode(tmp_path / "app.pid") == 0o644
    assert mode(tmp_path / "ctl.sock") == 0o600
    # The listener follows the umask setting, 0 by default as in Gunicorn: a proxy
    # running as another user (nginx as www-data) can connect.
    assert mode(tmp_path / "app.sock") == 0o777
    # So does the metrics socket (a scraper may run as another user).
    wait_until(lambda: (tmp_path / "metrics.sock").exists())
    assert mode(tmp_path / "metrics.sock") == 0o777

    # logrotate moves the files; USR1 has master and workers recreate them.
    for name in ("error.log", "access.log"):
        (tmp_path / name).rename(tmp_path / f"{name}.1")
    server.signal(signal.SIGUSR1)
    wait_until(lambda: (tmp_path / "error.log").exists() and (tmp_path / "access.log").exists())
    with server.connect() as sock:  # a request after the reopen writes the new access log
        sock.sendall(b"GET /after HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        sock.recv(4096)
    wait_until(lambda: "/after" in (tmp_path / "access.log").read_text())
    assert mode(tmp_path / "error.log") == 0o644
    assert mode(tmp_path / "access.log") == 0o644


def test_umask_setting_masks_the_unix_socket_only(start_server, tmp_path):
    server = start(start_server, tmp_path, 0, "--umask", "007")
    assert mode(tmp_path / "app.sock") == 0o770
    wait_until(lambda: (tmp_path / "metrics.sock").exists())
    assert mode(tmp_path / "metrics.sock") == 0o770
    assert made_modes(server) == (0o644, 0o755)
    assert mode(tmp_path / "error.log") == 0o644
    assert mode(tmp_path / "ctl.sock") == 0o600


def test_a_stricter_inherited_umask_is_kept(start_server, tmp_path):
    """systemd's UMask=0077, say: supervise never loosens it."""
    server = start(start_server, tmp_path, 0o077)
    assert made_modes(server) == (0o600, 0o700)
    assert mode(tmp_path / "error.log") == 0o600
    assert mode(tmp_path / "app.pid") == 0o600
