"""Health probes (--health-path) and the drain before a stop (--shutdown-delay),
on every worker class, as Kubernetes and a load balancer use them."""

from __future__ import annotations

import http.client
import re
import subprocess
import threading
import time
from signal import SIGHUP, SIGTERM

import pytest
from conftest import APPS_DIR, free_port, lifecycle_app, supervise_command, wait_until

HEALTH = ("--health-path", "/healthz")


def probe(server, path: str = "/healthz", method: str = "GET") -> tuple[int, dict, bytes]:
    return server.get(path, method=method)


def test_probes_are_answered_by_the_server_not_the_app(start_server, any_worker, tmp_path):
    access = tmp_path / "access.log"
    server = start_server(
        lifecycle_app(any_worker),
        "-k",
        any_worker,
        *HEALTH,
        "--access-logfile",
        str(access),
        "--max-requests",
        "4",
    )
    # Probes are no requests for --max-requests: the start check's GET and
    # the two /pid below are three, so ten probes counted as requests would
    # recycle the worker before the second /pid. (At 3 the worker began its
    # graceful stop after the second /pid, and a probe it answered then said
    # 503 draining: rightly, but the checks below expect a serving worker.)
    pid = int(server.get("/pid")[2])
    for _ in range(10):
        assert probe(server)[0] == 200
    assert int(server.get("/pid")[2]) == pid
    for path in ("/healthz", "/healthz/ready"):
        status, headers, body = probe(server, path)
        assert (status, body) == (200, b"ready\n"), path
        assert headers["cache-control"] == "no-store"
        assert headers["content-type"].startswith("text/plain")
    assert probe(server, "/healthz/live")[::2] == (200, b"live\n")
    assert probe(server, "/healthz?probe=1")[::2] == (200, b"ready\n")
    status, headers, body = probe(server, "/healthz", method="HEAD")
    assert (status, body, headers["content-length"]) == (200, b"", "6")
    status, headers, _ = probe(server, "/healthz", method="POST")
    assert (status, headers["allow"]) == (405, "GET, HEAD")
    # Not a probe path: the app's.
    assert server.get("/healthz/other")[::2] == (200, b"ok")
    assert server.get("/healthzz")[::2] == (200, b"ok")
    assert server.get("/healthz/")[::2] == (200, b"ok")
    # Nor for the access log (the app's requests are there).
    wait_until(lambda: "/healthz/other" in access.read_text())
    probes = re.compile(r'"(GET|HEAD|POST) /healthz(/ready|/live)?[ ?]')
    assert not probes.search(access.read_text())


def test_probes_on_one_keep_alive_connection(start_server, any_worker):
    """A load balancer's checker keeps its connection: probes and requests
    take turns on it, as on any keep-alive connection."""
    server = start_server(lifecycle_app(any_worker), "-k", any_worker, *HEALTH, "--keep-alive", "5")
    conn = server.http()
    try:
        for path in ("/healthz", "/pid", "/healthz/live", "/healthz", "/version"):
            conn.request("GET", path)
            resp = conn.getresponse()
            assert resp.status == 200, path
            resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["sync", "native"])
def test_health_access_log_writes_probes_when_asked(start_server, tmp_path, kind):
    access = tmp_path / "access.log"
    server = start_server(
        "lifecycle_app:app",
        "-k",
        kind,
        *HEALTH,
        "--health-access-log",
        "--access-logfile",
        str(access),
    )
    probe(server, "/healthz/live")
    wait_until(lambda: '"GET /healthz/live HTTP/1.1" 200' in access.read_text())


class Traffic:
    """A client that keeps requesting the app and the readiness probe, each on
    a new connection (as kubelet probes and as many clients do), and keeps
    what it saw in order."""

    def __init__(self, server) -> None:
        self.server = server
        # (when, path, status or what went wrong, whether the stop had begun)
        self.seen: list[tuple[float, str, int | str, bool]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _one(self, path: str) -> int | str:
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=10)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            resp.read()
            return resp.status
        except ConnectionRefusedError:
            return "refused"
        except OSError as exc:
            return f"failed: {exc!r}"
        finally:
            conn.close()

    def _run(self) -> None:
        while not self.stop.is_set():
            for path in ("/", "/healthz"):
                # Read before the request: a request begun before the master
                # logged the end of the drain began before its stop.
                stopping = "Drain over" in self.server.log()
                self.seen.append((time.monotonic(), path, self._one(path), stopping))
            time.sleep(0.05)

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)


