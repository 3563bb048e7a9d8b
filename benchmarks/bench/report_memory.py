"""Memory sections: one worker's RSS and PSS, and the cost of each extra worker."""

from __future__ import annotations

from bench.report_cells import MIB, mib, name_cell


def memory_table(point: dict) -> list[str]:
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
            f"| {name_cell(entry)} | {idle['processes']} | {mib(idle)} | {mib(load)} "
            f"| {mib(idle, 'pss')} | {mib(load, 'pss')} |"
        )
    return lines


def memory_scaling(points: list[dict]) -> list[str]:
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
        return [mib(runs[n][kind], key) if n in runs else "—" for n in counts]

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
            f"| {name_cell(entry)} | "
            + " | ".join(
                cells(runs, "memory_idle", "pss")
                + cells(runs, "memory_load", "pss")
                + cells(runs, "memory_idle", "rss")
            )
            + f" | {slope(runs, 'memory_idle')} / {slope(runs, 'memory_load')} |"
        )
    return lines


def scaling_section(points: list[dict], chart_dir: str) -> list[str]:
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
        *memory_scaling(points),
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
