"""Operating the server: preload, --reload, daemon mode, titles, users, log rotation."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import stat
import sys
import time
from pathlib import Path

import pytest
from conftest import APPS_DIR, children_of, free_port, lifecycle_app, wait_until

import supervise

APP = "lifecycle_app:app"


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode().strip()


def test_process_titles(start_server, any_worker):
    server = start_server("-k", any_worker, "-w", "2", "-n", "shop", lifecycle_app(any_worker))
    workers = server.wait_workers(2)
    assert _cmdline(server.pid).startswith("supervise: master [shop]")
    for pid in workers:
        wait_until(lambda pid=pid: _cmdline(pid).startswith("supervise: worker [shop] gen 1"))


def test_preload_hup_reloads_config_only(start_server, tmp_path):
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    shutil.copy(APPS_DIR / "lifecycle_app.py", app_dir)
    server = start_server("--preload", "-w", "2", APP, cwd=app_dir)
    old = set(server.wait_workers(2))
    source = app_dir / "lifecycle_app.py"
    source.write_text(source.read_text().replace('VERSION = "1"', 'VERSION = "2"'))
    server.signal(signal.SIGHUP)
    log = server.wait_for_log("Reload complete")
    assert "HUP reloads the configuration only" in log
    wait_until(lambda: not set(server.workers()) & old)
    assert server.get("/version")[2] == b"1"  # preloaded code stays


def test_reload_option_replaces_workers_on_change(start_server, tmp_path):
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    shutil.copy(APPS_DIR / "lifecycle_app.py", app_dir)
    server = start_server("--reload", "-w", "2", APP, cwd=app_dir)
    server.wait_for_log("Reloader: watching")
    time.sleep(0.5)  # changes made before the watcher is set up are not seen
    source = app_dir / "lifecycle_app.py"
    source.write_text(source.read_text().replace('VERSION = "1"', 'VERSION = "2"'))
    server.wait_for_log("Reload complete")
    wait_until(lambda: server.get("/version")[2] == b"2")


def test_env_chdir_and_pythonpath(start_server, tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "envapp.py").write_text(
        "import os\n"
        "def app(environ, start_response):\n"
        "    body = (os.environ['GREETING'] + ' ' + os.getcwd()).encode()\n"
        "    start_response('200 OK', [('Content-Length', str(len(body)))])\n"
        "    return [body]\n"
    )
    workdir = tmp_path / "work"
    workdir.mkdir()
    server = start_server(
        "-e", "GREETING=hi", "--chdir", str(workdir), "--pythonpath", str(lib), "envapp:app"
    )
    assert server.get("/")[2] == f"hi {workdir}".encode()


def test_daemon_mode_writes_pidfile(tmp_path, start_server):
    pidfile = tmp_path / "d.pid"
    port = free_port()
    logfile = tmp_path / "error.log"
    launcher = start_server(
        "-D",
        "--pid",
        str(pidfile),
        "--error-logfile",
        str(logfile),
        "-b",
        f"127.0.0.1:{port}",
        APP,
        wait=False,
    )
    assert launcher.proc.wait(20) == 0  # the launching process returns at once
    pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip()))
    try:
        launcher.port = port
        # Not wait_serving(): the launcher has exited by design; the daemon serves.
        wait_until(launcher.is_serving, timeout=20)
        # Detached into a session of its own, not the launcher's (nor ours).
        assert os.getsid(pid) not in (launcher.pid, os.getsid(0))
        assert len(children_of(pid)) == 1
    finally:
        os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not pidfile.exists())
    assert "Shutting down: Master" in logfile.read_text()


def test_usr1_reopens_log_files(start_server, tmp_path):
    access = tmp_path / "access.log"
    server = start_server("--access-logfile", str(access), APP)
    server.get("/first")
    wait_until(lambda: access.exists() and "/first" in access.read_text())
    os.rename(access, tmp_path / "access.log.1")
    server.signal(signal.SIGUSR1)
    wait_until(lambda: access.exists())
    server.get("/second")
    wait_until(lambda: "/second" in access.read_text())
    assert "/second" not in (tmp_path / "access.log.1").read_text()


def _others_can_reach(path: Path) -> bool:
    """Whether a user with no rights of its own can traverse to ``path``."""
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in [path, *path.parents])


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")
def test_workers_run_as_configured_user(start_server, tmp_path):
    # The worker, running as nobody, imports the app from the clone itself, and what
    # it imports later from supervise and the virtualenv.
    needed = [APPS_DIR, Path(supervise.__file__).parent, Path(sys.prefix)]
    for path in needed:
        if not _others_can_reach(path):
            pytest.skip(f"user nobody cannot enter {path} (a clone or venv in a private directory)")
    nobody = pwd.getpwnam("nobody")
    sock_path = str(tmp_path / "app.sock")
    os.chmod(tmp_path, 0o755)
    server = start_server(
        "-u", "nobody", "-g", str(nobody.pw_gid), "-m", "007", APP, unix=sock_path, wait=False
    )
    wait_until(lambda: server.is_serving())
    (worker,) = server.wait_workers(1)
    assert os.stat(f"/proc/{worker}").st_uid == nobody.pw_uid
    assert os.stat(f"/proc/{server.pid}").st_uid == 0  # the master keeps its user
    mode = stat.S_IMODE(os.stat(sock_path).st_mode)
    assert mode & 0o007 == 0  # umask 007 applied to the socket file
    assert os.stat(sock_path).st_uid == nobody.pw_uid


def test_worker_that_keeps_failing_boot_after_start_is_retried(start_server, tmp_path):
    """The app imported fine at start; later a replacement cannot boot: the others keep serving."""
    (tmp_path / "flaky.py").write_text(
        "import os\n"
        "if os.path.exists('broken'):\n"
        "    raise RuntimeError('dependency down')\n"
        "def app(environ, start_response):\n"
        "    body = str(os.getpid()).encode()\n"
        "    start_response('200 OK', [('Content-Length', str(len(body)))])\n"
        "    return [body]\n"
    )
    server = start_server("-w", "2", "flaky:app", cwd=tmp_path)
    server.wait_for_log("Ready: 2 worker")
    first, _ = server.wait_workers(2)
    (tmp_path / "broken").write_text("")
    os.kill(first, signal.SIGKILL)
    server.wait_for_log("next try in")
    assert server.proc.poll() is None
    assert server.get("/")[0] == 200
    (tmp_path / "broken").unlink()
    server.wait_workers(2, timeout=30)
