"""The WSGI rows added for the native engine: supervise-native, and the single-process C
peers bjoern and fastwsgi (launched by this suite's scripts, installed as optional peers).

Run with: .venv/bin/pytest benchmarks/tests (needs no server and no network: pip is faked).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import peers, plan, report_deploy, servers
from bench.peers import BENCH_DIR, Venv
from bench.servers import PEERS, Options, Unsupported

VENV = Venv(Path("/nowhere/venv"), "3.11")
BY_NAME = {s.name: s for s in PEERS}


def _point(table: str, options: Options | None = None) -> plan.Point:
    return plan.Point(table, plan.BY_NAME["get-4b"], "3.11", options or Options())


def test_bjoern_and_fastwsgi_run_the_wsgi_app_from_their_launchers() -> None:
    for name in ("bjoern", "fastwsgi"):
        cmd = BY_NAME[name].command(VENV, 8123, Options())
        assert cmd[0] == VENV.python
        assert cmd[1] == f"launchers/run_{name}.py"  # the runner starts servers in BENCH_DIR
        assert (BENCH_DIR / cmd[1]).is_file()
        assert cmd[2:] == ["--host", "127.0.0.1", "--port", "8123", "apps.wsgi_app:app"]


def test_single_process_peers_are_pinned_rows_only() -> None:
    deploy = _point("deploy", Options(workers=2, pinned=False))
    for name in ("bjoern", "fastwsgi"):
        server = BY_NAME[name]
        assert plan.applicable(_point("main"), server)
        assert not plan.applicable(deploy, server)
        assert not plan.applicable(_point("workers", Options(workers=2)), server)
        with pytest.raises(Unsupported, match="single process"):
            server.command(VENV, 8000, Options(workers=2))


def test_supervise_native_is_a_wsgi_worker_with_one_thread() -> None:
    wc = servers.SUPERVISE_WORKERS["native"]
    assert wc.interface == "wsgi"
    assert wc.module == "supervise.workers.native"
    # The rsgi worker's engine: h2c, h2 over TLS and HTTP/3 run, a wrong answer fails.
    assert wc.features == {"h2", "h2tls", "h3"}
    cmd = servers._supervise("native", wc)(VENV, 8000, Options(workers=2, pinned=False))
    assert cmd[1:7] == ["-k", "native", "-w", "2", "--threads", "1"]
    assert cmd[-1] == "apps.wsgi_app:app"


def test_a_missing_header_is_the_reason_and_is_retried_once_there(monkeypatch, tmp_path) -> None:
    header = tmp_path / "ev.h"
    monkeypatch.setattr(peers, "OPTIONAL", ["bjoern"])
    monkeypatch.setattr(peers, "SYSTEM_NEEDS", {"bjoern": ((str(header),), "no ev.h")})
    monkeypatch.setattr(peers, "_installed_versions", lambda venv: {})
    calls: list[list[str]] = []
    monkeypatch.setattr(peers, "_pip", lambda venv, args, log, env=None: calls.append(args))
    state: dict = {}
    peers._install_optional(VENV, state, fresh=False, up=[], log=lambda line: None)
    assert state["optional_failed"] == {"bjoern": "no ev.h"}
    assert calls == []  # no compiler error for the report: pip was not run
    header.write_text("")
    peers._install_optional(VENV, state, fresh=False, up=[], log=lambda line: None)
    assert calls == [["bjoern"]]


def test_a_pip_failure_is_retried_only_when_the_peers_are_reinstalled(monkeypatch) -> None:
    monkeypatch.setattr(peers, "OPTIONAL", ["fastwsgi"])
    monkeypatch.setattr(peers, "_installed_versions", lambda venv: {})
    calls: list[list[str]] = []

    def failing_pip(venv, args, log, env=None) -> bool:
        calls.append(args)
        return False

    monkeypatch.setattr(peers, "_pip", failing_pip)
    state: dict = {}
    for _ in range(2):
        peers._install_optional(VENV, state, fresh=False, up=[], log=lambda line: None)
    assert calls == [["fastwsgi"]]
    assert "pip install failed" in state["optional_failed"]["fastwsgi"]
    state["optional_tried"] = []  # what prepare() does when it reinstalls the peers
    peers._install_optional(VENV, state, fresh=True, up=["--upgrade"], log=lambda line: None)
    assert calls[-1] == ["--upgrade", "fastwsgi"]


def test_an_optional_peer_added_later_reaches_an_existing_venv(monkeypatch) -> None:
    monkeypatch.setattr(peers, "OPTIONAL", ["uwsgi", "fastwsgi"])
    monkeypatch.setattr(peers, "_installed_versions", lambda venv: {"uwsgi": "2.0"})
    calls: list[list[str]] = []
    monkeypatch.setattr(peers, "_pip", lambda venv, args, log, env=None: not calls.append(args))
    state = {"peers": ["gunicorn"], "optional_failed": {}}  # written before fastwsgi was added
    peers._install_optional(VENV, state, fresh=False, up=[], log=lambda line: None)
    assert calls == [["fastwsgi"]]
    assert state["optional_failed"] == {}


def test_the_deploy_section_names_the_single_process_servers() -> None:
    point = {
        "table": "deploy",
        "scenario": "get-4b",
        "title": "GET 4 B plain text",
        "protocol": "h1",
        "python": "3.11",
        "options": {"workers": 2, "loop": None, "runtime_threads": None},
        "servers": {},
    }
    text = "\n".join(
        report_deploy.deploy_section([point], [], "charts", single=["bjoern", "daphne"])
    )
    assert "Not in this table, single process only: bjoern, daphne." in text


def test_the_launchers_share_one_command_line() -> None:
    code = (
        "import sys; sys.argv[1:] = ['--port', '9', 'apps.wsgi_app:app'];"
        "from common import parse; host, port, app = parse('x');"
        "from apps import wsgi_app; assert (host, port, app) == ('127.0.0.1', 9, wsgi_app.app)"
    )
    env = {"PYTHONPATH": f"{BENCH_DIR / 'launchers'}:{BENCH_DIR}"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
