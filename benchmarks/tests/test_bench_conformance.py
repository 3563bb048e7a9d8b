"""benchmarks/conformance.py: every server started on the echo app, and the report of
what each got right. The replay and the judge are tests/test_conformance.py's own
(tests/http1_corpus.py), exercised there against real servers.

Run with: .venv/bin/pytest benchmarks/tests (needs no server).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conformance
from bench.peers import Venv
from bench.servers import ECHO_APPS, PEERS, Options

VENV = Venv(Path("/nowhere/venv"), "3.11")


def test_every_peer_can_serve_the_echo_app_of_its_interface() -> None:
    for server in PEERS:
        cmd = server.command(VENV, 8000, Options(echo=True))
        assert ECHO_APPS[server.interface] in cmd, (server.name, cmd)
        plain = server.command(VENV, 8000, Options())
        assert ECHO_APPS[server.interface] not in plain, (server.name, plain)


def _entry(name: str, folders: dict) -> dict:
    return {
        "server": name,
        "interface": "wsgi",
        "status": "ok",
        "reason": "",
        "version": "1",
        "command": [name, "app"],
        "folders": folders,
    }


def test_report_counts_right_answers_smuggled_requests_and_silence_per_server() -> None:
    clean = {"passed": 2, "total": 2, "misses": {}, "violations": {}, "silent": []}
    leaky = {
        "passed": 0,
        "total": 2,
        "misses": {"te-cl": "2 responses", "short": "answered 200"},
        "violations": {"te-cl": "answered the smuggled request {'uri': '/smuggled'}"},
        "silent": ["slow"],
    }
    doc = {
        "date": "2026-11-24",
        "command": "python benchmarks/conformance.py",
        "machine": {"host": "vm"},
        "supervise_source": {"commit": "abc", "dirty": "no"},
        "case_timeout": 3.0,
        "folders": ["smuggler"],
        "servers": [
            _entry("supervise-sync", {"smuggler": clean}),
            _entry("leaky", {"smuggler": leaky}),
            {
                "server": "broken",
                "interface": "asgi",
                "status": "failed",
                "version": "2",
                "reason": "did not start: ImportError",
            },
        ],
    }
    text = conformance.render(doc)
    assert "| **supervise-sync** | 1 | 2/2 | 2/2 | 0 | 0 |" in text
    assert "| leaky | 1 | 0/2 | 0/2 | 1 | 1 |" in text
    assert "| broken | 2 | — | failed | | |" in text
    assert "- `smuggler/te-cl`: answered the smuggled request" in text
    assert "failed: did not start: ImportError" in text
