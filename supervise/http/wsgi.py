"""PEP 3333: serving WSGI requests on a connection, for every WSGI worker.

The sync, gthread and gevent workers all drive ``WSGIHandler``; they differ
only in how they get connections and how many requests they run at once::

    handler = WSGIHandler(worker, multithread=False)
    base = handler.base_environ(listener)           # once per listener
    conn = handler.connection(sock, addr, base)     # per accepted socket
    while handler.handle(conn, keep_alive=True):    # per request
        ...                                         # (sync: keep_alive=False)
    conn.close()

Environs are built in three layers so that per-request work stays small: the
listener's base (wsgi.*, SERVER_*, SCRIPT_NAME) once, the peer (REMOTE_*) once
per connection, and the request's own keys natively by
``Request.wsgi_environ``, which copies the connection's dict.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from time import perf_counter
from typing import TYPE_CHECKING, Any

from supervise import SERVER_SOFTWARE, hooks
from supervise._native import ChunkedDecoder, EnvironRepeats, ParseError, RequestParser
from supervise.http.connection import Connection
from supervise.http.errors import ClientError, SendTimeout, error_response, phrase
from supervise.http.health import HealthProbes
from supervise.http.proxy import ContradictoryScheme, ProxyRules
from supervise.http.send_pace import peer_name
from supervise.http.wsgi_input import EMPTY_INPUT, WSGIInput
from supervise.http.wsgi_response import FileWrapper, Response

if TYPE_CHECKING:
    import socket

    from supervise.sockets import Listener
    from supervise.workers.base import Worker

__all__ = ["ErrorStream", "FileWrapper", "WSGIHandler"]

# A body the application left unread is drained when at most this big, so the
# connection can carry another request; a bigger one closes the connection.
DRAIN_LIMIT = 64 * 1024


class ErrorStream:
    """``wsgi.errors``: text the application writes goes where the error log goes.

    Written straight to the error log's streams (a file or stderr), not as log
    records: applications write partial lines and tracebacks here.
    """

    def __init__(self, log: Any) -> None:
        self._log = log

    def _streams(self) -> list[Any]:
        logger = getattr(self._log, "error_log", None)
        handlers = getattr(logger, "handlers", ())
        streams = [h.stream for h in handlers if isinstance(h, logging.StreamHandler)]
        return streams or [sys.stderr]

    def write(self, text: str) -> None:
        for stream in self._streams():
            stream.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        for stream in self._streams():
            stream.flush()


def request_line(req: Any) -> str:
    return f"{req.method} {req.target} HTTP/{req.http_version}"


# Bind addresses that name no address a client can reach.
_WILDCARDS = frozenset(("0.0.0.0", "::"))


class WSGIHandler:
    """Serves WSGI requests for one worker; safe to share between its threads.

    A worker with its own scheduler may set ``connection_class`` to a
    Connection subclass whose ``wait`` blocks cooperatively.
    """

    connection_class: type[Connection] = Connection

    def __init__(self, worker: Worker, *, multithread: bool = False) -> None:
        cfg = worker.cfg
        self.worker = worker
        self.state = worker.state
        self.app = worker.app
        self.log = worker.log
        self.cfg = cfg
        self.parse = RequestParser(
            cfg.limit_request_line, cfg.limit_request_fields, cfg.limit_request_field_size
        ).parse
        self.header_timeout: float | None = cfg.header_timeout or None
        self.body_timeout: float | None = cfg.body_timeout or None
        # Each wait for the socket to take more of a response: a client that
        # stopped reading loses its connection instead of holding the worker.
        self.send_timeout: float | None = cfg.send_timeout or None
        self.send_min_rate: int = cfg.send_min_rate
        self.limit_body: int = cfg.limit_request_body
        self.is_tls = worker.ssl_context is not None
        self.sendfile = bool(cfg.sendfile) and not self.is_tls
        self.proxy = ProxyRules(cfg)
        # The fields the proxy rules read: most requests from a trusted peer
        # carry none, which the request finds in one native pass.
        self.proxy_fields = self.proxy.header_tuple
        # The default hooks do nothing worth a call per request (pre_request only
        # logs at debug level): skip them unless they were replaced.
        self.pre_request: Any = cfg.pre_request
        if self.pre_request is hooks.pre_request and cfg.loglevel != "debug":
            self.pre_request = None
        self.post_request: Any = cfg.post_request
        if self.post_request is hooks.post_request:
            self.post_request = None
        self.access_log = self.log.access_enabled
        # Requests are timed only for someone: the access log or the metrics.
        self.timed = self.access_log or worker.record is not None
        self.multithread = multithread
        self.probes = HealthProbes.for_worker(worker)
        self.statics = worker.statics
        # Whether a request may be answered before the app (probe, static file).
        self.screened = self.probes is not None or self.statics is not None
        self.log_probes = bool(cfg.health_access_log) and self.access_log

    # -- environ layers ----------------------------------------------------------
    def base_environ(self, listener: Listener) -> dict[str, Any]:
        """The keys shared by every request on ``listener``."""
        return {
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "https" if self.is_tls else "http",
            "wsgi.errors": ErrorStream(self.log),
            "wsgi.multithread": self.multithread,
            "wsgi.multiprocess": self.cfg.workers > 1,
            "wsgi.run_once": False,
            "wsgi.file_wrapper": FileWrapper,
            "wsgi.input_terminated": True,
            "SERVER_SOFTWARE": SERVER_SOFTWARE,
            "SERVER_NAME": listener.server_name,
            "SERVER_PORT": listener.server_port,
            "SCRIPT_NAME": self.cfg.root_path or "",
        }

    def connection(self, sock: socket.socket, addr: Any, base: dict[str, Any]) -> Connection:
        """Wrap an accepted, non-blocking socket (already TLS-wrapped when TLS)."""
        environ = base.copy()
        if type(addr) is tuple:
            host = addr[0]
            environ["REMOTE_ADDR"] = host
            environ["REMOTE_PORT"] = str(addr[1])
            if base["SERVER_NAME"] in _WILDCARDS:
                # The address the client reached, as the engine and ASGI's
                # `server` give it, not the bind's 0.0.0.0.
                environ["SERVER_NAME"] = sock.getsockname()[0]
            trusted = self.proxy.enabled and self.proxy.trusts(host)
        else:
            # A unix socket: the peer usually has no name ("").
            environ["REMOTE_ADDR"] = addr.decode() if isinstance(addr, bytes) else (addr or "")
            trusted = self.proxy.enabled
        return self.connection_class(sock, environ, trusted, self.send_timeout, self.send_min_rate)

    # -- one request -----------------------------------------------------------------
    def handle(
        self, conn: Connection, keep_alive: bool = False, idle_timeout: float | None = None
    ) -> bool:
        """Read one request from ``conn``, run the app, send the response.

        Returns True when the connection may carry another request. Never
        raises for anything a client or the application does.
        ``idle_timeout`` bounds the wait for the first byte (keep-alive).
        """
        try:
            req = conn.read_head(self.parse, self.header_timeout, idle_timeout)
        except ParseError as exc:
            self._refuse(conn, exc.status, exc.reason)
            return False
        except ClientError as exc:
            if exc.status:
                self._refuse(conn, exc.status, str(exc))
            return False
        if req is None:
            return False
        return self.serve_request(conn, req, keep_alive)

    def refuse(self, conn: Connection, status: int, reason: str) -> None:
        """Answer a head that cannot be served (ParseError, ClientTimeout) and
        mark the connection for closing."""
        self._refuse(conn, status, reason)

    def _refuse(self, conn: Connection, status: int, reason: str) -> None:
        """Answer a request that cannot be served and mark the connection for closing."""
        self.log.debug("Invalid request from %s: %s", conn.environ.get("REMOTE_ADDR"), reason)
        conn.linger = True
        with contextlib.suppress(ClientError):
            conn.sendall(error_response(status, reason))

    def serve_request(self, conn: Connection, req: Any, keep_alive: bool = False) -> bool:
        """Serve a request whose head was read already (Connection.gather_head,
        Connection.take_head); like ``handle``, True when the connection may
        carry another."""
        if self.screened:
            answered = self._screen(conn, req, keep_alive)
            if answered is not None:
                return answered
        repeats = conn.repeats
        if repeats is None and keep_alive:
            # Kept for the connection's next request, which mostly sends the same values.
            repeats = conn.repeats = EnvironRepeats()
        environ = req.wsgi_environ(conn.environ, repeats)
        resp = Response(conn, self.state, req, keep_alive)
        length = req.content_length
        if req.chunked:
            body: Any = WSGIInput(
                conn, -1, ChunkedDecoder(self.limit_body), self.body_timeout, req.expect_continue
            )
        elif length:
            body = WSGIInput(conn, length, None, self.body_timeout, req.expect_continue)
        else:
            body = EMPTY_INPUT
        environ["wsgi.input"] = body
        worker = self.worker
        started = perf_counter() if self.timed else 0.0
        try:
            if self.limit_body and length and length > self.limit_body:
                resp.send_error(413, f"Request body larger than {self.limit_body} bytes")
            else:
                if conn.trusted and req.fields_named(self.proxy_fields) is not None:
                    self.proxy.apply(environ)
                if self.pre_request is not None:
                    self.pre_request(worker, req)
                self._run_app(environ, resp)
        except ClientError as exc:
            # The client went away or misbehaved: not the application's fault.
            if not resp.head_sent and exc.status:
                resp.send_error(exc.status, str(exc))
            resp.keep_alive = False
            self._client_failed(conn, req, exc)
        except ContradictoryScheme as exc:
            resp.send_error(400, str(exc))
        except Exception:
            self.log.exception("Error handling request %s", request_line(req))
            if resp.head_sent:
                resp.keep_alive = False  # cut off: the client sees a truncated response
            else:
                resp.send_error(500)
        keep = resp.keep_alive
        if not body.done:
            if keep:
                keep = body.drain(DRAIN_LIMIT)
            if not body.done:
                conn.linger = True
        if self.post_request is not None:
            try:
                self.post_request(worker, req, environ, resp)
            except Exception:
                self.log.exception("post_request hook failed for %s", request_line(req))
        elapsed = perf_counter() - started if self.timed else 0.0
        if self.access_log:
            self.log.access(resp, req, environ, elapsed)
        worker.request_finished(resp.status_code, elapsed, resp.sent)
        return keep

    def _screen(self, conn: Connection, req: Any, keep_alive: bool) -> bool | None:
        """Serve a probe or a static file; None when the app answers ``req``."""
        probes = self.probes
        if probes is not None and probes.is_probe(req.raw_path):
            return self._serve_probe(conn, req, keep_alive, probes)
        statics = self.statics
        if statics is not None and statics.claims(req.raw_path):
            answer = statics.decide(req)
            if answer is not None:
                return self._serve_static(conn, req, keep_alive, answer)
        return None

    def _serve_probe(
        self, conn: Connection, req: Any, keep_alive: bool, probes: HealthProbes
    ) -> bool:
        """A --health-path probe: answered here, not by the app; not a request
        for --max-requests, the hooks or the request metrics."""
        answer = probes.answer(req.method, req.raw_path)
        assert answer is not None
        resp = Response(conn, self.state, req, keep_alive)
        started = perf_counter() if self.log_probes else 0.0
        try:
            resp.start_response(answer.status_line, list(answer.headers))
            resp.send_whole(answer.body)
        except ClientError:
            resp.keep_alive = False
        keep = resp.keep_alive
        if req.content_length or req.chunked:
            # A probe carries no body; one that does is not read, so the
            # connection cannot carry another request.
            keep = False
            conn.linger = True
        if self.log_probes:
            self.log.access(resp, req, req.wsgi_environ(conn.environ), perf_counter() - started)
        self.worker.health_checked()
        return keep

    def _client_failed(self, conn: Connection, req: Any, exc: ClientError) -> None:
        """A client that stopped reading, or read too slowly, is news (once, at
        info, as the other classes say it); one that left is not."""
        if isinstance(exc, SendTimeout):
            environ = conn.environ
            client = (environ.get("REMOTE_ADDR"), environ.get("REMOTE_PORT"))
            self.log.info("Dropped %s: %s", peer_name(client) if client[1] else client[0], exc)
        else:
            self.log.debug("%s: %s", request_line(req), exc)

    def _serve_static(
        self, conn: Connection, req: Any, keep_alive: bool, answer: tuple[int, Any, Any]
    ) -> bool:
        """A --static-map file (or its 304, 404, 416...), as the native
        decision says: a request like any other for the log, the metrics and
        --max-requests, but not the app's."""
        status, headers, body = answer
        has_body = bool(req.content_length or req.chunked)
        resp = Response(conn, self.state, req, keep_alive and not has_body)
        started = perf_counter() if self.timed else 0.0
        try:
            if type(body) is tuple:
                fd, offset, length = body
                with os.fdopen(fd, "rb") as file:
                    file.seek(offset)
                    resp.start_response(
                        f"{status} {phrase(status)}", [*headers, ("Content-Length", str(length))]
                    )
                    if not resp.send_file(FileWrapper(file), self.sendfile):
                        resp.keep_alive = False
                    resp.finish()
            else:
                resp.start_response(f"{status} {phrase(status)}", headers)
                resp.send_whole(body or b"")
        except ClientError as exc:
            resp.keep_alive = False
            self._client_failed(conn, req, exc)
        keep = resp.keep_alive
        if has_body:
            # A static file's request body is not read: the connection ends.
            keep = False
            conn.linger = True
        elapsed = perf_counter() - started if self.timed else 0.0
        if self.access_log:
            self.log.access(resp, req, req.wsgi_environ(conn.environ), elapsed)
        self.worker.request_finished(resp.status_code, elapsed, resp.sent)
        return keep

    def _run_app(self, environ: dict[str, Any], resp: Response) -> None:
        # Loaded, then called: `self.app(...)` on an instance attribute is a
        # method load that CPython 3.11 cannot specialise, looked up afresh
        # each request (the class's MRO, then the instance).
        app = self.app
        result = app(environ, resp.start_response)
        try:
            if type(result) is list and len(result) == 1:
                resp.send_whole(result[0])
                return
            if type(result) is FileWrapper and resp.send_file(result, self.sendfile):
                resp.finish()
                return
            write = resp.write
            for data in result:
                write(data)
            resp.finish()
        finally:
            if type(result) is not list:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
