"""load_config: command line, environment, config files (Python files and
modules, Gunicorn's unchanged) and their precedence, and the errors a bad
file gets."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from supervise.cli import load_config
from supervise.config import ConfigError


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def test_command_line_flags(in_tmp: Path) -> None:
    cfg = load_config(
        [
            "-w",
            "3",
            "-b",
            "127.0.0.1:9000",
            "--bind=[::1]:9000",
            "-k",
            "gthread",
            "--threads",
            "8",
            "-e",
            "A=1",
            "--env",
            "B=2",
            "--no-sendfile",
            "--no-server-header",
            "--preload",
            "--umask",
            "022",
            "--log-level",
            "debug",
            "--limit-request-field-size",
            "100",
            "app:application",
        ],
        {},
    )
    assert cfg.workers == 3
    assert cfg.bind == ["127.0.0.1:9000", "[::1]:9000"]
    assert cfg.worker_class == "gthread" and cfg.threads == 8
    assert cfg.env == {"A": "1", "B": "2"}
    assert cfg.sendfile is False and cfg.server_header is False and cfg.preload_app is True
    assert cfg.umask == 0o22 and cfg.loglevel == "debug"
    assert cfg.limit_request_field_size == 100
    assert cfg.app_uri == "app:application"


def test_precedence_cli_over_env_over_file_over_defaults(in_tmp: Path) -> None:
    conf = write(
        in_tmp / "conf.py",
        """
        workers = 2
        timeout = 10
        keepalive = 7
        bind = "0.0.0.0:7000"
        wsgi_app = "fromfile:app"
        """,
    )
    environ = {"SUPERVISE_CMD_ARGS": "-w 3 --timeout 20 --graceful-timeout 5"}
    cfg = load_config(["-c", str(conf), "-w", "4"], environ)
    assert cfg.workers == 4  # command line
    assert cfg.timeout == 20  # SUPERVISE_CMD_ARGS
    assert cfg.graceful_timeout == 5  # SUPERVISE_CMD_ARGS
    assert cfg.keepalive == 7  # config file
    assert cfg.bind == ["0.0.0.0:7000"]  # config file, string form
    assert cfg.max_requests == 0  # default
    assert cfg.app_uri == "fromfile:app"
    assert cfg.config == str(conf)

    cfg = load_config(["-c", str(conf), "cli:app", "-b", "127.0.0.1:1"], environ)
    assert cfg.app_uri == "cli:app"
    assert cfg.bind == ["127.0.0.1:1"]  # replaces the file's list, no merging


def test_config_file_named_in_supervise_cmd_args(in_tmp: Path) -> None:
    conf = write(in_tmp / "other.py", "workers = 6\n")
    cfg = load_config([], {"SUPERVISE_CMD_ARGS": f"-c '{conf}'"})
    assert cfg.workers == 6


def test_default_config_file_is_read_when_present(in_tmp: Path) -> None:
    assert load_config([], {}).config is None
    write(in_tmp / "supervise.conf.py", "workers = 5\n")
    cfg = load_config([], {})
    assert cfg.workers == 5
    assert cfg.config == str(in_tmp / "supervise.conf.py")


def test_config_file_ignores_unknown_and_private_names(in_tmp: Path) -> None:
    conf = write(
        in_tmp / "conf.py",
        """
        import os
        statsd_host = "localhost:8125"   # a Gunicorn setting supervise does not have
        _workers = "not me"
        config = "ignored.py"
        workers = 2
        """,
    )
    cfg = load_config(["-c", str(conf)], {})
    assert cfg.workers == 2
    assert cfg.config == str(conf)


def test_config_from_python_module(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(in_tmp / "myconf_xyz.py", "workers = 7\n")
    monkeypatch.syspath_prepend(str(in_tmp))
    try:
        cfg = load_config(["-c", "python:myconf_xyz"], {})
        assert cfg.workers == 7
        # A reload (SIGHUP) sees edits to the module.
        write(in_tmp / "myconf_xyz.py", "workers = 8\n# changed size for the pyc check\n")
        cfg = load_config(["-c", "python:myconf_xyz"], {})
        assert cfg.workers == 8
    finally:
        sys.modules.pop("myconf_xyz", None)
    with pytest.raises(ConfigError, match="not found"):
        load_config(["-c", "python:no_such_conf_module_xyz"], {})


def test_gunicorn_config_file_works_unchanged(in_tmp: Path) -> None:
    conf = write(
        in_tmp / "gunicorn.conf.py",
        """
        import multiprocessing
        import os

        bind = os.environ.get("BIND", "0.0.0.0:8080")
        workers = multiprocessing.cpu_count() * 2 + 1
        worker_class = "uvicorn.workers.UvicornWorker"
        threads = 2
        worker_connections = 500
        max_requests = 1000
        max_requests_jitter = 50
        timeout = 120
        graceful_timeout = 60
        keepalive = 5
        limit_request_line = 8190
        limit_request_field_size = 16380
        preload_app = True
        reload = False
        sendfile = None
        daemon = False
        pidfile = "/tmp/gunicorn.pid"
        worker_tmp_dir = "/dev/shm"
        umask = 0o007
        user = None
        group = None
        raw_env = ["DJANGO_SETTINGS_MODULE=mysite.settings"]
        forwarded_allow_ips = "*"
        secure_scheme_headers = {"X-FORWARDED-PROTO": "https"}
        accesslog = "-"
        errorlog = "-"
        loglevel = "warning"
        access_log_format = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s %(L)s'
        capture_output = True
        proc_name = "mysite"
        statsd_host = "localhost:8125"
        logconfig_dict = {"version": 1, "loggers": {"gunicorn.error": {"level": "INFO"}}}

        def on_starting(server):
            server.log.info("starting")

        def when_ready(server):
            pass

        def post_fork(server, worker):
            server.log.info("Worker spawned (pid: %s)", worker.pid)

        def pre_fork(server, worker):
            pass

        def pre_exec(server):
            server.log.info("Forked child, re-executing.")

        def worker_int(worker):
            worker.log.info("worker received INT or QUIT signal")

        def worker_abort(worker):
            worker.log.info("worker received SIGABRT signal")

        def post_request(worker, req, environ, resp):
            pass

        def child_exit(server, worker):
            pass
        """,
    )
    cfg = load_config(["-c", str(conf), "mysite.asgi:application"], {})
    assert cfg.bind == ["0.0.0.0:8080"]
    assert cfg.workers == os.cpu_count() * 2 + 1
    assert cfg.worker_class == "asgi"
    assert cfg.timeout == 120 and cfg.graceful_timeout == 60 and cfg.keepalive == 5
    assert cfg.limit_request_line == 8190
    assert cfg.preload_app is True and cfg.sendfile is True
    assert cfg.umask == 0o007
    assert cfg.uid == os.geteuid()
    assert cfg.env == {"DJANGO_SETTINGS_MODULE": "mysite.settings"}
    assert cfg.forwarded_allow_ips == ["*"]
    assert cfg.loglevel == "warning" and cfg.accesslog == "-"
    assert cfg.proc_name == "mysite"
    assert cfg.on_starting.__name__ == "on_starting"
    assert cfg.post_fork.__code__.co_filename == str(conf)


def test_raising_config_file(in_tmp: Path) -> None:
    conf = write(in_tmp / "bad.py", "workers = 2\nx = 1 / 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(["-c", str(conf)], {})
    message = str(info.value)
    assert "ZeroDivisionError: division by zero" in message
    assert "(line 2)" in message and "bad.py" in message
    assert "\n" not in message


def test_syntax_error_config_file(in_tmp: Path) -> None:
    conf = write(in_tmp / "bad.py", "workers = 2\nworkers = = 3\n")
    with pytest.raises(ConfigError, match="syntax error on line 2"):
        load_config(["-c", str(conf)], {})


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_unreadable_config_file(in_tmp: Path, what: str) -> None:
    target = in_tmp / "nope.py"
    if what == "directory":
        target.mkdir()
    with pytest.raises(ConfigError, match="cannot read config file") as info:
        load_config(["-c", str(target)], {})
    assert "\n" not in str(info.value)


def test_invalid_value_in_config_file_names_the_file(in_tmp: Path) -> None:
    conf = write(in_tmp / "conf.py", 'workers = "many"\n')
    with pytest.raises(ConfigError) as info:
        load_config(["-c", str(conf)], {})
    message = str(info.value)
    assert "invalid value for workers" in message and "conf.py" in message


def test_supervise_cmd_args_errors(in_tmp: Path) -> None:
    with pytest.raises(ConfigError, match="SUPERVISE_CMD_ARGS"):
        load_config([], {"SUPERVISE_CMD_ARGS": "-w 'unbalanced"})
    with pytest.raises(ConfigError, match=r"workers .*SUPERVISE_CMD_ARGS"):
        load_config([], {"SUPERVISE_CMD_ARGS": "-w lots"})
    with pytest.raises(ConfigError, match="unrecognized arguments: --nope"):
        load_config(["--nope"], {})


def test_load_config_is_pure(in_tmp: Path) -> None:
    before = (os.getcwd(), dict(os.environ), list(sys.path))
    conf = write(in_tmp / "conf.py", "chdir = '/'\nraw_env = ['ZZZ_SUPERVISE_TEST=1']\n")
    cfg = load_config(["-c", str(conf), "--pythonpath", "/opt"], {})
    assert cfg.chdir == "/" and cfg.env == {"ZZZ_SUPERVISE_TEST": "1"}
    assert (os.getcwd(), dict(os.environ), list(sys.path)) == before
