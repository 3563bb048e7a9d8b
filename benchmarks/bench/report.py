"""The markdown report: Granian-style tables (total requests, RPS, latency) plus memory,
and for every scenario how supervise compares with the best peer. The sections live in
report_cells.py (tables and ratios), report_deploy.py and report_memory.py."""

from __future__ import annotations

from bench.plan import TABLES
from bench.report_cells import (
    h3_versus_h2,
    legend,
    noise_spread,
    num,
    pivot,
    ratios,
    scenario_table,
    summary_table,
    variant,
)
from bench.report_deploy import (
    deploy_section,
    deploy_workers,
    split_of,
    split_sentence,
    versus_pinned,
)
from bench.report_memory import memory_table, one_worker_get, scaling_section

__all__ = ["ratios", "render", "versus_pinned"]


def _cores(meta: dict) -> str:
    cpus = meta.get("all_cpus")
    return ",".join(map(str, cpus)) if cpus else "every core"


def _machine(doc: dict) -> list[str]:
    m = doc["machine"]
    meta = doc["meta"]
    tools = ", ".join(f"{k}: {v}" for k, v in doc["tools"].items())
    pythons = ", ".join(sorted(doc["versions"]))
    lines = [
        f"- Host: `{m['host']}`, {m['cores']} cores, {m['cpu']}, {m['memory_gib']} GiB, "
        f"kernel {m['kernel']}, virtualisation: {m['virtualisation']}, governor: {m['governor']}",
        f"- Pinning (`taskset`), pinned tables: every server's whole process tree on core "
        f"{meta['server_cpu']}; the load generator (and this harness) on core {meta['load_cpu']}",
    ]
    workers = deploy_workers(doc)
    if workers and split_of(meta):
        lines.append(
            f"- Deploy table: {split_sentence(meta, m['cores'], workers)}; the harness on "
            f"core {meta['load_cpu']}"
        )
    elif workers:
        lines.append(
            f"- Deploy table: {workers} workers per server; server and load generator both "
            f"free on cores {_cores(meta)} (the scheduler places them; the harness stays on "
            f"core {meta['load_cpu']})"
        )
    threads = meta.get("deploy_load_threads") or 1
    split_threads = f" ({threads} in the deploy table)" if split_of(meta) and threads > 1 else ""
    lines += [
        f"- Load generators: {tools}; wsload (in this suite, Go) for WebSocket. "
        f"wrk: 1 thread{split_threads}, `--timeout {meta['wrk_timeout']}`; h2load: 1 "
        f"thread{split_threads}, {meta['h2_streams']} streams per connection (connections = "
        "level / streams)",
    ]
    protocols = {p["protocol"] for p in doc["points"]}
    if "h3" in protocols:
        lines.append(
            "- HTTP/3: h3load (in this suite, Go, quic-go's client), "
            f"{meta.get('h3_streams', meta['h2_streams'])} streams per QUIC connection "
            "(connections = level / streams), 4 s request timeout; it counts response "
            "bodies only. HTTP/3 and HTTP/2 over TLS: the servers use a self-signed P-256 "
            "certificate made for the run, which the clients do not verify"
        )
    lines += [
        f"- Python for the servers: {pythons} (suite venvs under `benchmarks/.venvs/`); "
        f"harness on {m['harness_python']}",
        f"- Each point: warm-up {meta['warmup']:g} s at the "
        f"{meta.get('warmup_at', 'highest')} level, then "
        f"{meta['duration']:g} s at each of "
        f"c = {', '.join(map(str, meta['levels']))}, {meta['rounds']} round(s); best clean "
        "level kept",
    ]
    return lines


