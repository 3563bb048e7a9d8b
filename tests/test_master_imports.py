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


def _maps_uvloop(pid: int) -> bool:
    with open(f"/proc/{pid}/maps") as maps:
        return any("uvloop" in line for line in maps)


@pytest.mark.parametrize(
    ("loop", "interface", "master_has", "worker_has"),
    [
        ("auto", "wsgi", False, False),
        ("uvloop", "wsgi", True, True),
    ],
)
def test_the_native_workers_wsgi_loop_is_the_standard_librarys(
    start_server, loop, interface, master_has, worker_has
):
    """-k native runs a WSGI app on its runtime threads; the loop beside it
    only keeps house, so under --loop auto it is asyncio's, and once
    --interface says WSGI no process maps uvloop's code (/proc/PID/maps).
    Under --interface auto the master imports it for an ASGI or RSGI app,
    and a worker inherits the mapping, so only the first case is told by
    maps; --loop uvloop is still honoured."""
    pytest.importorskip("uvloop")
    server = start_server("lifecycle_app:app", "-k", "native", "--loop", loop,
                          "--interface", interface)  # fmt: skip
    (worker,) = server.wait_workers(1)
    assert server.get("/")[0] == 200
    assert _maps_uvloop(server.pid) is master_has
    assert _maps_uvloop(worker) is worker_has
