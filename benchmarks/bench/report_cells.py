"""The report's building blocks: figures, cells, one scenario's table, the ratios to
the best peer, and the pivots of the dimension tables."""

from __future__ import annotations

from bench.scenarios import BY_NAME

MIB = 2**20
# A load generator using this much of its core was probably the bottleneck.
CLIENT_BOUND_PCT = 90.0


def num(value: float) -> str:
    return f"{value:,.0f}"


def mib(memory: dict | None, key: str = "rss") -> str:
    return f"{memory[key] / MIB:.1f}" if memory else "—"


def latency_cells(run: dict) -> str:
    """p50 | p99 in ms; "—" where the run has none: results from before p50 was kept, and
    broadcast runs, which time no request."""
    cells = []
    for key in ("latency_p50_ms", "latency_p99_ms"):
        value = run.get(key)
        cells.append(f"{value:.2f} ms" if value else "—")
    return " | ".join(cells)


def client_bound(run: dict) -> bool:
    """The load generator used nearly all of its cores (one per thread): the client, not
    the server, may have set the pace."""
    return run.get("client_cpu_pct", 0) >= CLIENT_BOUND_PCT * run.get("threads", 1)


def cores_busy(run: dict) -> float | None:
    """Cores the server's process tree kept busy over the load (CPU seconds / wall)."""
    used, wall = run.get("server_cpu_s"), run.get("server_cpu_wall_s")
    return used / wall if used is not None and wall else None


def cpu_cells(run: dict) -> str:
    """The server's CPU per request (per message for WebSockets), in µs, and the cores
    it kept busy: a server using a whole core is CPU-bound and its µs say why it is
    slower; one using less waits on something. "—" for runs from before it was read."""
    used, wall = run.get("server_cpu_s"), run.get("server_cpu_wall_s")
    if used is None or not wall or not run.get("requests"):
        return "— | —"
    return f"{used / run['requests'] * 1e6:.1f} | {used / wall:.2f}"


def errors_cell(entry: dict) -> str:
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


def ranked(point: dict) -> list[dict]:
    entries = [e for e in point["servers"].values() if e.get("best")]
    # Clean figures first: a fast run with errors must not top the table.
    return sorted(entries, key=lambda e: (e["status"] != "ok", -e["best"]["rps"]))


def name_cell(entry: dict) -> str:
    name = f"**{entry['server']}**" if entry["supervise"] else entry["server"]
    return name + (" ⚠" if entry["status"] in ("errors", "failed") else "")


def is_broadcast(point: dict) -> bool:
    """Granian's broadcast measure: send and receive rates instead of latency."""
    return any(e.get("best", {}).get("broadcast") for e in point["servers"].values())


def scenario_table(point: dict) -> list[str]:
    unit = "msg/s" if point["protocol"] == "ws" else "RPS"
    total = "Total messages" if point["protocol"] == "ws" else "Total requests"
    broadcast = is_broadcast(point)
    middle = "Send msg/s | Receive msg/s" if broadcast else "Avg latency | Max latency"
    lines = [
        f"| Server | Version | {total} | {'Combined ' if broadcast else ''}{unit} "
        f"| vs best peer, same interface | p50 | p99 | {middle} | Server CPU µs per "
        f"{'message' if point['protocol'] == 'ws' else 'request'} | Server cores busy "
        "| RSS idle (MiB) | RSS load (MiB) | Errors | Best at |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|",
    ]
    for entry in ranked(point):
        best = entry["best"]
        bound = " †" if client_bound(best) else ""
        if broadcast:
            rates = best.get("broadcast") or {}
            middle = f"{num(rates.get('send', 0))} | {num(rates.get('receive', 0))}"
            at = f"{best['connections']} clients"
        else:
            middle = f"{best['latency_avg_ms']:.2f} ms | {best['latency_max_ms']:.2f} ms"
            at = f"c={best['connections']}"
        lines.append(
            f"| {name_cell(entry)} | {entry['version']} | {num(best['requests'])} "
            f"| {num(best['rps'])}{bound} | {versus_best_peer(point, entry)} "
            f"| {latency_cells(best)} | {middle} "
            f"| {cpu_cells(best)} | {mib(entry['memory_idle'])} | {mib(entry['memory_load'])} "
            f"| {errors_cell(entry)} | {at} |"
        )
    for entry in point["servers"].values():
        if not entry.get("best"):
            dashes = " — |" * 11
            lines.append(
                f"| {name_cell(entry)} | {entry['version']} |{dashes} "
                f"{entry['status']}: {entry['reason'][:120]} | — |"
            )
    return lines


def versus_best_peer(point: dict, entry: dict) -> str:
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
        row = {
            "server": sup["server"],
            "rps": sup["best"]["rps"],
            "latency": latency_cells(sup["best"]),
            "clean": sup["status"] == "ok",
        }
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