def test_kubernetes_stop_sequence_loses_nothing(start_server, any_worker):
    """TERM with --shutdown-delay: readiness turns 503 while every request is
    still served; then the graceful stop, exit 0, and no request failed."""
    server = start_server(
        lifecycle_app(any_worker), "-k", any_worker, "-w", "2", *HEALTH, "--shutdown-delay", "3"
    )
    server.wait_workers(2)
    with Traffic(server) as traffic:
        wait_until(lambda: len(traffic.seen) > 10)
        server.signal(SIGTERM)
        assert server.proc.wait(60) == 0
    seen = traffic.seen
    # Every request begun before the stop was answered: nothing failed.
    drain = [(t, path, status) for t, path, status, stopping in seen if not stopping]
    failed = [s for s in drain if not isinstance(s[2], int)]
    assert not failed, (failed, seen)
    assert {status for _, path, status in drain if path == "/"} == {200}, seen
    ready = [status for _, path, status in drain if path == "/healthz"]
    # Ready, then draining, and never ready again.
    assert ready[0] == 200 and 503 in ready, seen
    assert ready == sorted(ready), seen
    # The app was served after readiness turned 503: the drain kept serving.
    first_503 = next(t for t, path, status in drain if path == "/healthz" and status == 503)
    assert any(t > first_503 and path == "/" for t, path, _ in drain), seen
    log = server.log()
    assert "Draining: readiness probes answer 503" in log
    assert "Drain over: stopping gracefully" in log


def test_a_second_term_ends_the_drain(start_server):
    server = start_server("lifecycle_app:app", "-k", "sync", *HEALTH, "--shutdown-delay", "600")
    server.signal(SIGTERM)
    server.wait_for_log("Draining")
    assert probe(server)[0] == 503
    assert server.get("/")[0] == 200
    server.signal(SIGHUP)
    server.wait_for_log("HUP ignored: draining")
    server.signal(SIGTERM)
    assert server.proc.wait(30) == 0


def test_without_delay_term_stops_as_before(start_server):
    server = start_server("lifecycle_app:app", "-k", "gthread", *HEALTH)
    server.signal(SIGTERM)
    assert server.proc.wait(30) == 0
    assert "Draining" not in server.log()


def test_the_metrics_address_answers_for_the_server(start_server):
    metrics_port = free_port()
    server = start_server(
        "lifecycle_app:app",
        "-k",
        "gthread",
        "-w",
        "2",
        *HEALTH,
        "--shutdown-delay",
        "600",
        "--metrics-bind",
        f"127.0.0.1:{metrics_port}",
    )

    def metrics_get(path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=10)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    wait_until(lambda: metrics_get("/healthz") == (200, b"ready\n"))
    assert metrics_get("/healthz/live") == (200, b"live\n")
    for _ in range(5):
        probe(server)

    def checks() -> float:
        text = metrics_get("/metrics")[1].decode()
        found = re.search(r"^supervise_health_checks_total (\S+)$", text, re.M)
        return float(found.group(1)) if found else 0.0

    wait_until(lambda: checks() >= 5)
    requests = re.search(
        r"^supervise_requests_total (\S+)$", metrics_get("/metrics")[1].decode(), re.M
    )
    assert requests is not None and float(requests.group(1)) < 5  # probes are not requests
    server.signal(SIGTERM)
    server.wait_for_log("Draining")
    assert metrics_get("/healthz") == (503, b"draining\n")
    assert metrics_get("/healthz/live") == (200, b"live\n")
    server.signal(SIGTERM)
    assert server.proc.wait(30) == 0


@pytest.mark.parametrize("path", ["healthz", "/a?b", "/a%20b", "/a b"])
def test_a_bad_health_path_is_one_clear_error(path):
    done = subprocess.run(
        supervise_command("--health-path", path, "--check-config", "lifecycle_app:app"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=APPS_DIR,
    )
    assert done.returncode != 0
    assert "health" in (done.stderr + done.stdout).lower()
    assert "Traceback" not in done.stderr
