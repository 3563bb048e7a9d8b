"""Soak: keep-alive load on one worker class while the arbiter gets every
signal and the app misbehaves; counts every request the clients lost.

One cycle, under load all along (tests/keepalive_client.py, wrk's model):
HUP, TTIN, a worker SIGKILLed at random, TTOU, a HUP whose app import
fails (the old generation must keep serving), a HUP that works again, the
app deadlocking one worker (GET /block: --timeout kills and replaces it),
USR2 and TERM of the old master. All the while the app leaks memory on every
request and only --max-requests recycling bounds it (tests/apps/soak_app.py).
A worker that served while the app could not be imported is exempt from that
bound: its replacement cannot boot, so it rightly goes on serving (and leaking)
past max-requests until the HUP that repairs the app replaces it.

Zero failed requests is the only pass, except on the two workers killed on
purpose: a sampler reads every few milliseconds which worker holds which
client port (/proc), and a failed connection last seen on a killed worker is
counted apart ("on killed workers"), as is one that was never seen, opened
before a kill and failed just after it (accepted in the last milliseconds).

    pytest tests/test_soak.py                          # CI: one cycle per class
    python tests/soak.py -k asgi --cycles 20           # by hand: the long run
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conftest import Server, children_of, is_gone, launch
from keepalive_client import Failure, LoadResult, run_load

CONNECTIONS = 32
MAX_REQUESTS = 1000
LEAK = 16384  # bytes leaked per request: ~16 MiB a worker before it is recycled
# A worker's RSS past this means recycling failed to bound the leak.
RSS_BOUND = 512 * 1024 * 1024
# The arbiter's --timeout for the deadlocked worker; the client's stall limit is above it.
TIMEOUT = 3
STALL = 10.0
# A failed connection never seen on any worker, opened before a kill and failed
# at most this long after it, was accepted by the killed worker in its last moments.
UNSEEN_WINDOW = 2.0
SAMPLE_EVERY = 0.01


def server_args(worker: str, *, pidfile: Path, workers: int = 2) -> list[str]:
    app = {"rsgi": "soak_app:rsgi_app", "asgi": "soak_app:asgi_app"}.get(worker, "soak_app:app")
    return [
        *("-k", worker, "-w", str(workers), "--pid", str(pidfile)),
        *("--max-requests", str(MAX_REQUESTS), "--max-requests-jitter", "100"),
        *("--timeout", str(TIMEOUT), "--graceful-timeout", "10"),
        app,
    ]


def _listening_port_inodes(port: int) -> dict[int, int]:
    """socket inode -> the client's port, for the server side of every TCP
    connection to ``port`` (IPv4 and IPv6)."""
    inodes = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    local, remote, inode = cols[1], cols[2], int(cols[9])
                    if int(local.rsplit(":", 1)[1], 16) == port and inode:
                        remote_port = int(remote.rsplit(":", 1)[1], 16)
                        if remote_port:
                            inodes[inode] = remote_port
        except OSError:
            continue
    return inodes


def _socket_inodes(pid: int) -> set[int]:
    found = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(int(target[8:-1]))
    except OSError:
        pass
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


class Owners:
    """Which worker holds which client port, sampled in the background; also
    when each worker was last seen alive and the largest RSS of any worker."""

    def __init__(self, port: int, masters: Callable[[], list[int]]) -> None:
        self.port = port
        self.masters = masters
        # client port -> [[worker pid, first seen, last seen], ...]: a port is
        # reused by later connections, so ownership is kept per span of time.
        self.seen: dict[int, list[list]] = {}
        self.last_alive: dict[int, float] = {}
        self.max_rss: dict[int, int] = {}  # worker pid -> its largest RSS
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def workers(self) -> list[int]:
        return [pid for master in self.masters() for pid in children_of(master)]

    def sample(self, pids: list[int] | None = None) -> None:
        pids = self.workers() if pids is None else pids
        inodes = _listening_port_inodes(self.port)
        now = time.monotonic()
        with self.lock:
            for pid in pids:
                for inode in _socket_inodes(pid) & inodes.keys():
                    spans = self.seen.setdefault(inodes[inode], [])
                    if spans and spans[-1][0] == pid:
                        spans[-1][2] = now
                    else:
                        spans.append([pid, now, now])
                self.last_alive[pid] = now
                self.max_rss[pid] = max(self.max_rss.get(pid, 0), _rss(pid))

    def _run(self) -> None:
        while not self.done.wait(SAMPLE_EVERY):
            self.sample()

    def owner(self, failure: Failure) -> int | None:
        """The worker seen holding the failed connection while it was open."""
        with self.lock:
            spans = list(self.seen.get(failure.port, ()))
        end = failure.failed or time.monotonic()
        for pid, first, last in reversed(spans):
            if first <= end and last >= failure.opened:
                return pid
        return None

    def alive_since(self, since: float) -> set[int]:
        """Workers seen alive at ``since`` or later."""
        with self.lock:
            return {pid for pid, last in self.last_alive.items() if last >= since}

    def stop(self) -> None:
        self.done.set()
        self.thread.join(10)


@dataclass
class Report:
    requests: int = 0
    non_2xx: int = 0
    lost: list[str] = field(default_factory=list)  # failed requests not on a killed worker
    on_killed: int = 0
    killed: dict[int, float] = field(default_factory=dict)  # pid -> when it died (ours + timeout)
    events: list[str] = field(default_factory=list)
    recycled: int = 0
    max_rss_mib: float = 0.0  # the largest worker, but those exempt (the module's docstring)
    exempt_rss_mib: float = 0.0  # the largest of those

    def summary(self) -> str:
        return (
            f"{self.requests} responses, {self.non_2xx} non-2xx, {len(self.lost)} lost, "
            f"{self.on_killed} on the {len(self.killed)} killed workers, "
            f"{self.recycled} recycled at max-requests, largest worker RSS "
            f"{self.max_rss_mib:.0f} MiB ({self.exempt_rss_mib:.0f} MiB on one serving "
            "while the app could not be imported)"
        )


class Soak:
    """One server under load; ``cycle()`` runs the signal and fault sequence once."""

    def __init__(self, server: Server, *, pidfile: Path, flags: Path, gap: float = 1.0) -> None:
        self.server = server
        self.pidfile = pidfile
        self.flags = flags
        self.gap = gap
        self.master = server.pid
        self.old_masters: list[int] = []
        self.report = Report()
        self.broken_since: float | None = None
        self.exempt: set[int] = set()  # workers that served while the app was broken
        self.owners = Owners(server.port, lambda: [self.master, *self.old_masters])
        self.stopping = threading.Event()
        self.result: LoadResult | None = None
        self.load = threading.Thread(target=self._load, daemon=True)

    # -- the load ------------------------------------------------------------------
    def _load(self) -> None:
        self.result = run_load(
            self.server.host,
            self.server.port,
            connections=CONNECTIONS,
            requests=10**12,
            time_limit=10**6,
            stop=self.stopping.is_set,
            stall=STALL,
        )

    def __enter__(self) -> Soak:
        self.load.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.load.join(STALL + 30)
        self.owners.stop()

    # -- helpers ---------------------------------------------------------------------
    def _log_count(self, pattern: str) -> int:
        return len(re.findall(pattern, self.server.log()))

    def _wait(self, what: str, predicate: Callable[[], object], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"soak: {what} not within {timeout}s\n{self.server.log()}")
            time.sleep(0.05)

    def _event(self, what: str) -> None:
        self.report.events.append(f"{time.monotonic():.3f} {what}")

    def _signal(self, sig: int) -> None:
        self._event(signal.Signals(sig).name)
        os.kill(self.master, sig)

    def _reload(self, *, broken: bool) -> None:
        done = "Reload failed: generation" if broken else "Reload complete: generation"
        before = self._log_count(done)
        if broken:
            self.broken_since = time.monotonic()
            (self.flags / "broken").touch()
        else:
            (self.flags / "broken").unlink(True)
        self._signal(signal.SIGHUP)
        self._wait(f"'{done}' after HUP", lambda: self._log_count(done) > before, 60)
        if not broken and self.broken_since is not None:
            self.exempt |= self.owners.alive_since(self.broken_since)
            self.broken_since = None

    # -- the events --------------------------------------------------------------------
    def kill_random_worker(self) -> None:
        """SIGKILL a serving worker; stopped first, so the ports it holds are known."""
        while True:
            pid = random.choice(children_of(self.master))
            try:
                os.kill(pid, signal.SIGSTOP)
                break
            except ProcessLookupError:  # it had just left (recycled at max-requests)
                continue
        self.owners.sample([pid])
        with contextlib.suppress(ProcessLookupError):  # the arbiter's own kill came first
            os.kill(pid, signal.SIGKILL)
        self.report.killed[pid] = time.monotonic()
        self._event(f"SIGKILL {pid}")

    def deadlock_a_worker(self) -> None:
        """GET /block: that worker stops beating and --timeout replaces it."""
        sock = socket.create_connection((self.server.host, self.server.port), timeout=60)
        sock.sendall(b"GET /block HTTP/1.1\r\nHost: soak\r\n\r\n")
        port = sock.getsockname()[1]
        probe = Failure(port, time.monotonic() - 1, 0.0, 0, "block")
        self._wait("the /block connection on a worker", lambda: self.owners.owner(probe))
        pid = self.owners.owner(probe)
        self._event(f"/block on {pid}")
        self._wait(f"the timeout kill of {pid}", lambda: not os.path.exists(f"/proc/{pid}/fd"))
        self.report.killed[pid] = self.owners.last_alive.get(pid, time.monotonic())
        sock.close()

    def usr2(self) -> None:
        """USR2, then TERM the old master once the new one serves."""
        ready = self._log_count(r"Ready: \d+ worker")
        old = self.master
        self._signal(signal.SIGUSR2)
        oldbin = Path(f"{self.pidfile}.oldbin")
        self._wait("the .oldbin pidfile", oldbin.exists)
        self._wait("the new master's pidfile", lambda: self._pidfile_pid() not in (0, old))
        self._wait("the new master serving", lambda: self._log_count(r"Ready: \d+ worker") > ready)
        self.old_masters.append(old)
        self.master = self._pidfile_pid()
        os.kill(old, signal.SIGTERM)
        self._event(f"TERM old master {old}")
        self._wait("the old master's exit", lambda: is_gone(old), 30)
        self.old_masters.remove(old)

    def _pidfile_pid(self) -> int:
        try:
            return int(self.pidfile.read_text().strip() or 0)
        except (OSError, ValueError):
            return 0

    def cycle(self) -> None:
        pause = lambda: time.sleep(self.gap)  # noqa: E731
        for step in (
            lambda: self._reload(broken=False),
            lambda: self._signal(signal.SIGTTIN),
            self.kill_random_worker,
            lambda: self._signal(signal.SIGTTOU),
            lambda: self._reload(broken=True),
            lambda: self._reload(broken=False),
            self.deadlock_a_worker,
            self.usr2,
        ):
            step()
            pause()

    # -- the verdict --------------------------------------------------------------------
    def finish(self) -> Report:
        """Stop the load and sort the failures: lost, or on a killed worker."""
        self.__exit__()
        result = self.result
        report = self.report
        assert result is not None
        report.requests, report.non_2xx = result.requests, result.non_2xx
        report.recycled = self._log_count(r"replaced \(max_requests\)")
        peaks = self.owners.max_rss
        report.max_rss_mib = max((v for p, v in peaks.items() if p not in self.exempt), default=0)
        report.max_rss_mib /= 2**20
        report.exempt_rss_mib = max((v for p, v in peaks.items() if p in self.exempt), default=0)
        report.exempt_rss_mib /= 2**20
        for failure in result.failures:
            owner = self.owners.owner(failure)
            if owner in report.killed or (owner is None and self._unseen_on_killed(failure)):
                report.on_killed += 1
            else:
                report.lost.append(
                    f"{failure.kind} on port {failure.port} (worker {owner}), "
                    f"{failure.responses} responses before, opened at {failure.opened:.3f}, "
                    f"failed at {failure.failed:.3f}"
                )
        return report

    def _unseen_on_killed(self, failure: Failure) -> bool:
        return any(
            failure.opened <= died <= failure.failed <= died + UNSEEN_WINDOW
            for died in self.report.killed.values()
        )

    def stop_server(self) -> int | None:
        """TERM the current master; its exit code when it was our child, else None."""
        os.kill(self.master, signal.SIGTERM)
        if self.master == self.server.pid:
            return self.server.proc.wait(30)
        self._wait("the master's exit", lambda: is_gone(self.master), 30)
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", "--worker", default="sync")
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between events")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="supervise-soak-"))
    flags = work / "flags"
    flags.mkdir()
    pidfile = work / "supervise.pid"
    server = launch(
        server_args(args.worker, pidfile=pidfile),
        work / "server.log",
        env={"SOAK_FLAGS": str(flags), "SOAK_LEAK": str(LEAK)},
    )
    server.wait_serving()
    soak = Soak(server, pidfile=pidfile, flags=flags, gap=args.gap)
    try:
        with soak:
            for n in range(args.cycles):
                soak.cycle()
                print(f"cycle {n + 1}/{args.cycles}: {', '.join(soak.report.events)}", flush=True)
                soak.report.events.clear()
        report = soak.finish()
    finally:
        soak.stop_server()
    print(f"{args.worker}: {report.summary()}")
    for line in report.lost[:20]:
        print("  lost:", line)
    print(f"log: {work / 'server.log'}")
    return 1 if report.lost or report.non_2xx else 0


if __name__ == "__main__":
    sys.exit(main())
