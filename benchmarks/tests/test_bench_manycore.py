"""The many-core table's harness: core lists, the split deploy table, wrk and h2load with a
thread per load core, p50/p99 everywhere, and the venv from a wheelhouse.

Run with: .venv/bin/pytest benchmarks/tests (no server, no network: load generators and
pip are replaced where a test would start them).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import cpus, loadgen, plan, report, report_cells, runner, wheelhouse
from bench.peers import BENCH_DIR, DISTRIBUTION, Venv
from bench.servers import Options
from contexts import context, finished_entry


def _run_module():
    spec = importlib.util.spec_from_file_location("bench_run_py", BENCH_DIR / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- core lists ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cores"),
    [
        ("0", (0,)),
        ("0-7", tuple(range(8))),
        ("8-15", tuple(range(8, 16))),
        ("0,2,4", (0, 2, 4)),
        ("0-3,8-11", (0, 1, 2, 3, 8, 9, 10, 11)),
        ("0-15:4", (0, 4, 8, 12)),
        ("3,1,1-2", (1, 2, 3)),
        (" 0 - 1 ", (0, 1)),
    ],
)
def test_cpu_lists_read_as_taskset_reads_them(text: str, cores: tuple[int, ...]) -> None:
    assert cpus.parse_cpu_list(text) == cores


@pytest.mark.parametrize("text", ["", "a", "0-", "-1", "3-1", "0,,1", "4:2", "0-7:0", "1.5"])
def test_cpu_lists_taskset_would_refuse_are_errors(text: str) -> None:
    with pytest.raises(ValueError):
        cpus.parse_cpu_list(text)


def test_a_core_set_is_named_by_its_ranges() -> None:
    assert cpus.compact(range(8)) == "0-7"
    assert cpus.compact((0, 1, 2, 3, 8, 10, 11)) == "0-3,8,10-11"
    assert cpus.compact((5,)) == "5"


def test_the_split_must_be_two_sets_of_cores_this_run_may_use() -> None:
    split = cpus.split("0-7", "8-15", range(16))
    assert split.server == tuple(range(8)) and split.load_threads == 8
    assert split.describe()["server_cpus"] == "0-7"
    with pytest.raises(ValueError, match="share cores 7"):
        cpus.split("0-7", "7-15", range(16))
    with pytest.raises(ValueError, match="16-17"):
        cpus.split("0-7", "8-17", range(16))


def test_without_a_split_given_the_cores_are_halved() -> None:
    assert cpus.halves(range(16)) == cpus.Split(tuple(range(8)), tuple(range(8, 16)))
    assert cpus.halves((0, 1)) == cpus.Split((0,), (1,))
    with pytest.raises(ValueError):
        cpus.halves((0,))


# -- the command line ----------------------------------------------------------------


def test_server_and_load_cpus_go_together_and_must_parse(capsys) -> None:
    run = _run_module()
    for argv in (["--smoke", "--server-cpus", "0-7"], ["--smoke", "--load-cpus", "8"]):
        with pytest.raises(SystemExit):
            run.parse_args(argv)
    with pytest.raises(SystemExit):
        run.parse_args(["--smoke", "--server-cpus", "0-x", "--load-cpus", "8"])
    assert "--server-cpus" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.parse_args(["--smoke", "--here", "--wheelhouse", "/x"])


def test_the_split_comes_from_the_options_else_from_the_manycore_part() -> None:
    run = _run_module()
    given = run.parse_args(["--smoke", "--server-cpus", "0", "--load-cpus", "1"])
    assert run.core_split(given, (0, 1)) == cpus.Split((0,), (1,))
    part = run.parse_args(["--part", "manycore"])
    assert run.core_split(part, tuple(range(16))) == cpus.halves(range(16))
    # Without the options, every other table stays as it was: no split.
    assert run.core_split(run.parse_args(["--smoke", "--tables", "deploy"]), (0, 1)) is None


# -- the plan and where its processes run ---------------------------------------------


def test_the_manycore_part_runs_get_and_post_1k_on_the_shared_recipes_servers() -> None:
    run = _run_module()
    points, rows = run.part_plan("manycore", "3.12")
    assert [p.scenario.name for p in points] == ["get-4b", "post-1k"]
    assert all(p.table == "deploy" and p.options.split for p in points)
    names = {s.name for s in rows["3.12"]}
    assert names == set(plan.MANYCORE_SERVERS)
    assert plan.BY_NAME["post-1k"].body_size == 1024
    assert plan.BY_NAME["post-1k"].path == "/echo"


def test_the_split_adds_post_1k_and_leaves_the_2_core_deploy_table_alone() -> None:
    names = [s.name for s in plan.SCENARIOS]
    plain = plan.build(plan.FULL, names, ["deploy"], [], "3.11", cores=2)
    assert [p.scenario.name for p in plain] == ["get-4b", "post-10k", "json"]
    assert all(p.options == Options(workers=2, pinned=False) for p in plain)
    assert "post-1k" not in plan.FULL.scenarios
    split = plan.build(plan.FULL, names, ["deploy"], [], "3.11", cores=8, split=True)
    assert [p.scenario.name for p in split] == ["get-4b", "post-10k", "json", "post-1k"]
    assert all(p.options.split and p.options.workers == 8 for p in split)
    assert split[0].key.endswith("8w split")


def _context(split: cpus.Split | None) -> runner.Context:
    return context(levels=(256,), load_cpu=8, all_cpus=tuple(range(16)), split=split)


def test_a_split_deploy_point_runs_on_its_two_sets_with_a_thread_per_load_core() -> None:
    ctx = _context(cpus.split("0-7", "8-15", range(16)))
    deploy = plan.Point(
        "deploy", plan.BY_NAME["get-4b"], "3.12", Options(workers=8, pinned=False, split=True)
    )
    main = plan.Point("main", plan.BY_NAME["get-4b"], "3.12")
    assert ctx.placement(deploy) == ("0,1,2,3,4,5,6,7", "8,9,10,11,12,13,14,15")
    assert ctx.load_threads(deploy) == 8
    assert ctx.placement(main) == ("0", "8") and ctx.load_threads(main) == 1
    unsplit = _context(None)
    every = ",".join(map(str, range(16)))
    assert (
        unsplit.placement(
            plan.Point("deploy", plan.BY_NAME["get-4b"], "3.12", Options(workers=16, pinned=False))
        )[0]
        == every
    )


WRK_OUTPUT = (
    'BENCH_JSON {"requests":1000,"duration_us":2000000,"bytes":150000,'
    '"errors":{"connect":0,"read":0,"write":0,"status":0,"timeout":0},'
    '"latency_us":{"min":100,"max":9000,"mean":1500.5,"stdev":10.0,"p50":1200,"p90":2,'
    '"p99":3000}}\n'
)


def test_wrk_gets_a_thread_per_load_core_never_more_than_connections(monkeypatch) -> None:
    ran = []
    monkeypatch.setattr(loadgen, "WRK", "/bundle/bin/wrk")
    monkeypatch.setattr(loadgen, "_execute", lambda cmd, d: (ran.append(cmd), (WRK_OUTPUT, ""))[1])
    load = loadgen.run("http://127.0.0.1:1", plan.BY_NAME["post-1k"], 256, 1.0, "8-15", threads=8)
    few = loadgen.run("http://127.0.0.1:1", plan.BY_NAME["get-4b"], 4, 1.0, "8-15", threads=8)
    assert ran[0][:5] == ["taskset", "-c", "8-15", "/bundle/bin/wrk", "-t8"]
    assert ran[0][-2:] == ["POST", "1024"]
    assert ran[1][4] == "-t4" and few.threads == 4
    assert load.latency_p50_ms == 1.2 and load.latency_p99_ms == 3.0 and load.threads == 8


def test_h2load_percentiles_come_from_its_per_request_log(monkeypatch, tmp_path) -> None:
    rows = [f"1700000000{i:06d}\t200\t{i * 10}\n" for i in range(1, 101)]
    rows.append("1700000000999999\t-1\t999999\n")  # a failed stream: not a latency
    ran = []

    def fake(cmd: list[str], duration: float) -> tuple[str, str]:
        ran.append(cmd)
        Path(cmd[cmd.index("--log-file") + 1]).write_text("".join(rows))
        return "", "h2load exited 1"

    monkeypatch.setattr(loadgen, "_execute", fake)
    load = loadgen.run("http://127.0.0.1:1", plan.BY_NAME["h2-get"], 256, 1.0, "8-15", threads=8)
    (cmd,) = ran
    h2load = cmd[3:]
    assert h2load[1] == "-t8" and h2load[h2load.index("-c") + 1] == "25"
    assert (load.latency_p50_ms, load.latency_p99_ms) == (0.51, 1.0)
    assert not Path(cmd[cmd.index("--log-file") + 1]).exists()
    # 64 requests in flight are 6 clients: h2load refuses more threads than clients.
    loadgen.run("http://127.0.0.1:1", plan.BY_NAME["h2-get"], 64, 1.0, "8-15", threads=8)
    assert "-t6" in ran[1]
    assert loadgen.latency_percentiles(tmp_path / "absent.tsv") == (0.0, 0.0)


# -- the report ----------------------------------------------------------------------


def _entry(name: str, rps: float, iface: str, **run_extra: float) -> dict:
    command = [name.split("-")[0]]
    return finished_entry(
        name, rps, iface, connections=256, command=command, processes=9, **run_extra
    )


def _split_doc() -> dict:
    point = {
        "table": "deploy",
        "scenario": "post-1k",
        "title": "POST echo 1 KiB (body iterated)",
        "protocol": "h1",
        "python": "3.12",
        "options": {"workers": 8, "loop": None, "runtime_threads": None, "pinned": False,
                    "split": True},
        "servers": {
            "supervise-rsgi": _entry("supervise-rsgi", 469261.0, "rsgi", latency_p50_ms=0.53,
                                     latency_p99_ms=1.01, server_cpu_s=39.5,
                                     server_cpu_wall_s=5.0, client_cpu_pct=300.0, threads=8),
            "granian-rsgi": _entry("granian-rsgi", 185633.0, "rsgi", latency_p50_ms=1.3,
                                   latency_p99_ms=3.17, server_cpu_s=36.9,
                                   server_cpu_wall_s=5.0, client_cpu_pct=750.0, threads=8),
        },
    }  # fmt: skip
    return {
        "meta": {
            "date": "2026-11-27",
            "command": "python benchmarks/run.py --part manycore",
            "profile": "part manycore",
            "levels": [256],
            "duration": 5.0,
            "warmup": 1.0,
            "rounds": 1,
            "server_cpu": 0,
            "load_cpu": 8,
            "all_cpus": list(range(16)),
            "wrk_timeout": "4s",
            "h2_streams": 10,
            "deploy_split": cpus.split("0-7", "8-15", range(16)).describe(),
            "deploy_load_threads": 8,
        },
        "machine": {"host": "big", "cores": 16, "cpu": "c", "memory_gib": 64, "kernel": "k",
                    "virtualisation": "none", "governor": "g", "harness_python": "3.12"},
        "tools": {},
        "versions": {},
        "points": [point],
    }  # fmt: skip


def test_the_split_report_names_the_machine_the_split_and_the_cores_used() -> None:
    text = report.render(_split_doc(), "charts")
    assert "## Deploy: 8 workers on cores 0-7, load generator on 8-15 (16-core machine)" in text
    assert "server on cores 0-7 (8 of the machine's 16, 8 workers)" in text
    assert "load generator on cores 8-15 (8, wrk and h2load with 8 threads)" in text
    assert "| Scenario | supervise worker | RPS | p50 | p99 |" in text
    assert "| post-1k | supervise-rsgi | 469,261 | 0.53 ms | 1.01 ms | 2.53x" in text
    # Cores busy beside every figure: 7.90 of 8 is a server-bound point.
    assert "469,261 (7.90 cores)" in text
    # wrk -t8 used 7.5 of its 8 cores for Granian: client-bound, marked; 3 of 8 is not.
    assert "| 185,633 † |" in text and "| 469,261 |" in text


def test_results_from_before_p50_render_with_a_dash() -> None:
    doc = _split_doc()
    for entry in doc["points"][0]["servers"].values():
        for run in [*entry["runs"], entry["best"]]:
            run.pop("latency_p50_ms", None)
            run.pop("threads", None)
    del doc["meta"]["deploy_split"], doc["meta"]["deploy_load_threads"]
    doc["points"][0]["options"].pop("split")
    text = report.render(doc, "charts")
    assert "## Deploy: 8 workers = cores, unpinned" in text
    assert "| — | 1.01 ms |" in text
    assert report_cells.latency_cells({}) == "— | —"


# -- the wheelhouse ------------------------------------------------------------------


def test_wheel_names_are_read_as_distributions(tmp_path: Path) -> None:
    for name in ("supervise_server-0.1.0-cp312-cp312-linux_x86_64.whl",
                 "zope_interface-8.7-cp312-cp312-manylinux1_x86_64.whl",
                 "uvicorn_worker-0.4.0-py3-none-any.whl"):  # fmt: skip
        (tmp_path / name).write_bytes(b"")
    assert set(wheelhouse.dists(tmp_path)) == {DISTRIBUTION, "zope-interface", "uvicorn-worker"}
    assert wheelhouse.normalize("Zope.Interface") == "zope-interface"


def test_the_venv_is_installed_from_the_wheels_alone(monkeypatch, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in ("supervise_server-0.1.0-cp312-cp312-linux_x86_64.whl",
                 "granian-2.8.9-cp312-cp312-manylinux_2_17_x86_64.whl",
                 "uvicorn-0.54.0-py3-none-any.whl"):  # fmt: skip
        (wheels / name).write_bytes(name.encode())
    venv_dir = tmp_path / "venv"
    (venv_dir / "bin").mkdir(parents=True)
    (venv_dir / "bin" / "python").write_text("")
    monkeypatch.setattr(wheelhouse, "venv_path", lambda version: venv_dir)
    monkeypatch.setattr(wheelhouse, "_installed_versions", lambda venv: {"granian": "2.8.9"})
    calls = []
    # uvicorn's dependencies are not in the folder: its install fails, and only it is lost.
    monkeypatch.setattr(
        wheelhouse, "_pip", lambda venv, args, log: calls.append(args) or "uvicorn" not in args
    )
    venv = wheelhouse.prepare("3.12", wheels, charts=False, log=lambda line: None)
    assert all(call[:3] == ["--no-index", "--find-links", str(wheels)] for call in calls)
    assert calls[0][3:] == [DISTRIBUTION, "granian", "uvicorn"]
    assert calls[-1][3:] == ["--force-reinstall", "--no-deps", DISTRIBUTION]
    assert "dependency" in venv.failed["uvicorn"]
    assert venv.failed["gunicorn"] == "no gunicorn wheel in the wheelhouse"
    # Unchanged wheels: nothing to install the next time.
    calls.clear()
    wheelhouse.prepare("3.12", wheels, charts=False, log=lambda line: None)
    assert calls == []


def test_the_reports_supervise_is_the_one_the_bundle_recorded(tmp_path: Path) -> None:
    record = {"commit": "41486af", "dirty": "no", "digest": "abc", "wheel": "w.whl"}
    (tmp_path / wheelhouse.SOURCE_FILE).write_text(json.dumps(record))
    assert wheelhouse.source_state(tmp_path) == record
    (tmp_path / wheelhouse.SOURCE_FILE).unlink()
    (tmp_path / "supervise_server-0.1.0-cp312-cp312-linux_x86_64.whl").write_bytes(b"x")
    assert "unknown" in wheelhouse.source_state(tmp_path)["commit"]


def test_a_wheelhouse_venv_never_replaces_the_pypi_one() -> None:
    assert wheelhouse.venv_path("3.12") != Venv(BENCH_DIR / ".venvs" / "py3.12", "3.12").path
