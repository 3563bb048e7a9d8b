#!/usr/bin/env python3
"""Parser strictness, measured the same way for every server of the suite: the HTTP/1.1
corpora of ../shared/conformance replayed against supervise's workers and the peers,
each serving the same echo app (tests/apps/echo_app.py), each case judged by the same
rules as tests/test_conformance.py (tests/http1_corpus.py).

    python benchmarks/conformance.py                          # every server, every corpus
    python benchmarks/conformance.py --servers 'granian-*,supervise-sync'
    python benchmarks/conformance.py --list                   # what would run

Writes results/conformance/DATE-HOST.{json,md}. No load and no pinning: the answers, not
the speed, are measured, so the run may share the machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import http1_corpus
from bench import machine, peers, plan, procs, servers

BENCH_DIR = peers.BENCH_DIR
REPO = BENCH_DIR.parent
ECHO_DIR = REPO / "tests" / "apps"
CORPORA = REPO.parent / "shared" / "conformance" / "http1"
RESULTS = BENCH_DIR / "results" / "conformance"
# A server that neither answers nor closes within this long after the client's FIN
# is counted as hanging on that case (the tests wait 5 s for supervise's workers).
CASE_TIMEOUT = 3.0
SHOWN_PER_SERVER = 12


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="HTTP/1.1 corpora against every server.")
    p.add_argument("--servers", type=lambda t: [s for s in t.split(",") if s], default=[])
    p.add_argument("--python", default="3.11", help="Python version the servers run on")
    p.add_argument("--corpora", type=Path, default=CORPORA, help="the http1 corpora folder")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--list", action="store_true", help="print the servers and corpora, then exit")
    p.add_argument(
        "--render", type=Path, metavar="JSON", help="only rewrite a report from its JSON"
    )
    return p.parse_args(argv)


def _env(venv: peers.Venv) -> dict[str, str]:
    return peers.server_env(venv, pythonpath=[str(ECHO_DIR), str(BENCH_DIR)])


def _connector(port: int):
    def connect(timeout: float) -> socket.socket:
        return socket.create_connection((servers.HOST, port), timeout=min(timeout, CASE_TIMEOUT))

    return connect


def check_server(server, venv, corpora: dict, logs: Path, log) -> dict:
    """One server started on the echo app, every corpus replayed, then stopped."""
    entry = {"server": server.name, "interface": server.interface, "status": "ok", "reason": ""}
    entry["version"] = venv.versions.get(server.dist, "?")
    port = procs.free_port()
    options = servers.Options(echo=True)
    try:
        cmd = server.command(venv, port, options)
    except servers.Unsupported as exc:
        return {**entry, "status": "skipped", "reason": str(exc)}
    entry["command"] = [Path(cmd[0]).name, *cmd[1:]]
    logfile = logs / f"{server.name}.log"
    every_cpu = procs.cpu_list(os.sched_getaffinity(0))
    proc = procs.start(cmd, cpus=every_cpu, cwd=BENCH_DIR, env=_env(venv), log=logfile)
    try:
        if not procs.wait_listening(proc, port, 60.0):
            tail = logfile.read_text(errors="replace")[-400:]
            return {**entry, "status": "failed", "reason": f"did not start: {tail}"}
        folders = {}
        for folder, cases in corpora.items():
            started = time.monotonic()
            result = http1_corpus.replay(_connector(port), folder, cases, half_close=False)
            folders[folder] = {
                "passed": result.passed,
                "total": result.total,
                "misses": result.misses,
                "violations": result.violations,
                "silent": result.silent,
            }
            log(
                f"  {server.name:<22} {folder:<18} {result.passed:>4}/{result.total:<4} "
                f"violations {len(result.violations):>3}  ({time.monotonic() - started:.0f} s)"
            )
        entry["folders"] = folders
        if proc.poll() is not None:
            entry["reason"] = "exited during the replay"
    finally:
        procs.stop(proc)
    return entry


def _smuggled(entry: dict) -> int:
    return sum(
        1
        for f in entry.get("folders", {}).values()
        for why in f["violations"].values()
        if why.startswith("answered the smuggled")
    )


def _silent(entry: dict) -> int:
    return sum(len(f["silent"]) for f in entry.get("folders", {}).values())


def render(doc: dict) -> str:
    names = doc["folders"]
    out = [
        f"# HTTP/1.1 conformance — {doc['date']}, {doc['machine']['host']}",
        "",
        f"Command: `{doc['command']}`. supervise: commit "
        f"`{doc['supervise_source'].get('commit', '?')[:12]}`, local edits: "
        f"{doc['supervise_source'].get('dirty', '?')}.",
        "",
        "Each server serves the same echo app (`tests/apps/echo_app.py`: its answer says "
        "what the server handed the app) and gets every case of `../shared/conformance/http1` "
        "on a fresh connection, judged by `tests/http1_corpus.py` as the test suite judges "
        "supervise: `accept` cases must reach the app as the corpus parsed them (a 400 to an "
        "HTTP/1.1 request without Host is right), `reject` and `incomplete` ones must never "
        "get a 2xx, `no-second` ones must get one answer only. Cases that need non-default "
        f"parser settings are left out. The client keeps its side open (hyper, under Granian, "
        "drops a half-closed connection unanswered) and stops reading once the server has "
        "been quiet for 0.3 s after its first byte. *Smuggled*: answers to a request hidden "
        "in a body (never acceptable; counted wrong too). ⚠: the server exited during the "
        "replay (see below). *Silent*: neither an answer nor a close within "
        f"{doc['case_timeout']:.0f} s (right for some `incomplete` cases, a slow 4xx for "
        "others).",
        "",
        "| Server | Version | " + " | ".join(f"`{n}`" for n in names) + " | Right | Smuggled "
        "| Silent |",
        "|---|---|" + "--:|" * (len(names) + 3),
    ]
    for entry in doc["servers"]:
        shown = (
            f"**{entry['server']}**" if entry["server"].startswith("supervise") else entry["server"]
        )
        if entry["status"] != "ok":
            dashes = " | ".join("—" for _ in names)
            out.append(f"| {shown} | {entry['version']} | {dashes} | {entry['status']} | | |")
            continue
        folders = entry["folders"]
        if entry["reason"]:
            shown += " ⚠"
        cells = [f"{folders[n]['passed']}/{folders[n]['total']}" for n in names]
        right = sum(folders[n]["passed"] for n in names)
        total = sum(folders[n]["total"] for n in names)
        out.append(
            f"| {shown} | {entry['version']} | {' | '.join(cells)} | {right}/{total} "
            f"| {_smuggled(entry)} | {_silent(entry)} |"
        )
    out += ["", "## What each server got wrong", ""]
    for entry in doc["servers"]:
        if entry["status"] != "ok":
            out += [f"### {entry['server']}", "", f"{entry['status']}: {entry['reason']}", ""]
            continue
        wrong = [
            (folder, name, why)
            for folder, f in entry["folders"].items()
            for name, why in {**f["misses"], **f["violations"]}.items()
        ]
        out += [f"### {entry['server']}", ""]
        if entry["reason"]:
            refused = next(
                (
                    f"`{folder}/{name}`"
                    for folder, name, why in wrong
                    if why.startswith("no connection")
                ),
                "",
            )
            since = f"; every case from {refused} on was refused" if refused else ""
            out += [f"⚠ The server {entry['reason']}{since}.", ""]
        if not wrong:
            out += ["Nothing.", ""]
            continue
        out += [f"- `{folder}/{name}`: {why}" for folder, name, why in wrong[:SHOWN_PER_SERVER]]
        if len(wrong) > SHOWN_PER_SERVER:
            out.append(f"- … and {len(wrong) - SHOWN_PER_SERVER} more (in the JSON)")
        out.append("")
    out += ["## Command lines", ""]
    for entry in doc["servers"]:
        if entry.get("command"):
            out.append(f"- {entry['server']}: `{shlex.join(entry['command'])}`")
    out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.render:
        args.render.with_suffix(".md").write_text(render(json.loads(args.render.read_text())))
        return 0
    if not args.corpora.is_dir():
        print(f"no corpora at {args.corpora}: this needs ../shared/conformance (see its README)")
        return 2
    corpora = {f: http1_corpus.load(args.corpora, f) for f in http1_corpus.folders(args.corpora)}
    host = machine.describe()["host"]
    stem = f"{datetime.date.today().isoformat()}-{host}"
    logs = BENCH_DIR / ".work" / "logs" / f"conformance-{stem}"
    logs.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        print(line, flush=True)

    venv = peers.prepare(args.python, charts=False, upgrade=False, log=log)
    available, missing = servers.available_peers(venv)
    available += servers.supervise_servers(venv, log)
    # Static-file rows serve a folder, not the echo app: the parser is their base row's.
    available = [s for s in available if s.interface != servers.STATIC]
    chosen = plan.select_servers(available, args.servers, quick_only=False)
    count = sum(len(c) for c in corpora.values())
    log(f"{len(chosen)} servers x {count} cases in {len(corpora)} corpora")
    if args.list:
        for server in chosen:
            print(f"  {server.name} ({server.interface})")
        return 0
    started = time.monotonic()
    results = [check_server(s, venv, corpora, logs, log) for s in chosen]
    doc = {
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/conformance.py " + shlex.join(argv),
        "machine": machine.describe(),
        "supervise_source": peers.source_state(),
        "case_timeout": CASE_TIMEOUT,
        "folders": list(corpora),
        "missing": missing,
        "elapsed_s": round(time.monotonic() - started),
        "servers": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    report = args.out / f"{stem}.md"
    report.write_text(render(doc))
    log(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
