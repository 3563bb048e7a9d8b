"""Unit tests for the settings table, the validators and load_config's precedence."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from supervise.cli import build_parser, load_config
from supervise.config import SECTIONS, SETTINGS, Config, ConfigError, settings_markdown
from supervise.workers import WORKERS

REPO = Path(__file__).resolve().parent.parent
CLEAN_ENV: dict[str, str] = {}


def error_of(name: str, value: object) -> str:
    with pytest.raises(ConfigError) as info:
        Config(CLEAN_ENV).set(name, value)
    message = str(info.value)
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------- the table


def test_every_setting_is_documented_and_sectioned() -> None:
    for s in SETTINGS.values():
        assert s.section in SECTIONS, s.name
        assert s.help and "\n" not in s.help, s.name


def test_flags_are_unique() -> None:
    seen: dict[str, str] = {}
    for s in SETTINGS.values():
        for flag in s.flags:
            assert flag not in seen, f"{flag} used by {seen.get(flag)} and {s.name}"
            seen[flag] = s.name


def test_docs_are_generated_from_the_table() -> None:
    docs = REPO / "docs" / "settings.md"
    assert docs.read_text() == settings_markdown(), (
        "docs/settings.md is stale: python -m supervise.config --markdown > docs/settings.md"
    )


def test_gunicorn_names_flags_and_defaults() -> None:
    cfg = Config(CLEAN_ENV)
    expected = {
        "bind": ["127.0.0.1:8000"],
        "backlog": 2048,
        "workers": 1,
        "worker_class": "sync",
        "threads": 1,
        "worker_connections": 1000,
        "max_requests": 0,
        "max_requests_jitter": 0,
        "timeout": 30,
        "graceful_timeout": 30,
        "keepalive": 2,
        "limit_request_line": 4094,
        "limit_request_fields": 100,
        "limit_request_field_size": 8190,
        "limit_request_body": 0,
        "header_timeout": 10,
        "errorlog": "-",
        "accesslog": None,
        "loglevel": "info",
        "access_log_format": '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"',
        "forwarded_allow_ips": ["127.0.0.1", "::1"],
        "umask": 0,
        "server_header": True,
        "sendfile": True,
        "preload_app": False,
        "raw_env": [],
        "root_path": "",
    }
    for name, value in expected.items():
        assert getattr(cfg, name) == value, name
    flags = {
        "config": "-c",
        "bind": "-b",
        "workers": "-w",
        "worker_class": "-k",
        "timeout": "-t",
        "daemon": "-D",
        "raw_env": "-e",
        "pidfile": "-p",
        "user": "-u",
        "group": "-g",
        "umask": "-m",
        "proc_name": "-n",
        "enable_stdio_inheritance": "-R",
        "keepalive": "--keep-alive",
        "preload_app": "--preload",
        "sendfile": "--no-sendfile",
        "accesslog": "--access-logfile",
        "access_log_format": "--access-logformat",
        "errorlog": "--error-logfile",
        "loglevel": "--log-level",
        "limit_request_field_size": "--limit-request-field_size",
        "reload_extra_files": "--reload-extra-file",
        "proxy_allow_ips": "--proxy-allow-from",
    }
    for name, flag in flags.items():
        assert flag in SETTINGS[name].flags, name
    assert "--log-file" in SETTINGS["errorlog"].flags


HOOKS = {
    "on_starting": 1,
    "on_reload": 1,
    "when_ready": 1,
    "pre_fork": 2,
    "post_fork": 2,
    "post_worker_init": 1,
    "worker_int": 1,
    "worker_abort": 1,
    "pre_exec": 1,
    "pre_request": 2,
    "post_request": 4,
    "child_exit": 2,
    "worker_exit": 2,
    "nworkers_changed": 3,
    "on_exit": 1,
    "ssl_context": 2,
}


@pytest.mark.parametrize(("name", "arity"), HOOKS.items())
def test_hooks_have_gunicorn_arity(name: str, arity: int) -> None:
    setting = SETTINGS[name]
    assert setting.arity == arity
    assert setting.section == "Server Hooks"
    cfg = Config(CLEAN_ENV)
    cfg.set(name, lambda *args: None)  # *args accepts any arity
    params = ", ".join(f"a{i}" for i in range(arity))
    good = eval(f"lambda {params}: None")
    cfg.set(name, good)
    assert getattr(cfg, name) is good
    bad = eval(f"lambda {params}, extra: None")
    message = error_of(name, bad)
    assert name in message and f"{arity} positional" in message
    message = error_of(name, 42)
    assert "not callable" in message


def test_hook_from_dotted_path() -> None:
    cfg = Config(CLEAN_ENV)
    cfg.set("on_starting", "os.path.basename")
    assert cfg.on_starting is os.path.basename
    assert "cannot import" in error_of("on_starting", "no_such_module_xyz.hook")


def test_post_request_accepts_fewer_args_like_gunicorn() -> None:
    calls = []
    cfg = Config(CLEAN_ENV)
    cfg.set("post_request", lambda worker, req: calls.append((worker, req)))
    cfg.post_request("w", "r", {}, "resp")
    assert calls == [("w", "r")]


def test_default_pre_request_logs_method_and_path() -> None:
    logged = []

    class Log:
        def debug(self, *args: object) -> None:
            logged.append(args)

    class Worker:
        log = Log()

    class Req:
        method = "GET"
        path = "/x"

    Config(CLEAN_ENV).pre_request(Worker(), Req())
    assert logged == [("%s %s", "GET", "/x")]


# --------------------------------------------------------------------------- validators


def test_invalid_integer_names_the_setting_and_flag() -> None:
    assert error_of("workers", "abc") == (
        "invalid value for workers (-w, --workers): 'abc' is not an integer"
    )
    assert "at least 1" in error_of("workers", 0)
    assert "is not an integer" in error_of("workers", True)
    assert Config(CLEAN_ENV).copy().workers == 1


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("limit_request_line", 8191, "between 0 and 8190"),
        ("limit_request_fields", 32769, "between 0 and 32768"),
        ("limit_request_field_size", -1, "at least 0"),
        ("timeout", "soon", "not a number"),
        ("timeout", -1, ">= 0"),
        ("keepalive", float("nan"), ">= 0"),
        ("preload_app", "maybe", "not a boolean"),
        ("loglevel", "loud", "debug, info, warning, error, critical"),
        ("reload_engine", "inotifyx", "auto, poll, inotify"),
        ("forwarded_allow_ips", "10.0.0.1,example.com", "'example.com'"),
        ("raw_env", ["FOO"], "KEY=VALUE"),
        ("user", "no-such-user-xyz", "no such user"),
        ("group", "no-such-group-xyz", "no such group"),
        ("umask", "0o1000", "between 0 and 0o777"),
        ("umask", "abc", "not a umask"),
        ("chdir", "/no/such/dir", "not a directory"),
        ("certfile", "/no/such/cert.pem", "no such file"),
        ("cert_reqs", "sometimes", "required"),
        ("root_path", "api", "start with '/'"),
        ("secure_scheme_headers", {"X-PROTO": 1}, "strings"),
        ("bind", [], "at least one address"),
        ("worker_class", 3, "not a string"),
    ],
)
def test_invalid_values(name: str, value: object, reason: str) -> None:
    message = error_of(name, value)
    assert message.startswith(f"invalid value for {name}")
    assert reason in message


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("workers", " 4 ", 4),
        ("timeout", "2.5", 2.5),
        ("timeout", "0", 0),
        ("umask", "0o22", 0o22),
        ("umask", "022", 0o22),
        ("umask", "0x12", 0x12),
        ("umask", 18, 18),
        ("preload_app", "yes", True),
        ("preload_app", "False", False),
        ("sendfile", None, True),
        ("loglevel", "WARNING", "warning"),
        ("bind", "0.0.0.0:80", ["0.0.0.0:80"]),
        ("forwarded_allow_ips", "*", ["*"]),
        ("forwarded_allow_ips", " 10.0.0.0/8 , ::1", ["10.0.0.0/8", "::1"]),
        ("proxy_allow_ips", ["127.0.0.1"], ["127.0.0.1"]),
        ("user", "0", 0),
        ("user", "root", 0),
        ("group", 0, 0),
        ("cert_reqs", "required", 2),
        ("cert_reqs", "CERT_OPTIONAL", 1),
        ("cert_reqs", 0, 0),
        ("root_path", "/api/", "/api"),
        ("worker_class", "gthread", "gthread"),
        ("worker_class", "myproject.workers.Custom", "myproject.workers.Custom"),
        ("worker_class", "myproject.workers:Custom", "myproject.workers:Custom"),
        ("worker_class", "uvicorn.workers.UvicornWorker", "asgi"),
        ("worker_class", "gunicorn.workers.ggevent.GeventWorker", "gevent"),
    ],
)
def test_valid_values_are_normalised(name: str, value: object, expected: object) -> None:
    cfg = Config(CLEAN_ENV)
    cfg.set(name, value)
    assert getattr(cfg, name) == expected


def test_unknown_worker_class_message() -> None:
    *others, last = WORKERS
    assert error_of("worker_class", "foo") == (
        f"unknown worker class 'foo': use {', '.join(others)} or {last}, "
        "or a dotted path to a Worker subclass"
    )


def test_attribute_assignment_validates() -> None:
    cfg = Config(CLEAN_ENV)
    cfg.workers = "3"
    assert cfg.workers == 3
    with pytest.raises(ConfigError):
        cfg.workers = "many"
    with pytest.raises(ConfigError, match="unknown setting"):
        cfg.set("no_such_setting", 1)
    with pytest.raises(AttributeError):
        _ = cfg.no_such_setting


# --------------------------------------------------------------------------- derived values


def test_derived_values() -> None:
    cfg = Config(CLEAN_ENV)
    assert cfg.app_uri is None
    assert cfg.proc_name == "supervise"
    cfg.set("wsgi_app", "hello:app")
    assert cfg.app_uri == "hello:app"
    assert cfg.proc_name == "hello:app"
    cfg.set("proc_name", "shop")
    assert cfg.proc_name == "shop"

    cfg.set("raw_env", ["A=1", "B=x=y"])
    assert cfg.env == {"A": "1", "B": "x=y"}

    assert cfg.uid == os.geteuid() and cfg.gid == os.getegid()
    assert not cfg.is_ssl

    assert cfg.worker_class_str == "sync"
    cfg.set("threads", 4)
    assert cfg.worker_class_str == "gthread"  # Gunicorn's rule
    cfg.set("worker_class", "gevent")
    assert cfg.worker_class_str == "gevent"


def test_is_ssl(tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    cfg = Config(CLEAN_ENV)
    cfg.set("certfile", str(cert))
    assert cfg.is_ssl


def test_defaults_from_the_environment() -> None:
    cfg = Config(
        {
            "PORT": "5000",
            "WEB_CONCURRENCY": "3",
            "FORWARDED_ALLOW_IPS": "10.0.0.1",
            "SCRIPT_NAME": "/app",
            "SENDFILE": "0",
        }
    )
    assert cfg.bind == ["0.0.0.0:5000"]
    assert cfg.workers == 3
    assert cfg.forwarded_allow_ips == ["10.0.0.1"]
    assert cfg.root_path == "/app"
    assert cfg.sendfile is False


def test_bad_environment_default_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="WEB_CONCURRENCY") as info:
        Config({"WEB_CONCURRENCY": "lots"})
    assert "workers" in str(info.value)


def test_bind_given_beats_port() -> None:
    cfg = load_config(["-b", "unix:/tmp/x.sock"], {"PORT": "5000"})
    assert cfg.bind == ["unix:/tmp/x.sock"]


# --------------------------------------------------------------------------- load_config


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


def test_help_groups_by_section() -> None:
    text = build_parser().format_help()
    for section in ("Config File", "Server Socket", "Worker Processes", "Logging", "SSL"):
        assert f"\n{section}:\n" in text
    assert text.index("--workers") < text.index("--access-logfile")
