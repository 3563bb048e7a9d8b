"""The markdown report: Granian-style tables (total requests, RPS, latency) plus memory,
and for every scenario how supervise compares with the best peer."""

from __future__ import annotations

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
        f"| Server | Version | {total} | {unit} | Avg latency | Max latency "
        "| RSS idle (MiB) | RSS load (MiB) | Errors | Best at |",
        "|---|---|--:|--:|--:|--:|--:|--:|---|--:|",
    ]
    for entry in _ranked(point):
        best = entry["best"]
        bound = " †" if best.get("client_cpu_pct", 0) >= CLIENT_BOUND_PCT else ""
        lines.append(
            f"| {_name(entry)} | {entry['version']} | {_num(best['requests'])} "
            f"| {_num(best['rps'])}{bound} | {best['latency_avg_ms']:.2f} ms "
            f"| {best['latency_max_ms']:.2f} ms | {_mib(entry['memory_idle'])} "
            f"| {_mib(entry['memory_load'])} | {_errors(entry)} | c={best['connections']} |"
        )
    for entry in point["servers"].values():
        if not entry.get("best"):
            lines.append(
                f"| {_name(entry)} | {entry['version']} | — | — | — | — | — | — "
                f"| {entry['status']}: {entry['reason'][:120]} | — |"
            )
    return lines


def ratios(point: dict) -> list[dict]:
    """supervise worker vs the best clean peer of its interface, and the best of all."""
    clean = [e for e in point["servers"].values() if e.get("best") and e["status"] == "ok"]
    peers = [e for e in clean if not e["supervise"]]
    out = []
    for sup in (e for e in point["servers"].values() if e["supervise"] and e.get("best")):
        same = [p for p in peers if p["interface"] == sup["interface"]]
        row = {"server": sup["server"], "rps": sup["best"]["rps"], "clean": sup["status"] == "ok"}
        for key, pool in (("interface", same), ("overall", peers)):
            if pool:
                top = max(pool, key=lambda p: p["best"]["rps"])
                row[key] = (
                    top["server"],
                    top["best"]["rps"],
                    sup["best"]["rps"] / top["best"]["rps"],
                )
        out.append(row)
    return out


def _ratio_cell(row: dict, key: str) -> str:
    if key not in row:
        return "—"
    name, rps, ratio = row[key]
    mark = "" if row["clean"] else " ⚠"
    return f"{ratio:.2f}x {name} ({_num(rps)}){mark}"


def _summary(points: list[dict]) -> list[str]:
    lines = [
        "| Scenario | supervise worker | RPS | vs best peer, same interface "
        "| vs best peer, any interface |",
        "|---|---|--:|---|---|",
    ]
    for point in points:
        for row in ratios(point):
            lines.append(
                f"| {point['scenario']} | {row['server']} | {_num(row['rps'])} "
                f"| {_ratio_cell(row, 'interface')} | {_ratio_cell(row, 'overall')} |"
            )
    if len(lines) == 2:
        lines.append("| — | no supervise worker class served any scenario | | | |")
    return lines


def _variant(point: dict) -> str:
    opts = point["options"]
    if point["table"] == "python":
        return f"Python {point['python']}"
    if point["table"] == "loops":
        return f"loop: {opts['loop']}"
    if point["table"] == "threads":
        return f"runtime threads: {opts['runtime_threads']}"
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


def _machine(doc: dict) -> list[str]:
    m = doc["machine"]
    meta = doc["meta"]
    tools = ", ".join(f"{k}: {v}" for k, v in doc["tools"].items())
    pythons = ", ".join(sorted(doc["versions"]))
    return [
        f"- Host: `{m['host']}`, {m['cores']} cores, {m['cpu']}, {m['memory_gib']} GiB, "
        f"kernel {m['kernel']}, virtualisation: {m['virtualisation']}, governor: {m['governor']}",
        f"- Pinning (`taskset`): every server's whole process tree on core {meta['server_cpu']}; "
        f"the load generator (and this harness) on core {meta['load_cpu']}",
        f"- Load generators: {tools}; wsload (in this suite, Python + uvloop) for WebSocket. "
        f"wrk: 1 thread, `--timeout {meta['wrk_timeout']}`; h2load: 1 thread, "
        f"{meta['h2_streams']} streams per connection (connections = level / streams)",
        f"- Python for the servers: {pythons} (suite venvs under `benchmarks/.venvs/`); "
        f"harness on {m['harness_python']}",
        f"- Each point: warm-up {meta['warmup']:g} s, then {meta['duration']:g} s at each of "
        f"c = {', '.join(map(str, meta['levels']))}, {meta['rounds']} round(s); best clean "
        "level kept",
    ]


