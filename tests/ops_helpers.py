"""Shared by the operations tests: the app per worker class, a Prometheus
scrape parsed by prometheus_client's own parser, and `supervise ctl` run as a
subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import httpx
from conftest import APPS_DIR, children_of, interface_of
from prometheus_client.parser import text_string_to_metric_families


def ops_app(worker: str) -> str:
    attr = {"wsgi": "app", "asgi": "asgi_app", "rsgi": "rsgi_app"}[interface_of(worker)]
    return f"ops_app:{attr}"


class Scrape:
    """One parsed scrape: ``scrape["supervise_requests_total"]`` or
    ``scrape.value("supervise_responses_total", status="2xx")``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: list[Any] = []
        self.types: dict[str, str] = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            self.samples.extend(family.samples)

    def value(self, name: str, **labels: str) -> float | None:
        for sample in self.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
        return None

    def __getitem__(self, name: str) -> float:
        value = self.value(name)
        assert value is not None, f"{name} is not in the scrape:\n{self.text}"
        return value

    def labelled(self, name: str, label: str) -> dict[str, float]:
        return {s.labels[label]: s.value for s in self.samples if s.name == name}


def scrape(address: str, path: str = "/metrics") -> Scrape:
    """GET /metrics with a real HTTP client; ``address`` is HOST:PORT or unix:PATH."""
    if address.startswith("unix:"):
        transport = httpx.HTTPTransport(uds=address[5:])
        with httpx.Client(transport=transport, timeout=10) as client:
            resp = client.get(f"http://metrics{path}")
    else:
        resp = httpx.get(f"http://{address}{path}", timeout=10)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain"), resp.headers
    return Scrape(resp.text)


def ctl(*args: str, timeout: float = 60.0, **options: Any) -> subprocess.CompletedProcess:
    """`supervise ctl ARGS` as a user runs it: its output and exit status."""
    env = dict(os.environ)
    env.pop("SUPERVISE_CMD_ARGS", None)
    env.pop("SUPERVISE_CONTROL_SOCKET", None)
    env.update(options.pop("env", {}))
    return subprocess.run(
        [sys.executable, "-m", "supervise", "ctl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=options.pop("cwd", APPS_DIR),
        env=env,
        **options,
    )


def process_title(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def helper_pid(master: int) -> int | None:
    """The metrics helper among the master's children (by its process title)."""
    for pid in children_of(master):
        if process_title(pid).startswith("supervise: metrics"):
            return pid
    return None


def worker_pids(master: int) -> list[int]:
    return [pid for pid in children_of(master) if "supervise: worker" in process_title(pid)]
