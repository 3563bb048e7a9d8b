"""Tables and charts of the shared many-core recipe's results (../shared/manycore: servers
on cores 0-7 with 8 workers, `wrk -t8 -c256` on cores 8-15, one run, 5 s a point), for
docs/comparison.md and the README, until `run.py --part manycore` has measured its own.

    benchmarks/.venvs/py3.11/bin/python benchmarks/manycore/shared_figures.py \\
        ../shared/manycore/2026-11-27-multicore.jsonl benchmarks/results/2026-11-27-manycore-shared

Writes OUT/tables.md (the markdown tables), OUT/multicore.jsonl (the figures, copied) and,
where matplotlib imports (the suite's venv has it), OUT/manycore.png and OUT/scaling.png.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

# The recipe's server names, by interface; its "uvicorn" is Uvicorn with httptools and
# uvloop (the suite's uvicorn-httptools), "supervise-native-wsgi" the suite's
# supervise-native (with the native worker's default threads rather than the suite's 1).
INTERFACES = {
    "WSGI": ("supervise-gthread", "supervise-gevent", "supervise-native-wsgi", "granian-wsgi",
             "gunicorn-gthread"),
    "ASGI": ("supervise-asgi", "supervise-native-asgi", "granian-asgi", "uvicorn"),
    "RSGI": ("supervise-rsgi", "granian-rsgi"),
}  # fmt: skip
SCENARIOS = {"get": "GET 4 B", "echo": "POST echo 1 KiB"}
SERVER_CORES = 8
SUPERVISE = "#d9480f"
PEER = "#4c6ef5"


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _point(records: list[dict], server: str, scenario: str, workers: int) -> dict | None:
    for record in records:
        if (record["server"], record["scenario"], record["workers"]) == (
            server,
            scenario,
            workers,
        ):
            return record
    return None


def _ms(us: float) -> str:
    return f"{us / 1000:.2f} ms"


def main_table(records: list[dict], scenario: str) -> list[str]:
    """Each server at 8 workers: RPS, p50, p99, cores used, and its ratio to the fastest
    peer (not supervise) of its interface."""
    lines = [
        "| Interface | Server | RPS | p50 | p99 | Server cores used (of 8) | vs best peer |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for interface, names in INTERFACES.items():
        rows = [r for n in names if (r := _point(records, n, scenario, SERVER_CORES))]
        peers = [r["rps"] for r in rows if not r["server"].startswith("supervise")]
        best = max(peers) if peers else None
        for row in sorted(rows, key=lambda r: -r["rps"]):
            name = row["server"]
            shown = f"**{name}**" if name.startswith("supervise") else name
            ratio = f"{row['rps'] / best:.2f}x" if best else "—"
            lines.append(
                f"| {interface} | {shown} | {row['rps']:,} | {_ms(row['lat_p50_us'])} "
                f"| {_ms(row['lat_p99_us'])} | {row['server_cores']:.2f} | {ratio} |"
            )
    return lines


def scaling_table(records: list[dict]) -> list[str]:
    """GET 4 B with 1, 4 and 8 workers (cores used in brackets), and 8 workers over 1."""
    names = sorted({r["server"] for r in records if r["workers"] != SERVER_CORES})
    order = [n for names_ in INTERFACES.values() for n in names_ if n in names]
    lines = [
        "| Server | 1 worker | 4 workers | 8 workers | 8 workers / 1 |",
        "|---|--:|--:|--:|--:|",
    ]
    for name in order:
        cells, rps = [], {}
        for workers in (1, 4, SERVER_CORES):
            row = _point(records, name, "get", workers)
            if row:
                rps[workers] = row["rps"]
                cells.append(f"{row['rps']:,} ({row['server_cores']:.2f} cores)")
            else:
                cells.append("—")
        gain = f"{rps[SERVER_CORES] / rps[1]:.1f}x" if 1 in rps and SERVER_CORES in rps else "—"
        shown = f"**{name}**" if name.startswith("supervise") else name
        lines.append(f"| {shown} | {' | '.join(cells)} | {gain} |")
    return lines


def tables(records: list[dict]) -> str:
    out = []
    for scenario, title in SCENARIOS.items():
        out += [f"{title}, 8 workers:", "", *main_table(records, scenario), ""]
    out += ["GET 4 B by worker count:", "", *scaling_table(records), ""]
    return "\n".join(out)


def charts(records: list[dict], out: Path) -> list[Path]:
    """Requests per second per server at 8 workers (one panel per scenario, p99 beside
    each bar), and GET 4 B against the worker count."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    names = [n for group in INTERFACES.values() for n in group]
    fig, axes = plt.subplots(1, len(SCENARIOS), figsize=(14, 5.5), sharey=True)
    for ax, (scenario, title) in zip(axes, SCENARIOS.items(), strict=True):
        rows = [r for n in names if (r := _point(records, n, scenario, SERVER_CORES))]
        labels = [r["server"] for r in rows]
        bars = ax.barh(
            labels,
            [r["rps"] for r in rows],
            color=[SUPERVISE if r["server"].startswith("supervise") else PEER for r in rows],
        )
        ax.bar_label(
            bars,
            labels=[f"{r['rps'] / 1000:,.0f}k  p99 {r['lat_p99_us'] / 1000:.1f} ms" for r in rows],
            padding=3,
            fontsize=8,
        )
        ax.invert_yaxis()
        ax.margins(x=0.35)
        ax.set_xlabel("requests/s")
        ax.set_title(title)
    fig.suptitle(
        "8 workers on cores 0-7, wrk -t8 -c256 on cores 8-15 (16-core machine, Python 3.12; "
        "shared recipe, 2026-11-27)"
    )
    fig.tight_layout()
    main_path = out / "manycore.png"
    fig.savefig(main_path, dpi=100, bbox_inches="tight")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 5))
    for name in dict.fromkeys(r["server"] for r in records if r["workers"] != SERVER_CORES):
        points = sorted(
            (r["workers"], r["rps"])
            for r in records
            if r["server"] == name and r["scenario"] == "get"
        )
        supervise = name.startswith("supervise")
        style = {"linewidth": 2.5} if supervise else {"linestyle": "--", "linewidth": 1.2}
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name, **style)
    ax.set_xticks([1, 4, SERVER_CORES])
    ax.set_xlabel("workers (on cores 0-7)")
    ax.set_ylabel("requests/s")
    ax.set_title("GET 4 B by worker count (wrk -t8 -c256 on cores 8-15)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    scaling_path = out / "scaling.png"
    fig.savefig(scaling_path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return [main_path, scaling_path]


def write(source: Path, out: Path) -> list[Path]:
    records = load(source)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, out / "multicore.jsonl")
    (out / "tables.md").write_text(tables(records))
    return [out / "multicore.jsonl", out / "tables.md", *charts(records, out)]


if __name__ == "__main__":
    for written in write(Path(sys.argv[1]), Path(sys.argv[2])):
        print(written)