def _which_tables(doc: dict) -> list[str]:
    """Two ways of running that answer different questions; every section says which."""
    meta = doc["meta"]
    tables = {p["table"] for p in doc["points"]}
    pinned = sorted(tables - {"deploy"})
    lines = []
    if pinned:
        lines.append(
            "- **Pinned, one worker: per-core cost** (the main table"
            + (" and the dimension tables" if set(pinned) - {"main"} else "")
            + f"). Each server runs 1 worker process with its whole process tree pinned to "
            f"core {meta['server_cpu']}, and the load generator has core {meta['load_cpu']} "
            "to itself: what one core of server buys, comparable across servers, but not "
            "what a deployment gets."
        )
    workers = deploy_workers(doc)
    if workers and split_of(meta):
        where = split_sentence(meta, doc["machine"]["cores"], workers)
        lines.append(
            f"- **Deploy, server and load generator on cores of their own**: {where}. The "
            "load generator never takes a server core: what a server does with that many "
            "cores when the client is not in its way."
        )
    elif workers:
        lines.append(
            f"- **Deploy: workers = cores ({workers}), unpinned: what users get**. Each "
            f"server runs {workers} workers as users deploy it, and neither the server nor "
            f"the load generator is pinned (cores {_cores(meta)}). The load generator (wrk, "
            "1 thread) then competes with the server for the same cores: on 2 cores it can "
            "take one of them, so these figures are not the pinned figure times the "
            "workers, and the scheduler's placement adds noise of its own."
        )
    return lines


def _noise(doc: dict) -> list[str]:
    n = doc.get("noise")
    if not n:
        return ["No repeated point was measured in this run."]
    if "problem" in n:
        return [f"The repeated point could not be measured: {n['problem']}"]
    figures = ", ".join(num(f) for f in n["rps"])
    deploy = "server and load on their own cores" if split_of(doc["meta"]) else "unpinned"
    where = {
        "main": " (pinned, 1 worker)",
        "deploy": f" (deploy table: workers = cores, {deploy})",
    }.get(n.get("table", "main"), "")
    return [
        f"`{n['scenario']}`{where} on {n['server']} at c={n['connections']}, "
        f"{len(n['rps'])} runs of "
        f"{n['duration_s']:g} s on one server start: {figures} RPS. Spread (max - min) / median "
        f"= **{n['spread_pct']:.1f}%**, standard deviation {n['stdev_pct']:.1f}% of the median. "
        "Differences smaller than the spread are noise."
    ]


def _commands(points: list[dict], table: str) -> list[str]:
    out, seen = [], set()
    for point in points:
        if point["table"] != table:
            continue
        for entry in point["servers"].values():
            if entry["command"] and entry["server"] not in seen:
                seen.add(entry["server"])
                note = f" ({entry['note']})" if entry.get("note") else ""
                out.append(f"- {entry['server']}{note}: `{' '.join(entry['command'])}`")
    return out


