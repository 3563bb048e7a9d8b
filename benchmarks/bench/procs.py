"""Start a server on its cores, wait until it listens, measure its memory, stop it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

_PR_SET_PDEATHSIG = 1
# Resolved now: the preexec function runs between fork and exec.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def free_port(udp: bool = False) -> int:
    """A free TCP port; with `udp`, one whose number is free over UDP too (HTTP/3 servers
    bind both, TLS on TCP and QUIC on UDP, on one number)."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if not udp:
            return port
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as dgram:
            try:
                dgram.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise OSError("no port free over both TCP and UDP")


def cpu_list(cpus: Iterable[int]) -> str:
    """A taskset CPU list: "0" or "0,1"."""
    return ",".join(str(c) for c in sorted(cpus))


def _die_with_harness() -> Callable[[], None] | None:
    """A preexec_fn that has the kernel send SIGTERM to the server when the
    harness dies (killed, or the pytest running it interrupted): in a session of
    its own, the server would otherwise keep serving. The kernel's "parent" is
    the thread that started the process, so only the main thread arms it."""
    if _prctl is None or threading.current_thread() is not threading.main_thread():
        return None
    harness = os.getpid()

    def arm() -> None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != harness:  # the harness went before the signal was armed
            os._exit(1)

    return arm


def start(cmd: list[str], *, cpus: str, cwd: Path, env: dict[str, str], log: Path):
    """Launch under `taskset -c CPUS` so every process the server forks inherits the same
    cores: one core for the pinned tables, every core the harness may use for the
    unpinned ones (named explicitly: the harness's own affinity is the load core, which
    children would otherwise inherit)."""
    out = log.open("wb")
    # A session of its own: stopping the server signals its whole process group, workers
    # included, and never the harness.
    proc = subprocess.Popen(
        ["taskset", "-c", cpus, *cmd],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_harness(),  # taskset execs the server: the signal stays armed
    )
    out.close()
    return proc


def wait_listening(proc: subprocess.Popen, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """TERM the server's process group, KILL it if it lingers."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
    # Workers can outlive a master that exited; the group id is still the master's pid.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(5)


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: fields start after the last ")".
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def tree_pids(root: int) -> list[int]:
    tree = _children()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(tree.get(pid, []))
    return pids


def _kib(path: str, key: bytes) -> int:
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def tree_memory(root: int) -> dict[str, int]:
    """RSS summed over the process tree (what `ps` users compare) and PSS (shared pages
    split between the processes, so forked workers are not counted twice), in bytes."""
    pids = tree_pids(root)
    rss = sum(_kib(f"/proc/{pid}/status", b"VmRSS:") for pid in pids)
    pss = sum(_kib(f"/proc/{pid}/smaps_rollup", b"Pss:") for pid in pids)
    return {"rss": rss * 1024, "pss": pss * 1024, "processes": len(pids)}


def cpu_seconds(pids: Iterable[int]) -> dict[int, float]:
    """User + system CPU seconds each live process of ``pids`` has used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    used = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        used[pid] = (int(fields[11]) + int(fields[12])) / tick
    return used


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds used between two ``cpu_seconds`` readings, by the processes in both
    (one that left in between would otherwise make the sum shrink)."""
    return sum(after[pid] - before[pid] for pid in before if pid in after)


class MemorySampler(threading.Thread):
    """Keeps the peak tree memory while a load runs."""

    def __init__(self, root: int, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.interval = interval
        self.peak = {"rss": 0, "pss": 0, "processes": 0}
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            sample = tree_memory(self.root)
            for key, value in sample.items():
                self.peak[key] = max(self.peak[key], value)

    def finish(self) -> dict[str, int]:
        self._stop_event.set()
        self.join()
        return self.peak
