"""The static-file companion settings (--static-fallthrough,
--static-follow-symlinks, --static-immutable, --static-cache-control, several
maps, one relative to --chdir) on every worker class, and what a bad
--static-map gets: one clear error, at --check-config and at a real start.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    APPS_DIR,
    Server,
    lifecycle_app,
    shutdown,
    supervise_command,
)
from static_tree import (
    APP_ANSWER,
    CACHE_CONTROL,
    DIGITS,
    DIRECTORIES,
    EVERY_WORKER,
    HELLO,
    HIDDEN,
    IMMUTABLE,
    NUL,
    SECRET,
    TRAVERSALS,
    Tree,
    build_tree,
    start_serving,
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    return build_tree(tmp_path_factory.mktemp("static"))


@pytest.fixture(scope="module", params=EVERY_WORKER)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def tuned(kind: str, tree: Tree, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Every companion setting on, and a second map given relative to --chdir
    with a trailing slash."""
    work = tmp_path_factory.mktemp(f"tuned-{kind}")
    args = [lifecycle_app(kind), "-k", kind, "--chdir", str(tree.root)]
    args += ["--pythonpath", str(APPS_DIR)]
    args += ["--static-map", f"/static={tree.public}", "--static-map", "/assets/=assets"]
    args += ["--static-fallthrough", "--static-follow-symlinks", "--static-immutable"]
    args += ["--static-cache-control", CACHE_CONTROL]
    server = start_serving(args, work / "server.log")
    yield server
    shutdown(server)


# -- the companion settings ----------------------------------------------------------


def test_cache_control_and_immutable_names(tuned):
    for name in ("app.3f2a9c1b.js", "app-3f2a9c1b8d0e.css"):
        status, headers, _ = tuned.get(f"/static/{name}")
        assert (status, headers.get("cache-control")) == (200, IMMUTABLE), name
    for name in ("app.3f2a9c1.js", "app.3g2a9c1b.js", "hello.txt", "big.bin"):
        status, headers, _ = tuned.get(f"/static/{name}", method="HEAD")
        assert (status, headers.get("cache-control")) == (200, CACHE_CONTROL), name


def test_fallthrough_hands_what_is_not_a_file_to_the_app(tuned):
    folders = [path for path in DIRECTORIES if "/." not in path]  # a dot-folder is hidden
    paths = [*folders, "/static/nope.txt", "/static/sub/nope.txt"]
    answers = {path: tuned.get(path)[::2] for path in paths}
    wrong = {path: got for path, got in answers.items() if got != (200, APP_ANSWER)}
    assert not wrong, f"not handed to the app: {wrong}"
    # Dotfiles are refused, not handed on: a path that names one is never
    # the app's under a static prefix (an app serving /static/.env would be
    # the mistake this guards against).
    hidden = [*HIDDEN, *(path for path in DIRECTORIES if "/." in path)]
    answers = {path: tuned.get(path)[::2] for path in hidden}
    wrong = {path: got for path, got in answers.items() if got[0] != 404}
    assert not wrong, f"dotfiles not refused: {wrong}"
    # ... but never a way out of the folder.
    answers = {path: tuned.get(path)[::2] for path in TRAVERSALS}
    wrong = {
        path: got
        for path, got in answers.items()
        if got[0] not in (400, 404) or got[1] == APP_ANSWER or SECRET in got[1]
    }
    assert not wrong, f"traversals not refused: {wrong}"
    for path in NUL:
        assert SECRET not in tuned.get(path)[2], path
    assert tuned.get("/static/hello.txt")[::2] == (200, HELLO)


def test_follow_symlinks_serves_links_leading_outside(tuned):
    assert tuned.get("/static/link-outside.txt")[::2] == (200, SECRET)
    assert tuned.get("/static/linkdir/secret.txt")[::2] == (200, SECRET)
    assert tuned.get("/static/link-inside.txt")[::2] == (200, HELLO)


def test_several_maps_and_a_directory_relative_to_chdir(tuned):
    status, headers, body = tuned.get("/assets/x.txt")
    assert (status, body) == (200, b"from assets\n")
    assert headers.get("cache-control") == CACHE_CONTROL
    assert tuned.get("/assetsx/x.txt")[::2] == (200, APP_ANSWER)
    assert tuned.get("/static/digits.txt")[::2] == (200, DIGITS)


# -- settings --------------------------------------------------------------------------------


def _check_config(*args: str, cwd: Path = APPS_DIR) -> subprocess.CompletedProcess:
    return subprocess.run(
        supervise_command(*args, "--check-config", "lifecycle_app:app"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


@pytest.mark.parametrize(
    "value",
    ["static=./x", "/s", "/static={missing}", "=/tmp"],
    ids=["no-slash", "no-dir", "missing", "no-prefix"],
)
def test_a_bad_static_map_is_one_clear_error(value, tmp_path):
    done = _check_config("--static-map", value.format(missing=tmp_path / "missing"))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "static" in lines[0].lower(), lines[0]


def test_a_good_static_map_passes_the_check_from_the_command_line_and_a_file(tmp_path):
    (tmp_path / "public").mkdir()
    done = _check_config("--chdir", str(tmp_path), "--pythonpath", str(APPS_DIR),
                         "--static-map", "/static=public")  # fmt: skip
    assert done.returncode == 0, done.stderr
    conf = tmp_path / "conf.py"
    conf.write_text(
        f"static_map = ['/static={tmp_path / 'public'}', '/media/={tmp_path}']\n"
        "static_cache_control = 'public, max-age=60'\n"
        "static_immutable = True\nstatic_fallthrough = True\nstatic_follow_symlinks = True\n"
    )
    done = _check_config("-c", str(conf))
    assert done.returncode == 0, done.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("static_map = ['static=public']\n")
    done = _check_config("-c", str(bad))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "static" in done.stderr.lower()


def test_a_missing_folder_stops_the_start_with_one_line(start_server, tmp_path):
    """The same error at a real start as under --check-config: the arbiter says it
    once and exits, rather than workers failing to boot one after another."""
    missing = tmp_path / "missing"
    server = start_server("lifecycle_app:app", "--static-map", f"/static={missing}", wait=False)
    try:
        code = server.proc.wait(30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after 30 s with a missing folder:\n{server.log()[-3000:]}")
    log = server.log()
    assert code != 0
    assert "Traceback" not in log, log[-3000:]
    assert log.count(str(missing)) <= 2, log[-3000:]  # said once (or twice), not per worker