def ratio_cell(row: dict, key: str, spread: float | None = None) -> str:
    """`spread`: the run's measured noise (percent) for this table, when it has one; a
    ratio within it is a tie, not a win or a loss."""
    if key not in row:
        return "—"
    name, rps, ratio = row[key]
    mark = "" if row["clean"] else " ⚠"
    tie = " **tie**" if spread is not None and abs(ratio - 1) * 100 <= spread else ""
    return f"{ratio:.2f}x{tie} {name} ({num(rps)}){mark}"


def noise_spread(doc: dict, table: str) -> float | None:
    """The spread measured on this table's repeated point, if this run measured one."""
    noise = doc.get("noise") or {}
    if "spread_pct" not in noise or noise.get("table", "main") != table:
        return None
    return noise["spread_pct"]


def summary_table(points: list[dict], spread: float | None = None) -> list[str]:
    lines = [
        "| Scenario | supervise worker | RPS | p50 | p99 | vs best peer, same interface "
        "| vs best peer, any interface |",
        "|---|---|--:|--:|--:|---|---|",
    ]
    for point in points:
        for row in ratios(point):
            lines.append(
                f"| {point['scenario']} | {row['server']} | {num(row['rps'])} "
                f"| {row['latency']} | {ratio_cell(row, 'interface', spread)} "
                f"| {ratio_cell(row, 'overall', spread)} |"
            )
    if len(lines) == 2:
        lines.append("| — | no supervise worker class served any scenario | | | | | |")
    return lines


def legend() -> str:
    return (
        "Ratio of supervise's best clean throughput to a clean peer's in the same run "
        "(> 1 means supervise is faster). ⚠ marks figures with errors; † in the tables marks "
        f"runs whose load generator used over {CLIENT_BOUND_PCT:.0f}% of its cores (one per "
        "thread), where the figure is a lower bound for the server. p50 and p99: the "
        'latency of the best level\'s requests, "—" where the run kept none. '
        "**tie**: the ratio is within the noise this "
        "run measured on the same table (section Noise), so neither side wins; a table "
        "without its own noise measure marks no ties."
    )


def variant(point: dict) -> str:
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
        where = "server and load on core sets of their own" if opts.get("split") else "unpinned"
        return f"{point['title']}, {opts['workers']} workers {where}"
    if point["table"] == "workers":
        return f"{opts['workers']} worker{'s' if opts['workers'] > 1 else ''}"
    return point["title"]


def pivot(points: list[dict]) -> list[str]:
    """One row per server, one column per variant: the dimension at a glance."""
    names: list[str] = []
    for point in points:
        names += [n for n, e in point["servers"].items() if e.get("best") and n not in names]
    lines = [
        "| Server | " + " | ".join(variant(p) for p in points) + " |",
        "|---|" + "--:|" * len(points),
    ]
    for name in names:
        cells = []
        for point in points:
            entry = point["servers"].get(name)
            if entry and entry.get("best"):
                mark = "" if entry["status"] == "ok" else " ⚠"
                cells.append(f"{num(entry['best']['rps'])}{mark}")
            else:
                cells.append("—")
        shown = f"**{name}**" if name.startswith("supervise") else name
        lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    return lines


def _same_request_over_h2tls(h3: str, names: set[str]) -> str | None:
    """The scenario sending what `h3` sends over HTTP/2 with TLS, among `names`."""
    want = BY_NAME[h3]
    for name in names:
        other = BY_NAME.get(name)
        if (
            other
            and other.protocol == "h2"
            and other.tls
            and (other.path, other.method, other.body_size)
            == (want.path, want.method, want.body_size)
        ):
            return name
    return None


def h3_versus_h2(points: list[dict]) -> list[str]:
    """Each server's HTTP/3 against its own HTTP/2 over TLS on the same request (the same
    certificate and shape of load): what the transport costs or buys, server by server.
    No lines when the run had no such pair."""
    by_name = {p["scenario"]: p for p in points}
    lines = []
    for name, h3 in by_name.items():
        if name not in BY_NAME or BY_NAME[name].protocol != "h3":
            continue
        pair = _same_request_over_h2tls(name, set(by_name))
        if pair is None:
            continue
        h2 = by_name[pair]
        for server, entry in h3["servers"].items():
            other = h2["servers"].get(server, {})
            if not entry.get("best") or not other.get("best"):
                continue
            h3_rps, h2_rps = entry["best"]["rps"], other["best"]["rps"]
            clean = entry["status"] == "ok" and other["status"] == "ok"
            warn = "" if clean else " ⚠"
            ratio = f"{h3_rps / h2_rps:.2f}x" if h2_rps else "—"
            lines.append(
                f"| {name_cell(entry)} | {BY_NAME[name].title} | {num(h2_rps)} | {num(h3_rps)} "
                f"| {ratio}{warn} |"
            )
    if not lines:
        return []
    return [
        "| Server | Request | HTTP/2 over TLS RPS | HTTP/3 RPS | HTTP/3 / HTTP/2 |",
        "|---|---|--:|--:|--:|",
        *lines,
    ]
