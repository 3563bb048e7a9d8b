"""What the master imports before it forks is in every worker's pages too:
modules that only a rare setting uses are imported when it is used, not at
boot (docs/performance.md, "Memory per worker")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from supervise.workers import WORKERS

# Each is a few hundred KiB of a master's memory, with the modules it brings:
# difflib (suggestions for a misspelt name), ctypes (QUIC routing's BPF
# program), logging.config and logging.handlers (a user's logging file, syslog).
ONLY_WHEN_USED = ("difflib", "ctypes", "logging.config", "logging.handlers", "configparser")

BOOT = """
import sys
from supervise import arbiter, cli, config
from supervise.workers import load_worker_class
cfg = config.Config()
cls = load_worker_class(sys.argv[1])
cls.import_in_master(cfg)
print(" ".join(m for m in {modules!r} if m in sys.modules))
"""


@pytest.mark.parametrize("worker", sorted(WORKERS))
def test_master_boot_leaves_rarely_used_modules_out(worker):
    code = BOOT.format(modules=ONLY_WHEN_USED)
    done = subprocess.run(
        [sys.executable, "-c", code, worker], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0 and "needs" in done.stderr:
        pytest.skip(f"{worker}: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def _maps(pid: int, name: str) -> bool:
    with open(f"/proc/{pid}/maps") as maps:
        return any(name in line for line in maps)


@pytest.mark.parametrize(
    ("loop", "interface", "loop_in_master"),
    [
        ("auto", "wsgi", False),
        ("uvloop", "wsgi", False),
        ("auto", "auto", True),
    ],
)
def test_a_wsgi_app_on_the_native_worker_runs_without_a_loop(
    start_server, loop, interface, loop_in_master
):
    """-k native runs a WSGI app on its runtime threads, and its main thread
    only keeps house, so no process imports asyncio or uvloop for it once
    --interface says WSGI, whatever --loop says (their C parts' mappings
    in /proc/PID/maps tell). Under --interface auto the master imports them
    for an ASGI or RSGI app, and the worker inherits the mappings."""
    import _asyncio

    pytest.importorskip("uvloop")
    if not getattr(_asyncio, "__file__", None):
        pytest.skip("this Python has _asyncio built in: its maps cannot tell")
    server = start_server("lifecycle_app:app", "-k", "native", "--loop", loop,
                          "--interface", interface)  # fmt: skip
    (worker,) = server.wait_workers(1)
    assert server.get("/")[0] == 200
    for pid in (server.pid, worker):
        assert _maps(pid, "/_asyncio.") is loop_in_master
        assert _maps(pid, "uvloop") is loop_in_master
