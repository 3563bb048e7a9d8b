"""The metrics helper process: Prometheus scrapes and statsd datagrams.

Forked by the arbiter (helper.py), it holds only the metrics socket and the
shared scoreboard. Scrapes are answered on threads (``http.server``, with a
socket timeout so a slow client holds one thread for a while at most); the
main thread sends statsd once a second and leaves when the master is gone.
It runs as the workers' user: it needs no privilege, everything it reads is
in the shared memory it inherited.
"""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from supervise import __version__, process
from supervise.http.health import HealthProbes, ProbeAnswer

if TYPE_CHECKING:
    from supervise.config import Config
    from supervise.scoreboard import Scoreboard

STATSD_PERIOD = 1.0
CLIENT_TIMEOUT = 10.0
METRICS_PATHS = ("/metrics", "/")


def serve(
    *,
    sock: socket.socket | None,
    cfg: Config,
    log: Any,
    scoreboard: Scoreboard,
    listeners: list[str],
    from_zero: bool,
) -> None:
    """Run until the master is gone (SIGTERM ends the process at once)."""
    _set_proctitle(cfg)
    master = os.getppid()
    process.drop_privileges(cfg.uid, cfg.gid, cfg.initgroups)
    if sock is not None:
        probes = HealthProbes.for_server(cfg.health_path, scoreboard)
        _start_http(sock, _registry(scoreboard, cfg, listeners), probes)
    sender = None
    if cfg.statsd_host:
        from supervise.statsd import StatsdSender

        sender = StatsdSender(
            address=cfg.statsd_host,
            prefix=cfg.statsd_prefix,
            tags=cfg.dogstatsd_tags,
            log=log,
            from_zero=from_zero,
        )
    while os.getppid() == master:
        time.sleep(STATSD_PERIOD)
        if sender is not None:
            try:
                sender.flush(scoreboard.snapshot())
            except Exception:
                log.exception("statsd: sending failed")


def _registry(scoreboard: Scoreboard, cfg: Config, listeners: list[str]) -> Any:
    from prometheus_client import CollectorRegistry

    from supervise.metrics import ScoreboardCollector

    registry = CollectorRegistry(auto_describe=False)
    info = {
        "version": __version__,
        "worker_class": cfg.worker_class_str,
        "app": cfg.app_uri or "",
    }
    registry.register(ScoreboardCollector(scoreboard=scoreboard, listeners=listeners, info=info))
    return registry


def _start_http(sock: socket.socket, registry: Any, probes: HealthProbes | None) -> None:
    from prometheus_client.exposition import choose_encoder

    class Handler(BaseHTTPRequestHandler):
        timeout = CLIENT_TIMEOUT
        server_version = f"supervise-metrics/{__version__}"

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if probes is not None and probes.is_probe(path.encode("latin-1", "replace")):
                self._probe(probes.answer(self.command, path.encode("latin-1", "replace")))
                return
            if path not in METRICS_PATHS:
                self.send_error(404, "Try /metrics")
                return
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            try:
                body = encoder(registry)
            except Exception as exc:  # a scrape must never take the helper down
                self.send_error(500, f"collecting metrics failed: {exc}")
                return
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_HEAD = do_GET

        def _probe(self, answer: ProbeAnswer | None) -> None:
            assert answer is not None
            self.send_response(answer.status, answer.reason)
            for name, value in answer.headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(answer.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a scrape every 15 s would only fill the error log

    base: type = _UnixServer if sock.family == socket.AF_UNIX else _TcpServer
    server = base(sock.getsockname(), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    thread.start()


class _TcpServer(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:  # pragma: no cover - bound by the arbiter
        raise AssertionError("the metrics socket is bound by the arbiter")


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _set_proctitle(cfg: Config) -> None:
    with contextlib.suppress(ImportError):
        from setproctitle import setproctitle

        setproctitle(f"supervise: metrics [{cfg.proc_name}]")
