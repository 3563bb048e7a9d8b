"""``wsgi.input``: the request body as a file-like object, read lazily.

The body is pulled from the connection only when the application reads it, so
an application that refuses a large upload never waits for it. A body that is
still unread when the response is done is drained (when small) so that the
connection can carry the next request, or the connection is closed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from supervise._native import ParseError
from supervise.http.connection import BODY_RECV_SIZE
from supervise.http.errors import ClientDisconnected, ClientError, InvalidBody

if TYPE_CHECKING:
    from supervise.http.connection import Connection

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class EmptyInput:
    """The body of a request without one; stateless, so one instance serves all."""

    __slots__ = ()
    done = True

    def read(self, size: int | None = -1) -> bytes:
        return b""

    def readline(self, size: int | None = -1) -> bytes:
        return b""

    def readlines(self, hint: int | None = -1) -> list[bytes]:
        return []

    def __iter__(self) -> Iterator[bytes]:
        return iter(())

    def drain(self, limit: int) -> bool:
        return True


EMPTY_INPUT = EmptyInput()


class WSGIInput:
    """A Content-Length (``length`` >= 0) or chunked (``decoder`` set) request body."""

    __slots__ = ("_buf", "_conn", "_continue", "_decoder", "_remaining", "_timeout", "done")

    def __init__(
        self,
        conn: Connection,
        length: int,
        decoder: Any,
        timeout: float | None,
        expect_continue: bool,
    ) -> None:
        self._conn = conn
        self._remaining = length  # Content-Length bytes not yet read from the connection
        self._decoder = decoder  # a ChunkedDecoder, or None
        self._timeout = timeout
        self._continue = expect_continue
        self._buf = bytearray()  # body bytes read from the connection, not yet by the app
        self.done = False  # the whole body has been read from the connection

    def _more(self, size: int) -> bytes:
        """The next piece of the body (at most ``size`` for Content-Length); b"" at the end."""
        if self.done:
            return b""
        conn = self._conn
        if self._continue:
            # The client waits for our go before sending the body: give it on the
            # first read, unless the body is already arriving.
            self._continue = False
            if not conn.buf:
                conn.sendall(CONTINUE)
        decoder = self._decoder
        if decoder is None:
            data = conn.read_some(min(size, self._remaining), self._timeout)
            if not data:
                raise ClientDisconnected("client closed the connection before the end of the body")
            self._remaining -= len(data)
            if not self._remaining:
                self.done = True
            return data
        while True:
            data = conn.read_some(BODY_RECV_SIZE, self._timeout)
            if not data:
                raise ClientDisconnected("client closed the connection before the last chunk")
            try:
                decoded = decoder.feed(data)
            except ParseError as exc:
                raise InvalidBody(exc.status, exc.reason) from None
            if decoder.done:
                self.done = True
                conn.unread(decoder.leftover)
            if decoded or self.done:
                return decoded

    def read(self, size: int | None = -1) -> bytes:
        buf = self._buf
        if size is None or size < 0:
            parts = [bytes(buf)] if buf else []
            buf.clear()
            while data := self._more(BODY_RECV_SIZE):
                parts.append(data)
            return parts[0] if len(parts) == 1 else b"".join(parts)
        if size == 0:
            return b""
        if not buf:
            # The usual case: nothing buffered, hand over what the connection gives.
            data = self._more(size)
            if len(data) == size or self.done:
                if len(data) > size:
                    buf += data[size:]
                    data = data[:size]
                return data
            buf += data
        while len(buf) < size and (data := self._more(size - len(buf))):
            buf += data
        data = bytes(buf[:size])
        del buf[:size]
        return data

    def readline(self, size: int | None = -1) -> bytes:
        if size is None:
            size = -1
        buf = self._buf
        start = 0
        while True:
            end = buf.find(b"\n", start)
            if end >= 0:
                end += 1
                break
            if 0 <= size <= len(buf):
                end = size
                break
            start = len(buf)
            data = self._more(BODY_RECV_SIZE)
            if not data:
                end = len(buf)
                break
            buf += data
        if 0 <= size < end:
            end = size
        line = bytes(buf[:end])
        del buf[:end]
        return line

    def readlines(self, hint: int | None = -1) -> list[bytes]:
        lines = []
        total = 0
        while line := self.readline():
            lines.append(line)
            total += len(line)
            if hint is not None and 0 < hint <= total:
                break
        return lines

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def drain(self, limit: int) -> bool:
        """Read and drop what the app left unread; False when that is over ``limit``
        bytes, or impossible, and the connection must be closed instead."""
        self._buf.clear()
        if self.done:
            return True
        if self._continue and not self._conn.buf:
            return False  # the client still waits for 100 Continue: it sends nothing
        if self._decoder is None and self._remaining > limit:
            return False
        try:
            while data := self._more(BODY_RECV_SIZE):
                limit -= len(data)
                if limit < 0:
                    return False
        except ClientError:
            return False
        return True
