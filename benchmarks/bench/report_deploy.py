"""The deploy section: workers = cores, unpinned, against Granian, the best peer and
each server's own pinned run."""

from __future__ import annotations

from collections.abc import Iterable

from bench.cpus import compact
from bench.report_cells import cores_busy, legend, num, ratio_cell, ratios, scenario_table


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


def deploy_summary(points: list[dict], main: list[dict], spread: float | None = None) -> list[str]:
    lines = [
        "| Scenario | supervise worker | RPS | p50 | p99 | vs Granian, same interface "
        "| vs best peer, same interface | vs itself pinned, 1 worker |",
        "|---|---|--:|--:|--:|---|---|---|",
    ]
    for point in points:
        pinned = versus_pinned(point, main)
        for row in ratios(point):
            if row["server"] in pinned:
                rps, ratio = pinned[row["server"]]
                own = f"{ratio:.2f}x ({num(rps)})"
            else:
                own = "— (not in the main table of this run)" if not main else "—"
            lines.append(
                f"| {point['scenario']} | {row['server']} | {num(row['rps'])} "
                f"| {row['latency']} | {ratio_cell(row, 'granian', spread)} "
                f"| {ratio_cell(row, 'interface', spread)} | {own} |"
            )
    if len(lines) == 2:
        lines.append("| — | no supervise worker class served any scenario | | | | | | |")
    return lines


def deploy_pivot(points: list[dict], main: list[dict]) -> list[str]:
    """Every server, every deploy scenario, with the cores it kept busy (a server short
    of its cores was held back by something else: the client, a lock) and its ratio to
    its own pinned run."""
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
            busy = cores_busy(entry["best"])
            notes = [f"{busy:.2f} cores"] if busy is not None else []
            if name in against:
                notes.append(f"{against[name][1]:.2f}x pinned")
            extra = f" ({'; '.join(notes)})" if notes else ""
            cells.append(f"{num(entry['best']['rps'])}{mark}{extra}")
        shown = f"**{name}**" if name.startswith("supervise") else name
        lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    return lines


def deploy_workers(doc: dict) -> int | None:
    for point in doc["points"]:
        if point["table"] == "deploy":
            return point["options"]["workers"]
    return None


def split_of(meta: dict) -> dict | None:
    """The deploy table's core sets when it ran split: {"server": [...], "load": [...]}."""
    split = meta.get("deploy_split")
    return split if split and split.get("server") and split.get("load") else None


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def split_sentence(meta: dict, machine_cores: int | None, workers: int) -> str:
    """The machine's cores and how the split used them, for the report's headings."""
    split = split_of(meta) or {}
    server, load = split.get("server", []), split.get("load", [])
    threads = meta.get("deploy_load_threads") or len(load)
    of = f" of the machine's {machine_cores}" if machine_cores else ""
    return (
        f"server on cores {compact(server)} ({len(server)}{of}, {_count(workers, 'worker')}), "
        f"load generator on cores {compact(load)} ({len(load)}, wrk and h2load with "
        f"{_count(threads, 'thread')})"
    )


def deploy_section(
    deploy: list[dict],
    main: list[dict],
    chart_dir: str,
    *,
    single: Iterable[str] = (),
    spread: float | None = None,
    meta: dict | None = None,
    machine_cores: int | None = None,
) -> list[str]:
    workers = deploy[0]["options"]["workers"]
    # Say who is left out and why, so an absent peer is not read as a failed one.
    left_out = ", ".join(single)
    not_here = f" Not in this table, single process only: {left_out}." if left_out else ""
    split = split_of(meta or {}) if deploy[0]["options"].get("split") else None
    if split:
        where = split_sentence(meta or {}, machine_cores, workers)
        heading = (
            f"## Deploy: {_count(workers, 'worker')} on cores {compact(split['server'])}, "
            f"load generator on {compact(split['load'])}"
            + (f" ({machine_cores}-core machine)" if machine_cores else "")
        )
        intro = (
            f"{where[0].upper()}{where[1:]}. "
            f"Every server that can run several workers, with {workers} of them, its whole "
            f"process tree pinned to the server cores; the load generator pinned to the "
            "others, one thread per core, so it never takes a server core. Server cores "
            f"busy near {len(split['server'])} means the server was the limit; well under "
            "it, something else was (the client: see † and the load generator's CPU)."
        )
    else:
        heading = f"## Deploy: {workers} workers = cores, unpinned (what users get)"
        intro = (
            f"Every server that can run several workers, with {workers} of them; server and "
            "load generator unpinned. The client competes with the server for the cores, so "
            "read these figures against each other, not against the pinned tables."
        )
    out = [
        heading,
        "",
        f"{intro} gthread keeps its threads per worker (see the command lines).{not_here}",
        "",
        "### supervise against Granian and the best peer",
        "",
        legend() + " The last column divides this table's figure by the same worker's pinned "
        "one-worker figure (main table, same scenario, same run).",
        "",
        *deploy_summary(deploy, main, spread),
        "",
        "### Every server: RPS, the server's cores busy, and its ratio to its own pinned "
        "one-worker run",
        "",
        *deploy_pivot(deploy, main),
        "",
    ]
    placed = "server and load on their own cores" if split else "unpinned"
    for point in deploy:
        out += [f"### {point['title']} (`{point['scenario']}`): {workers} workers, {placed}", ""]
        out += [f"![deploy {point['scenario']}]({chart_dir}/deploy-{point['scenario']}.png)", ""]
        out += [*scenario_table(point), ""]
    return out
