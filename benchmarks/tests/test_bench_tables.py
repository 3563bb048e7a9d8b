"""The tables of the plan: pinned one-worker, deploy (workers = cores, unpinned), runtime
mode and threads; where their processes run, and how the report tells them apart.

Run with: .venv/bin/pytest benchmarks/tests (needs no server: processes started here are
`python -c` one-liners that report their own CPU affinity).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import loadgen, plan, procs, report, report_cells
from bench.peers import BENCH_DIR, Venv
from bench.servers import PEERS, Options, Server, Unsupported
from contexts import context, finished_entry

VENV = Venv(Path("/nowhere/venv"), "3.11")
BY_NAME = {s.name: s for s in PEERS}


def _points(tables: list[str], cores: int = 2) -> list[plan.Point]:
    scenarios = [s.name for s in plan.SCENARIOS]
    return plan.build(plan.FULL, scenarios, tables, [], "3.11", cores=cores)


def test_deploy_table_runs_the_target_scenarios_with_workers_equal_to_cores_unpinned() -> None:
    points = _points(["deploy"], cores=3)
    assert [p.scenario.name for p in points] == ["get-4b", "post-10k", "json"]
    for point in points:
        assert point.options == Options(workers=3, pinned=False)
        assert "unpinned" in point.key


def test_deploy_table_keeps_only_the_requested_scenarios() -> None:
    points = plan.build(plan.QUICK, ["json", "ws-echo"], ["deploy"], [], "3.11", cores=2)
    assert [p.scenario.name for p in points] == ["json"]


def test_deploy_table_takes_every_multi_worker_server_and_leaves_single_process_ones() -> None:
    (get,) = (p for p in _points(["deploy"]) if p.scenario.name == "get-4b")
    assert plan.applicable(get, BY_NAME["gunicorn-gthread"])
    assert plan.applicable(get, BY_NAME["granian-wsgi"])
    assert plan.applicable(get, BY_NAME["gunicorn-uvicorn"])
    assert not plan.applicable(get, BY_NAME["daphne"])


def test_deploy_is_part_of_the_full_profile_and_not_of_quick() -> None:
    assert "deploy" in plan.FULL.tables
    assert "deploy" not in plan.QUICK.tables


def test_threads_table_is_st_and_mt_times_1_2_4() -> None:
    points = _points(["threads"])
    combos = [(p.options.runtime_mode, p.options.runtime_threads) for p in points]
    assert combos == [("st", 1), ("st", 2), ("st", 4), ("mt", 1), ("mt", 2), ("mt", 4)]
    assert all(p.options.pinned and p.options.workers == 1 for p in points)
    rsgi = BY_NAME["granian-rsgi"]
    assert all(plan.applicable(p, rsgi) for p in points)
    assert not any(plan.applicable(p, BY_NAME["granian-asgi"]) for p in points)


def test_granian_gets_runtime_mode_and_threads_on_its_command_line() -> None:
    cmd = BY_NAME["granian-rsgi"].command(VENV, 8000, Options(runtime_threads=2, runtime_mode="mt"))
    assert cmd[cmd.index("--runtime-threads") + 1] == "2"
    assert cmd[cmd.index("--runtime-mode") + 1] == "mt"
    assert cmd[-1] == "apps.rsgi_app:app"


def test_a_server_without_runtime_mode_is_skipped_with_the_reason() -> None:
    server = Server("plain", "rsgi", "plain", lambda venv, port, opts: ["x"], runtime_threads=True)
    with pytest.raises(Unsupported, match="runtime mode"):
        server.command(VENV, 8000, Options(runtime_threads=1, runtime_mode="st"))


def test_pinned_points_split_the_cores_and_deploy_points_use_them_all() -> None:
    ctx = context()
    main = plan.Point("main", plan.BY_NAME["get-4b"], "3.11")
    deploy = plan.Point("deploy", plan.BY_NAME["get-4b"], "3.11", Options(2, pinned=False))
    assert ctx.placement(main) == ("0", "1")
    assert ctx.placement(deploy) == ("0,1,2", "0,1,2")


def _affinity_of_started(cpus: str, tmp_path: Path) -> set[int]:
    log = tmp_path / f"affinity-{cpus}.log"
    code = "import os; print(sorted(os.sched_getaffinity(0)))"
    proc = procs.start(
        [sys.executable, "-c", code], cpus=cpus, cwd=tmp_path, env=dict(os.environ), log=log
    )
    assert proc.wait(30) == 0
    return set(ast.literal_eval(log.read_text().strip()))


def test_a_started_server_runs_on_exactly_the_cores_it_was_given(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    first = str(allowed[0])
    every = procs.cpu_list(allowed)
    # The harness pins itself to the load core; an unpinned server must still get them all.
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {allowed[-1]})
    try:
        assert _affinity_of_started(first, tmp_path) == {allowed[0]}
        assert _affinity_of_started(every, tmp_path) == set(allowed)
    finally:
        os.sched_setaffinity(0, before)


def test_load_generators_are_launched_on_the_cores_given() -> None:
    assert loadgen._pinned("0,1", ["wrk"]) == ["taskset", "-c", "0,1", "wrk"]


def _entry(name: str, rps: float, iface: str = "wsgi") -> dict:
    command = [name.split("-")[0], "-w", "2"]
    return finished_entry(name, rps, iface, connections=64, command=command, processes=3)


def _point(table: str, workers: int, entries: list[dict]) -> dict:
    return {
        "table": table,
        "scenario": "get-4b",
        "title": "GET 4 B plain text",
        "protocol": "h1",
        "python": "3.11",
        "options": {"workers": workers, "loop": None, "runtime_threads": None},
        "servers": {e["server"]: e for e in entries},
    }


def _doc(points: list[dict]) -> dict:
    return {
        "meta": {
            "date": "2026-01-01",
            "command": "python benchmarks/run.py --full",
            "profile": "full",
            "levels": [64],
            "duration": 1.0,
            "warmup": 0.0,
            "rounds": 1,
            "server_cpu": 0,
            "load_cpu": 1,
            "all_cpus": [0, 1],
            "wrk_timeout": "4s",
            "h2_streams": 10,
        },
        "machine": {
            "host": "h",
            "cores": 2,
            "cpu": "c",
            "memory_gib": 1,
            "kernel": "k",
            "virtualisation": "v",
            "governor": "g",
            "harness_python": "3.11",
        },
        "tools": {},
        "versions": {},
        "points": points,
    }


def test_report_names_each_table_and_gives_the_deploy_ratios() -> None:
    main = _point("main", 1, [_entry("supervise-gthread", 1000.0), _entry("granian-wsgi", 1500.0)])
    deploy = _point(
        "deploy",
        2,
        [
            _entry("supervise-gthread", 1800.0),
            _entry("granian-wsgi", 1200.0),
            _entry("gunicorn-gthread", 1500.0),
        ],
    )
    text = report.render(_doc([main, deploy]), "charts")
    assert "Pinned, one worker: per-core cost" in text
    assert "Deploy: workers = cores (2), unpinned: what users get" in text
    assert "competes with the server" in text
    # supervise vs Granian (same interface), vs the best peer, and vs its own pinned run.
    row = next(
        line
        for line in text.splitlines()
        if line.startswith("| get-4b | supervise-gthread | 1,800 |")
    )
    assert "1.50x granian-wsgi (1,200)" in row
    assert "1.20x gunicorn-gthread (1,500)" in row
    assert "1.80x (1,000)" in row
    assert "| granian-wsgi | 1,200 (0.80x pinned) |" in text
    assert "| gunicorn-gthread | 1,500 |" in text  # not in the main table: no ratio


def test_deploy_ratio_to_pinned_ignores_runs_with_errors() -> None:
    broken = _entry("supervise-gthread", 1000.0)
    broken["status"] = "errors"
    main = _point("main", 1, [broken])
    deploy = _point("deploy", 2, [_entry("supervise-gthread", 1800.0)])
    assert report.versus_pinned(deploy, [main]) == {}


def test_threads_variants_are_labelled_by_mode_and_count() -> None:
    point = _point("threads", 1, [])
    point["options"] = {"workers": 1, "runtime_threads": 4, "runtime_mode": "mt"}
    assert report_cells.variant(point) == "MT, 4 threads"


def test_an_earlier_results_file_still_renders() -> None:
    results = sorted((BENCH_DIR / "results").glob("*.json"))
    if not results:
        pytest.skip("no results file committed under benchmarks/results")
    doc = json.loads(results[-1].read_text())
    text = report.render(doc, "charts")
    assert "Pinned, one worker: per-core cost" in text
    assert "## supervise against the best peer: pinned, one worker" in text


def _run_module():
    spec = importlib.util.spec_from_file_location("bench_run_py", BENCH_DIR / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_alone_smokes_the_quick_plan_and_nothing_at_all_is_refused(capsys) -> None:
    run = _run_module()
    args = run.parse_args(["--smoke", "--tables", "deploy"])
    profile = run._profile(args)
    assert profile.tables == ("deploy",)
    assert profile.duration == 2.0 and profile.quick_servers_only
    with pytest.raises(SystemExit) as exc:
        run.parse_args(["--tables", "deploy"])
    assert exc.value.code == 2
    assert (
        "one of --quick, --full, --part, --smoke or --render is required" in capsys.readouterr().err
    )


def test_memory_table_runs_1_2_and_4_workers_and_single_process_servers_once() -> None:
    points = _points(["memory"])
    assert [p.options.workers for p in points] == [1, 2, 4]
    assert {p.key for p in points} == {
        "memory/get-4b/py3.11/1w",
        "memory/get-4b/py3.11/2w",
        "memory/get-4b/py3.11/4w",
    }
    bjoern = BY_NAME["bjoern"]
    assert [plan.applicable(p, bjoern) for p in points] == [True, False, False]
    assert all(plan.applicable(p, BY_NAME["granian-wsgi"]) for p in points)


def _with_memory(entry: dict, idle_pss_mib: float, load_pss_mib: float) -> dict:
    entry["memory_idle"] = {
        "rss": int(idle_pss_mib * 2**21),
        "pss": int(idle_pss_mib * 2**20),
        "processes": 1,
    }
    entry["memory_load"] = {
        "rss": int(load_pss_mib * 2**21),
        "pss": int(load_pss_mib * 2**20),
        "processes": 1,
    }
    return entry


def test_memory_report_gives_pss_per_worker_count_and_the_cost_of_each_extra_worker() -> None:
    points = [
        _point(
            "memory",
            n,
            [
                _with_memory(
                    _entry("supervise-gthread", 1000.0), 30 + 10 * (n - 1), 40 + 12 * (n - 1)
                ),
                *([_with_memory(_entry("bjoern", 900.0), 20, 25)] if n == 1 else []),
            ],
        )
        for n in (1, 2, 4)
    ]
    text = report.render(_doc(points), "charts")
    assert "## Memory and scaling: 1, 2 and 4 workers (pinned)" in text
    assert (
        "| **supervise-gthread** | 30.0 | 40.0 | 60.0 | 40.0 | 52.0 | 76.0 "
        "| 60.0 | 80.0 | 120.0 | 10.0 / 12.0 |"
    ) in text
    assert "| bjoern | 20.0 | — | — | 25.0 | — | — | 40.0 | — | — | — / — |" in text
    assert "## Dimension (pinned): memory" not in text


def test_python_table_runs_bytes_str_and_echo_and_loops_table_get_and_echo_10k() -> None:
    python = plan.build(plan.FULL, ["get-4b"], ["python"], ["3.10", "3.13"], "3.11")
    assert [(p.scenario.name, p.python) for p in python] == [
        (name, py) for name in ("get-4b", "get-str", "post-10k") for py in ("3.10", "3.13")
    ]
    loops = _points(["loops"])
    assert [(p.scenario.name, p.options.loop) for p in loops] == [
        (name, loop) for name in ("get-10k", "post-10k") for loop in plan.LOOPS
    ]


def test_every_row_has_its_ratio_to_the_best_peer_of_its_interface() -> None:
    point = _point(
        "main",
        1,
        [
            _entry("supervise-rsgi", 1200.0, "rsgi"),
            _entry("granian-rsgi", 1000.0, "rsgi"),
            _entry("supervise-gthread", 900.0),
            _entry("gunicorn-gthread", 300.0),
            _entry("granian-wsgi", 600.0),
        ],
    )
    rows = {line.split(" | ")[0]: line for line in report.render(_doc([point]), "c").splitlines()}
    assert "| 1,200 | 1.20x |" in rows["| **supervise-rsgi**"]
    assert "| 1,000 | 1.00x |" in rows["| granian-rsgi"]
    assert "| 900 | 1.50x |" in rows["| **supervise-gthread**"]
    assert "| 300 | 0.50x |" in rows["| gunicorn-gthread"]


def test_ratios_within_the_measured_noise_are_ties() -> None:
    point = _point("main", 1, [_entry("supervise-gthread", 1010.0), _entry("granian-wsgi", 1000.0)])
    doc = _doc([point])
    doc["noise"] = {
        "table": "main",
        "spread_pct": 2.0,
        "stdev_pct": 1.0,
        "rps": [1000.0, 1020.0],
        "server": "supervise-gthread",
        "scenario": "get-4b",
        "connections": 64,
        "duration_s": 5.0,
    }
    assert "1.01x **tie** granian-wsgi" in report.render(doc, "c")
    doc["noise"]["spread_pct"] = 0.5
    assert "1.01x granian-wsgi" in report.render(doc, "c")
    doc["noise"]["table"] = "deploy"  # another table's noise says nothing about this one
    assert "x **tie**" not in report.render(doc, "c")


def test_dimension_tables_with_several_scenarios_get_a_section_and_chart_each() -> None:
    points = []
    for scenario, title in (("get-10k", "GET 10 KiB"), ("post-10k", "POST echo 10 KiB")):
        for loop in ("asyncio", "uvloop"):
            point = _point("loops", 1, [_entry("supervise-rsgi", 1000.0, "rsgi")])
            point.update(scenario=scenario, title=title)
            point["options"]["loop"] = loop
            points.append(point)
    text = report.render(_doc(points), "c")
    assert "### GET 10 KiB (`get-10k`)" in text
    assert "![loops post-10k](c/dim-loops-post-10k.png)" in text
    assert text.count("#### loop: uvloop") == 2


def test_the_published_parts_cover_every_table_and_each_fits_its_limit() -> None:
    run = _run_module()
    covered = set()
    for name, part in plan.PARTS.items():
        points, rows = run.part_plan(name, "3.11")
        assert points, name
        minutes = plan.estimate_s(points, rows, plan.part_profile(part)) / 60
        assert minutes < plan.PART_LIMIT_MIN, (name, minutes)
        covered |= {p.table for p in points}
    assert covered == set(plan.TABLES)
    # The Python table: every version in a part of its own.
    assert {py for p in plan.PARTS.values() for py in p.pythons} == set(plan.PYTHONS)


def test_a_part_runs_only_its_interfaces_servers_and_list_alone_lists_the_parts(capsys) -> None:
    run = _run_module()
    points, rows = run.part_plan("versus-asgi", "3.11")
    assert {s.interface for s in rows["3.11"]} == {"asgi"}
    assert "gunicorn-asgi" in {s.name for s in rows["3.11"]}
    assert {p.scenario.name for p in points} >= {"get-4b", "post-10k", "io10", "io100"}
    assert run.main(["--list"]) == 0
    listed = capsys.readouterr().out
    for name in plan.PARTS:
        assert f"  {name} " in listed


def test_the_workers_table_takes_its_one_worker_column_from_the_memory_table() -> None:
    memory = _point("memory", 1, [_entry("supervise-gthread", 1000.0)])
    workers = _point("workers", 2, [_entry("supervise-gthread", 1800.0)])
    text = report.render(_doc([memory, workers]), "charts")
    assert "| **supervise-gthread** | 1,000 | 1,800 |" in text
