"""statsd (--statsd-host): datagrams received on a real socket in the test and
checked by Gunicorn's metric names, so that a Gunicorn dashboard keeps working."""

from __future__ import annotations

import re
import socket
import time
from collections import defaultdict

import pytest
from conftest import wait_until
from ops_helpers import ops_app

from supervise.statsd import format_prefix

# name:value|type, then an optional |@rate, then optional |#tags.
LINE = re.compile(
    r"(?P<name>[\w.]+):(?P<value>-?[\d.]+)\|(?P<type>c|g|ms)(\|@(?P<rate>[\d.]+))?(\|#(?P<tags>.*))?"
)


class Receiver:
    """A statsd server's socket: collects every datagram the test is sent."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.settimeout(0.2)
        self.lines: list[str] = []

    def drain(self) -> None:
        while True:
            try:
                data = self.sock.recv(65536)
            except (TimeoutError, BlockingIOError):
                return
            self.lines.append(data.decode("ascii"))

    def parsed(self) -> list[dict]:
        found = []
        for line in self.lines:
            match = LINE.fullmatch(line)
            assert match, f"not a statsd datagram: {line!r}"
            found.append(match.groupdict())
        return found

    def counts(self, prefix: str = "") -> dict[str, float]:
        """Counter totals by name (a rate r means each datagram stands for 1/r)."""
        totals: dict[str, float] = defaultdict(float)
        for m in self.parsed():
            if m["type"] == "c":
                totals[m["name"].removeprefix(prefix)] += float(m["value"])
        return totals

    def timings(self, name: str) -> tuple[float, list[float]]:
        """(how many requests the timings stand for, their values in ms)."""
        count, values = 0.0, []
        for m in self.parsed():
            if m["name"].endswith(name) and m["type"] == "ms":
                count += 1 / float(m["rate"] or 1)
                values.append(float(m["value"]))
        return count, values


@pytest.fixture
def udp_receiver():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    yield Receiver(sock)
    sock.close()


def _wait_for(receiver: Receiver, name: str, total: float, prefix: str = "") -> None:
    def seen() -> bool:
        receiver.drain()
        return receiver.counts(prefix).get(name, 0) >= total

    wait_until(seen, timeout=20)


@pytest.mark.parametrize("worker", ["sync", "asgi"])
def test_gunicorn_metric_names_prefix_and_tags(start_server, udp_receiver, worker):
    port = udp_receiver.sock.getsockname()[1]
    server = start_server(
        ops_app(worker),
        "-k",
        worker,
        "--statsd-host",
        f"127.0.0.1:{port}",
        "--statsd-prefix",
        "shop.web",
        "--dogstatsd-tags",
        "env:test,team:ops",
    )
    prefix = "shop.web."
    # The start-up probe of the fixture counts as one 200.
    _wait_for(udp_receiver, "gunicorn.request.status.200", 1, prefix)
    for path in ["/", "/", "/status/404", "/raise"]:
        server.get(path)
    _wait_for(udp_receiver, "gunicorn.requests", 5, prefix)
    time.sleep(1.5)  # one more flush: nothing more may come
    udp_receiver.drain()
    counts = udp_receiver.counts(prefix)
    assert counts["gunicorn.requests"] == 5
    assert counts["gunicorn.request.status.200"] == 3
    assert counts["gunicorn.request.status.404"] == 1
    assert counts["gunicorn.request.status.500"] == 1
    assert counts["gunicorn.log.exception"] >= 1  # the 500's traceback
    count, values = udp_receiver.timings("gunicorn.request.duration")
    assert round(count) == 5 and all(v >= 0 for v in values)
    parsed = udp_receiver.parsed()
    assert all(m["name"].startswith(prefix) for m in parsed)
    assert all(m["tags"] == "env:test,team:ops" for m in parsed)
    gauges = [m for m in parsed if m["name"] == prefix + "gunicorn.workers"]
    assert gauges and all(m["type"] == "g" and m["value"] == "1" for m in gauges)


def test_unix_datagram_socket_and_no_prefix(start_server, tmp_path):
    path = str(tmp_path / "statsd.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    receiver = Receiver(sock)
    try:
        server = start_server(ops_app("gthread"), "-k", "gthread", "--statsd-host", f"unix:{path}")
        _wait_for(receiver, "gunicorn.requests", 1)
        server.get("/status/204")
        _wait_for(receiver, "gunicorn.request.status.204", 1)
        assert all(not m["name"].startswith(".") for m in receiver.parsed())
        assert all(m["tags"] is None for m in receiver.parsed())
    finally:
        sock.close()


def test_statsd_without_a_listener_costs_the_server_nothing(start_server):
    """Nobody listens on the statsd port: datagrams are dropped, serving goes on."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = start_server(ops_app("sync"), "--statsd-host", f"127.0.0.1:{port}")
    for _ in range(20):
        assert server.get("/")[0] == 200
    time.sleep(1.5)
    assert server.get("/")[0] == 200
    assert "Traceback" not in server.log()


def test_prefix_gets_one_trailing_dot_as_in_gunicorn():
    assert format_prefix("") == ""
    assert format_prefix("app") == "app."
    assert format_prefix("app.") == "app."
    assert format_prefix("app...") == "app."
