"""Prometheus metrics (--metrics-bind): the real server, scraped with a real
HTTP client, parsed with prometheus_client's parser."""

from __future__ import annotations

import os
import signal
import socket
import subprocess

import httpx
import pytest
from conftest import free_port, launch, shutdown, wait_until
from ops_helpers import Scrape, helper_pid, ops_app, scrape, worker_pids

from supervise.scoreboard import DURATION_BOUNDS


def _requests(server, paths: list[str]) -> int:
    """GET each path on a fresh connection; the body bytes received."""
    received = 0
    for path in paths:
        status, _, body = server.get(path)
        if path.startswith("/status/"):
            assert status == int(path[len("/status/") :])
        received += len(body)
    return received


def _baseline(address: str) -> Scrape:
    """The figures once the start-up probe (one GET from the test fixture) is counted."""

    # rsgi counts finished requests from Rust at each tick (0.1 s), and workers
    # publish their response figures about once a second: wait for both.
    def counted() -> Scrape | None:
        s = scrape(address)
        requests = s["supervise_requests_total"]
        return (
            s
            if requests >= 1 and s["supervise_request_duration_seconds_count"] == requests
            else None
        )

    return wait_until(counted)


def _scrape_when(address: str, name: str, at_least: float, **labels: str) -> Scrape:
    return wait_until(lambda: ((s := scrape(address)).value(name, **labels) or 0) >= at_least and s)


def test_a_scrape_shows_requests_statuses_durations_and_workers(start_server, any_worker):
    address = f"127.0.0.1:{free_port()}"
    server = start_server(
        ops_app(any_worker), "-k", any_worker, "-w", "2", "--metrics-bind", address
    )
    _scrape_when(address, "supervise_workers", 2, state="ready")  # the canary came first
    before = _baseline(address)
    assert before.types["supervise_request_duration_seconds"] == "histogram"
    start = before["supervise_requests_total"]
    paths = ["/", "/bytes/1000", "/status/204", "/status/404", "/status/404", "/status/301"]
    sent = _requests(server, paths)
    status, _, error_body = server.get("/raise")
    assert status == 500
    # Workers publish their response figures about once a second.
    _scrape_when(address, "supervise_requests_total", start + 7)
    after = _scrape_when(address, "supervise_request_duration_seconds_count", start + 7)
    assert after["supervise_requests_total"] == start + 7
    classes = after.labelled("supervise_responses_total", "status")
    old = before.labelled("supervise_responses_total", "status")
    delta = {name: classes[name] - old[name] for name in classes}
    assert delta == {"1xx": 0, "2xx": 3, "3xx": 1, "4xx": 2, "5xx": 1, "other": 0}
    assert after["supervise_request_duration_seconds_count"] == start + 7
    assert after["supervise_request_duration_seconds_sum"] > 0
    buckets = after.labelled("supervise_request_duration_seconds_bucket", "le")
    assert len(buckets) == len(DURATION_BOUNDS) + 1 and buckets["+Inf"] == start + 7
    grew = after["supervise_response_body_bytes_total"]
    grew -= before["supervise_response_body_bytes_total"]
    # The 500's short body counts where the worker wrote it through the response.
    assert sent <= grew <= sent + len(error_body)
    assert after.value("supervise_workers", state="ready") == 2
    assert after["supervise_workers_target"] == 2
    assert after["supervise_generation"] == after["supervise_serving_generation"] == 1
    assert after.value("supervise_log_messages_total", level="exception") >= 1
    pids = {str(pid) for pid in worker_pids(server.pid)}
    per_worker = after.labelled("supervise_worker_requests_total", "pid")
    assert set(per_worker) == pids and sum(per_worker.values()) == start + 7
    assert after.value("supervise_info", worker_class=any_worker) == 1
    # Worker memory is read by the master every few seconds.
    name = "supervise_worker_resident_memory_bytes"
    memory = wait_until(lambda: len((s := scrape(address)).labelled(name, "pid")) == 2 and s)
    assert all(v > 1_000_000 for v in memory.labelled(name, "pid").values())
    queue = memory.labelled("supervise_listen_queue_max", "listener")
    assert queue == {f"127.0.0.1:{server.port}": 2048}


