"""A small HTTP/3 client for the test suite, built on aioquic's asyncio API.

The HTTP/3 tests talk to the real server over real UDP sockets with a real
HTTP/3 client, so that what they check is what a browser or curl would see:
QUIC handshakes, QPACK, flow control, stream resets, GOAWAY. The tests are
synchronous, so `H3Client` runs its own asyncio event loop in a background
thread and every public method blocks until its result is there.

One QUIC connection is kept open across requests. A new one is opened only
when asked (`reconnect()`), when the current one was closed, or after the
server sent GOAWAY on it (as browsers do: no new request goes on a connection
that is going away; the old one is closed once its requests are done).

    with H3Client("127.0.0.1", port) as client:
        r = client.request("GET", "/")
        assert r.status == 200 and client.connections_opened == 1
        rs = client.gather([{"method": "GET", "path": f"/{i}"} for i in range(10)])

Errors: `H3StreamReset` (the server reset the stream), `H3ConnectionClosed`
(the connection ended before the response did), `H3Rejected` (the server did
not process the request: its stream id is at or above the GOAWAY id, or it was
reset with H3_REQUEST_REJECTED; safe to retry per RFC 9114 sections 4.1.1 and
5.2, which `request(retry_rejected=True)` does once, on a new connection),
`H3MessageError` (a malformed response: content-length does not match the
body) and `TimeoutError`.

How one request stream and the QUIC connection are driven, and what aioquic
is worked around for: tests/h3client_streams.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ssl
import threading
from collections.abc import Sequence
from typing import Any

from aioquic.asyncio import connect
from aioquic.h3.connection import H3_ALPN, ErrorCode
from aioquic.quic.configuration import QuicConfiguration
from h3client_streams import (
    CLOSE_GRACE,
    H3ConnectionClosed,
    H3Error,
    H3MessageError,
    H3Protocol,
    H3Rejected,
    H3Response,
    H3StreamReset,
    Header,
    QuicLink,
    Spec,
)

# The client and what its calls raise or return.
__all__ = [
    "H3Client",
    "H3ConnectionClosed",
    "H3Error",
    "H3MessageError",
    "H3Rejected",
    "H3Response",
    "H3StreamReset",
]

# --- the client ----------------------------------------------------------------


class H3Client:
    """A blocking HTTP/3 client keeping one QUIC connection open across requests.

    Use it as a context manager; `close()` ends it (it cannot be restarted).
    `verify=False` accepts any server certificate; `cafile` is the CA bundle
    for `verify=True`; `certfile`/`keyfile` present a TLS client certificate;
    `server_name` is the SNI (default: `host`).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        verify: bool = False,
        cafile: str | None = None,
        certfile: str | None = None,
        keyfile: str | None = None,
        server_name: str | None = None,
        idle_timeout: float = 30.0,
    ) -> None:
        self.host, self.port = host, port
        self.verify, self.cafile = verify, cafile
        self.certfile, self.keyfile = certfile, keyfile
        self.server_name = server_name
        self.idle_timeout = idle_timeout
        self.connections_opened = 0
        self.retries = 0
        self._current: QuicLink | None = None
        self._retired: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()  # binds to the client's loop on first use
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def __enter__(self) -> H3Client:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the event loop thread (done by `with`)."""
        if self._loop is not None:
            return
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="h3client", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Close every connection, then stop the event loop thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._close_all(), CLOSE_GRACE * 2)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = None

    # state of the current connection

    @property
    def goaway_received(self) -> bool:
        """Whether the server sent GOAWAY on the current connection."""
        return self.goaway_id is not None

    @property
    def goaway_id(self) -> int | None:
        current = self._current
        return current.protocol.goaway_id if current else None

    @property
    def connected(self) -> bool:
        """Whether the current connection is open (not closed; it may have got GOAWAY)."""
        current = self._current
        return bool(current and current.protocol.closed_by is None)

    @property
    def handshake_retried(self) -> bool:
        """Whether the server sent Retry before the current connection (it
        made the client prove its address, RFC 9000 8.1.2)."""
        current = self._current
        return bool(current and getattr(current.protocol._quic, "_retry_count", 0))

    @property
    def closed_by(self) -> tuple[int, str] | None:
        """(error code, reason) that closed the current connection, if it is closed."""
        current = self._current
        return current.protocol.closed_by if current else None

    def wait_goaway(self, timeout: float = 5) -> bool:
        """Wait until the current connection got GOAWAY or closed; True on GOAWAY."""
        self._call(self._wait_goaway(timeout), timeout)
        return self.goaway_received

    # requests

    def reconnect(self, timeout: float = 10) -> None:
        """Close the current connection (if any) and open a new one now."""
        self._call(self._reconnect(timeout), timeout + CLOSE_GRACE)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: Sequence[Header] = (),
        timeout: float = 10,
        authority: str | None = None,
        extra_pseudo: list[tuple[bytes, bytes]] | None = None,
        raw_headers: list[tuple[bytes, bytes]] | None = None,
        retry_rejected: bool = True,
    ) -> H3Response:
        """Send one request and return its complete response.

        `headers` names are lower-cased; content-length is added for a
        non-empty body unless given. `extra_pseudo` is appended after the
        four usual pseudo-headers. `raw_headers` replaces the whole header
        list, pseudo-headers included, and is sent exactly as given.
        `timeout` covers opening a connection and the whole response.
        """
        spec = Spec(
            method,
            path,
            body,
            headers,
            timeout,
            authority,
            extra_pseudo,
            raw_headers,
            retry_rejected,
        )
        return self._call(self._request(spec), self._budget(spec))

    def gather(self, requests: list[dict[str, Any]]) -> list[H3Response | Exception]:
        """Send requests concurrently on one connection (one stream each).

        Each dict holds `request`'s arguments (method defaults to GET, path to
        /). The result is in the same order: a response or the exception.
        """
        specs = [Spec(**r) for r in requests]
        budget = max((self._budget(s) for s in specs), default=1)
        return self._call(self._gather(specs), budget)

    # the loop side

    def _call(self, coro: Any, timeout: float) -> Any:
        if self._loop is None:
            coro.close()
            raise RuntimeError("H3Client is not started (use it as a context manager)")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout + 5)
        except concurrent.futures.TimeoutError:  # also the builtin one, on Python 3.11+
            if future.done():  # the request's own TimeoutError, or just in time
                return future.result()
            future.cancel()
            raise TimeoutError(f"no answer from the client loop in {timeout + 5} s") from None

    @staticmethod
    def _budget(spec: Spec) -> float:
        return spec.timeout * (2 if spec.retry_rejected else 1) + CLOSE_GRACE

    async def _gather(self, specs: list[Spec]) -> list[H3Response | Exception]:
        results = await asyncio.gather(*(self._request(s) for s in specs), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
        return list(results)

    async def _request(self, spec: Spec) -> H3Response:
        try:
            return await self._attempt(spec)
        except H3Rejected as rejected:
            if not spec.retry_rejected:
                raise
            self.retries += 1
            return await self._attempt(spec, avoid=rejected.connection)

    async def _attempt(self, spec: Spec, avoid: int | None = None) -> H3Response:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + spec.timeout
        protocol = await self._usable(spec.timeout, avoid)
        exchange = protocol.start(spec, self._authority())
        try:
            left = max(deadline - loop.time(), 0)
            return await asyncio.wait_for(asyncio.shield(exchange.future), left)
        except asyncio.TimeoutError:
            error = TimeoutError(f"no complete response in {spec.timeout} s")
            protocol.cancel(exchange, error)
            raise error from None

    def _authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    async def _usable(self, timeout: float, avoid: int | None = None) -> H3Protocol:
        """The current connection, or a new one if it is gone, going away or `avoid`."""
        async with self._lock:
            current = self._current
            if current and current.protocol.usable and current.protocol.number != avoid:
                return current.protocol
            if current:
                self._retire(current)
            self._current = await self._open(timeout)
            return self._current.protocol

    async def _reconnect(self, timeout: float) -> None:
        async with self._lock:
            if self._current:
                await self._shutdown(self._current)
                self._current = None
            self._current = await self._open(timeout)

    async def _wait_goaway(self, timeout: float) -> None:
        current = self._current
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while current and current.protocol.goaway_id is None and loop.time() < deadline:
            if current.protocol.closed_by is not None:
                return
            await asyncio.sleep(0.01)

    def _configuration(self) -> QuicConfiguration:
        config = QuicConfiguration(
            is_client=True,
            alpn_protocols=H3_ALPN,
            idle_timeout=self.idle_timeout,
            server_name=self.server_name or self.host,
            verify_mode=ssl.CERT_REQUIRED if self.verify else ssl.CERT_NONE,
        )
        if self.cafile:
            config.load_verify_locations(self.cafile)
        if self.certfile:
            config.load_cert_chain(self.certfile, self.keyfile)
        return config

    async def _open(self, timeout: float) -> QuicLink:
        """Open a connection and wait for its QUIC handshake.

        `connect(wait_connected=False)` and our own handshake event: aioquic's
        `wait_connected`, cancelled by a timeout, leaves a future whose
        ConnectionError nobody retrieves.
        """
        stack = contextlib.AsyncExitStack()
        opening = connect(
            self.host,
            self.port,
            configuration=self._configuration(),
            create_protocol=H3Protocol,
            wait_connected=False,
        )
        protocol = await stack.enter_async_context(opening)
        connection = QuicLink(protocol, stack)
        protocol.transmit()
        try:
            await asyncio.wait_for(protocol.handshake_ended.wait(), timeout)
        except asyncio.TimeoutError:
            await self._shutdown(connection, grace=0.2)  # no peer to say goodbye to
            raise TimeoutError(
                f"no QUIC handshake with {self._authority()} in {timeout} s"
            ) from None
        if protocol.closed_by is not None:
            await self._shutdown(connection)
            raise H3ConnectionClosed(*protocol.closed_by)
        self.connections_opened += 1
        protocol.number = self.connections_opened
        return connection

    def _retire(self, connection: QuicLink) -> None:
        """Let a connection finish its requests in the background, then close it."""
        connection.protocol.retiring = True

        async def retire() -> None:
            try:
                await connection.protocol.wait_idle()
            finally:  # also when `close()` cancels the wait
                await self._shutdown(connection)

        task = asyncio.ensure_future(retire())
        self._retired.add(task)
        task.add_done_callback(self._retired.discard)

    async def _shutdown(self, connection: QuicLink, grace: float = CLOSE_GRACE) -> None:
        """Close a connection (CONNECTION_CLOSE H3_NO_ERROR), waiting `grace` at most."""
        protocol = connection.protocol
        protocol.close(error_code=ErrorCode.H3_NO_ERROR)
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(connection.stack.aclose(), grace)
        if protocol._transport is not None:
            protocol._transport.close()

    async def _close_all(self) -> None:
        retired = list(self._retired)
        for task in retired:
            task.cancel()
        closing = [self._shutdown(self._current)] if self._current else []
        self._current = None
        await asyncio.gather(*retired, *closing, return_exceptions=True)
        await asyncio.get_running_loop().shutdown_default_executor()  # getaddrinfo's thread
