"""The error and access logs: formats, atoms, levels, reopening after logrotate."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from supervise.config import Config, ConfigError
from supervise.logs import Logger

ERROR_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}\] \[(\d+)\] \[(\w+)\] (.*)$")
CLF_TIME = r"\[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]"


class Response:
    def __init__(self, status: str = "200 OK", headers=(), sent: int | None = 5) -> None:
        self.status = status
        self.status_code = int(status.split()[0])
        self.headers = list(headers)
        self.sent = sent


def environ(**extra: str) -> dict[str, str]:
    env = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": "/path?q=1",
        "PATH_INFO": "/path",
        "QUERY_STRING": "q=1",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "10.1.2.3",
        "HTTP_USER_AGENT": "curl/8.0",
        "HTTP_REFERER": "http://example.com/",
    }
    env.update(extra)
    return env


@pytest.fixture
def make_logger(tmp_path: Path) -> Iterator[Callable[..., tuple[Logger, Path, Path]]]:
    """Logger writing to files in tmp_path; settings given as keyword arguments."""
    loggers: list[Logger] = []

    def make(**settings: object) -> tuple[Logger, Path, Path]:
        error, access = tmp_path / "error.log", tmp_path / "access.log"
        cfg = Config({})
        cfg.set("errorlog", str(error))
        cfg.set("accesslog", str(access))
        for name, value in settings.items():
            cfg.set(name, value)
        log = Logger(cfg)
        loggers.append(log)
        return log, error, access

    yield make
    for log in loggers:
        log.close()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_default_access_format(make_logger) -> None:
    log, _, access = make_logger()
    log.access(Response(), None, environ(), 0.25)
    (line,) = lines(access)
    assert re.fullmatch(
        rf'10\.1\.2\.3 - - {CLF_TIME} "GET /path\?q=1 HTTP/1\.1" 200 5 '
        r'"http://example\.com/" "curl/8\.0"',
        line,
    ), line


def test_every_atom(make_logger, monkeypatch: pytest.MonkeyPatch) -> None:
    fmt = " | ".join(
        [
            "%(h)s",
            "%(l)s",
            "%(u)s",
            "%(t)s",
            "%(r)s",
            "%(m)s",
            "%(U)s",
            "%(q)s",
            "%(H)s",
            "%(s)s",
            "%(B)s",
            "%(b)s",
            "%(f)s",
            "%(a)s",
            "%(T)s",
            "%(M)s",
            "%(D)s",
            "%(L)s",
            "%(p)s",
            "%({x-request-id}i)s",
            "%({Content-Type}o)s",
            "%({supervise_test_var}e)s",
            "%({wsgi.url_scheme}e)s",
            "%({x-missing}i)s",
            "%(nope)s",
            "100%%",
        ]
    )
    log, _, access = make_logger(access_log_format=fmt)
    monkeypatch.setenv("SUPERVISE_TEST_VAR", "from-env")
    auth = "Basic " + base64.b64encode(b"alice:secret").decode()
    env = environ(
        HTTP_X_REQUEST_ID="abc-123", HTTP_AUTHORIZATION=auth, **{"wsgi.url_scheme": "https"}
    )
    resp = Response("404 Not Found", [("Content-Type", "text/html")], sent=1234)
    log.access(resp, None, env, 1.5)
    (line,) = lines(access)
    fields = line.split(" | ")
    assert fields[0:3] == ["10.1.2.3", "-", "alice"]
    assert re.fullmatch(CLF_TIME, fields[3])
    assert fields[4:14] == [
        "GET /path?q=1 HTTP/1.1",
        "GET",
        "/path",
        "q=1",
        "HTTP/1.1",
        "404",
        "1234",
        "1234",
        "http://example.com/",
        "curl/8.0",
    ]
    assert fields[14:18] == ["1", "1500", "1500000", "1.500000"]
    assert fields[18] == f"<{os.getpid()}>"
    assert fields[19:] == ["abc-123", "text/html", "from-env", "https", "-", "-", "100%"]


def test_missing_values_and_zero_bytes(make_logger) -> None:
    log, _, access = make_logger(access_log_format="%(b)s %(B)s %(f)s %(a)s %(h)s %(u)s")
    env = environ()
    for key in ("HTTP_REFERER", "HTTP_USER_AGENT", "REMOTE_ADDR"):
        del env[key]
    log.access(Response(sent=None), None, env, 0.0)
    assert lines(access) == ["- 0 - - - -"]


def test_request_data_cannot_forge_log_lines(make_logger) -> None:
    log, _, access = make_logger()
    log.access(Response(), None, environ(HTTP_USER_AGENT='evil"\n10.0.0.1 - - fake'), 0.0)
    (line,) = lines(access)
    assert line.endswith('"evil\\"\\x0a10.0.0.1 - - fake"')


def test_access_log_is_off_by_default(tmp_path: Path, capsys) -> None:
    cfg = Config({})
    cfg.set("errorlog", str(tmp_path / "error.log"))
    log = Logger(cfg)
    try:
        log.access(Response(), None, environ(), 0.0)
        assert capsys.readouterr().out == ""
    finally:
        log.close()


def test_error_log_format_and_level(make_logger) -> None:
    log, error, _ = make_logger(loglevel="warning")
    log.info("not shown")
    log.warning("careful: %s", "disk")
    log.error("%d%% broken", 50)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("it failed")
    text = lines(error)
    first = ERROR_LINE.match(text[0])
    assert first and first.groups() == (str(os.getpid()), "WARNING", "careful: disk")
    assert ERROR_LINE.match(text[1]).group(2, 3) == ("ERROR", "50% broken")
    assert ERROR_LINE.match(text[2]).group(3) == "it failed"
    assert "RuntimeError: boom" in text[-1]
    assert "not shown" not in "\n".join(text)


def test_reopen_after_rename(make_logger, tmp_path: Path) -> None:
    log, error, access = make_logger()
    log.info("before rotation")
    log.access(Response(), None, environ(RAW_URI="/one"), 0.0)
    error.rename(tmp_path / "error.log.1")
    access.rename(tmp_path / "access.log.1")
    log.info("still the old file")  # until USR1, writes go to the renamed file
    log.reopen_files()
    log.info("after rotation")
    log.access(Response(), None, environ(RAW_URI="/two"), 0.0)

    old_error = "\n".join(lines(tmp_path / "error.log.1"))
    assert "before rotation" in old_error and "still the old file" in old_error
    new_error = lines(error)
    assert len(new_error) == 1 and new_error[0].endswith("after rotation")
    assert "/one" in lines(tmp_path / "access.log.1")[0]
    (new_access,) = lines(access)
    assert "/two" in new_access


def test_setup_reapplies_settings(make_logger, tmp_path: Path) -> None:
    log, error, _ = make_logger()
    log.debug("hidden")
    cfg = Config({})
    cfg.set("errorlog", str(tmp_path / "other.log"))
    cfg.set("loglevel", "debug")
    log.setup(cfg)
    log.debug("visible")
    assert "visible" in lines(tmp_path / "other.log")[0]
    assert "hidden" not in error.read_text()
    assert "visible" not in error.read_text()


def test_unwritable_log_file_is_a_config_error(tmp_path: Path) -> None:
    cfg = Config({})
    cfg.set("errorlog", str(tmp_path / "no" / "such" / "dir.log"))
    with pytest.raises(ConfigError, match="cannot open log file"):
        Logger(cfg)


def test_gunicorn_logconfig_dict(make_logger, tmp_path: Path) -> None:
    target = tmp_path / "dict.log"
    config = {
        "version": 1,
        "formatters": {"plain": {"format": "DICT %(levelname)s %(message)s"}},
        "handlers": {
            "file": {"class": "logging.FileHandler", "filename": str(target), "formatter": "plain"}
        },
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": ["file"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["file"], "propagate": False},
        },
    }
    log, _, _ = make_logger(logconfig_dict=config, accesslog=None)
    log.info("through the gunicorn logger")
    log.access(Response(), None, environ(RAW_URI="/dict"), 0.0)
    text = lines(target)
    assert text[0] == "DICT INFO through the gunicorn logger"
    assert "/dict" in text[1]


def test_capture_output(tmp_path: Path) -> None:
    # Redirects the process's own fds 1 and 2, hence a subprocess.
    error = tmp_path / "error.log"
    script = textwrap.dedent(
        f"""
        import os, sys
        from supervise.config import Config
        from supervise.logs import Logger
        cfg = Config({{}})
        cfg.set("errorlog", {str(error)!r})
        cfg.set("capture_output", True)
        log = Logger(cfg)
        print("printed by the app", flush=True)
        os.write(2, b"written to fd 2\\n")
        log.info("logged")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""
    text = error.read_text()
    assert "printed by the app" in text and "written to fd 2" in text and "logged" in text
