"""The soak test's short mode: one cycle of every signal and fault under load,
per worker class (tests/soak.py says what a cycle is; its long mode is run by hand)."""

from __future__ import annotations

import pytest
from soak import LEAK, RSS_BOUND, Soak, server_args

# Soaks, hostile clients and external suites: `pytest -m long` (CI runs it too).
pytestmark = pytest.mark.long


def test_one_soak_cycle_loses_nothing(start_server, any_worker, tmp_path):
    flags = tmp_path / "flags"
    flags.mkdir()
    pidfile = tmp_path / "supervise.pid"
    server = start_server(
        *server_args(any_worker, pidfile=pidfile),
        env={"SOAK_FLAGS": str(flags), "SOAK_LEAK": str(LEAK)},
    )
    soak = Soak(server, pidfile=pidfile, flags=flags)
    with soak:
        soak.cycle()
    report = soak.finish()
    print(f"{any_worker}: {report.summary()}")
    assert report.requests > 0
    # Every event with its time, and each kill's: a loss near one is judged by them.
    timeline = [*report.events, *(f"{t:.3f} died {pid}" for pid, t in report.killed.items())]
    assert not report.lost, "\n".join([report.summary(), *report.lost[:20], *sorted(timeline)])
    assert report.non_2xx == 0, report.summary()
    # Two kills on purpose (SIGKILL, and --timeout for the deadlocked worker).
    assert len(report.killed) == 2, report.events
    # The leak is bounded by recycling, not by luck (but where no replacement could boot).
    assert report.recycled > 0, report.summary()
    assert report.max_rss_mib * 2**20 < RSS_BOUND, report.summary()
    assert soak.stop_server() in (0, None)
