"""Slow and hostile clients: slowhttptest runs, a probe client, worker RSS.

Shared by tests/test_slow_clients.py and tests/test_resource_bounds.py (the
short CI mode) and runnable by hand for the long mode, one worker class and
one slowhttptest mode at a time, printing the figures of docs/reliability.md:

    python tests/hostile.py --long                     # 1,000 connections, 60 s each
    python tests/hostile.py --long -k gthread -m slowloris --seconds 120
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conftest import children_of

# slowhttptest's switch per attack; the request each one sends (see hostile_app.py).
MODES = {"slowloris": "-H", "slow-body": "-B", "slow-read": "-X"}
MODE_PATHS = {"slowloris": "/", "slow-body": "/", "slow-read": "/big"}

# A probe that waits longer than this counts as unanswered: a server that is
# down, not a slow one (the bound is generous on purpose; see the tests).
PROBE_BOUND = 5.0


def hostile_app(worker: str) -> str:
    """tests/apps/hostile_app.py's app for a worker class's interface."""
    from conftest import interface_of

    return (
        "hostile_app:"
        + {"wsgi": "app", "asgi": "asgi_app", "rsgi": "rsgi_app"}[interface_of(worker)]
    )


def slowhttptest_binary() -> str | None:
    return shutil.which("slowhttptest") or (
        "/usr/bin/slowhttptest" if Path("/usr/bin/slowhttptest").exists() else None
    )


@dataclass
class Probes:
    """What a normal client saw while an attack ran: one result per request."""

    ok: int = 0
    failures: list[str] = field(default_factory=list)
    worst: float = 0.0

    @property
    def total(self) -> int:
        return self.ok + len(self.failures)


class Prober:
    """A normal client: a request every ``interval`` seconds, each one bounded
    by PROBE_BOUND, in a thread, until stopped. By default a GET / over a
    fresh plain connection; ``ask`` asks any other way (TLS, a PROXY header
    first) and returns the status and body, which must be 200 and "ok"."""

    def __init__(
        self,
        host: str = "",
        port: int = 0,
        interval: float = 0.2,
        ask: Callable[[], tuple[int, bytes]] | None = None,
    ) -> None:
        self.host, self.port, self.interval = host, port, interval
        self.ask = ask or self._get
        self.result = Probes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(PROBE_BOUND + 5)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self._probe(started)
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def _probe(self, started: float) -> None:
        try:
            status, body = self.ask()
            took = time.monotonic() - started
            if status == 200 and body == b"ok" and took <= PROBE_BOUND:
                self.result.ok += 1
            else:
                self.result.failures.append(f"{status} {body[:40]!r} after {took:.1f}s")
        except (OSError, http.client.HTTPException) as exc:
            took = time.monotonic() - started
            self.result.failures.append(f"{type(exc).__name__}: {exc} after {took:.1f}s")
        self.result.worst = max(self.result.worst, took)

    def _get(self) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=PROBE_BOUND)
        try:
            conn.request("GET", "/", headers={"Connection": "close"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()


@dataclass
class Attack:
    """The end of one slowhttptest run: its own verdicts and the most
    connections it held open at once."""

    mode: str
    output: str
    most_connected: int
    unavailable: bool


_STATUS = re.compile(r"connected:\s+(\d+).*?service available:\s+(\w+)", re.S)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def slowhttptest(
    mode: str, host: str, port: int, *, connections: int, seconds: int, rate: int = 200
) -> subprocess.Popen:
    """Start one slowhttptest run (the caller waits for it and reads it with
    ``attack_result``). Follow-up data every 2 s: well inside header_timeout
    and body_timeout, so only a server that bounds the whole head and body
    (or does not care) stays up."""
    binary = slowhttptest_binary()
    assert binary, "slowhttptest is not installed"
    args = [binary, MODES[mode], "-c", str(connections), "-r", str(rate), "-l", str(seconds)]
    args += ["-u", f"http://{host}:{port}{MODE_PATHS[mode]}", "-p", str(int(PROBE_BOUND))]
    if mode == "slow-read":
        # A receive window of 32-128 bytes read 32 bytes a second, ten requests
        # pipelined on each connection where keep-alive allows it.
        args += ["-k", "10", "-n", "1", "-w", "32", "-y", "128", "-z", "32"]
    else:
        args += ["-i", "2", "-x", "24"]
        if mode == "slow-body":
            args += ["-s", "1000000"]
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
    )


def attack_result(mode: str, proc: subprocess.Popen, timeout: float) -> Attack:
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
    output = _ANSI.sub("", output)
    reports = _STATUS.findall(output)
    most = max((int(n) for n, _ in reports), default=0)
    unavailable = any(verdict.upper() != "YES" for _, verdict in reports)
    return Attack(mode, output, most, unavailable)


def worker_rss(master: int) -> dict[int, int]:
    """Resident bytes of each worker process (the master's children)."""
    out = {}
    for pid in children_of(master):
        with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    out[pid] = int(line.split()[1]) * 1024
    return out


def _long(args: argparse.Namespace) -> int:
    from conftest import launch, shutdown

    print("| class | mode | connections held | probes answered | worst probe | RSS growth |")
    print("|---|---|---|---|---|---|")
    failed = 0
    for worker in args.worker or ["sync", "gthread", "gevent", "asgi", "rsgi", "native"]:
        for mode in args.mode or list(MODES):
            app = hostile_app(worker)
            log = Path(f"/tmp/hostile-{worker}-{mode}.log")
            server = launch(["-k", worker, app, "--backlog", "2048"], log)
            try:
                deadline = time.monotonic() + 30
                while not _serving(server) and time.monotonic() < deadline:
                    time.sleep(0.1)
                before = sum(worker_rss(server.pid).values())
                attack = slowhttptest(
                    mode,
                    server.host,
                    server.port,
                    connections=args.connections,
                    seconds=args.seconds,
                )
                with Prober(server.host, server.port) as prober:
                    result = attack_result(mode, attack, args.seconds + 60)
                after = sum(worker_rss(server.pid).values())
            finally:
                shutdown(server)
            probes = prober.result
            failed += bool(probes.failures)
            print(
                f"| {worker} | {mode} | {result.most_connected} | {probes.ok}/{probes.total} "
                f"| {probes.worst:.2f} s | {(after - before) / 2**20:+.1f} MiB |",
                flush=True,
            )
    return 1 if failed else 0


def _serving(server: object) -> bool:
    return server.is_serving()  # type: ignore[attr-defined]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--long", action="store_true", help="the long mode (the default)")
    parser.add_argument("-k", "--worker", action="append", help="a worker class (repeatable)")
    parser.add_argument("-m", "--mode", action="append", choices=list(MODES))
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=60)
    sys.exit(_long(parser.parse_args()))
