"""The benchmark harness run for real, every table in smoke mode, so it cannot rot: real
supervise servers (from this venv: `run.py --here`, no peers), real wrk, h2load and wsload loads,
and the report a reader gets. Figures are seconds long and never asserted.

Skips where wrk, h2load or Go (which builds wsload) is missing (CI installs wrk and
h2load; a fresh machine has Go).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_DIR

RUN = REPO_DIR / "benchmarks" / "run.py"
TABLES = ("main", "deploy", "workers", "python", "loops", "threads", "memory")
# One server per interface that every table applies to: rsgi has runtime threads and
# loops, h2 and ws; sync keeps a WSGI row in the tables that take every interface.
SERVERS = "supervise-rsgi,supervise-sync"

pytestmark = [
    pytest.mark.long,
    pytest.mark.skipif(
        not (shutil.which("wrk") and shutil.which("h2load") and shutil.which("go")),
        reason="wrk, h2load or go is missing",
    ),
]


def test_every_table_runs_and_reports(tmp_path: Path) -> None:
    cores = sorted(os.sched_getaffinity(0))
    server_cpu, load_cpu = cores[0], cores[-1]
    cmd = [sys.executable, str(RUN), "--smoke", "--here", "--no-charts"]
    cmd += ["--tables", ",".join(TABLES), "--scenarios", "get-4b,h2-get,ws-echo,ws-broadcast"]
    cmd += ["--servers", SERVERS, "--out", str(tmp_path), "--duration", "1", "--warmup", "0"]
    cmd += ["--server-cpu", str(server_cpu), "--load-cpu", str(load_cpu)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    (results,) = tmp_path.glob("*.json")
    doc = json.loads(results.read_text())
    assert {p["table"] for p in doc["points"]} == set(TABLES)
    for point in doc["points"]:
        for name, entry in point["servers"].items():
            # A point a server cannot run is skipped with its reason, never failed.
            assert entry["status"] in ("ok", "skipped"), (point["table"], name, entry["reason"])
            # The server's CPU is read around every load, and serving one costs some.
            assert all(run["server_cpu_s"] > 0 for run in entry["runs"]), (point["table"], name)
    rsgi = [p["servers"].get("supervise-rsgi", {}) for p in doc["points"]]
    assert all(e.get("status") == "ok" for e in rsgi), [e.get("reason") for e in rsgi]

    report = results.with_suffix(".md").read_text()
    for heading in (
        "## supervise against the best peer: pinned, one worker",
        "## Deploy: ",
        "## Memory and scaling: 1, 2 and 4 workers (pinned)",
        "## Dimension (pinned): 2 worker processes",
        "## Dimension (pinned): Python versions",
        "## Dimension (pinned): event loops",
        "## Dimension (pinned): runtime mode and threads",
        "| Server CPU µs per request | Server cores busy |",
    ):
        assert heading in report, heading


def test_the_manycore_part_splits_server_and_load_cores_and_reports_p50_p99(
    tmp_path: Path,
) -> None:
    """The many-core table's shape on this machine: the server's process tree on one core,
    wrk on another, workers = server cores; the report names the split and gives each
    figure's p50 and p99."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("the split needs 2 cores")
    server, load = cores[0], cores[-1]
    cmd = [sys.executable, str(RUN), "--part", "manycore", "--smoke", "--here", "--no-charts"]
    cmd += ["--servers", "supervise-rsgi", "--server-cpus", str(server), "--load-cpus", str(load)]
    cmd += ["--out", str(tmp_path), "--duration", "1", "--warmup", "0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    (results,) = tmp_path.glob("*.json")
    doc = json.loads(results.read_text())
    assert doc["meta"]["deploy_split"]["server"] == [server]
    assert doc["meta"]["deploy_split"]["load"] == [load]
    assert [p["scenario"] for p in doc["points"]] == ["get-4b", "post-1k"]
    for point in doc["points"]:
        assert point["table"] == "deploy" and point["options"]["workers"] == 1
        entry = point["servers"]["supervise-rsgi"]
        assert entry["status"] == "ok", entry["reason"]
        assert entry["cpus"] == {"server": str(server), "load": str(load), "load_threads": 1}
        best = entry["best"]
        assert 0 < best["latency_p50_ms"] <= best["latency_p99_ms"]

    report = results.with_suffix(".md").read_text()
    assert f"## Deploy: 1 worker on cores {server}, load generator on {load}" in report
    assert f"server on cores {server} (1 of the machine's {os.cpu_count()}, 1 worker)" in report
    assert "| Scenario | supervise worker | RPS | p50 | p99 |" in report
    assert "| vs best peer, same interface | p50 | p99 |" in report
    assert "| Server cores busy |" in report
