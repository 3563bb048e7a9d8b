"""ASGI over HTTP/1.1 on asyncio: one ``HttpProtocol`` per connection.

The protocol object owns the connection: it parses heads, feeds request
bodies to the current ``RequestCycle`` (asgi_cycle.py) and starts the next
request once a response is complete (keep-alive and pipelining, in order).
Those steps run for every request and are native (``_native.AsgiHttpConnection``,
the base class: native/src/asgi/worker/connection.rs, with the fields); this
subclass holds what is rare or waits: a connection queued for a slot, what is
answered before the app, the WebSocket upgrade, proxy headers that name a
client, refusals, write-side flow control and the sweep. It never blocks and
never waits on a timer of its own: the worker's tick calls ``sweep()`` to
enforce the header and keep-alive deadlines, so a request costs no timer
handle.

Flow control both ways: reading pauses while the app has not taken the body
already buffered (or pipelined requests pile up), and the cycle's ``send``
awaits while the transport's write buffer is over its high-water mark. A
client that takes none of that buffer for ``send_timeout`` is dropped by the
sweep (write_stall.py).
"""

from __future__ import annotations

import asyncio
from time import monotonic
from typing import Any

from supervise._native import AsgiHttpConnection, asgi_response_head
from supervise.http.asgi_context import AsgiContext
from supervise.http.asgi_scope import ConnectionInfo, apply_proxy_fields, websocket_scope
from supervise.http.errors import error_response
from supervise.http.health import HealthProbes
from supervise.http.proxy import ContradictoryScheme
from supervise.http.send_pace import peer_name
from supervise.http.server_answers import AnsweredRecord, probe_environ
from supervise.http.state import IDLE_GRACE_ON_STOP
from supervise.http.write_stall import WriteStall


