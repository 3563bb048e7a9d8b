"""The markdown report: Granian-style tables (total requests, RPS, latency) plus memory,
and for every scenario how supervise compares with the best peer."""

from __future__ import annotations

from collections.abc import Iterable

from bench.plan import TABLES

MIB = 2**20
# A load generator using this much of its core was probably the bottleneck.
CLIENT_BOUND_PCT = 90.0


def _num(value: float) -> str:
    return f"{value:,.0f}"


def _mib(memory: dict | None, key: str = "rss") -> str:
    return f"{memory[key] / MIB:.1f}" if memory else "—"


def _errors(entry: dict) -> str:
    best = entry.get("best")
    if not best:
        return "—"
    parts = []
    if best["non2xx"]:
        parts.append(f"{best['non2xx']:,} non-2xx")
    if best["socket_errors"]:
        parts.append(f"{best['socket_errors']:,} socket")
    if best["problem"]:
        parts.append(best["problem"][:80])
    others = [r for r in entry["runs"] if r is not best and (r["non2xx"] or r["socket_errors"])]
    if others and not parts:
        levels = ", ".join(str(r["connections"]) for r in others)
        return f"0 (errors at c={levels})"
    if entry.get("wrong_after_load"):
        parts.append("wrong answer after load")
    return ", ".join(parts) if parts else "0"


def _ranked(point: dict) -> list[dict]:
    entries = [e for e in point["servers"].values() if e.get("best")]
    # Clean figures first: a fast run with errors must not top the table.
    return sorted(entries, key=lambda e: (e["status"] != "ok", -e["best"]["rps"]))


def _name(entry: dict) -> str:
    name = f"**{entry['server']}**" if entry["supervise"] else entry["server"]
    return name + (" ⚠" if entry["status"] in ("errors", "failed") else "")


def _table(point: dict) -> list[str]:
    unit = "msg/s" if point["protocol"] == "ws" else "RPS"
    total = "Total messages" if point["protocol"] == "ws" else "Total requests"
    lines = [
        f"| Server | Version | {total} | {unit} | vs best peer, same interface "
        "| Avg latency | Max latency | RSS idle (MiB) | RSS load (MiB) | Errors | Best at |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|---|--:|",
    ]
    for entry in _ranked(point):
        best = entry["best"]
        bound = " †" if best.get("client_cpu_pct", 0) >= CLIENT_BOUND_PCT else ""
        lines.append(
            f"| {_name(entry)} | {entry['version']} | {_num(best['requests'])} "
            f"| {_num(best['rps'])}{bound} | {_versus_best_peer(point, entry)} "
            f"| {best['latency_avg_ms']:.2f} ms "
            f"| {best['latency_max_ms']:.2f} ms | {_mib(entry['memory_idle'])} "
            f"| {_mib(entry['memory_load'])} | {_errors(entry)} | c={best['connections']} |"
        )
    for entry in point["servers"].values():
        if not entry.get("best"):
            lines.append(
                f"| {_name(entry)} | {entry['version']} | — | — | — | — | — | — | — "
                f"| {entry['status']}: {entry['reason'][:120]} | — |"
            )
    return lines


def _versus_best_peer(point: dict, entry: dict) -> str:
    """This row against the fastest clean peer (not supervise) of its interface."""
    peers = [
        e
        for e in point["servers"].values()
        if e.get("best")
        and e["status"] == "ok"
        and not e["supervise"]
        and e["interface"] == entry["interface"]
    ]
    if not peers:
        return "—"
    top = max(peers, key=lambda e: e["best"]["rps"])
    return f"{entry['best']['rps'] / top['best']['rps']:.2f}x"


def ratios(point: dict) -> list[dict]:
    """supervise worker vs the best clean peer of its interface, the best of all, and
    Granian on the same interface (the peer the project's targets name)."""
    clean = [e for e in point["servers"].values() if e.get("best") and e["status"] == "ok"]
    peers = [e for e in clean if not e["supervise"]]
    out = []
    for sup in (e for e in point["servers"].values() if e["supervise"] and e.get("best")):
        same = [p for p in peers if p["interface"] == sup["interface"]]
        granian = [p for p in same if p["server"] == f"granian-{sup['interface']}"]
        row = {"server": sup["server"], "rps": sup["best"]["rps"], "clean": sup["status"] == "ok"}
        for key, pool in (("interface", same), ("overall", peers), ("granian", granian)):
            if pool:
                top = max(pool, key=lambda p: p["best"]["rps"])
                row[key] = (
                    top["server"],
                    top["best"]["rps"],
                    sup["best"]["rps"] / top["best"]["rps"],
                )
        out.append(row)
    return out