def test_counters_keep_what_replaced_workers_counted(start_server):
    """max_requests replaces workers; the server-wide counters must not go back,
    and the exits are counted by cause."""
    address = f"127.0.0.1:{free_port()}"
    server = start_server(
        ops_app("sync"), "-w", "2", "--max-requests", "5", "--metrics-bind", address
    )
    total = _baseline(address)["supervise_requests_total"] + 30
    for _ in range(30):
        assert server.get("/")[0] == 200
    exits = "supervise_worker_exits_total"
    # A retiring worker serves on until its replacement is ready: at this pace
    # one or two workers leave, taking their counts with them.
    _scrape_when(address, exits, 1, cause="max_requests")
    result = _scrape_when(address, "supervise_responses_total", total, status="2xx")
    assert result["supervise_requests_total"] == total
    assert result.value("supervise_responses_total", status="2xx") == total
    assert result["supervise_request_duration_seconds_count"] == total
    server.signal(signal.SIGHUP)
    server.wait_for_log("Reload complete")
    after = _scrape_when(address, exits, 2, cause="reload")
    assert after["supervise_reloads_total"] == 1 and after["supervise_reloads_failed_total"] == 0
    assert after["supervise_generation"] == 2
    assert after["supervise_requests_total"] == total
    assert after.value(exits, cause="crash") == after.value(exits, cause="timeout") == 0


def test_metrics_on_a_unix_socket_and_a_helper_that_dies_comes_back(start_server, tmp_path):
    path = tmp_path / "metrics.sock"
    server = start_server(ops_app("sync"), "--metrics-bind", f"unix:{path}")
    first = _baseline(f"unix:{path}")
    assert first.value("supervise_workers", state="ready") == 1
    helper = wait_until(lambda: helper_pid(server.pid))
    os.kill(helper, signal.SIGKILL)
    server.wait_for_log(r"Metrics helper \(pid \d+\) exited")
    again = wait_until(lambda: (h := helper_pid(server.pid)) and h != helper and h)
    assert again
    assert scrape(f"unix:{path}")["supervise_requests_total"] == first["supervise_requests_total"]
    # The master's figures are not the helper's: they survived it.
    assert (
        scrape(f"unix:{path}")["supervise_master_start_time_seconds"]
        == first["supervise_master_start_time_seconds"]
    )
    assert server.stop() == 0
    assert not path.exists(), "the metrics socket is removed at exit"


def test_only_metrics_paths_are_served(start_server):
    address = f"127.0.0.1:{free_port()}"
    start_server(ops_app("sync"), "--metrics-bind", address)
    wait_until(lambda: scrape(address))
    assert httpx.get(f"http://{address}/admin", timeout=5).status_code == 404
    assert isinstance(scrape(address, "/"), Scrape)


def test_a_metrics_address_in_use_is_one_line_and_exit_1(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        server = launch([ops_app("sync"), "--metrics-bind", f"127.0.0.1:{port}"], tmp_path / "log")
        try:
            assert server.proc.wait(30) == 1
        except subprocess.TimeoutExpired:
            pytest.fail(f"supervise did not exit:\n{server.log()}")
        finally:
            shutdown(server)
    log = server.log()
    assert f"cannot bind metrics_bind 127.0.0.1:{port}: Address already in use" in log
    assert "Traceback" not in log


def test_usr2_scrapes_describe_one_master_at_a_time(start_server, tmp_path):
    """The old master answers scrapes until it exits; then the new one binds the address."""
    address = f"127.0.0.1:{free_port()}"
    pidfile = tmp_path / "app.pid"
    server = start_server(ops_app("sync"), "--metrics-bind", address, "--pid", str(pidfile))
    started = _baseline(address)["supervise_master_start_time_seconds"]
    server.signal(signal.SIGUSR2)
    server.wait_for_log("is still the old master's: serving metrics once it is free", timeout=30)
    server.wait_for_log("Ready: 1 worker", count=2, timeout=30)  # the new master serves
    assert scrape(address)["supervise_master_start_time_seconds"] == started
    new = int(pidfile.read_text())
    assert new != server.pid
    server.signal(signal.SIGTERM)
    assert server.proc.wait(30) == 0
    after = wait_until(
        lambda: (
            (s := scrape_or_none(address))
            and s["supervise_master_start_time_seconds"] != started
            and s
        )
    )
    assert after.value("supervise_workers", state="ready") == 1
    os.kill(new, signal.SIGTERM)


def scrape_or_none(address: str) -> Scrape | None:
    try:
        return scrape(address)
    except httpx.TransportError:
        return None  # between the old master's exit and the new one's bind
