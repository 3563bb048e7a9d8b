"""The static-file scenarios (static-1k, static-1m): supervise's --static-map rows, Granian's
static route and nginx, a group of rows of their own that no other scenario runs.

Run with: .venv/bin/pytest benchmarks/tests (needs no server; nginx, when installed,
only checks the launcher's config with `nginx -t`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps import payload
from bench import plan, servers
from bench.peers import BENCH_DIR, Venv
from bench.servers import STATIC_PEERS, Options, Unsupported

VENV = Venv(Path("/nowhere/venv"), "3.11")
PEERS = {s.name: s for s in STATIC_PEERS}
HELP = "--static-map --metrics-bind"
MODULES = {wc.module for wc in servers.SUPERVISE_WORKERS.values()}


def _main(name: str) -> plan.Point:
    return plan.Point("main", plan.BY_NAME[name], "3.11")


def test_the_static_scenarios_ask_for_the_files_the_folder_holds(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("BENCH_STATIC_DIR", str(tmp_path / "static"))
    folder = Path(payload.ensure_static())
    for name, size in (("static-1k", 1024), ("static-1m", 1024 * 1024)):
        scenario = plan.BY_NAME[name]
        body = scenario.expected_body()
        assert len(body) == size
        assert scenario.path.startswith(f"{payload.STATIC_ROUTE}/")
        assert (folder / scenario.path.rsplit("/", 1)[1]).read_bytes() == body


def test_supervise_static_rows_come_once_the_setting_exists() -> None:
    assert not [
        s for s in servers.supervise_rows("--metrics-bind", MODULES) if s.interface == "static"
    ]
    rows = {s.name: s for s in servers.supervise_rows(HELP, MODULES) if s.interface == "static"}
    assert set(rows) == {
        "supervise-rsgi-static",
        "supervise-native-static",
        "supervise-gthread-static",
    }
    cmd = rows["supervise-gthread-static"].command(VENV, 8123, Options())
    assert cmd[cmd.index("--static-map") + 1] == f"/static={servers.static_folder()}"
    assert cmd[cmd.index("-k") + 1] == "gthread" and "--threads" in cmd
    assert cmd[-1] == "apps.wsgi_app:app"
    rsgi = rows["supervise-rsgi-static"].command(VENV, 8123, Options())
    assert rsgi[-1] == "apps.rsgi_app:app"


def test_granian_and_nginx_serve_the_same_folder_on_the_same_route() -> None:
    cmd = PEERS["granian-static"].command(VENV, 8123, Options())
    assert cmd[cmd.index("--static-path-route") + 1] == "/static"
    assert cmd[cmd.index("--static-path-mount") + 1] == servers.static_folder()
    assert cmd[-1] == "apps.rsgi_app:app"
    cmd = PEERS["nginx"].command(VENV, 8123, Options(workers=2))
    assert cmd[1] == "launchers/run_nginx.py" and (BENCH_DIR / cmd[1]).is_file()
    assert cmd[cmd.index("--root") + 1] == servers.static_folder()
    assert cmd[cmd.index("--workers") + 1] == "2"
    # Relative to benchmarks/, where the servers start: no checkout path in the report.
    assert servers.static_folder() == ".work/static" or "BENCH_STATIC_DIR" in os.environ


def test_static_rows_run_the_static_scenarios_only() -> None:
    static = [*STATIC_PEERS, *servers.supervise_rows(HELP, MODULES)]
    static = [s for s in static if s.interface == "static"]
    others = [s for s in servers.every_row() if s.interface != "static"]
    assert len(static) == 5
    for name in ("static-1k", "static-1m"):
        assert all(plan.applicable(_main(name), s) for s in static)
        assert not any(plan.applicable(_main(name), s) for s in others)
    for name in ("get-4b", "file", "h2-get"):
        assert not any(plan.applicable(_main(name), s) for s in static)
    for point in plan.build(
        plan.FULL, ["get-4b", "post-10k", "json"], list(plan.TABLES), ["3.11"], "3.11"
    ):
        assert not any(plan.applicable(point, s) for s in static), point.key
    with pytest.raises(Unsupported):  # the conformance replay's echo app: not theirs
        PEERS["nginx"].command(VENV, 8123, Options(echo=True))


def test_the_static_part_runs_the_static_rows() -> None:
    rows = plan.part_servers(plan.PARTS["static"], servers.every_row())
    assert {s.name for s in rows} == {
        "granian-static", "nginx", "supervise-rsgi-static", "supervise-native-static",
        "supervise-gthread-static",
    }  # fmt: skip


def test_a_missing_nginx_is_a_reason_not_a_row(monkeypatch) -> None:
    monkeypatch.setattr(servers, "system_binary", lambda name: None)
    available, missing = servers.available_peers(VENV)
    assert "nginx" not in {s.name for s in available}
    assert "nginx" in missing["nginx"]


def test_the_nginx_launchers_config_is_one_nginx_accepts(tmp_path) -> None:
    binary = servers.system_binary("nginx")
    if binary is None:
        pytest.skip("nginx is not installed")
    sys.path.insert(0, str(BENCH_DIR / "launchers"))
    try:
        import run_nginx
    finally:
        sys.path.pop(0)
    (tmp_path / "root").mkdir()
    text = run_nginx.config("127.0.0.1", 8123, "/static", str(tmp_path / "root"), 1, tmp_path)
    assert "location /static/ { alias " in text
    (tmp_path / "nginx.conf").write_text(text)
    done = subprocess.run(
        [binary, "-t", "-q", "-p", f"{tmp_path}/", "-c", str(tmp_path / "nginx.conf"),
         "-e", str(tmp_path / "error.log")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
