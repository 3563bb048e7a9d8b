"""The `supervise` command as a user runs it: real subprocesses, exit codes, output."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import supervise
from supervise.workers import WORKERS

WSGI_APP = """
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]
"""

ASGI_APP = """
async def app(scope, receive, send):
    pass
"""

# A third-party worker class given by dotted path, so these tests do not depend on
# which built-in workers exist yet.
CUSTOM_WORKER = """
from supervise.workers.base import Worker

class HelloWorker(Worker):
    interface = "wsgi"

    def run(self):
        pass
"""


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "SUPERVISE_CMD_ARGS",
            "GUNICORN_CMD_ARGS",
            "WEB_CONCURRENCY",
            "PORT",
            "FORWARDED_ALLOW_IPS",
        )
    }
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "supervise", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def settings(output: str) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in output.splitlines())


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def test_print_config(tmp_path: Path) -> None:
    result = run("--print-config", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    names = [line.split(" = ", 1)[0] for line in lines]
    assert names == sorted(names)
    values = settings(result.stdout)
    assert values["workers"] == "1"
    assert values["bind"] == "['127.0.0.1:8000']"
    assert values["on_starting"] == "<supervise.config.on_starting>"
    assert values["wsgi_app"] == "None"


def test_print_config_reflects_options_and_environment(tmp_path: Path) -> None:
    result = run(
        "--print-config",
        "-w",
        "3",
        "-k",
        "gthread",
        "--access-logfile",
        "-",
        "hello:app",
        cwd=tmp_path,
        env={"PORT": "5001"},
    )
    assert result.returncode == 0, result.stderr
    values = settings(result.stdout)
    assert values["workers"] == "3"
    assert values["worker_class"] == "'gthread'"
    assert values["accesslog"] == "'-'"
    assert values["wsgi_app"] == "'hello:app'"
    assert values["bind"] == "['0.0.0.0:5001']"


def test_precedence_via_print_config(tmp_path: Path) -> None:
    write(
        tmp_path / "supervise.conf.py",
        """
        workers = 2
        timeout = 11
        keepalive = 9
        """,
    )
    result = run(
        "--print-config",
        "-w",
        "5",
        cwd=tmp_path,
        env={"SUPERVISE_CMD_ARGS": "-w 3 --timeout 7"},
    )
    assert result.returncode == 0, result.stderr
    values = settings(result.stdout)
    assert values["workers"] == "5"  # command line beats SUPERVISE_CMD_ARGS
    assert values["timeout"] == "7"  # SUPERVISE_CMD_ARGS beats the config file
    assert values["keepalive"] == "9"  # the config file beats the default
    assert values["config"] == repr(str(tmp_path / "supervise.conf.py"))


def test_invalid_integer_exits_2_naming_workers(tmp_path: Path) -> None:
    result = run("-w", "abc", "hello:app", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    line = one_line_error(result)
    assert "workers" in line and "'abc' is not an integer" in line


def test_unknown_worker_class_exits_2(tmp_path: Path) -> None:
    result = run("-k", "foo", "hello:app", cwd=tmp_path)
    assert result.returncode == 2
    line = one_line_error(result)
    assert "unknown worker class 'foo'" in line
    *others, last = WORKERS
    assert f"{', '.join(others)} or {last}" in line


def test_unknown_option_exits_2(tmp_path: Path) -> None:
    result = run("--no-such-option", "hello:app", cwd=tmp_path)
    assert result.returncode == 2
    assert "--no-such-option" in one_line_error(result)


def test_missing_app_exits_2(tmp_path: Path) -> None:
    result = run("-w", "2", cwd=tmp_path)
    assert result.returncode == 2
    assert "no application given" in one_line_error(result)


@pytest.mark.parametrize("what", ["missing", "directory", "no-permission"])
def test_unreadable_config_file_exits_2(tmp_path: Path, what: str) -> None:
    conf = tmp_path / "conf.py"
    if what == "directory":
        conf.mkdir()
    elif what == "no-permission":
        if os.geteuid() == 0:
            pytest.skip("root reads any file")
        conf.write_text("workers = 2\n")
        conf.chmod(0)
    result = run("-c", str(conf), "hello:app", cwd=tmp_path)
    assert result.returncode == 2
    line = one_line_error(result)
    assert "cannot read config file" in line and "conf.py" in line


def test_raising_config_file_exits_2_with_the_line(tmp_path: Path) -> None:
    conf = write(
        tmp_path / "conf.py",
        """\
        workers = 2
        settings = {}
        timeout = settings["timeout"]
        """,
    )
    result = run("-c", str(conf), "hello:app", cwd=tmp_path)
    assert result.returncode == 2
    line = one_line_error(result)
    assert "KeyError" in line and "'timeout'" in line and "(line 3)" in line


def test_help_shows_sections(tmp_path: Path) -> None:
    result = run("--help", cwd=tmp_path)
    assert result.returncode == 0
    for section in ("Config File:", "Server Socket:", "Worker Processes:", "Logging:", "SSL:"):
        assert section in result.stdout
    assert "-w INT, --workers INT" in result.stdout
    assert "APP_MODULE" in result.stdout


def test_version(tmp_path: Path) -> None:
    result = run("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.startswith(f"supervise {supervise.__version__}")


def test_check_config_good_app(tmp_path: Path) -> None:
    write(tmp_path / "hello.py", WSGI_APP)
    write(tmp_path / "hello_worker.py", CUSTOM_WORKER)
    result = run("--check-config", "-k", "hello_worker.HelloWorker", "hello:app", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout


def test_check_config_with_the_default_worker(tmp_path: Path) -> None:
    if importlib.util.find_spec("supervise.workers.sync") is None:
        pytest.skip("the sync worker is not written yet")
    write(tmp_path / "hello.py", WSGI_APP)
    result = run("--check-config", "hello:app", cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_check_config_missing_module_exits_1(tmp_path: Path) -> None:
    write(tmp_path / "hello_worker.py", CUSTOM_WORKER)
    result = run(
        "--check-config", "-k", "hello_worker.HelloWorker", "no_such_app_mod:app", cwd=tmp_path
    )
    assert result.returncode == 1
    assert "Error: " in result.stderr and "no_such_app_mod" in result.stderr


def test_check_config_interface_mismatch_exits_1(tmp_path: Path) -> None:
    write(tmp_path / "hello.py", WSGI_APP)
    write(tmp_path / "hello_worker.py", CUSTOM_WORKER.replace('"wsgi"', '"asgi"'))
    result = run("--check-config", "-k", "hello_worker.HelloWorker", "hello:app", cwd=tmp_path)
    assert result.returncode == 1
    assert "is a WSGI application" in result.stderr
    assert "use -k sync, gthread, gevent or native" in result.stderr


RSGI_APP = """
async def app(scope, protocol):
    protocol.response_str(200, [], "rsgi")
