"""Prometheus metrics: a prometheus-client collector over the scoreboard.

Nothing is counted here: each scrape takes one consistent ``snapshot()`` of
the shared scoreboard (written by the workers and the arbiter) and turns it
into metric families. Server-wide counters add the departed workers' totals
to the live workers', so they never go back when a worker is replaced.
Imported only by the metrics helper process.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
)
from prometheus_client.registry import Collector

from supervise.scoreboard import (
    DURATION_BOUNDS,
    EXIT_CAUSES,
    LOG_LEVELS,
    OTHER_STATUS,
    Scoreboard,
    SlotFigures,
    State,
)

STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")


def add(total: list[int], more: list[int]) -> None:
    for i, value in enumerate(more):
        if value:
            total[i] += value


class Totals:
    """Server-wide sums of a snapshot: departed workers plus live ones."""

    def __init__(self, departed: SlotFigures, workers: list[SlotFigures], master_logs: list[int]):
        self.requests = departed.requests
        self.bytes_out = departed.bytes_out
        self.duration_sum = departed.duration_sum
        self.codes = list(departed.codes)
        self.buckets = list(departed.buckets)
        self.logs = list(departed.logs)
        self.health_checks = departed.health_checks
        add(self.logs, master_logs)
        for w in workers:
            self.health_checks += w.health_checks
            self.requests += w.requests
            self.bytes_out += w.bytes_out
            self.duration_sum += w.duration_sum
            add(self.codes, w.codes)
            add(self.buckets, w.buckets)
            add(self.logs, w.logs)

    @classmethod
    def zero(cls) -> Totals:
        empty = SlotFigures(
            0, 0, State.FREE, 0, 0.0, 0, 0.0, 0, 0, 0.0, 0, [0] * 4, [0] * 16, [0] * 501
        )
        return cls(empty, [], [0] * 4)

    def status_classes(self) -> list[int]:
        return [sum(self.codes[i * 100 : (i + 1) * 100]) for i in range(5)]

    @property
    def responses(self) -> int:
        return sum(self.codes)


class ScoreboardCollector(Collector):
    """Every metric of one master, read from its scoreboard at scrape time."""

    def __init__(self, *, scoreboard: Scoreboard, listeners: list[str], info: dict[str, str]):
        self.scoreboard = scoreboard
        self.listeners = listeners
        self.info = info

    def collect(self) -> Iterator[Any]:
        snap = self.scoreboard.snapshot()
        master = snap.master
        totals = Totals(snap.departed, snap.workers, master["logs"])  # type: ignore[arg-type]
        yield InfoMetricFamily("supervise", "The server and what it runs.", value=self.info)
        yield GaugeMetricFamily(
            "supervise_master_start_time_seconds",
            "When the master started, in seconds since the epoch.",
            value=master["started_at"],
        )
        yield GaugeMetricFamily(
            "supervise_generation", "The newest worker generation.", value=master["generation"]
        )
        yield GaugeMetricFamily(
            "supervise_serving_generation",
            "The newest generation that was fully ready (below supervise_generation "
            "while a reload is under way).",
            value=master["serving_generation"],
        )
        yield GaugeMetricFamily(
            "supervise_workers_target",
            "Workers wanted (-w, TTIN/TTOU, ctl scale).",
            value=master["target_workers"],
        )
        by_state = GaugeMetricFamily(
            "supervise_workers", "Worker processes by state.", labels=["state"]
        )
        for state in (State.BOOTING, State.READY, State.RETIRING, State.STOPPING):
            count = sum(1 for w in snap.workers if w.state == state)
            by_state.add_metric([state.name.lower()], count)
        yield by_state
        yield CounterMetricFamily(
            "supervise_reloads", "Reloads started (HUP, ctl reload).", value=master["reloads"]
        )
        yield CounterMetricFamily(
            "supervise_reloads_failed",
            "Reloads that failed (bad configuration, unbindable address, a generation that "
            "could not boot); the serving generation kept serving.",
            value=master["reloads_failed"],
        )
        exits = CounterMetricFamily(
            "supervise_worker_exits", "Worker processes that exited, by cause.", labels=["cause"]
        )
        for cause in EXIT_CAUSES:
            exits.add_metric([cause], master["exits"][cause])  # type: ignore[index]
        yield exits
        yield from self._requests(snap.workers, totals)
        yield from self._per_worker(snap.workers)
        yield from self._listen_queues(master["listen_queues"])  # type: ignore[arg-type]
        logs = CounterMetricFamily(
            "supervise_log_messages",
            "Error-log calls at warning level and above, by level (master and workers).",
            labels=["level"],
        )
        for level, count in zip(LOG_LEVELS, totals.logs, strict=True):
            logs.add_metric([level], count)
        yield logs

    def _requests(self, workers: list[SlotFigures], totals: Totals) -> Iterator[Any]:
        yield CounterMetricFamily(
            "supervise_requests",
            "Requests finished by every worker, past and present.",
            value=totals.requests,
        )
        responses = CounterMetricFamily(
            "supervise_responses",
            "Responses by status class (`other`: none was sent, the client left first).",
            labels=["status"],
        )
        for name, count in zip(STATUS_CLASSES, totals.status_classes(), strict=True):
            responses.add_metric([name], count)
        responses.add_metric(["other"], totals.codes[OTHER_STATUS])
        yield responses
        cumulative, buckets = 0, []
        for bound, count in zip((*DURATION_BOUNDS, float("inf")), totals.buckets, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        yield HistogramMetricFamily(
            "supervise_request_duration_seconds",
            "Time from a request's head to the end of its response, per request.",
            buckets=buckets,
            sum_value=totals.duration_sum,
        )
        yield CounterMetricFamily(
            "supervise_response_body_bytes",
            "Response body bytes sent (rsgi: not counted yet).",
            value=totals.bytes_out,
        )
        yield CounterMetricFamily(
            "supervise_health_checks",
            "Health probes (--health-path) the workers answered; not in supervise_requests.",
            value=totals.health_checks,
        )
        yield GaugeMetricFamily(
            "supervise_requests_in_flight",
            "Requests being served now, all workers.",
            value=sum(w.in_flight for w in workers),
        )
        yield GaugeMetricFamily(
            "supervise_connections",
            "Open client connections, all workers.",
            value=sum(w.active for w in workers),
        )

    def _per_worker(self, workers: list[SlotFigures]) -> Iterator[Any]:
        labels = ["pid", "generation"]
        now = time.monotonic()
        requests = CounterMetricFamily(
            "supervise_worker_requests", "Requests finished by this worker.", labels=labels
        )
        in_flight = GaugeMetricFamily(
            "supervise_worker_requests_in_flight", "Requests this worker serves now.", labels=labels
        )
        connections = GaugeMetricFamily(
            "supervise_worker_connections", "Open connections of this worker.", labels=labels
        )
        memory = GaugeMetricFamily(
            "supervise_worker_resident_memory_bytes",
            "Resident set size, read by the master every few seconds.",
            labels=labels,
        )
        heartbeat = GaugeMetricFamily(
            "supervise_worker_heartbeat_age_seconds",
            "Seconds since the worker's last heartbeat (it is killed past --timeout).",
            labels=labels,
        )
        age = GaugeMetricFamily(
            "supervise_worker_age_seconds", "Seconds since the worker was started.", labels=labels
        )
        for w in workers:
            key = [str(w.pid), str(w.generation)]
            requests.add_metric(key, w.requests)
            in_flight.add_metric(key, w.in_flight)
            connections.add_metric(key, w.active)
            if w.memory:
                memory.add_metric(key, w.memory)
            heartbeat.add_metric(key, max(now - w.heartbeat, 0.0))
            age.add_metric(key, max(now - w.booted_at, 0.0))
        yield from (requests, in_flight, connections, memory, heartbeat, age)

    def _listen_queues(self, queues: list[tuple[int, int]]) -> Iterator[Any]:
        waiting = GaugeMetricFamily(
            "supervise_listen_queue_length",
            "Connections waiting to be accepted (TCP listeners, Linux).",
            labels=["listener"],
        )
        size = GaugeMetricFamily(
            "supervise_listen_queue_max",
            "The size of that queue (the backlog the kernel applies).",
            labels=["listener"],
        )
        for name, (count, limit) in zip(self.listeners, queues, strict=False):
            if limit:
                waiting.add_metric([name], count)
                size.add_metric([name], limit)
        yield waiting
        yield size