def _noise(doc: dict) -> list[str]:
    n = doc.get("noise")
    if not n:
        return ["No repeated point was measured in this run."]
    if "problem" in n:
        return [f"The repeated point could not be measured: {n['problem']}"]
    figures = ", ".join(_num(f) for f in n["rps"])
    return [
        f"`{n['scenario']}` on {n['server']} at c={n['connections']}, {len(n['rps'])} runs of "
        f"{n['duration_s']:g} s on one server start: {figures} RPS. Spread (max - min) / median "
        f"= **{n['spread_pct']:.1f}%**, standard deviation {n['stdev_pct']:.1f}% of the median. "
        "Differences smaller than the spread are noise."
    ]


def render(doc: dict, chart_dir: str) -> str:
    meta = doc["meta"]
    points = doc["points"]
    main = [p for p in points if p["table"] == "main"]
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
        "## Machine",
        "",
        *_machine(doc),
        "",
        "## Noise",
        "",
        *_noise(doc),
        "",
        "## supervise against the best peer",
        "",
        "Ratio of supervise's best clean throughput to the best clean peer's in the same run "
        "(> 1 means supervise is faster). ⚠ marks figures with errors; † in the tables marks "
        f"runs whose load generator used over {CLIENT_BOUND_PCT:.0f}% of its core, where the "
        "figure is a lower bound for the server.",
        "",
        *_summary(main),
        "",
    ]
    memory = [p for p in main if p["scenario"] == "get-4b"]
    if memory:
        out += [
            "## Memory",
            "",
            "GET 4 B run: RSS summed over the process tree (what `ps` "
            "shows); PSS splits shared pages between processes, so forked workers are not "
            "counted twice. Peak under load, sampled every 0.25 s.",
            "",
        ]
        out += [*_memory(memory[0]), ""]
    for point in main:
        out += [f"## {point['title']} (`{point['scenario']}`)", ""]
        out += [f"![{point['scenario']}]({chart_dir}/{point['scenario']}.png)", ""]
        out += [*_table(point), ""]
    for table, title in TABLES.items():
        if table == "main":
            continue
        group = [p for p in points if p["table"] == table]
        if not group:
            continue
        one_worker = [p for p in main if p["scenario"] == "get-4b"]
        summary = group
        if table == "workers" and one_worker:
            # The 1-worker column comes from the main table's run of the same scenario.
            summary = [{**one_worker[0], "table": "workers"}, *group]
        out += [f"## Dimension: {title}", ""]
        if table == "workers":
            out += [
                "The machine has 2 cores: both workers share the one server core, so this "
                "table shows the cost of a second process rather than a second core. The "
                "1-worker column is the GET 4 B run of the main table.",
                "",
            ]
        out += [f"![{table}]({chart_dir}/dim-{table}.png)", "", "RPS:", ""]
        out += [*_pivot(summary), ""]
        for point in group:
            out += [f"### {_variant(point)}", "", *_table(point), ""]
    out += ["## Versions", ""]
    for py, versions in sorted(doc["versions"].items()):
        listed = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
        out.append(f"- Python {py}: {listed}")
    missing = {py: m for py, m in doc.get("missing", {}).items() if m}
    for py, servers in sorted(missing.items()):
        for name, why in servers.items():
            out.append(f"- Not run on Python {py}: {name} ({why})")
    out += ["", "## Command lines", ""]
    seen = set()
    for point in points:
        for entry in point["servers"].values():
            if entry["command"] and entry["server"] not in seen and point["table"] == "main":
                seen.add(entry["server"])
                note = f" ({entry['note']})" if entry.get("note") else ""
                out.append(f"- {entry['server']}{note}: `{' '.join(entry['command'])}`")
    out += [
        "",
        "Ports vary per run; servers ran from `benchmarks/` with the apps in `benchmarks/apps/`.",
        "",
    ]
    return "\n".join(out)
