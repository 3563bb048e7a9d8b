"""The harness's own logic, without servers or load: parsing, ranking, the apps' bytes.

Run with: .venv/bin/pytest benchmarks/tests (not in the default testpaths: it needs no server)
"""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path

# The harness imports `bench` and `apps` from benchmarks/, as run.py does. No conftest.py:
# the project's tests import their own `conftest` by name.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps import asgi_app, payload, wsgi_app
from bench import loadgen, report, report_cells, runner
from bench.scenarios import BY_NAME

H2LOAD_OUTPUT = (
    "finished in 3.00s, 60728.67 req/s, 1.74MB/s\n"
    "requests: 182186 total, 182346 started, 182186 done, 182100 succeeded, 86 failed, "
    "6 errored, 0 timeout\n"
    "status codes: 182100 2xx, 0 3xx, 80 4xx, 0 5xx\n"
    "traffic: 5.21MB (5468156) total, 1.39MB (1459184) headers (space savings 91.39%), "
    "711.66KB (728744) data\n"
    "                     min         max         mean         sd        +/- sd\n"
    "time for request:      552us     16.59ms      2.60ms      1.16ms    95.35%\n"
)

WRK_OUTPUT = (
    "Running 3s test\n"
    'BENCH_JSON {"requests":1000,"duration_us":2000000,"bytes":150000,'
    '"errors":{"connect":1,"read":2,"write":0,"status":3,"timeout":4},'
    '"latency_us":{"min":100,"max":9000,"mean":1500.5,"stdev":10.0,"p50":1,"p90":2,"p99":3000}}\n'
)


def test_h2load_output_gives_rate_latency_and_error_counts() -> None:
    load = loadgen.parse_h2load(H2LOAD_OUTPUT, 64)
    assert load.rps == 60728.67
    assert load.requests == 182186
    assert load.non2xx == 80
    assert load.socket_errors == 6
    assert load.latency_avg_ms == 2.60
    assert abs(load.latency_max_ms - 16.59) < 1e-9
    assert not load.clean


def test_wrk_json_summary_gives_rate_and_error_counts() -> None:
    load = loadgen._from_json("wrk", 64, WRK_OUTPUT)
    assert load.rps == 500.0
    assert load.non2xx == 3
    assert load.socket_errors == 1 + 2 + 4
    assert load.latency_avg_ms == 1.5005
    assert load.bytes_per_request == 150.0


def test_missing_summary_is_a_problem_not_a_zero() -> None:
    load = loadgen._from_json("wrk", 64, "wrk: connection refused\n")
    assert load.problem
    assert not load.clean


def _run(rps: float, **errors: int) -> dict:
    base = loadgen.Load("wrk", 64, requests=int(rps), duration_s=1.0, rps=rps).to_dict()
    base.update(errors)
    return base


def _entry(name: str, runs: list[dict], supervise: bool = False, iface: str = "wsgi") -> dict:
    return {
        "server": name,
        "interface": iface,
        "supervise": supervise,
        "version": "1",
        "note": "",
        "status": "pending",
        "reason": "",
        "command": [name],
        "memory_idle": {"rss": 2**20, "pss": 2**20, "processes": 1},
        "memory_load": {"rss": 2**21, "pss": 2**21, "processes": 1},
        "runs": runs,
    }


def test_best_run_is_the_fastest_clean_one_and_errors_are_marked() -> None:
    mixed = _entry("mixed", [_run(900.0), _run(5000.0, non2xx=10)])
    runner.finalize(mixed)
    assert mixed["status"] == "ok"
    assert mixed["best"]["rps"] == 900.0

    broken = _entry("broken", [_run(5000.0, socket_errors=3)])
    runner.finalize(broken)
    assert broken["status"] == "errors"
    assert "every run had errors" in broken["reason"]


