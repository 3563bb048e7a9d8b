"""PNG charts of throughput and memory per scenario, drawn from a results JSON.

Runs under the suite's venv (matplotlib is installed there, not in the harness's Python):

    benchmarks/.venvs/py3.11/bin/python benchmarks/bench/charts.py RESULTS.json OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

SUPERVISE = "#d9480f"
PEER = "#4c6ef5"
IDLE = "#adb5bd"
MIB = 2**20


def _entries(point: dict) -> list[dict]:
    entries = [e for e in point["servers"].values() if e.get("best")]
    return sorted(entries, key=lambda e: e["best"]["rps"])


def _cores(split: dict, side: str) -> str:
    return split.get(f"{side}_cpus") or ",".join(map(str, split[side]))


def _setup(point: dict, meta: dict) -> str:
    opts = point["options"]
    split = meta.get("deploy_split")
    if point["table"] == "deploy" and opts.get("split") and split:
        workers = f"{opts['workers']} worker{'' if opts['workers'] == 1 else 's'}"
        return (
            f"{workers} per server on cores {_cores(split, 'server')}, "
            f"load generator on cores {_cores(split, 'load')}"
        )
    if point["table"] == "deploy":
        return f"{opts['workers']} workers per server, server and client unpinned"
    return "1 worker pinned to 1 core"


def scenario_chart(point: dict, path: Path, meta: dict | None = None) -> None:
    entries = _entries(point)
    if not entries:
        return
    names = [e["server"] + (" (errors)" if e["status"] != "ok" else "") for e in entries]
    colors = [SUPERVISE if e["supervise"] else PEER for e in entries]
    hatches = ["//" if e["status"] != "ok" else "" for e in entries]
    height = 1.2 + 0.35 * len(entries)
    fig, (ax_rps, ax_mem) = plt.subplots(1, 2, figsize=(12, height), sharey=True)
    rps = [e["best"]["rps"] for e in entries]
    bars = ax_rps.barh(names, rps, color=colors)
    for bar, hatch in zip(bars, hatches, strict=True):
        bar.set_hatch(hatch)
    unit = "messages/s" if point["protocol"] == "ws" else "requests/s"
    ax_rps.set_xlabel(unit)
    ax_rps.bar_label(bars, labels=[f"{v:,.0f}" for v in rps], padding=3, fontsize=8)
    ax_rps.margins(x=0.2)
    idle = [(e["memory_idle"] or {}).get("rss", 0) / MIB for e in entries]
    load = [(e["memory_load"] or {}).get("rss", 0) / MIB for e in entries]
    y = range(len(entries))
    ax_mem.barh([i + 0.2 for i in y], load, height=0.4, color=colors, label="under load")
    ax_mem.barh([i - 0.2 for i in y], idle, height=0.4, color=IDLE, label="idle")
    ax_mem.set_xlabel("RSS of the process tree (MiB)")
    ax_mem.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.suptitle(f"{point['title']} — {_setup(point, meta or {})}")
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def dimension_chart(table: str, points: list[dict], path: Path) -> None:
    variants = [_variant(p) for p in points]
    servers = sorted({name for p in points for name, e in p["servers"].items() if e.get("best")})
    if not servers:
        return
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(servers) * max(1, len(variants)) / 2), 4))
    width = 0.8 / len(variants)
    for i, (variant, point) in enumerate(zip(variants, points, strict=True)):
        values = []
        for name in servers:
            entry = point["servers"].get(name)
            values.append(entry["best"]["rps"] if entry and entry.get("best") else 0)
        xs = [j + i * width - 0.4 + width / 2 for j in range(len(servers))]
        ax.bar(xs, values, width=width, label=variant)
    ax.set_xticks(range(len(servers)))
    ax.set_xticklabels(servers, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("requests/s")
    # Outside the axes: with six variants an inside legend hides the tallest bars.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"{points[0]['title']} — {table}")
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def _variant(point: dict) -> str:
    opts = point["options"]
    mode = opts.get("runtime_mode")
    n = opts.get("runtime_threads")
    threads = f"{n} thread{'' if n == 1 else 's'}"
    return {
        "python": f"Python {point['python']}",
        "loops": str(opts.get("loop")),
        "threads": f"{mode.upper()} {threads}" if mode else threads,
        "workers": f"{opts['workers']} worker{'s' if opts['workers'] > 1 else ''}",
    }.get(point["table"], point["scenario"])


def memory_chart(points: list[dict], path: Path) -> None:
    """PSS against the worker count, idle and under load, one line per server."""
    series: dict[str, list[tuple[int, float, float]]] = {}
    for point in points:
        n = point["options"]["workers"]
        for name, entry in point["servers"].items():
            if entry.get("memory_idle") and entry.get("memory_load"):
                pss = (entry["memory_idle"]["pss"] / MIB, entry["memory_load"]["pss"] / MIB)
                series.setdefault(name, []).append((n, *pss))
    if not series:
        return
    fig, (ax_idle, ax_load) = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for name, values in sorted(series.items()):
        values.sort()
        # Colours tell the servers apart; solid and thick lines mark supervise's workers.
        supervise = name.startswith("supervise")
        style = {"linewidth": 2.5} if supervise else {"linestyle": "--", "linewidth": 1.2}
        xs = [v[0] for v in values]
        ax_idle.plot(xs, [v[1] for v in values], marker="o", label=name, **style)
        ax_load.plot(xs, [v[2] for v in values], marker="o", label=name, **style)
    for ax, what in ((ax_idle, "idle"), (ax_load, "under load")):
        ax.set_xlabel("worker processes")
        ax.set_xticks(sorted({p["options"]["workers"] for p in points}))
        ax.set_title(f"PSS of the process tree, {what}")
    ax_idle.set_ylabel("MiB")
    ax_load.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle("Memory per worker count — GET 4 B, pinned")
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def draw(results: Path, out_dir: Path) -> list[Path]:
    doc = json.loads(results.read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    by_table: dict[str, list[dict]] = {}
    for point in doc["points"]:
        by_table.setdefault(point["table"], []).append(point)
    for point in by_table.get("main", []):
        path = out_dir / f"{point['scenario']}.png"
        scenario_chart(point, path)
        written.append(path)
    for point in by_table.get("deploy", []):
        path = out_dir / f"deploy-{point['scenario']}.png"
        scenario_chart(point, path, doc["meta"])
        written.append(path)
    one_worker = [
        p
        for table in ("main", "memory")
        for p in by_table.get(table, [])
        if p["scenario"] == "get-4b" and p["options"]["workers"] == 1
    ][:1]
    if "workers" in by_table and one_worker:
        # The 1-worker bars come from the main table's run of the same scenario.
        by_table["workers"] = [{**one_worker[0], "table": "workers"}, *by_table["workers"]]
    if "memory" in by_table:
        path = out_dir / "memory.png"
        memory_chart(by_table["memory"], path)
        written.append(path)
    for table, points in by_table.items():
        if table in ("main", "deploy", "memory"):
            continue
        for scenario in dict.fromkeys(p["scenario"] for p in points):
            path = out_dir / f"dim-{table}-{scenario}.png"
            dimension_chart(table, [p for p in points if p["scenario"] == scenario], path)
            written.append(path)
    return [p for p in written if p.exists()]


if __name__ == "__main__":
    for written_path in draw(Path(sys.argv[1]), Path(sys.argv[2])):
        print(written_path)