def render(doc: dict, chart_dir: str) -> str:
    meta = doc["meta"]
    points = doc["points"]
    main = [p for p in points if p["table"] == "main"]
    deploy = [p for p in points if p["table"] == "deploy"]
    out = [f"# supervise benchmarks — {meta['date']}, {doc['machine']['host']}", ""]
    if meta.get("smoke"):
        out += [
            "> **Smoke run**: seconds per point, for checking the harness only. "
            "Do not quote these figures.",
            "",
        ]
    if meta.get("interrupted"):
        out += ["> **Interrupted run**: some points are missing.", ""]
    src = doc.get("supervise_source") or {}
    out += [
        f"Command: `{meta['command']}` (profile: {meta['profile']}).",
        "",
        f"supervise: commit `{src.get('commit', '?')[:12]}`, local edits: "
        f"{src.get('dirty', '?')}, source digest `{src.get('digest', '?')}`.",
        "",
        "## Which table is which",
        "",
        *_which_tables(doc),
        "",
        "## Machine",
        "",
        *_machine(doc),
        "",
        "## Noise",
        "",
        *_noise(doc),
        "",
    ]
    if main:
        out += [
            "## supervise against the best peer: pinned, one worker (per-core cost)",
            "",
            legend(),
            "",
            *summary_table(main, noise_spread(doc, "main")),
            "",
        ]
    versus_h2 = h3_versus_h2(main)
    if versus_h2:
        out += [
            "## HTTP/3 against the same server's HTTP/2 over TLS (pinned, one worker)",
            "",
            "The same request, the same certificate and the same load (connections = level "
            "/ streams): > 1 means the server answers faster over HTTP/3. ⚠: one of the "
            "two figures had errors.",
            "",
            *versus_h2,
            "",
        ]
    memory = [p for p in main if p["scenario"] == "get-4b"]
    if memory:
        out += [
            "## Memory (pinned, one worker)",
            "",
            "GET 4 B run: RSS summed over the process tree (what `ps` "
            "shows); PSS splits shared pages between processes, so forked workers are not "
            "counted twice. Peak under load, sampled every 0.25 s.",
            "",
        ]
        out += [*memory_table(memory[0]), ""]
    for point in main:
        out += [f"## {point['title']} (`{point['scenario']}`): pinned, 1 worker", ""]
        out += [f"![{point['scenario']}]({chart_dir}/{point['scenario']}.png)", ""]
        out += [*scenario_table(point), ""]
    if deploy:
        out += deploy_section(
            deploy,
            main,
            chart_dir,
            single=meta.get("single_process", ()),
            spread=noise_spread(doc, "deploy"),
            meta=meta,
            machine_cores=doc["machine"].get("cores"),
        )
    out += scaling_section([p for p in points if p["table"] == "memory"], chart_dir)
    for table, title in TABLES.items():
        if table in ("main", "deploy", "memory"):
            continue
        group = [p for p in points if p["table"] == table]
        if not group:
            continue
        one_worker = one_worker_get(points)
        summary = group
        if table == "workers" and one_worker:
            # The 1-worker column comes from the main table's run of the same scenario.
            summary = [{**one_worker[0], "table": "workers"}, *group]
        out += [f"## Dimension (pinned): {title}", ""]
        if table == "workers":
            out += [
                "The machine has 2 cores: both workers share the one server core, so this "
                "table shows the cost of a second process rather than a second core. The "
                "1-worker column is the GET 4 B run of the main table (or of the memory "
                "table's 1-worker point when the main table did not run).",
                "",
            ]
        if table == "threads":
            out += [
                "One worker process pinned to the server core, whatever its thread count: "
                "ST runs one single-threaded tokio runtime per thread (each accepting), MT "
                "one work-stealing runtime with that many threads. The app runs on the "
                "worker's one Python thread either way.",
                "",
            ]
        for scenario in dict.fromkeys(p["scenario"] for p in summary):
            part = [p for p in summary if p["scenario"] == scenario]
            chart = f"dim-{table}-{scenario}.png"
            out += [f"### {part[0]['title']} (`{scenario}`)", ""]
            out += [f"![{table} {scenario}]({chart_dir}/{chart})", "", "RPS:", ""]
            out += [*pivot(part), ""]
            for point in part:
                if point in group:
                    out += [f"#### {variant(point)}", "", *scenario_table(point), ""]
    out += ["## Versions", ""]
    for py, versions in sorted(doc["versions"].items()):
        listed = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
        out.append(f"- Python {py}: {listed}")
    missing = {py: m for py, m in doc.get("missing", {}).items() if m}
    for py, servers in sorted(missing.items()):
        for name, why in servers.items():
            out.append(f"- Not run on Python {py}: {name} ({why})")
    out += ["", "## Command lines", ""]
    pinned_cmds = _commands(points, "main")
    if pinned_cmds:
        out += ["Pinned, one worker (main table):", "", *pinned_cmds, ""]
    deploy_cmds = _commands(points, "deploy")
    if deploy_cmds:
        how = "server and load on their own cores" if split_of(meta) else "unpinned"
        out += [f"Deploy table (workers = cores, {how}):", "", *deploy_cmds, ""]
    threads_cmds = [c for p in points if p["table"] == "threads" for c in _commands([p], "threads")]
    if threads_cmds:
        out += ["Runtime mode and threads table:", "", *threads_cmds, ""]
    out += [
        "Ports vary per run; servers ran from `benchmarks/` with the apps in `benchmarks/apps/`.",
        "",
    ]
    return "\n".join(out)