def test_report_ranks_clean_first_and_gives_supervise_ratio() -> None:
    sup = _entry("supervise-sync", [_run(800.0)], supervise=True)
    peer = _entry("peer-wsgi", [_run(400.0)])
    fast_but_wrong = _entry("peer-asgi", [_run(9000.0, non2xx=5)], iface="asgi")
    for entry in (sup, peer, fast_but_wrong):
        runner.finalize(entry)
    point = {
        "table": "main",
        "scenario": "get-4b",
        "title": "GET 4 B plain text",
        "protocol": "h1",
        "python": "3.11",
        "options": {"workers": 1, "loop": None, "runtime_threads": None},
        "servers": {e["server"]: e for e in (fast_but_wrong, peer, sup)},
    }
    (row,) = report.ratios(point)
    assert row["interface"][0] == "peer-wsgi"
    assert row["interface"][2] == 2.0
    table = "\n".join(report_cells.scenario_table(point))
    # The run with errors is listed last and flagged, though it was the fastest.
    assert table.rindex("peer-asgi") > table.index("peer-wsgi")
    assert "peer-asgi ⚠" in table


def test_wsgi_app_serves_the_payload_bytes() -> None:
    def call(path: str, body: bytes = b"") -> bytes:
        environ = {
            "PATH_INFO": path,
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
        }
        return b"".join(wsgi_app.app(environ, lambda status, headers: None))

    assert call("/4b") == BY_NAME["get-4b"].expected_body()
    assert call("/10k") == payload.BODY_10K
    assert call("/json") == BY_NAME["json"].expected_body()
    assert call("/echo", payload.pattern(10240)) == BY_NAME["post-10k"].expected_body()
    assert call("/file") == payload.file_bytes()


def test_asgi_app_echoes_a_body_sent_in_parts() -> None:
    parts = [
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"cd", "more_body": False},
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        return parts.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/echo", "extensions": {}}
    asyncio.run(asgi_app.app(scope, receive, send))
    assert sent[0]["status"] == 200
    assert (b"content-length", b"4") in sent[0]["headers"]
    assert sent[1]["body"] == b"abcd"


def test_distribution_name_is_pyprojects() -> None:
    """The harness finds supervise's version under pyproject's [project] name."""
    from bench.peers import DISTRIBUTION

    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert f'\nname = "{DISTRIBUTION}"\n' in pyproject


BROADCAST_OUTPUT = (
    'BENCH_JSON {"requests":4000,"duration_us":500000,"bytes":256000,'
    '"errors":{"connect":0,"read":0,"write":0,"status":0,"timeout":0},'
    '"latency_us":{"min":0,"max":0,"mean":0,"stdev":0,"p50":0,"p90":0,"p99":0},'
    '"rps":9000.5,"broadcast":{"send":1000,"receive":8000,"combined":9000.5,'
    '"clients":8,"messages":50}}\n'
)


def test_broadcast_rate_is_the_combined_one_and_send_and_receive_are_kept() -> None:
    load = loadgen._from_json("wsload", 8, BROADCAST_OUTPUT)
    # Granian's combined rate (per-client rates summed), not requests / duration.
    assert load.rps == 9000.5
    assert load.broadcast["send"] == 1000 and load.broadcast["receive"] == 8000
    assert load.clean


def test_broadcast_runs_granians_8_16_32_clients_from_the_profile_levels() -> None:
    assert BY_NAME["ws-broadcast"].levels((64, 128, 256)) == (8, 16, 32)
    assert BY_NAME["ws-echo"].levels((64, 128, 256)) == (64, 128, 256)
    assert BY_NAME["ws-broadcast"].levels((4,)) == (1,)


def test_broadcast_table_shows_send_and_receive_instead_of_latency() -> None:
    run = loadgen._from_json("wsload", 8, BROADCAST_OUTPUT).to_dict()
    entry = _entry("supervise-rsgi", [run], supervise=True, iface="rsgi")
    runner.finalize(entry)
    point = {"scenario": "ws-broadcast", "protocol": "ws", "servers": {"s": entry}}
    head, _, row = report_cells.scenario_table(point)
    assert "Send msg/s | Receive msg/s" in head and "latency" not in head
    assert "| 1,000 | 8,000 |" in row and "8 clients" in row