def _ratio_cell(row: dict, key: str, spread: float | None = None) -> str:
    """`spread`: the run's measured noise (percent) for this table, when it has one; a
    ratio within it is a tie, not a win or a loss."""
    if key not in row:
        return "—"
    name, rps, ratio = row[key]
    mark = "" if row["clean"] else " ⚠"
    tie = " **tie**" if spread is not None and abs(ratio - 1) * 100 <= spread else ""
    return f"{ratio:.2f}x{tie} {name} ({_num(rps)}){mark}"


def noise_spread(doc: dict, table: str) -> float | None:
    """The spread measured on this table's repeated point, if this run measured one."""
    noise = doc.get("noise") or {}
    if "spread_pct" not in noise or noise.get("table", "main") != table:
        return None
    return noise["spread_pct"]


def _summary(points: list[dict], spread: float | None = None) -> list[str]:
    lines = [
        "| Scenario | supervise worker | RPS | vs best peer, same interface "
        "| vs best peer, any interface |",
        "|---|---|--:|---|---|",
    ]
    for point in points:
        for row in ratios(point):
            lines.append(
                f"| {point['scenario']} | {row['server']} | {_num(row['rps'])} "
                f"| {_ratio_cell(row, 'interface', spread)} "
                f"| {_ratio_cell(row, 'overall', spread)} |"
            )
    if len(lines) == 2:
        lines.append("| — | no supervise worker class served any scenario | | | |")
    return lines


def versus_pinned(point: dict, main: list[dict]) -> dict[str, tuple[float, float]]:
    """Per server: (pinned one-worker RPS, unpinned / pinned) for a deploy-table point,
    from the main table's run of the same scenario in the same report. Clean runs only."""
    same = [
        m for m in main if m["scenario"] == point["scenario"] and m["python"] == point["python"]
    ]
    if not same:
        return {}
    pinned = same[0]["servers"]
    out = {}
    for name, entry in point["servers"].items():
        base = pinned.get(name)
        if not (entry.get("best") and base and base.get("best")):
            continue
        if entry["status"] != "ok" or base["status"] != "ok" or not base["best"]["rps"]:
            continue
        out[name] = (base["best"]["rps"], entry["best"]["rps"] / base["best"]["rps"])
    return out


def _deploy_summary(points: list[dict], main: list[dict], spread: float | None = None) -> list[str]:
    lines = [
        "| Scenario | supervise worker | RPS | vs Granian, same interface "
        "| vs best peer, same interface | vs itself pinned, 1 worker |",
        "|---|---|--:|---|---|---|",
    ]
    for point in points:
        pinned = versus_pinned(point, main)
        for row in ratios(point):
            if row["server"] in pinned:
                rps, ratio = pinned[row["server"]]
                own = f"{ratio:.2f}x ({_num(rps)})"
            else:
                own = "— (not in the main table of this run)" if not main else "—"
            lines.append(
                f"| {point['scenario']} | {row['server']} | {_num(row['rps'])} "
                f"| {_ratio_cell(row, 'granian', spread)} "
                f"| {_ratio_cell(row, 'interface', spread)} | {own} |"
            )
    if len(lines) == 2:
        lines.append("| — | no supervise worker class served any scenario | | | | |")
    return lines


def _deploy_pivot(points: list[dict], main: list[dict]) -> list[str]:
    """Every server, every deploy scenario, with its ratio to its own pinned run."""
    names: list[str] = []
    for point in points:
        names += [n for n, e in point["servers"].items() if e.get("best") and n not in names]
    pinned = [versus_pinned(p, main) for p in points]
    lines = [
        "| Server | " + " | ".join(f"`{p['scenario']}`" for p in points) + " |",
        "|---|" + "--:|" * len(points),
    ]
    for name in names:
        cells = []
        for point, against in zip(points, pinned, strict=True):
            entry = point["servers"].get(name)
            if not (entry and entry.get("best")):
                cells.append("—")
                continue
            mark = "" if entry["status"] == "ok" else " ⚠"
            ratio = f" ({against[name][1]:.2f}x pinned)" if name in against else ""
            cells.append(f"{_num(entry['best']['rps'])}{mark}{ratio}")
        shown = f"**{name}**" if name.startswith("supervise") else name
        lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    return lines


def _variant(point: dict) -> str:
    opts = point["options"]
    if point["table"] == "python":
        return f"Python {point['python']}"
    if point["table"] == "loops":
        return f"loop: {opts['loop']}"
    if point["table"] == "threads":
        n = opts["runtime_threads"]
        mode = opts.get("runtime_mode")
        threads = f"{n} thread{'s' if n != 1 else ''}"
        return f"{mode.upper()}, {threads}" if mode else f"runtime threads: {n}"
    if point["table"] == "deploy":
        return f"{point['title']}, {opts['workers']} workers unpinned"
    if point["table"] == "workers":
        return f"{opts['workers']} worker{'s' if opts['workers'] > 1 else ''}"
    return point["title"]


