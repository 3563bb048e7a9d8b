"""--worker-cpu-affinity: every worker on one core, spread, across HUP and TTIN/TTOU."""

from __future__ import annotations

import os
import signal

import pytest
from conftest import lifecycle_app, wait_until

from supervise.affinity import AUTO, OFF, core_for, parse

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this platform"
)
CORES = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def allowed(pid: int) -> set[int]:
    return set(os.sched_getaffinity(pid))


def test_parse() -> None:
    assert parse("off") == OFF
    assert parse("AUTO") == AUTO
    assert parse("0,2-3") == [0, 2, 3]
    assert parse([1, 0]) == [0, 1]
    for bad in ("a", "3-1", "1-", ",", "-1"):
        with pytest.raises(ValueError):
            parse(bad)


def test_worker_n_goes_to_core_n_modulo() -> None:
    assert [core_for([4, 6], i) for i in range(4)] == [4, 6, 4, 6]
    assert core_for(OFF, 3) is None


def test_a_bad_list_is_a_config_error(start_server) -> None:
    server = start_server("--worker-cpu-affinity", "2-1", "--check-config", wait=False)
    assert server.proc.wait(20) != 0
    assert "worker_cpu_affinity" in server.log()


def test_auto_spreads_the_workers_over_the_cores(start_server, any_worker) -> None:
    workers = len(CORES)
    server = start_server(
        "-k", any_worker, "-w", str(workers), "--worker-cpu-affinity", "auto",
        lifecycle_app(any_worker),
    )  # fmt: skip
    pids = server.wait_workers(workers)
    # A worker pins itself just after fork: the last one may be a moment behind.
    wait_until(lambda: all(len(allowed(pid)) == 1 for pid in pids))
    cores = [allowed(pid) for pid in pids]
    assert set().union(*cores) == set(CORES)
    assert allowed(server.pid) == set(CORES)  # the master is not pinned


def test_pinning_holds_across_hup_and_ttin(start_server) -> None:
    server = start_server("-w", "1", "--worker-cpu-affinity", str(CORES[0]), lifecycle_app("sync"))
    (first,) = server.wait_workers(1)
    server.signal(signal.SIGHUP)
    wait_until(lambda: (w := server.workers()) and first not in w and len(w) == 1)
    server.signal(signal.SIGTTIN)
    pids = server.wait_workers(2)
    wait_until(lambda: all(allowed(pid) == {CORES[0]} for pid in pids))


def test_off_leaves_workers_to_the_kernel(start_server) -> None:
    server = start_server("-w", "1", lifecycle_app("sync"))
    (pid,) = server.wait_workers(1)
    assert allowed(pid) == set(CORES)
