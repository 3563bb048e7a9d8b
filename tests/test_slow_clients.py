"""slowhttptest against every worker class while a normal client keeps asking.

Each class meets the three slow attacks at once (slowloris, slow body, slow
read: 100 connections each, follow-up data every 2 s, well inside
header_timeout and body_timeout), with the default settings and one worker,
while a probe client makes a request every 200 ms. Every probe must be
answered 200 within PROBE_BOUND, and slowhttptest's own probe must never
find the service unavailable. The long mode (1,000 connections per attack)
is `python tests/hostile.py --long`; its figures are in docs/reliability.md.
"""

from __future__ import annotations

import pytest
from conftest import WSGI_WORKERS, worker_params
from hostile import (
    MODES,
    Prober,
    attack_result,
    hostile_app,
    slowhttptest,
    slowhttptest_binary,
    worker_rss,
)

pytestmark = [
    pytest.mark.long,
    pytest.mark.skipif(
        slowhttptest_binary() is None,
        reason="slowhttptest is not installed (Debian package; .ci/run installs it as root)",
    ),
]

SECONDS = 15
SLOW_CONNECTIONS = 300  # in all, shared by the attacks a class meets


# The WSGI workers that run the app on a thread or a process (sync, gthread)
# hold it there while the app reads the body or writes the response: a slow
# body or a slow reader occupies it for up to body_timeout between reads and
# timeout per write. That is by design (docs/operations.md, "Slow clients"):
# they keep only slowloris off, and slow bodies and readers are nginx's job
# in front of them (proxy_request_buffering and proxy_buffering, its defaults).
THREAD_BOUND = ("sync", "gthread")


def attacks_for(worker: str) -> list[str]:
    return ["slowloris"] if worker in THREAD_BOUND else list(MODES)


@pytest.mark.parametrize("worker", WSGI_WORKERS + worker_params("asgi") + worker_params("rsgi"))
def test_slow_attacks_leave_the_server_answering(start_server, worker: str) -> None:
    server = start_server("-k", worker, hostile_app(worker))
    assert server.get("/")[0] == 200
    rss_before = sum(worker_rss(server.pid).values())
    attacks = {
        mode: slowhttptest(
            mode,
            server.host,
            server.port,
            connections=SLOW_CONNECTIONS // len(attacks_for(worker)),
            seconds=SECONDS,
        )
        for mode in attacks_for(worker)
    }
    with Prober(server.host, server.port) as prober:
        results = [attack_result(mode, proc, SECONDS + 30) for mode, proc in attacks.items()]
    probes = prober.result
    assert probes.total >= 10, "the probe client hardly ran"
    assert not probes.failures, f"{len(probes.failures)} of {probes.total}: {probes.failures[:5]}"
    for result in results:
        # slowhttptest did hold connections open (it attacked), and its own
        # probe was always answered.
        assert result.most_connected > 0, result.output[-2000:]
        assert not result.unavailable, f"{result.mode}: {result.output[-2000:]}"
    growth = sum(worker_rss(server.pid).values()) - rss_before
    assert growth < 50 * 2**20, f"workers grew by {growth / 2**20:.0f} MiB"
    assert server.get("/")[0] == 200