def _pivot(points: list[dict]) -> list[str]:
    """One row per server, one column per variant: the dimension at a glance."""
    names: list[str] = []
    for point in points:
        names += [n for n, e in point["servers"].items() if e.get("best") and n not in names]
    lines = [
        "| Server | " + " | ".join(_variant(p) for p in points) + " |",
        "|---|" + "--:|" * len(points),
    ]
    for name in names:
        cells = []
        for point in points:
            entry = point["servers"].get(name)
            if entry and entry.get("best"):
                mark = "" if entry["status"] == "ok" else " ⚠"
                cells.append(f"{_num(entry['best']['rps'])}{mark}")
            else:
                cells.append("—")
        shown = f"**{name}**" if name.startswith("supervise") else name
        lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    return lines


def _memory(point: dict) -> list[str]:
    """Resident memory of each server's whole process tree, idle and at peak under load."""
    lines = [
        "| Server | Processes | RSS idle (MiB) | RSS load (MiB) | PSS idle (MiB) "
        "| PSS load (MiB) |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    entries = [e for e in point["servers"].values() if e.get("memory_load")]
    for entry in sorted(entries, key=lambda e: e["memory_load"]["rss"]):
        idle, load = entry["memory_idle"], entry["memory_load"]
        lines.append(
            f"| {_name(entry)} | {idle['processes']} | {_mib(idle)} | {_mib(load)} "
            f"| {_mib(idle, 'pss')} | {_mib(load, 'pss')} |"
        )
    return lines


def _memory_scaling(points: list[dict]) -> list[str]:
    """PSS and RSS per worker count, and what each worker past the first adds: PSS counts
    pages shared between the forked workers once, so its slope is a worker's real cost."""
    counts = [p["options"]["workers"] for p in points]
    by_server: dict[str, dict[int, dict]] = {}
    for point, n in zip(points, counts, strict=True):
        for name, entry in point["servers"].items():
            if entry.get("memory_idle"):
                by_server.setdefault(name, {})[n] = entry
    head = " | ".join(f"{n} w" for n in counts)
    lines = [
        f"| Server | PSS idle (MiB): {head} | PSS load (MiB): {head} | RSS idle (MiB): {head} "
        "| PSS per extra worker, idle / load (MiB) |",
        "|---|" + "--:|" * (3 * len(counts) + 1),
    ]

    def cells(runs: dict[int, dict], kind: str, key: str) -> list[str]:
        return [_mib(runs[n][kind], key) if n in runs else "—" for n in counts]

    def slope(runs: dict[int, dict], kind: str) -> str:
        known = [n for n in counts if n in runs and runs[n][kind]]
        if len(known) < 2:
            return "—"
        first, last = known[0], known[-1]
        extra = (runs[last][kind]["pss"] - runs[first][kind]["pss"]) / (last - first)
        return f"{extra / MIB:.1f}"

    def first_pss(name: str) -> float:
        runs = by_server[name]
        return runs[min(runs)]["memory_idle"]["pss"]

    for name in sorted(by_server, key=first_pss):
        runs = by_server[name]
        entry = next(iter(runs.values()))
        lines.append(
            f"| {_name(entry)} | "
            + " | ".join(
                cells(runs, "memory_idle", "pss")
                + cells(runs, "memory_load", "pss")
                + cells(runs, "memory_idle", "rss")
            )
            + f" | {slope(runs, 'memory_idle')} / {slope(runs, 'memory_load')} |"
        )
    return lines


def _scaling_section(points: list[dict], chart_dir: str) -> list[str]:
    if not points:
        return []
    intro = (
        "GET 4 B with each worker count, the whole process tree on the server core. "
        "Idle: after the first answer (and 2 s for the other workers to boot); load: the "
        "peak under the run, sampled every 0.25 s. The last column is what each worker "
        "past the first adds to the PSS (the pages forked workers share are counted once): "
        "the price of scaling out. Single-process servers have a 1-worker figure only."
    )
    return [
        "## Memory and scaling: 1, 2 and 4 workers (pinned)",
        "",
        intro,
        "",
        f"![memory]({chart_dir}/memory.png)",
        "",
        *_memory_scaling(points),
        "",
    ]


def one_worker_get(points: list[dict]) -> list[dict]:
    """The pinned one-worker GET 4 B point: the main table's, else the memory table's
    (the same run), so the workers table has its 1-worker column in either case."""
    for table in ("main", "memory"):
        for p in points:
            one = p["table"] == table and p["options"]["workers"] == 1
            if one and p["scenario"] == "get-4b":
                return [p]
    return []


def _deploy_workers(doc: dict) -> int | None:
    for point in doc["points"]:
        if point["table"] == "deploy":
            return point["options"]["workers"]
    return None


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
    workers = _deploy_workers(doc)
    if workers:
        lines.append(
            f"- Deploy table: {workers} workers per server; server and load generator both "
            f"free on cores {_cores(meta)} (the scheduler places them; the harness stays on "
            f"core {meta['load_cpu']})"
        )
    lines += [
        f"- Load generators: {tools}; wsload (in this suite, Python + uvloop) for WebSocket. "
        f"wrk: 1 thread, `--timeout {meta['wrk_timeout']}`; h2load: 1 thread, "
        f"{meta['h2_streams']} streams per connection (connections = level / streams)",
        f"- Python for the servers: {pythons} (suite venvs under `benchmarks/.venvs/`); "
        f"harness on {m['harness_python']}",
        f"- Each point: warm-up {meta['warmup']:g} s, then {meta['duration']:g} s at each of "
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
    workers = _deploy_workers(doc)
    if workers:
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
    figures = ", ".join(_num(f) for f in n["rps"])
    where = {
        "main": " (pinned, 1 worker)",
        "deploy": " (deploy table: workers = cores, unpinned)",
    }.get(n.get("table", "main"), "")
    return [
        f"`{n['scenario']}`{where} on {n['server']} at c={n['connections']}, "
        f"{len(n['rps'])} runs of "
        f"{n['duration_s']:g} s on one server start: {figures} RPS. Spread (max - min) / median "
        f"= **{n['spread_pct']:.1f}%**, standard deviation {n['stdev_pct']:.1f}% of the median. "
        "Differences smaller than the spread are noise."
    ]


def _legend() -> str:
    return (
        "Ratio of supervise's best clean throughput to a clean peer's in the same run "
        "(> 1 means supervise is faster). ⚠ marks figures with errors; † in the tables marks "
        f"runs whose load generator used over {CLIENT_BOUND_PCT:.0f}% of a core, where the "
        "figure is a lower bound for the server. **tie**: the ratio is within the noise this "
        "run measured on the same table (section Noise), so neither side wins; a table "
        "without its own noise measure marks no ties."
    )


def _deploy_section(
    deploy: list[dict],
    main: list[dict],
    chart_dir: str,
    *,
    single: Iterable[str] = (),
    spread: float | None = None,
) -> list[str]:
    workers = deploy[0]["options"]["workers"]
    # Say who is left out and why, so an absent peer is not read as a failed one.
    left_out = ", ".join(single)
    not_here = f" Not in this table, single process only: {left_out}." if left_out else ""
    out = [
        f"## Deploy: {workers} workers = cores, unpinned (what users get)",
        "",
        f"Every server that can run several workers, with {workers} of them; server and "
        "load generator unpinned. The client competes with the server for the cores, so "
        "read these figures against each other, not against the pinned tables. gthread "
        f"keeps its threads per worker (see the command lines).{not_here}",
        "",
        "### supervise against Granian and the best peer",
        "",
        _legend() + " The last column divides this table's figure by the same worker's pinned "
        "one-worker figure (main table, same scenario, same run).",
        "",
        *_deploy_summary(deploy, main, spread),
        "",
        "### Every server: RPS, and its ratio to its own pinned one-worker run",
        "",
        *_deploy_pivot(deploy, main),
        "",
    ]
    for point in deploy:
        out += [f"### {point['title']} (`{point['scenario']}`): {workers} workers, unpinned", ""]
        out += [f"![deploy {point['scenario']}]({chart_dir}/deploy-{point['scenario']}.png)", ""]
        out += [*_table(point), ""]
    return out


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
            _legend(),
            "",
            *_summary(main, noise_spread(doc, "main")),
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
        out += [*_memory(memory[0]), ""]
    for point in main:
        out += [f"## {point['title']} (`{point['scenario']}`): pinned, 1 worker", ""]
        out += [f"![{point['scenario']}]({chart_dir}/{point['scenario']}.png)", ""]
        out += [*_table(point), ""]
    if deploy:
        out += _deploy_section(
            deploy,
            main,
            chart_dir,
            single=meta.get("single_process", ()),
            spread=noise_spread(doc, "deploy"),
        )
    out += _scaling_section([p for p in points if p["table"] == "memory"], chart_dir)
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
            out += [*_pivot(part), ""]
            for point in part:
                if point in group:
                    out += [f"#### {_variant(point)}", "", *_table(point), ""]
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
        out += ["Deploy table (workers = cores, unpinned):", "", *deploy_cmds, ""]
    threads_cmds = [c for p in points if p["table"] == "threads" for c in _commands([p], "threads")]
    if threads_cmds:
        out += ["Runtime mode and threads table:", "", *threads_cmds, ""]
    out += [
        "Ports vary per run; servers ran from `benchmarks/` with the apps in `benchmarks/apps/`.",
        "",
    ]
    return "\n".join(out)