class HttpProtocol(AsgiHttpConnection, asyncio.Protocol):
    """One HTTP/1.1 connection of an asgi worker. Built as
    ``HttpProtocol(ctx, peer=None)``; ``peer`` is the client a PROXY header
    named (None: the socket's own peer)."""

    __slots__ = ("_drained", "write_stall")

    def __init__(self, ctx: AsgiContext, peer: tuple[str, int] | None = None) -> None:
        self.write_stall = WriteStall(ctx.send_timeout, ctx.send_min_rate)
        self._drained: asyncio.Future[None] | None = None
        ctx.arriving[self] = monotonic()

    # -- asyncio callbacks (data_received: AsgiHttpConnection) ----------------
    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        ctx = self.ctx
        self.transport = transport
        ctx.arriving.pop(self, None)
        if ctx.queued or not ctx.has_slot(monotonic()):
            # Full: it waits unread, in turn, for a slot (asgi_context.py).
            transport.pause_reading()
            ctx.queued.append(self)
            return
        self._take_slot()

    def seat(self) -> None:
        """Its slot came, after it was queued: read from now on."""
        self._take_slot()
        if not self.transport.is_closing():
            self.transport.resume_reading()
        if self.buf:
            self._next_request()

    def _take_slot(self) -> None:
        ctx = self.ctx
        ctx.connections.add(self)
        self.info = ConnectionInfo(ctx, self.transport, self.peer)
        self.idle_since = now = monotonic()
        self.deadline = now + ctx.header_timeout

    def _data_while_queued(self, data: bytes) -> None:
        # uvloop may deliver what came with the connection before
        # pause_reading takes effect. Kept for when its slot comes.
        self.buf += data
        self.transport.pause_reading()

    def waiting(self) -> tuple[float, float] | None:
        return (self.idle_since, self.deadline) if self.cycle is None else None

    def connection_lost(self, exc: Exception | None) -> None:
        ctx = self.ctx
        if self.info is None:  # queued, never seated
            ctx.queued.remove(self)
            return
        ctx.leave(self)
        if self.cycle is not None:
            self.cycle.disconnected()
        self._wake_writers()

    def pause_writing(self) -> None:
        self.write_paused = True
        self.write_stall.paused(self.transport, monotonic())

    def resume_writing(self) -> None:
        self.write_paused = False
        self.write_stall.resumed(self.transport, monotonic())
        self._wake_writers()

    # -- what the cycle and the worker use (pause_reading, resume_reading,
    # close, response_complete: AsgiHttpConnection) ---------------------------
    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its low-water mark."""
        if self._drained is None:
            self._drained = self.ctx.loop.create_future()
        await self._drained

    def _wake_writers(self) -> None:
        waiter, self._drained = self._drained, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def shutdown(self) -> None:
        """A graceful stop began: idle keep-alive connections close (after a short
        grace, a request may be on the wire); a request in flight finishes and
        its response says ``Connection: close``."""
        self.sweep(monotonic())

    def sweep(self, now: float) -> None:
        why = self.write_paused and self.write_stall.expired(self.transport, now)
        if why:
            client = self.info.client if self.info is not None else None
            self.ctx.log.info("Dropped %s: %s", peer_name(client), why)
            self.transport.abort()
            return
        cycle = self.cycle
        if cycle is not None:
            cycle.sweep(now)
            return
        if now > self.deadline:
            if self.buf:
                # Part of a head, then silence: say why before closing.
                self.transport.write(
                    error_response(408, "request head not complete within header_timeout")
                )
            self.close()
        elif (
            self.ctx.state.stopping
            and self.served
            and not self.buf
            and now - self.idle_since >= IDLE_GRACE_ON_STOP
        ):
            self.close()

    # -- a request's rare steps (the native dispatch calls these) ---------------
    def _try_upgrade(self, req: Any, size: int) -> bool:
        """A head with an Upgrade field: whether it became a WebSocket (else
        it is served as a plain request)."""
        ctx = self.ctx
        upgrade = req.upgrade
        if ctx.ws_protocol is None or upgrade is None or upgrade.lower() != "websocket":
            return False
        buf = self.buf
        self._upgrade(req, buf[:size], buf[size:])
        return True

    def _proxied(self, scope: dict[str, Any], found: dict[str, str]) -> bool:
        """A trusted peer's proxy headers applied to the scope; False when they
        contradict each other (the request is refused)."""
        try:
            apply_proxy_fields(self.ctx, scope, found, websocket=False)
        except ContradictoryScheme as exc:
            self._refuse(400, str(exc))
            return False
        return True

    def _screen(self, req: Any) -> tuple[bool, Any]:
        """What the settings decide before the app (probes, static files, the
        body and concurrency limits): whether that answered the request, and
        a static file's answer for the cycle to send."""
        ctx = self.ctx
        if ctx.probes is not None and ctx.probes.is_probe(req.raw_path):
            self._answer_probe(req, ctx.probes)
            return True, None
        static = None
        if ctx.statics is not None and ctx.statics.claims(req.raw_path):
            static = ctx.statics.decide(req)
        if ctx.limit_body and req.content_length and req.content_length > ctx.limit_body:
            self._refuse(413, f"Request body larger than {ctx.limit_body} bytes")
            return True, None
        if ctx.limit_concurrency and ctx.in_flight >= ctx.limit_concurrency:
            self._refuse(503, "Too many requests in flight")
            return True, None
        return False, static

    def _answer_probe(self, req: Any, probes: HealthProbes) -> None:
        """A --health-path probe, answered here instead of by the app."""
        ctx = self.ctx
        answer = probes.answer(req.method, req.raw_path)
        assert answer is not None
        is_head = req.method == "HEAD"
        # A probe's body is never read: a connection that sent one closes.
        keep = (
            req.keep_alive
            and ctx.keepalive > 0
            and not ctx.state.stopping
            and not (req.content_length or req.chunked)
        )
        head, _, _, keep = asgi_response_head(
            answer.status, answer.raw_headers, req.http_version, keep, is_head, len(answer.body)
        )
        self.transport.write(head if is_head else head + answer.body)
        ctx.health_checked()
        if ctx.log_probes:
            client = self.info.client if self.info is not None else None
            environ = probe_environ(
                req.method,
                req.target,
                req.path,
                f"HTTP/{req.http_version}",
                client[0] if client else "",
            )
            sent = 0 if is_head else len(answer.body)
            ctx.log.access(AnsweredRecord.of_probe(answer, sent), None, environ, 0.0)
        if not keep:
            self.buf = b""
            self.close()
            return
        self.served = True
        self.idle_since = now = monotonic()
        self.deadline = now + (ctx.header_timeout if self.buf else ctx.keepalive)
        self._again = True  # a pipelined request may follow

    def _upgrade(self, req: Any, head: bytes, rest: bytes) -> None:
        """Hand the connection to the WebSocket protocol (it answers the handshake)."""
        ctx = self.ctx
        assert self.info is not None
        try:
            scope = websocket_scope(ctx, self.info, req)
        except ContradictoryScheme as exc:
            self._refuse(400, str(exc))
            return
        self.buf = b""
        # From here on reading is the WebSocket protocol's to pause and resume.
        self.resume_reading()
        ws = ctx.ws_protocol(ctx=ctx, info=self.info, scope=scope, head=head)
        ctx.connections.discard(self)
        self.transport.set_protocol(ws)
        ws.connection_made(self.transport)
        if rest:
            ws.data_received(rest)

    def _refuse(self, status: int, reason: str) -> None:
        """Answer a request that cannot be served and close the connection."""
        self.ctx.log.debug("Invalid request from %s: %s", self.info and self.info.client, reason)
        self.buf = b""
        self.transport.write(error_response(status, reason))
        self.close()
