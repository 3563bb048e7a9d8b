"""Recycling without a capacity gap: --max-worker-memory and --worker-lifetime
replace a worker the way max_requests does (the replacement first, TERM once
it serves), under a bounded load that must see no failed request."""

from __future__ import annotations

import json
import re
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from conftest import free_port, lifecycle_app, wait_until
from keepalive_client import LoadResult, run_load
from ops_helpers import ops_app, scrape
from test_zero_loss import ABNORMAL, CONNECTIONS, JITTER, MAX_REQUESTS, _signals_along


def _status(sock: Path) -> dict:
    """One `status` over the control protocol (faster than a ctl process per poll)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(str(sock))
        conn.sendall(b'{"command": "status"}\n')
        return json.loads(conn.makefile().readline())


class Watch:
    """Polls the master's status in the background: the fewest workers serving
    (ready, or retiring but still serving) seen at any moment."""

    def __init__(self, sock: Path) -> None:
        self.sock = sock
        self.fewest = 1_000
        self.worst: list[dict] = []
        self.samples = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            workers = _status(self.sock)["workers"]
            serving = sum(1 for w in workers if w["state"] in ("ready", "retiring"))
            if serving < self.fewest:
                self.fewest, self.worst = serving, workers
            self.samples += 1
            time.sleep(0.02)

    def stop(self) -> None:
        self.done.set()
        self.thread.join(10)


class Load:
    """keepalive_client's bounded load on a thread, until stopped."""

    def __init__(self, port: int) -> None:
        self.stopping = threading.Event()
        self.result: LoadResult | None = None
        self.thread = threading.Thread(target=self._run, args=(port,), daemon=True)
        self.thread.start()

    def _run(self, port: int) -> None:
        self.result = run_load(
            "127.0.0.1",
            port,
            connections=8,
            requests=10**9,
            time_limit=60,
            stop=self.stopping.is_set,
        )

    def stop(self) -> LoadResult:
        self.stopping.set()
        self.thread.join(30)
        assert self.result is not None
        return self.result


def _in_order(log: str, *patterns: str) -> None:
    at = 0
    for pattern in patterns:
        match = re.compile(pattern).search(log, at)
        assert match, f"{pattern!r} not found after position {at} of the log:\n{log}"
        at = match.end()


def test_a_worker_over_the_memory_limit_is_replaced_without_a_gap(
    start_server, any_worker, tmp_path
):
    sock = tmp_path / "ctl.sock"
    server = start_server(
        ops_app(any_worker),
        "-k",
        any_worker,
        "-w",
        "2",
        "--max-worker-memory",
        "100",
        "--control-socket",
        str(sock),
    )
    wait_until(lambda: [w["state"] for w in _status(sock)["workers"]] == ["ready", "ready"])
    watch = Watch(sock)
    load = Load(server.port)
    try:
        status, _, body = server.get("/grow?150")
        assert status == 200
        big = int(body.split()[1])
        log = server.wait_for_log(rf"Worker exiting \(pid: {big}\)", timeout=30)
    finally:
        result = load.stop()
        watch.stop()
    _in_order(
        log,
        rf"Worker {big} uses \d+\.\d MiB \(PSS; max_worker_memory 100 MiB\): "
        "a replacement is starting",
        r"Booting worker with pid: \d+",
        rf"Worker {big} replaced \(memory\): stopping it",
        rf"Worker exiting \(pid: {big}\)",
    )
    assert result.requests > 0 and result.error_count == 0 and result.non_2xx == 0, result
    assert watch.samples > 0 and watch.fewest >= 2, f"capacity dropped: {watch.worst}"
    wait_until(lambda: len(_status(sock)["workers"]) == 2)  # the old one reaped


@pytest.mark.parametrize("worker", ["sync", "asgi"])
def test_workers_are_replaced_after_their_lifetime(start_server, worker, tmp_path):
    sock = tmp_path / "ctl.sock"
    server = start_server(
        ops_app(worker),
        "-k",
        worker,
        "-w",
        "2",
        "--worker-lifetime",
        "3",
        "--worker-lifetime-jitter",
        "1",
        "--control-socket",
        str(sock),
    )
    first = wait_until(
        lambda: (s := _status(sock)["workers"]) and [w["state"] for w in s] == ["ready"] * 2 and s
    )
    watch = Watch(sock)
    load = Load(server.port)
    try:
        for w in first:
            server.wait_for_log(rf"Worker exiting \(pid: {w['pid']}\)", timeout=30)
    finally:
        result = load.stop()
        watch.stop()
    log = server.log()
    for w in first:
        _in_order(
            log,
            rf"Worker {w['pid']} has run \d+s \(worker_lifetime\): a replacement is starting",
            rf"Worker {w['pid']} replaced \(lifetime\): stopping it",
        )
    assert result.requests > 0 and result.error_count == 0 and result.non_2xx == 0, result
    assert watch.samples > 0 and watch.fewest >= 2, f"capacity dropped: {watch.worst}"


def test_no_request_lost_with_every_operation_on(start_server, any_worker, tmp_path):
    """issue 14's scenario (recycling + HUP/TTIN/TTOU) with the metrics helper,
    statsd, the control socket and memory checks all on, and a scraper and a
    status poller running: the master's extra work must cost no request."""
    sock, address = tmp_path / "ctl.sock", f"127.0.0.1:{free_port()}"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as statsd:
        statsd.bind(("127.0.0.1", 0))
        server = start_server(
            "-k",
            any_worker,
            "-w",
            "2",
            "--max-requests",
            MAX_REQUESTS,
            "--max-requests-jitter",
            JITTER,
            "--graceful-timeout",
            "10",
            "--metrics-bind",
            address,
            "--control-socket",
            str(sock),
            "--statsd-host",
            f"127.0.0.1:{statsd.getsockname()[1]}",
            "--max-worker-memory",
            "1000",
            lifecycle_app(any_worker),
        )
        watch = Watch(sock)
        scrapes = threading.Event()

        def scraper() -> None:
            while not scrapes.is_set():
                scrape(address)

        thread = threading.Thread(target=scraper, daemon=True)
        thread.start()
        served = 0
        try:
            for round_ in range(3):
                result = run_load(
                    server.host,
                    server.port,
                    connections=CONNECTIONS,
                    requests=10_000,
                    time_limit=25,
                    progress=_signals_along(server, 10_000),
                )
                assert result.error_count == 0, (round_, result.errors, result.samples)
                assert result.non_2xx == 0 and result.requests > 0
                served += result.requests
        finally:
            scrapes.set()
            thread.join(10)
            watch.stop()
        # The figures are complete once the workers' last counts are in.
        final = wait_until(
            lambda: (
                (s := scrape(address))["supervise_requests_total"] >= served
                and s.value("supervise_responses_total", status="2xx") >= served
                and s
            )
        )
        assert final["supervise_request_duration_seconds_count"] >= served
        assert server.stop(signal.SIGTERM) == 0
    abnormal = [line for line in server.log().splitlines() if ABNORMAL.search(line)]
    assert not abnormal, "\n".join(abnormal)
