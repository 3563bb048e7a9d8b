"""The attacks of tests/attacks.py against supervise's classes and its peers
(Granian, Uvicorn, Gunicorn), one server at a time, each with its defaults
and one worker, for the side-by-side table of docs/reliability.md:

    python tests/peer_attacks.py --peers-venv benchmarks/.venvs/py3.11
    python tests/peer_attacks.py --peers-venv /tmp/peers --only 'granian-*' -a ping-flood

The peers' venv needs granian, uvicorn[standard], gunicorn and gevent. Each
row: the server tree's RSS before, at the peak and 5 s after the attacking
clients left, the probes answered (a GET every 0.5 s, 5 s bound), and the
attacking connections the server closed by itself. By hand only: minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from attacks import closed_among, h2_zero_window, hold_slow_readers, ping_flood
from conftest import APPS_DIR, REPO_DIR, children_of, free_port
from hostile import Prober

HOST = "127.0.0.1"


@dataclass
class Target:
    name: str
    interface: str  # wsgi, asgi, rsgi: the hostile_app entry point
    features: frozenset[str]  # ws, h2

    def command(self, port: int, peers: Path) -> list[str]:
        app = (
            "hostile_app:"
            + {
                "wsgi": "app",
                "asgi": "asgi_ws_app",
                "rsgi": "rsgi_ws_app",
            }[self.interface]
        )
        bind = f"{HOST}:{port}"
        kind, _, variant = self.name.partition("-")
        if kind == "supervise":
            return [sys.executable, "-m", "supervise", "-k", variant, "-b", bind, app]
        if kind == "granian":
            granian = str(peers / "bin/granian")
            return [granian, "--interface", variant, "--host", HOST, "--port", str(port), app]
        if kind == "uvicorn":
            return [str(peers / "bin/uvicorn"), "--host", HOST, "--port", str(port), app]
        return [str(peers / "bin/gunicorn"), "-k", variant, "-b", bind, app]


W, A, R = "wsgi", "asgi", "rsgi"
TARGETS = [
    Target("supervise-sync", W, frozenset()),
    Target("supervise-gthread", W, frozenset()),
    Target("supervise-gevent", W, frozenset()),
    Target("supervise-native", W, frozenset({"h2"})),
    Target("supervise-asgi", A, frozenset({"ws"})),
    Target("supervise-rsgi", R, frozenset({"ws", "h2"})),
    Target("gunicorn-sync", W, frozenset()),
    Target("gunicorn-gthread", W, frozenset()),
    Target("gunicorn-gevent", W, frozenset()),
    Target("granian-wsgi", W, frozenset({"h2"})),
    Target("granian-asgi", A, frozenset({"ws", "h2"})),
    Target("granian-rsgi", R, frozenset({"ws", "h2"})),
    Target("uvicorn-asgi", A, frozenset({"ws"})),
]
ATTACKS = {"slow-readers": None, "ping-flood": "ws", "h2-zero-window": "h2"}


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children_of(p))
        with contextlib.suppress(OSError), open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def serving(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


class Peak:
    """Samples a tree's RSS every 0.2 s in a thread; the highest seen."""

    def __init__(self, pid: int) -> None:
        self.pid, self.value = pid, tree_rss(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.value = max(self.value, tree_rss(self.pid))


def attack(name: str, port: int, seconds: float) -> tuple[int, int]:
    """Runs one attack; (connections opened, closed by the server)."""
    if name == "ping-flood":
        out = ping_flood(HOST, port, "/ws", clients=10, seconds=seconds)
        return out.opened, out.closed_by_server
    if name == "slow-readers":
        socks = hold_slow_readers(HOST, port, "/huge", 100)
        time.sleep(seconds)
    else:
        socks = [h2_zero_window(HOST, port, "/huge", streams=100)]
        time.sleep(seconds)
    try:
        return len(socks), closed_among(socks)
    finally:
        for sock in socks:
            sock.close()


def run_one(target: Target, name: str, peers: Path, seconds: float) -> str:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(APPS_DIR), WEB_CONCURRENCY="1")
    proc = subprocess.Popen(
        target.command(port, peers),
        cwd=APPS_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not serving(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                return f"| {target.name} | {name} | did not start | | | | |"
            time.sleep(0.2)
        time.sleep(1)
        before = tree_rss(proc.pid)
        with Peak(proc.pid) as peak, Prober(HOST, port, interval=0.5) as prober:
            try:
                opened, closed = attack(name, port, seconds)
            except OSError as exc:
                return f"| {target.name} | {name} | refused: {exc} | | | | |"
        time.sleep(5)
        after = tree_rss(proc.pid)
        probes = prober.result
        mib = 2**20
        return (
            f"| {target.name} | {name} | {before / mib:.0f} → {peak.value / mib:.0f} → "
            f"{after / mib:.0f} MiB | {probes.ok}/{probes.total} | {probes.worst:.2f} s "
            f"| {closed}/{opened} |"
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers-venv", type=Path, required=True)
    parser.add_argument("--only", action="append", help="server name glob (repeatable)")
    parser.add_argument("-a", "--attack", action="append", choices=list(ATTACKS))
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    print(f"supervise from {REPO_DIR}; peers from {args.peers_venv}")
    print("| server | attack | RSS before → peak → 5 s after | probes | worst probe | dropped |")
    print("|---|---|---|---|---|---|")
    for name in args.attack or list(ATTACKS):
        for target in TARGETS:
            if args.only and not any(fnmatch.fnmatch(target.name, g) for g in args.only):
                continue
            need = ATTACKS[name]
            if need is not None and need not in target.features:
                continue
            print(run_one(target, name, args.peers_venv, args.seconds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
