#!/usr/bin/env python3
"""Benchmark supervise side by side with its peers, in one run, on this machine.

    python benchmarks/run.py --quick        # the subset: under 10 minutes on 2 cores
    python benchmarks/run.py --full         # every scenario and dimension table
    python benchmarks/run.py --smoke        # seconds per point (the quick plan): checks the harness
    python benchmarks/run.py --smoke --tables deploy   # one table alone
    python benchmarks/run.py --part manycore --server-cpus 0-7 --load-cpus 8-15 \
        --wheelhouse bundle/wheels --wrk bundle/bin/wrk   # many cores, no network

See benchmarks/README.md for what it measures and how to read the report.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apps import payload
from bench import cpus, loadgen, machine, peers, plan, report, runner, servers, wheelhouse

BENCH_DIR = peers.BENCH_DIR
RESULTS = BENCH_DIR / "results"
README = BENCH_DIR / "README.md"
LATEST_START = "<!-- latest-report:start -->"
LATEST_END = "<!-- latest-report:end -->"


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="supervise vs its peers, side by side.")
    # --smoke alone smokes the quick plan; otherwise one of these must be chosen.
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--render", type=Path, metavar="RESULTS.json", help="only redraw a report and its charts"
    )
    which.add_argument("--quick", action="store_true", help="the quick subset (< 10 min)")
    which.add_argument("--full", action="store_true", help="the full matrix (hours)")
    which.add_argument(
        "--part",
        choices=sorted(plan.PARTS),
        help="one part of the published comparison (--list alone lists them)",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="2 s per point, one level, results under .work/: checks the harness",
    )
    p.add_argument("--duration", type=float, help="seconds of load per level")
    p.add_argument("--warmup", type=float, help="seconds of warm-up load per server")
    p.add_argument("--levels", type=_csv, help="concurrency levels, e.g. 64,128,256")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the whole plan this many times, interleaved; best run kept",
    )
    p.add_argument("--scenarios", type=_csv, help="only these scenarios (names from --list)")
    p.add_argument("--servers", type=_csv, help="only servers matching these globs")
    p.add_argument("--tables", type=_csv, help=f"only these tables: {', '.join(plan.TABLES)}")
    p.add_argument(
        "--pythons", type=_csv, default=list(plan.PYTHONS), help="versions for the Python table"
    )
    p.add_argument(
        "--python",
        default=f"{sys.version_info.major}.{sys.version_info.minor}",
        help="Python version the servers run on outside the Python table",
    )
    p.add_argument(
        "--server-cpu",
        type=int,
        help="the pinned tables' server core (default 0, or the first of --server-cpus)",
    )
    p.add_argument(
        "--load-cpu",
        type=int,
        help="the pinned tables' client core, and the harness's (default 1, or the first of "
        "--load-cpus)",
    )
    p.add_argument(
        "--server-cpus",
        metavar="LIST",
        help="the deploy table's server cores, a taskset list (0-7): with --load-cpus, the "
        "server's process tree on these and the load generator on those",
    )
    p.add_argument(
        "--load-cpus",
        metavar="LIST",
        help="the deploy table's load-generator cores (8-15); wrk and h2load get one thread each",
    )
    p.add_argument(
        "--deploy-workers",
        type=int,
        help="workers per server in the deploy table (default: the cores this run may use, "
        "or the --server-cpus count)",
    )
    p.add_argument(
        "--wheelhouse",
        type=Path,
        metavar="DIR",
        help="install supervise and the peers from these wheels only (pip --no-index), into "
        ".venvs/pyX.Y-wheelhouse: a machine with no network",
    )
    p.add_argument(
        "--wrk", type=Path, metavar="PATH", help="the wrk binary to use (default: wrk on PATH)"
    )
    p.add_argument("--out", type=Path, help="directory for results (default benchmarks/results)")
    p.add_argument(
        "--here",
        action="store_true",
        help="run the servers from this interpreter's environment as it is (supervise "
        "installed there, no peers): checks the harness without building venvs",
    )
    p.add_argument("--upgrade-peers", action="store_true", help="pip install --upgrade the peers")
    p.add_argument("--no-charts", action="store_true")
    p.add_argument("--list", action="store_true", help="print the plan and its duration, then exit")
    args = p.parse_args(argv)
    if not (args.render or args.quick or args.full or args.smoke or args.part or args.list):
        p.error("one of --quick, --full, --part, --smoke or --render is required")
    if args.deploy_workers is not None and args.deploy_workers < 1:
        p.error("--deploy-workers must be at least 1")
    if (args.server_cpus is None) != (args.load_cpus is None):
        p.error("--server-cpus and --load-cpus go together")
    for option, text in (("--server-cpus", args.server_cpus), ("--load-cpus", args.load_cpus)):
        if text is not None:
            try:
                cpus.parse_cpu_list(text)
            except ValueError as exc:
                p.error(f"{option}: {exc}")
    if args.here and args.wheelhouse:
        p.error("--here runs this interpreter's supervise; --wheelhouse builds a venv: not both")
    return args


def core_split(args: argparse.Namespace, allowed: tuple[int, ...]) -> cpus.Split | None:
    """The deploy table's server and load-generator cores: the ones given, else halves of
    the machine for a part that splits (manycore), else none (both on every core)."""
    if args.server_cpus is not None:
        return cpus.split(args.server_cpus, args.load_cpus, allowed)
    if args.part and plan.PARTS[args.part].split:
        return cpus.halves(allowed)
    return None


class Log:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("a")

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        self.file.write(line + "\n")
        self.file.flush()


def _profile(args: argparse.Namespace) -> plan.Profile:
    if args.part:
        base = plan.part_profile(plan.PARTS[args.part])
    else:
        base = plan.FULL if args.full else plan.QUICK
    if args.smoke:
        base = plan.Profile(
            base.scenarios, (64,), 2.0, 0.5, base.tables, base.quick_servers_only, 2
        )
    return plan.Profile(
        scenarios=tuple(args.scenarios or base.scenarios),
        levels=tuple(int(x) for x in args.levels) if args.levels else base.levels,
        duration=args.duration or base.duration,
        warmup=base.warmup if args.warmup is None else args.warmup,
        tables=tuple(args.tables or base.tables),
        quick_servers_only=base.quick_servers_only,
        noise_repeats=base.noise_repeats,
    )


def _servers_for(venv: peers.Venv, args, profile, log) -> tuple[list, dict]:
    available, missing = servers.available_peers(venv)
    available += servers.supervise_servers(venv, log)
    chosen = plan.select_servers(available, args.servers or [], profile.quick_servers_only)
    if args.part:
        chosen = plan.part_servers(plan.PARTS[args.part], chosen)
    return chosen, missing


def part_plan(name: str, python: str) -> tuple[list[plan.Point], dict]:
    """A part's points and the servers it would run, from the suite's own tables."""
    part = plan.PARTS[name]
    profile = plan.part_profile(part)
    rows = [s for s in plan.part_servers(part, servers.every_row()) if not s.explicit]
    pythons = list(part.pythons) or [python]
    points = plan.build(
        profile, list(profile.scenarios), list(part.tables), pythons, python, split=part.split
    )
    return points, {py: rows for py in pythons}


def list_parts(python: str) -> None:
    """Every part with what it measures and how long it takes, no venv needed."""
    print("The published comparison, one command per part (python benchmarks/run.py --part NAME):")
    total = 0.0
    for name, part in plan.PARTS.items():
        points, rows = part_plan(name, python)
        minutes = plan.estimate_s(points, rows, plan.part_profile(part)) / 60
        total += minutes
        print(f"  {name:<13} ~{minutes:3.0f} min  {part.what} ({', '.join(part.tables)})")
    print(f"  all parts     ~{total:3.0f} min (each under {plan.PART_LIMIT_MIN})")


def _stem(out: Path, host: str) -> str:
    stem = f"{datetime.date.today().isoformat()}-{host}"
    if (out / f"{stem}.json").exists():
        stem += datetime.datetime.now().strftime("-%H%M%S")
    return stem


def _noise_server(points: list[dict], candidates: dict) -> tuple[str, str, int] | None:
    """The fastest supervise worker on GET 4 B (else the fastest server): its spread is
    the one that matters when reading supervise's ratios. From the pinned main table when
    it ran, else from the deploy table. Returns (table, server, connections)."""
    for table in ("main", "deploy"):
        for point in points:
            if point["table"] == table and point["scenario"] == "get-4b":
                ranked = [e for e in point["servers"].values() if e.get("best")]
                ranked.sort(
                    key=lambda e: (not e["supervise"], e["status"] != "ok", -e["best"]["rps"])
                )
                for entry in ranked:
                    if entry["server"] in candidates:
                        return table, entry["server"], entry["best"]["connections"]
    return None


def _update_readme(report_path: Path) -> None:
    if not README.exists():
        return
    text = README.read_text()
    if LATEST_START not in text or LATEST_END not in text:
        return
    rel = report_path.relative_to(BENCH_DIR).as_posix()
    head, rest = text.split(LATEST_START, 1)
    _, tail = rest.split(LATEST_END, 1)
    line = f"\nLatest report: [{report_path.stem}]({rel})\n"
    README.write_text(head + LATEST_START + line + LATEST_END + tail)


def render(results_path: Path, python: str) -> Path:
    """Report and charts from a results JSON: written next to it, named after it."""
    doc = json.loads(results_path.read_text())
    stem = results_path.stem
    report_path = results_path.with_suffix(".md")
    report_path.write_text(report.render(doc, stem))
    charts = subprocess.run(
        [
            python,
            str(BENCH_DIR / "bench" / "charts.py"),
            str(results_path),
            str(results_path.parent / stem),
        ],
        capture_output=True,
        text=True,
    )
    if charts.returncode != 0:
        print(f"charts failed: {charts.stderr.strip()[-500:]}")
    return report_path


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.list and not (args.quick or args.full or args.part or args.smoke):
        list_parts(args.python)
        return 0
    if args.render:
        # Whichever venv has matplotlib: the PyPI one, else a wheelhouse's.
        candidates = [peers.VENVS_DIR / f"py{args.python}", wheelhouse.venv_path(args.python)]
        found = [c / "bin" / "python" for c in candidates if (c / "bin" / "python").exists()]
        print(f"report: {render(args.render, str(found[0]) if found else sys.executable)}")
        return 0
    if args.wrk:
        loadgen.WRK = str(args.wrk.resolve())
    profile = _profile(args)
    unknown = [s for s in profile.scenarios if s not in plan.BY_NAME]
    if unknown:
        print(f"unknown scenarios: {', '.join(unknown)}; known: {', '.join(plan.BY_NAME)}")
        return 2
    protocols = {plan.BY_NAME[s].protocol for s in profile.scenarios} | {"h1"}
    if any(plan.BY_NAME[s].secure for s in profile.scenarios):
        protocols.add("tls")
    missing_tools = loadgen.missing_tools(protocols)
    if missing_tools:
        for tool, hint in missing_tools.items():
            print(f"missing {tool}: install it with `{hint}`")
        return 2
    host = machine.describe()["host"]
    out = args.out or (BENCH_DIR / ".work" / "smoke" if args.smoke else RESULTS)
    out.mkdir(parents=True, exist_ok=True)
    stem = _stem(out, host)
    work = BENCH_DIR / ".work"
    log = Log(work / "logs" / stem / "run.log")
    # The cores this run may use, read before the harness pins itself: the unpinned
    # tables' servers and load generators run on all of them.
    all_cpus = tuple(sorted(os.sched_getaffinity(0)))
    try:
        split = core_split(args, all_cpus)
    except ValueError as exc:
        print(f"--server-cpus/--load-cpus: {exc}")
        return 2
    # With a split, the pinned tables and the harness default to its first cores, so the
    # harness never sits on one of the deploy table's server cores.
    if args.server_cpu is None:
        args.server_cpu = split.server[0] if split else 0
    if args.load_cpu is None:
        args.load_cpu = split.load[0] if split else 1
    deploy_workers = args.deploy_workers or (len(split.server) if split else len(all_cpus))
    # The harness shares the load core: it must never take time from the server's core.
    os.sched_setaffinity(0, {args.load_cpu})
    if split:
        log(
            f"deploy table: server on cores {cpus.compact(split.server)}, load generator on "
            f"{cpus.compact(split.load)} (wrk -t{split.load_threads}), {deploy_workers} workers"
        )

    if args.part and plan.PARTS[args.part].pythons:
        args.pythons = list(plan.PARTS[args.part].pythons)
    pythons = [args.python]
    if "python" in profile.tables:
        pythons += [v for v in args.pythons if v != args.python]
    venvs, available, missing = {}, {}, {}
    if args.here:
        here = peers.current()
        args.python = here.python_version
        pythons = [here.python_version]
        args.pythons = pythons
    for version in pythons:
        if args.here:
            venvs[version] = here
            available[version], missing[version] = _servers_for(here, args, profile, log)
            continue
        try:
            if args.wheelhouse:
                venv = wheelhouse.prepare(
                    version, args.wheelhouse, charts=version == args.python, log=log
                )
            else:
                venv = peers.prepare(
                    version, charts=version == args.python, upgrade=args.upgrade_peers, log=log
                )
        except (RuntimeError, FileNotFoundError, subprocess.CalledProcessError) as exc:
            if version == args.python:
                log(f"cannot prepare the Python {version} venv: {exc}")
                return 1
            log(f"skipping Python {version}: {exc}")
            continue
        venvs[version] = venv
        available[version], missing[version] = _servers_for(venv, args, profile, log)
    log("servers: " + ", ".join(s.name for s in available[args.python]))
    pythons = [v for v in args.pythons if v in venvs] if "python" in profile.tables else []
    points = plan.build(
        profile,
        list(profile.scenarios),
        list(profile.tables),
        pythons,
        args.python,
        cores=deploy_workers,
        split=split is not None,
    )
    payload.ensure_static()  # the folder the static scenarios' servers serve
    ctx = runner.Context(
        venvs=venvs,
        servers=available,
        levels=profile.levels,
        duration=profile.duration,
        warmup=profile.warmup,
        server_cpu=args.server_cpu,
        load_cpu=args.load_cpu,
        logs=work / "logs" / stem,
        log=log,
        file_path=payload.ensure_file(),
        all_cpus=all_cpus,
        split=split,
    )
    eta = plan.estimate_s(points, available, profile, rounds=args.rounds)
    log(f"{len(points)} points, about {eta / 60:.0f} min")
    if args.list:
        for point in points:
            names = [s.name for s in available[point.python] if plan.applicable(point, s)]
            print(f"  {point.key}: {', '.join(names)}")
        return 0

    # Read now, when the venvs hold these sources: edits or commits made while the
    # run goes on must not be credited to it.
    source = wheelhouse.source_state(args.wheelhouse) if args.wheelhouse else peers.source_state()
    started = time.monotonic()
    interrupted = False
    try:
        for rnd in range(args.rounds):
            for point in points:
                runner.run_point(point, ctx, rnd)
    except KeyboardInterrupt:
        # Keep what was measured: hours of a full run should not vanish with one Ctrl-C.
        log("interrupted: writing the results measured so far")
        interrupted = True
    for result in ctx.results.values():
        for entry in result["servers"].values():
            runner.finalize(entry)
    point_docs = list(ctx.results.values())
    noise = None
    chosen = _noise_server(point_docs, {s.name: s for s in available[args.python]})
    if chosen and profile.noise_repeats > 1 and not interrupted:
        table, name, level = chosen
        by_name = {s.name: s for s in available[args.python]}
        base = next(p for p in points if p.table == table and p.scenario.name == "get-4b")
        noise = runner.noise(base, by_name[name], level, profile.noise_repeats, ctx)
        noise["table"] = table

    doc = {
        "meta": {
            "date": datetime.date.today().isoformat(),
            "finished": datetime.datetime.now().isoformat(timespec="seconds"),
            "elapsed_s": round(time.monotonic() - started),
            "profile": f"part {args.part}" if args.part else "full" if args.full else "quick",
            "smoke": args.smoke,
            "interrupted": interrupted,
            "command": "python benchmarks/run.py " + shlex.join(argv),
            "levels": list(profile.levels),
            "duration": profile.duration,
            "warmup": profile.warmup,
            "warmup_at": "lowest",  # runs before 2026-11-24 20:00 warmed up at the highest
            "rounds": args.rounds,
            "server_cpu": args.server_cpu,
            "load_cpu": args.load_cpu,
            "all_cpus": list(all_cpus),
            "deploy_workers": deploy_workers,
            # The deploy table's two core sets, when it had them (None: every core).
            "deploy_split": split.describe() if split else None,
            "deploy_load_threads": split.load_threads if split else 1,
            "wheelhouse": str(args.wheelhouse) if args.wheelhouse else None,
            "threads_per_gthread": servers.THREADS,
            # Servers the deploy and workers tables leave out: they run one process only.
            "single_process": sorted(s.name for s in available[args.python] if not s.multi_worker),
            "wrk_timeout": loadgen.WRK_TIMEOUT,
            "h2_streams": loadgen.H2_STREAMS,
            "h3_streams": loadgen.H3_STREAMS,
        },
        "machine": machine.describe(),
        "tools": loadgen.tool_versions(),
        "supervise_source": source,
        "versions": {v: peers.reported_versions(venv) for v, venv in venvs.items()},
        "packages": {v: venv.versions for v, venv in venvs.items()},
        "missing": missing,
        "noise": noise,
        "points": point_docs,
    }
    results_path = out / f"{stem}.json"
    results_path.write_text(json.dumps(doc, indent=1))
    report_path = out / f"{stem}.md"
    if args.no_charts:
        report_path.write_text(report.render(doc, stem))
    else:
        render(results_path, venvs[args.python].python)
    if out.resolve() == RESULTS.resolve() and not (args.smoke or interrupted):
        _update_readme(report_path)
    log(f"results: {results_path}")
    log(f"report:  {report_path}")
    log(f"took {(time.monotonic() - started) / 60:.1f} min")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
