"""Unit tests for the settings table, the validators and the derived values
(config files and load_config's precedence: test_config_files.py)."""

from __future__ import annotations

import os
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


def test_help_groups_by_section() -> None:
    text = build_parser().format_help()
    for section in ("Config File", "Server Socket", "Worker Processes", "Logging", "SSL"):
        assert f"\n{section}:\n" in text
    assert text.index("--workers") < text.index("--access-logfile")
