"""The deploy section: workers = cores, unpinned, against Granian, the best peer and
each server's own pinned run."""

from __future__ import annotations

from collections.abc import Iterable

from bench.report_cells import legend, num, ratio_cell, ratios, scenario_table


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
        "| Scenario | supervise worker | RPS | vs Granian, same interface "
        "| vs best peer, same interface | vs itself pinned, 1 worker |",
        "|---|---|--:|---|---|---|",
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
                f"| {ratio_cell(row, 'granian', spread)} "
                f"| {ratio_cell(row, 'interface', spread)} | {own} |"
            )
    if len(lines) == 2:
        lines.append("| — | no supervise worker class served any scenario | | | | |")
    return lines


def deploy_pivot(points: list[dict], main: list[dict]) -> list[str]:
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
            cells.append(f"{num(entry['best']['rps'])}{mark}{ratio}")
        shown = f"**{name}**" if name.startswith("supervise") else name
        lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    return lines


def deploy_workers(doc: dict) -> int | None:
    for point in doc["points"]:
        if point["table"] == "deploy":
            return point["options"]["workers"]
    return None


def deploy_section(
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
        legend() + " The last column divides this table's figure by the same worker's pinned "
        "one-worker figure (main table, same scenario, same run).",
        "",
        *deploy_summary(deploy, main, spread),
        "",
        "### Every server: RPS, and its ratio to its own pinned one-worker run",
        "",
        *deploy_pivot(deploy, main),
        "",
    ]
    for point in deploy:
        out += [f"### {point['title']} (`{point['scenario']}`): {workers} workers, unpinned", ""]
        out += [f"![deploy {point['scenario']}]({chart_dir}/deploy-{point['scenario']}.png)", ""]
        out += [*scenario_table(point), ""]
    return out