"""


@pytest.mark.parametrize(
    ("source", "interface", "outcome"),
    [
        (WSGI_APP, "auto", 0),
        (ASGI_APP, "auto", 0),
        (RSGI_APP, "auto", 0),
        (WSGI_APP, "wsgi", 0),
        (ASGI_APP, "asgi", 0),
        (RSGI_APP, "rsgi", 0),
        (WSGI_APP, "asgi", "'hello:app' is a WSGI application, not ASGI: use --interface wsgi"),
        (ASGI_APP, "wsgi", "'hello:app' is an ASGI application, not WSGI: use --interface asgi"),
        (RSGI_APP, "asgi", "'hello:app' is an RSGI application, not ASGI: use --interface rsgi"),
    ],
)
def test_native_interface_is_checked_against_the_app(
    tmp_path: Path, source: str, interface: str, outcome: int | str
) -> None:
    write(tmp_path / "hello.py", source)
    args = ("--check-config", "-k", "native", "--interface", interface, "hello:app")
    result = run(*args, cwd=tmp_path)
    if outcome == 0:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 1
        assert outcome in result.stderr


def test_check_config_uses_the_config_file_app(tmp_path: Path) -> None:
    write(tmp_path / "hello.py", WSGI_APP)
    write(tmp_path / "hello_worker.py", CUSTOM_WORKER)
    write(
        tmp_path / "supervise.conf.py",
        """
        wsgi_app = "hello:app"
        worker_class = "hello_worker.HelloWorker"
        """,
    )
    result = run("--check-config", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
