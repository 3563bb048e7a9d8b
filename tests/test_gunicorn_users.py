"""What a user coming from Gunicorn meets: their config file and GUNICORN_CMD_ARGS are
read, names supervise does not have are reported (never dropped silently), -v, -k
with Gunicorn's and Uvicorn's class names, and --help-setting. Real `supervise`
processes, their exit status, stderr and logs."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wait_until
from test_cli import WSGI_APP, write

import supervise
from supervise.settings import SETTINGS

ASGI_APP = """
async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"asgi"})
"""

# Gunicorn settings supervise does not have and nobody is adding (the dirty arbiter,
# PasteDeploy): other Gunicorn-only names may become supervise settings.
GUNICORN_ONLY_NAME = "dirty_workers"
GUNICORN_ONLY_OPTION = "--dirty-workers"


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SUPERVISE_CMD_ARGS", "GUNICORN_CMD_ARGS", "WEB_CONCURRENCY", "PORT")
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


def warnings(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]


# -- names that set nothing ---------------------------------------------------------


def test_check_config_fails_on_a_misspelt_name_and_reports_every_ignored_one(
    tmp_path: Path,
) -> None:
    write(tmp_path / "hello.py", WSGI_APP)
    write(
        tmp_path / "supervise.conf.py",
        f"""
        import os
        from os.path import join
        BASE_DIR = os.path.dirname(__file__)
        wokers = 3
        access_logfile = "-"
        {GUNICORN_ONLY_NAME} = 2
        cpus = 4
        _private = 1
        def post_forks(server, worker):
            pass
        """,
    )
    result = run("--check-config", "hello:app", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "OK" not in result.stdout
    lines = warnings(result)
    text = "\n".join(lines)
    assert "wokers" in text and "did you mean workers?" in text
    assert "access_logfile" in text and "did you mean accesslog?" in text
    assert "post_forks" in text and "did you mean post_fork?" in text
    assert f"{GUNICORN_ONLY_NAME} (in config file supervise.conf.py): a Gunicorn setting" in text
    assert any(line.startswith("Warning: cpus ") for line in lines)
    # Helpers by their look: modules, imports, ALL-CAPS and _private names.
    for quiet in ("BASE_DIR", "_private", "join", "os"):
        assert not any(line.startswith(f"Warning: {quiet} ") for line in lines)
    assert len(lines) == 5, text
    assert "3 name(s)" in result.stderr.splitlines()[-1]


def test_check_config_passes_with_warnings_when_nothing_is_misspelt(tmp_path: Path) -> None:
    write(tmp_path / "hello.py", WSGI_APP)
    write(
        tmp_path / "supervise.conf.py",
        f"""
        workers = 2
        {GUNICORN_ONLY_NAME} = 2
        env = "staging"
        worker_count = 4
        """,
    )
    result = run("--check-config", "hello:app", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Configuration OK" in result.stdout and "3 warning(s)" in result.stdout
    gunicorn_only, env, helper = warnings(result)
    assert GUNICORN_ONLY_NAME in gunicorn_only and "does not have" in gunicorn_only
    # A one-word option spelling (-e/--env) may well be a helper: a hint, not a failure.
    assert env.startswith("Warning: env ") and "did you mean raw_env?" in env
    assert helper.startswith("Warning: worker_count ") and "did you mean" not in helper


def test_unknown_options_suggest_the_right_one(tmp_path: Path) -> None:
    result = run("--wokers", "2", "hello:app", cwd=tmp_path)
    assert result.returncode == 2
    assert "did you mean --workers?" in result.stderr
    result = run(cwd=tmp_path, env={"SUPERVISE_CMD_ARGS": "--max-request 5 hello:app"})
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "did you mean --max-requests?" in line and "(in SUPERVISE_CMD_ARGS)" in line


def test_gunicorn_only_options_are_refused_on_the_command_line_and_skipped_in_env(
    tmp_path: Path,
) -> None:
    result = run("--paste", "development.ini", cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "--paste is Gunicorn's option for paste" in line and "PasteDeploy" in line
    # In an environment variable the option and its value are skipped, and the
    # options around them still apply.
    env = {"SUPERVISE_CMD_ARGS": f"-w 3 {GUNICORN_ONLY_OPTION} 2 --timeout 7 --spew"}
    result = run("--print-config", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    values = settings(result.stdout)
    assert values["workers"] == "3" and values["timeout"] == "7"
    lines = warnings(result)
    assert len(lines) == 2, lines
    assert GUNICORN_ONLY_OPTION in lines[0] and "(in SUPERVISE_CMD_ARGS)" in lines[0]
    assert "--spew" in lines[1]


def test_a_running_server_logs_each_notice_once_across_reloads(start_server, tmp_path):
    write(tmp_path / "hello.py", WSGI_APP)
    write(
        tmp_path / "supervise.conf.py",
        """
        workers = 2
        timout = 5
        """,
    )
    server = start_server("hello:app", cwd=tmp_path)
    server.wait_workers(2)
    log = server.wait_for_log("Ready: 2 worker")
    assert "[WARNING] timout (in config file" in log and "did you mean timeout?" in log
    server.signal(signal.SIGHUP)
    log = server.wait_for_log("Reload complete")
    assert log.count("timout") == 1


# -- Gunicorn's files and variables --------------------------------------------------


def test_gunicorn_conf_py_is_read_when_there_is_no_supervise_conf_py(start_server, tmp_path):
    write(tmp_path / "hello.py", WSGI_APP)
    write(tmp_path / "gunicorn.conf.py", "workers = 2\n")
    server = start_server("hello:app", cwd=tmp_path)
    assert len(server.wait_workers(2)) == 2
    assert server.get("/")[2] == b"hello"
    log = server.log()
    assert "[INFO] Reading Gunicorn's config file ./gunicorn.conf.py" in log
    # supervise.conf.py, when present, is the one read.
    write(tmp_path / "supervise.conf.py", "workers = 3\n")
    result = run("--print-config", cwd=tmp_path)
    assert settings(result.stdout)["config"] == repr(str(tmp_path / "supervise.conf.py"))
    assert "gunicorn.conf.py" not in result.stderr


def test_gunicorn_cmd_args_rank_below_supervise_cmd_args(tmp_path: Path) -> None:
    write(tmp_path / "gconf.py", "workers = 2\ntimeout = 11\nkeepalive = 9\n")
    env = {
        "GUNICORN_CMD_ARGS": "-c gconf.py -w 4 --timeout 12 --paste app.ini --graceful-timeout 5",
        "SUPERVISE_CMD_ARGS": "-w 6",
    }
    result = run("--print-config", "--backlog", "64", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    values = settings(result.stdout)
    assert values["config"] == repr(str(tmp_path / "gconf.py"))  # -c from GUNICORN_CMD_ARGS
    assert values["backlog"] == "64"  # the command line
    assert values["workers"] == "6"  # SUPERVISE_CMD_ARGS beats GUNICORN_CMD_ARGS
    assert values["timeout"] == "12"  # GUNICORN_CMD_ARGS beats the config file
    assert values["keepalive"] == "9"  # the config file beats the default
    assert values["graceful_timeout"] == "5"  # after the skipped --paste VALUE
    (line,) = warnings(result)
    assert "--paste (in GUNICORN_CMD_ARGS)" in line


def test_gunicorn_cmd_args_apply_to_a_running_server(start_server, tmp_path):
    write(tmp_path / "hello.py", WSGI_APP)
    env = {"GUNICORN_CMD_ARGS": f"-w 2 {GUNICORN_ONLY_OPTION} 4"}
    server = start_server("hello:app", cwd=tmp_path, env=env)
    assert len(server.wait_workers(2)) == 2
    log = server.wait_for_log("Ready: 2 worker")
    assert f"[WARNING] {GUNICORN_ONLY_OPTION} (in GUNICORN_CMD_ARGS)" in log


# -- -v, --help, --help-setting ------------------------------------------------------


def test_dash_v_prints_the_version_as_gunicorn_does(tmp_path: Path) -> None:
    result = run("-v", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == f"supervise (version {supervise.__version__})\n"
    assert run("--version", cwd=tmp_path).stdout.startswith(f"supervise {supervise.__version__}")


def test_help_points_to_help_setting_not_to_a_file(tmp_path: Path) -> None:
    result = run("--help", cwd=tmp_path)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "docs/settings.md" not in text
    assert "--help-setting NAME" in text
    bind_help = text[text.index("-b ADDRESS, --bind ADDRESS") :][:300]
    for form in ("HOST:PORT", "[::1]:PORT", "unix:PATH", "fd://N"):
        assert form in bind_help


@pytest.mark.parametrize("query", ["max_requests", "--max-requests", "max-requests"])
def test_help_setting_prints_the_whole_entry(tmp_path: Path, query: str) -> None:
    result = run("--help-setting", query, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("max_requests\n")
    assert "--max-requests INT" in out and "Default:" in out
    # The full text, not only the first sentence --help shows.
    assert " ".join(SETTINGS["max_requests"].help.replace("`", "").split()) in " ".join(out.split())


def test_help_setting_by_short_flag_and_for_config_only_settings(tmp_path: Path) -> None:
    assert run("--help-setting", "-b", cwd=tmp_path).stdout.startswith("bind\n")
    out = run("--help-setting", "post_fork", cwd=tmp_path).stdout
    assert "none (config file only)" in out and "def post_fork(server, worker)" in out


def test_help_setting_unknown_names(tmp_path: Path) -> None:
    result = run("--help-setting", "wokers", cwd=tmp_path)
    assert result.returncode == 2 and "did you mean workers?" in result.stderr
    result = run("--help-setting", GUNICORN_ONLY_NAME, cwd=tmp_path)
    assert result.returncode == 2
    assert "a Gunicorn setting supervise does not have" in result.stderr


# -- -k with Gunicorn's and Uvicorn's names ------------------------------------------


@pytest.mark.parametrize(
    ("typed", "ours"),
    [
        ("uvicorn.workers.UvicornWorker", "asgi"),
        ("uvicorn_worker.UvicornWorker", "asgi"),
        ("gunicorn.workers.gthread.ThreadWorker", "gthread"),
        ("egg:gunicorn#sync", "sync"),
        ("egg:gunicorn#gevent", "gevent"),
        ("gunicorn.workers.ggevent.GeventWorker", "gevent"),
        ("gevent_pywsgi", "gevent"),
    ],
)
def test_k_with_a_foreign_class_names_it_and_the_k_to_use(
    tmp_path: Path, typed: str, ours: str
) -> None:
    if ours == "gevent" and importlib.util.find_spec("gevent") is None:
        pytest.skip("gevent is not installed")
    write(tmp_path / "hello.py", ASGI_APP if ours == "asgi" else WSGI_APP)
    result = run("--check-config", "-k", typed, "hello:app", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"worker class {ours!r}" in result.stdout
    (line,) = warnings(result)
    assert f"worker class {typed!r}" in line and f"write -k {ours}" in line


def test_a_uvicorn_worker_serves_as_asgi(start_server, tmp_path):
    write(tmp_path / "hello.py", ASGI_APP)
    server = start_server("-k", "uvicorn.workers.UvicornWorker", "hello:app", cwd=tmp_path)
    assert server.get("/")[2] == b"asgi"
    log = server.log()
    assert "Using worker: asgi" in log
    assert "[WARNING] worker class 'uvicorn.workers.UvicornWorker'" in log


@pytest.mark.parametrize(
    ("typed", "advice"),
    [
        ("eventlet", "-k gevent"),
        ("gunicorn.workers.geventlet.EventletWorker", "-k gevent"),
        ("tornado", "-k gthread"),
        ("egg:gunicorn#tornado", "-k gthread"),
    ],
)
def test_k_with_a_class_supervise_lacks_says_what_to_use(
    tmp_path: Path, typed: str, advice: str
) -> None:
    result = run("-k", typed, "hello:app", cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert f"worker class {typed!r}" in line and "not supported" in line and advice in line


def test_k_misspelt_suggests_the_name(tmp_path: Path) -> None:
    result = run("-k", "gthraed", "hello:app", cwd=tmp_path)
    assert result.returncode == 2
    assert "did you mean gthread?" in result.stderr


# -- the distribution ----------------------------------------------------------------


def test_installed_under_the_distribution_name_the_hints_use() -> None:
    assert importlib.metadata.version(supervise.DISTRIBUTION) == supervise.__version__


def test_reload_log_line_says_what_is_watched_and_what_is_not() -> None:
    from supervise.reloader import describe_watch

    assert describe_watch(["/srv/app"], 1, []) == (
        "Reloader: watching *.py, *.pyx, *.pyi files in 1 directory under /srv/app; "
        "no directory skipped"
    )
    assert describe_watch(["/srv/app", "/srv/lib"], 3, ["node_modules", ".git"], 1) == (
        "Reloader: watching *.py, *.pyx, *.pyi files and 1 extra file in 3 directories "
        "under /srv/app, /srv/lib; skipping virtualenv, hidden, dependency and build "
        "directories: .git, node_modules"
    )
    assert "and 2 extra files in 2 directories under /a;" in describe_watch(["/a"], 2, [], 2)


@pytest.mark.parametrize("engine", ["auto", "poll"])
def test_reload_watches_neither_virtualenvs_nor_dependencies(start_server, tmp_path, engine):
    """A venv or node_modules inside the project is never watched: a change there
    does not reload, while a change to the project's code does."""
    project = tmp_path / "project"
    heavy = [project / d / "mod.py" for d in (".venv/lib", "venv2/lib", "node_modules/p", "build")]
    for path in heavy:
        path.parent.mkdir(parents=True)
        path.write_text("x = 0\n")
    (project / "venv2" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a venv by any name
    write(project / "hello.py", WSGI_APP)
    probe = project / "probe.py"
    server = start_server("--reload", "--reload-engine", engine, "hello:app", cwd=project)
    log = server.wait_for_log("Reloader: watching")
    watching = next(line for line in log.splitlines() if "Reloader: watching" in line)
    # The import path may add roots (an editable install's checkout), so only
    # the project's own part of the line is pinned down.
    assert "watching *.py, *.pyx, *.pyi files in " in watching, watching
    skipped = watching.split("build directories: ", 1)[1].split(", ")
    assert {".venv", "build", "node_modules", "venv2"} <= set(skipped), watching

    edits = iter(range(1, 1000))

    def edit_heavy_then_probe() -> bool:
        n = next(edits)
        for path in heavy:
            path.write_text(f"x = {n}\n")
        probe.write_text(f"x = {n}\n")  # last: when it is seen, so would they be
        return server.log().count("Detected change in") >= 2

    # Repeated until two watchers' worth of changes were seen: a watcher that was not
    # set up yet sees nothing, which proves nothing either way.
    wait_until(edit_heavy_then_probe, timeout=30, interval=0.5)
    changes = [line for line in server.log().splitlines() if "Detected change in" in line]
    assert all("probe.py" in line and "mod.py" not in line for line in changes), changes
    assert server.get("/")[2] == b"hello"
