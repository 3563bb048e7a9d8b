"""Run the plan: for each point, every applicable server in turn on the same machine.

Each server gets: a start on its cores (one core, or every core in unpinned tables), one
verified request, idle memory, a warm-up, then a load per concurrency level with peak
memory sampled, and a second verification after the load. The best level counts, but
only among error-free levels; a server whose every level had errors is marked, never
ranked as if clean.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import loadgen, procs, verify
from bench.cpus import Split
from bench.peers import BENCH_DIR, Venv, server_env
from bench.plan import Point, applicable, server_options
from bench.servers import HOST, Server, Unsupported


@dataclass
class Context:
    venvs: dict[str, Venv]  # python version -> venv
    servers: dict[str, list[Server]]  # python version -> servers available there
    levels: tuple[int, ...]
    duration: float
    warmup: float
    server_cpu: int
    load_cpu: int
    logs: Path
    log: object  # callable(str)
    start_timeout: float = 60.0
    file_path: str = ""
    # Every core the harness may use: where unpinned servers and load generators run.
    all_cpus: tuple[int, ...] = ()
    # The deploy table's server and load-generator cores when they are kept apart
    # (--server-cpus / --load-cpus, or the many-core part's halves).
    split: Split | None = None
    results: dict[str, dict] = field(default_factory=dict)

    def placement(self, point: Point) -> tuple[str, str]:
        """taskset CPU lists for the server and the load generator of this point."""
        if point.options.pinned:
            return str(self.server_cpu), str(self.load_cpu)
        if point.options.split and self.split:
            return procs.cpu_list(self.split.server), procs.cpu_list(self.split.load)
        every = procs.cpu_list(self.all_cpus or range(os.cpu_count() or 1))
        return every, every

    def load_threads(self, point: Point) -> int:
        """wrk's and h2load's threads: one per load core when the load generator has cores
        of its own, else one (what every table ran with before the split existed)."""
        if not point.options.pinned and point.options.split and self.split:
            return self.split.load_threads
        return 1


def _env(venv: Venv, ctx: Context) -> dict[str, str]:
    return server_env(venv, pythonpath=[str(BENCH_DIR)], BENCH_FILE=ctx.file_path)


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])[-600:]


def _is_wrong(problem: str) -> bool:
    """An answer that came and was wrong, as opposed to no answer (yet)."""
    return "expected" in problem or problem.startswith("status")


def _verify(port: int, point: Point, venv: Venv, attempts: int = 3) -> str:
    problem = ""
    for attempt in range(attempts):
        problem = verify.check(HOST, port, point.scenario)
        if not problem:
            return ""
        # A worker still booting refuses or resets; a wrong body will not fix itself.
        if _is_wrong(problem):
            return problem
        time.sleep(0.5 * (attempt + 1))
    return problem


def _base(point: Point, port: int) -> str:
    """The server's address for the load generators: https:// over TLS and HTTP/3 (the
    same port number, TCP and UDP)."""
    return f"{'https' if point.scenario.secure else 'http'}://{HOST}:{port}"


def _entry(point: Point, server: Server, venv: Venv) -> dict:
    return {
        "server": server.name,
        "interface": server.interface,
        "supervise": server.is_supervise,
        "version": server.version or venv.versions.get(server.dist, "?"),
        "note": server.note,
        "status": "pending",
        "reason": "",
        "command": [],
        "memory_idle": None,
        "memory_load": None,
        "runs": [],
    }


def _run_server(point: Point, server: Server, ctx: Context, entry: dict, rnd: int) -> None:
    venv = ctx.venvs[point.python]
    scenario = point.scenario
    probing = bool(scenario.needs) and scenario.needs not in server.features
    port = procs.free_port(udp=scenario.protocol == "h3")
    try:
        cmd = server.command(venv, port, server_options(point))
    except Unsupported as exc:
        entry.update(status="skipped", reason=str(exc))
        return
    entry["command"] = [Path(cmd[0]).name, *cmd[1:]]
    logfile = ctx.logs / f"{point.key.replace('/', '_')}-{server.name}-r{rnd}.log"
    server_cpus, load_cpus = ctx.placement(point)
    threads = ctx.load_threads(point)
    entry["cpus"] = {"server": server_cpus, "load": load_cpus, "load_threads": threads}
    proc = procs.start(cmd, cpus=server_cpus, cwd=BENCH_DIR, env=_env(venv, ctx), log=logfile)
    try:
        if not procs.wait_listening(proc, port, ctx.start_timeout):
            entry.update(status="failed", reason=f"did not start: {_tail(logfile)}")
            return
        problem = _verify(port, point, venv)
        if problem and probing:
            entry.update(status="skipped", reason=f"no {scenario.needs} yet ({problem[:120]})")
            return
        if problem:
            entry.update(status="failed", reason=f"wrong answer before load: {problem}")
            return
        if point.options.workers > 1:
            time.sleep(2.0)  # the other workers finish booting; the first answered already
        idle = procs.tree_memory(proc.pid)
        entry["memory_idle"] = _min_memory(entry["memory_idle"], idle)
        base = _base(point, port)
        # Levels go up, and the warm-up is at the first: a server whose thread pool
        # grows with its connections (Granian's WSGI starts a Python thread per busy
        # connection and keeps an idle one 30 s) would otherwise carry the highest
        # level's threads, and their GIL contention, into every level. Until
        # 2026-11-24 the warm-up was at the highest: Granian's WSGI, one worker
        # pinned, GET 4 B at c=64, 66.5k req/s after a warm-up at c=256 against
        # 97.0k after one at c=64 (medians of 3 alternated rounds).
        levels = sorted(scenario.levels(ctx.levels))
        if ctx.warmup > 0:
            loadgen.run(base, scenario, levels[0], ctx.warmup, load_cpus, threads=threads)
        for level in levels:
            sampler = procs.MemorySampler(proc.pid)
            sampler.start()
            pids = procs.tree_pids(proc.pid)
            cpu_before, since = procs.cpu_seconds(pids), time.monotonic()
            load = loadgen.run(base, scenario, level, ctx.duration, load_cpus, threads=threads)
            cpu_after, wall = procs.cpu_seconds(pids), time.monotonic() - since
            peak = sampler.finish()
            entry["memory_load"] = _max_memory(entry["memory_load"], peak)
            run = load.to_dict()
            # The server's CPU per request says why a row is ahead or behind: a row
            # that costs less CPU but is slower waits on something (a handoff, a lock).
            run["server_cpu_s"] = procs.cpu_used(cpu_before, cpu_after)
            run["server_cpu_wall_s"] = wall
            run["round"] = rnd
            entry["runs"].append(run)
            flag = "" if load.clean else f"  !! {_problems(run)}"
            ctx.log(
                f"    {server.name:<20} c={level:<4} {load.rps:>10.0f} rps  "
                f"p50 {load.latency_p50_ms:6.2f} ms  p99 {load.latency_p99_ms:7.2f} ms  "
                f"rss {peak['rss'] / 2**20:6.1f} MiB  "
                f"client cpu {load.client_cpu_pct:3.0f}%{flag}"
            )
        after = _verify(port, point, venv, attempts=1)
        if _is_wrong(after):
            entry["reason"] = f"wrong answer after load: {after}"
            entry["wrong_after_load"] = True
        elif after:
            # A one-request-at-a-time worker may still be serving the requests wrk left in
            # the listen queue (io100: seconds); slowness is not a wrong answer.
            entry["reason"] = f"no answer right after the load: {after}"
        if proc.poll() is not None:
            entry["reason"] = f"exited during the run: {_tail(logfile)}"
    finally:
        procs.stop(proc)


def _min_memory(old: dict | None, new: dict) -> dict:
    return new if old is None or new["rss"] < old["rss"] else old


def _max_memory(old: dict | None, new: dict) -> dict:
    return new if old is None or new["rss"] > old["rss"] else old


def _problems(run: dict) -> str:
    parts = []
    if run["non2xx"]:
        parts.append(f"{run['non2xx']} non-2xx")
    if run["socket_errors"]:
        parts.append(f"{run['socket_errors']} socket errors")
    if run["problem"]:
        parts.append(run["problem"])
    return "; ".join(parts)


def _clean(run: dict) -> bool:
    return not run["problem"] and not run["non2xx"] and not run["socket_errors"]


def finalize(entry: dict) -> None:
    """Pick the best run: the highest throughput among clean runs, else mark errors."""
    if entry["status"] in ("skipped", "failed") and not entry["runs"]:
        return
    runs = entry["runs"]
    clean = [r for r in runs if _clean(r)]
    pool = clean or runs
    if not pool:
        if entry["status"] == "pending":
            entry.update(status="failed", reason=entry["reason"] or "no run completed")
        return
    best = max(pool, key=lambda r: r["rps"])
    entry["best"] = best
    if entry.get("wrong_after_load"):
        entry["status"] = "errors"
    else:
        entry["status"] = "ok" if clean else "errors"
    if not clean:
        entry["reason"] = entry["reason"] or f"every run had errors: {_problems(best)}"


def run_point(point: Point, ctx: Context, rnd: int) -> None:
    result = ctx.results.setdefault(
        point.key,
        {
            "table": point.table,
            "scenario": point.scenario.name,
            "title": point.scenario.title,
            "protocol": point.scenario.protocol,
            "python": point.python,
            "options": point.options.__dict__,
            "servers": {},
        },
    )
    servers = [s for s in ctx.servers[point.python] if applicable(point, s)]
    ctx.log(f"[{point.key}] round {rnd + 1}: {len(servers)} servers")
    for server in servers:
        entry = result["servers"].setdefault(
            server.name, _entry(point, server, ctx.venvs[point.python])
        )
        if entry["status"] in ("skipped", "failed"):
            continue  # no second chance in later rounds: its figures would not be comparable
        _run_server(point, server, ctx, entry, rnd)
        if entry["status"] in ("skipped", "failed"):
            ctx.log(f"    {server.name:<20} {entry['status']}: {entry['reason'][:200]}")


def noise(point: Point, server: Server, level: int, repeats: int, ctx: Context) -> dict:
    """The same point measured `repeats` times on one server start: the run-to-run spread
    readers need to judge a difference between two servers."""
    venv = ctx.venvs[point.python]
    port = procs.free_port()
    cmd = server.command(venv, port, server_options(point))
    logfile = ctx.logs / f"noise-{server.name}.log"
    server_cpus, load_cpus = ctx.placement(point)
    threads = ctx.load_threads(point)
    proc = procs.start(cmd, cpus=server_cpus, cwd=BENCH_DIR, env=_env(venv, ctx), log=logfile)
    figures: list[float] = []
    try:
        if not procs.wait_listening(proc, port, ctx.start_timeout) or _verify(port, point, venv):
            return {"server": server.name, "problem": f"could not start: {_tail(logfile)}"}
        base = _base(point, port)
        if ctx.warmup > 0:
            loadgen.run(base, point.scenario, level, ctx.warmup, load_cpus, threads=threads)
        for _ in range(repeats):
            load = loadgen.run(
                base, point.scenario, level, ctx.duration, load_cpus, threads=threads
            )
            figures.append(load.rps)
    finally:
        procs.stop(proc)
    median = statistics.median(figures)
    spread = (max(figures) - min(figures)) / median * 100 if median else 0.0
    ctx.log(f"  noise: {server.name} {[round(f) for f in figures]} rps, spread {spread:.1f}%")
    return {
        "server": server.name,
        "scenario": point.scenario.name,
        "connections": level,
        "duration_s": ctx.duration,
        "rps": figures,
        "median": median,
        "spread_pct": spread,
        "stdev_pct": statistics.pstdev(figures) / median * 100 if median else 0.0,
    }
