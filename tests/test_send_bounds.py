"""Clients that make the server owe them bytes and never take them
(tests/attacks.py): what a worker holds for them is bounded in time by
``--send-timeout`` and in memory by back-pressure, and handed back after.

- slow readers: each asks for an 8 MiB page (made anew per request) and
  reads nothing; every worker class closes them past the send timeout, a
  probe client is answered meanwhile, and the worker's RSS returns near
  where it started once they are gone;
- a WebSocket PING flood from clients that never read (the native server:
  `-k rsgi` and `-k native` with ASGI and RSGI apps; `-k asgi` is in
  tests/test_ws_hostile.py): memory stays flat, the probe is answered, and
  the flooders are closed past the send timeout;
- a client that reads, but slower than ``--send-min-rate``: dropped, while
  the same client over the floor is served;
- HTTP/2 with a zero flow-control window (the native server): the client
  opens streams and never lets a body byte through; the connection is
  dropped past the send timeout, and what it held with it.

The budgets are fixed figures, far from what the server did before (GBs);
nothing asserts how fast the server is.
"""

from __future__ import annotations

import time

import pytest
from attacks import (
    closed_among,
    closed_by_server,
    h2_zero_window,
    hold_slow_readers,
    paced_reader,
    ping_flood,
)
from conftest import WSGI_WORKERS, interface_of, worker_params
from hostile import Prober, hostile_app, worker_rss

# Soaks, hostile clients and external suites: `pytest -m long` (CI runs it too).
pytestmark = pytest.mark.long

SEND_TIMEOUT = 2
# Memory back near its start: within this of the RSS before the attack.
SETTLED_MARGIN = 40 * 2**20
# The page each slow reader asks for (tests/apps/hostile_app.py's /huge).
HUGE = 8 * 2**20
# What a flood of pings may grow the worker by.
FLOOD_BUDGET = 64 * 2**20

ALL_WORKERS = WSGI_WORKERS + worker_params("asgi") + worker_params("rsgi")
NATIVE = [p for p in worker_params("asgi") + worker_params("rsgi") if p.values[0] != "asgi"]
NATIVE_ALL = NATIVE + [p for p in WSGI_WORKERS if p.values[0] == "native"]


def rss(server) -> int:
    return sum(worker_rss(server.pid).values())


def settles(server, before: int, timeout: float = 10.0) -> int:
    """The workers' RSS once it has come back within SETTLED_MARGIN of
    ``before`` (the worker hands freed memory back once a second), or the
    last reading after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        now = rss(server)
        if now - before < SETTLED_MARGIN or time.monotonic() > deadline:
            return now
        time.sleep(0.25)


def start(start_server, worker: str, app: str, *extra: str):
    return start_server("-k", worker, app, "--send-timeout", str(SEND_TIMEOUT), *extra)


def slow_reader_count(worker: str) -> int:
    # sync serves one connection at a time (gthread one a thread): each
    # slow reader holds it for the send timeout, and the probe waits behind.
    return 1 if worker in ("sync", "gthread") else 20


@pytest.mark.parametrize("worker", ALL_WORKERS)
def test_clients_that_do_not_read_are_dropped_and_their_memory_given_back(
    start_server, worker
) -> None:
    server = start(start_server, worker, hostile_app(worker))
    before = rss(server)
    with Prober(server.host, server.port, interval=0.5) as prober:
        socks = hold_slow_readers(server.host, server.port, "/huge", slow_reader_count(worker))
        try:
            peak = before
            deadline = time.monotonic() + SEND_TIMEOUT * 2 + 1
            while time.monotonic() < deadline:
                peak = max(peak, rss(server))
                time.sleep(0.2)
            dropped = closed_among(socks)
        finally:
            for sock in socks:
                sock.close()
    assert dropped == len(socks), f"{len(socks) - dropped} slow readers still connected"
    # The page the app made for each, and not a second copy of it.
    copies = (peak - before) / (len(socks) * HUGE)
    assert copies < 1.5, f"RSS {before >> 20} -> {peak >> 20} MiB: {copies:.1f} pages a reader"
    assert not prober.result.failures, prober.result.failures[:5]
    after = settles(server, before)
    assert after - before < SETTLED_MARGIN, f"RSS {before >> 20} -> {after >> 20} MiB"
    assert server.get("/")[0] == 200


# The paced reader's speed, and how long it reads (tests/apps/hostile_app.py's
# /stream is longer than that at this speed).
READER_RATE = 2**20
READER_SECONDS = 10


@pytest.mark.parametrize("worker", ALL_WORKERS)
@pytest.mark.parametrize(
    "floor, dropped", [(8 * READER_RATE, True), (READER_RATE // 8, False)], ids=["under", "over"]
)
def test_a_client_reading_under_send_min_rate_is_dropped_and_one_over_it_served(
    start_server, worker, floor, dropped
) -> None:
    # The reader takes bytes often enough for --send-timeout alone to keep it.
    server = start_server(
        "-k", worker, hostile_app(worker), "--send-timeout", "3", "--send-min-rate", str(floor)
    )
    assert paced_reader(server.host, server.port, "/stream", READER_RATE, READER_SECONDS) is dropped
    if dropped:
        # Said once, with the reason.
        server.wait_for_log("slower than send_min_rate")
    assert server.get("/")[0] == 200


def ws_app(worker: str) -> str:
    return "hostile_app:" + {"asgi": "asgi_ws_app", "rsgi": "rsgi_ws_app"}[interface_of(worker)]


@pytest.mark.parametrize("worker", NATIVE)
def test_a_ping_flood_from_clients_that_never_read_stays_bounded(start_server, worker) -> None:
    server = start(start_server, worker, ws_app(worker))
    before = rss(server)
    peak = before
    with Prober(server.host, server.port, interval=0.5) as prober:
        outcome = ping_flood(server.host, server.port, "/ws", clients=10, seconds=SEND_TIMEOUT * 3)
        peak = max(peak, rss(server))
    assert not prober.result.failures, prober.result.failures[:5]
    assert peak - before < FLOOD_BUDGET, f"RSS {before >> 20} -> {peak >> 20} MiB"
    # Reading stopped once pongs were owed, and past the send timeout the
    # server gave up on them.
    assert outcome.closed_by_server == outcome.opened, outcome
    assert settles(server, before) - before < SETTLED_MARGIN


@pytest.mark.parametrize("worker", NATIVE_ALL)
def test_an_http2_client_that_opens_no_window_is_dropped(start_server, worker) -> None:
    server = start(start_server, worker, hostile_app(worker))
    before = rss(server)
    with Prober(server.host, server.port, interval=0.5) as prober:
        sock = h2_zero_window(server.host, server.port, "/big", streams=100)
        try:
            time.sleep(SEND_TIMEOUT * 1.5 + 1)
            dropped = closed_by_server(sock)
        finally:
            sock.close()
    assert dropped, "the connection with no window is still open"
    assert not prober.result.failures, prober.result.failures[:5]
    assert settles(server, before) - before < SETTLED_MARGIN
