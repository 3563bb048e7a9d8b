"""No request is lost while workers are recycled, reloaded, added and removed (issue 14).

The scenario of the report, for every worker class: two workers under
wrk-like keep-alive load, recycled constantly by --max-requests, while the
master gets HUP, TTIN, TTOU and HUP. Every request must get a 2xx response:
a connection closed or reset before its response is a lost request.

The loss that prompted it was rare (two requests in 420k): the arbiter read a
heartbeat of 0.0 from a scoreboard write in progress and SIGABRTed a healthy
worker, which lost a request only when the signal landed mid-request. So
besides the client's count the test asserts on the causes: no worker is
aborted or killed, and at the final graceful stop every worker that booted
leaves on its own (a TERM sent while a worker booted used to be lost).

Measured on the old code, 2 cores: sync failed 4 runs in 8 (15 rounds), 3 of
them with a lost request (EOF or reset before the response); gevent failed
10 runs in 10 even with 3 rounds (workers SIGKILLed at the stop).
tests/test_scoreboard.py catches the heartbeat race itself in every run.

The rsgi worker lost 43 connections in one round of 15 to 45: a worker
stopping while its accept loop took a burst of new connections (a round's
start) counted them only once their tasks first ran, saw none, and shut its
runtime down under them. They are now counted from accept(), and the worker
also waits for its accept loops to end.
"""

from __future__ import annotations

import os
import re
import signal

from conftest import lifecycle_app
from keepalive_client import run_load

# A fraction of max-requests (~0.1 s of work per worker at this load) keeps the
# arbiter busy replacing workers the whole time, as 2000 does at wrk's rate.
MAX_REQUESTS = "300"
JITTER = "30"
CONNECTIONS = 64
# Rounds of the scenario per worker class, on one server; each round sends
# HUP, TTIN, TTOU, HUP at 1/5 ... 4/5 of its requests. 15 rounds: the old sync
# worker failed one run in two (3 rounds: one in ten); the whole file runs in
# about 50 s on a 2-core machine.
ROUNDS = 15
REQUESTS_PER_ROUND = 10_000
# Bounds the whole test on a slow machine; fewer requests are then checked.
TIME_LIMIT = 75.0
SEQUENCE = (signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGHUP)

# What the arbiter logs for a worker that did not leave on its own.
ABNORMAL = re.compile(
    r"WORKER TIMEOUT|aborted: no heartbeat|was sent SIGKILL|killed by signal"
    r"|exited with code|did not stop in time|Traceback"
)


def _signals_along(server, total: int):
    """A progress callback sending SEQUENCE to the master spread over ``total`` responses."""
    marks = [total * (i + 1) // (len(SEQUENCE) + 1) for i in range(len(SEQUENCE))]
    pending = list(zip(marks, SEQUENCE, strict=True))

    def progress(done: int) -> None:
        while pending and done >= pending[0][0]:
            os.kill(server.pid, pending.pop(0)[1])

    return progress


def test_no_request_lost_under_recycling_and_signals(start_server, any_worker):
    server = start_server(
        "-k",
        any_worker,
        "-w",
        "2",
        "--max-requests",
        MAX_REQUESTS,
        "--max-requests-jitter",
        JITTER,
        # Bounds the final stop should a worker ignore its TERM (that fails the test).
        "--graceful-timeout",
        "10",
        lifecycle_app(any_worker),
    )
    served = 0
    for round_ in range(ROUNDS):
        result = run_load(
            server.host,
            server.port,
            connections=CONNECTIONS,
            requests=REQUESTS_PER_ROUND,
            time_limit=TIME_LIMIT / ROUNDS,
            progress=_signals_along(server, REQUESTS_PER_ROUND),
        )
        served += result.requests
        assert result.error_count == 0, (
            f"round {round_}: {result.errors} after {result.requests} responses; "
            f"first errors: {result.samples}\n{server.log()}"
        )
        assert result.non_2xx == 0, f"round {round_}: {result.non_2xx} non-2xx responses"
        assert result.requests > 0
    assert server.proc.poll() is None, server.log()
    # Every worker that ever booted leaves on its own at a graceful stop. One
    # whose TERM came while it booted, and was lost, is SIGKILLed: silently.
    assert server.stop(signal.SIGTERM) == 0
    log = server.log()
    abnormal = [line for line in log.splitlines() if ABNORMAL.search(line)]
    assert not abnormal, f"{served} requests served, but:\n" + "\n".join(abnormal)
    booted = set(re.findall(r"Booting worker with pid: (\d+)", log))
    exited = set(re.findall(r"Worker exiting \(pid: (\d+)\)", log))
    assert booted <= exited, f"workers SIGKILLed, not stopped: {sorted(booted - exited)}\n{log}"
