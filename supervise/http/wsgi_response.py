"""The WSGI response side: start_response, write(), body framing, file_wrapper.

The head is formatted natively (``_native.response_head``: validation, Date,
Server, framing headers) and sent together with the first body block, so a
typical response costs one ``send``. When the whole body is known up front (a
one-item list, a file) and the application gave no Content-Length, one is
added: the connection can then stay open without chunked framing.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from supervise._native import response_head
from supervise.http.errors import ClientError, error_response, phrase

if TYPE_CHECKING:
    from supervise.http.connection import Connection
    from supervise.http.state import ServeState

_LAST_CHUNK = b"0\r\n\r\n"


# Bodies up to this size go out joined to their head (one small copy, one
# send); larger ones after it.
_JOIN_UP_TO = 64 * 1024


class FileWrapper:
    """``wsgi.file_wrapper``: lets the server send a file with sendfile()."""

    def __init__(self, filelike: Any, blksize: int = 8192) -> None:
        self.filelike = filelike
        self.blksize = blksize
        if hasattr(filelike, "close"):
            self.close = filelike.close

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        data = self.filelike.read(self.blksize)
        if data:
            return data
        raise StopIteration


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"a WSGI application must send bytes, not {type(data).__name__} ({data!r:.60})")


class Response:
    """One response: the state start_response() and write() share.

    Also the ``resp`` given to the post_request hook and the access log:
    ``status``, ``status_code``, ``headers`` and ``sent`` (body bytes).
    """

    __slots__ = (
        "_body",
        "_chunked",
        "_conn",
        "_is_head",
        "_length",
        "_state",
        "_version",
        "head_sent",
        "headers",
        "keep_alive",
        "sent",
        "status",
        "status_code",
    )

    def __init__(
        self, conn: Connection, state: ServeState, version: str, keep_alive: bool, is_head: bool
    ) -> None:
        self._conn = conn
        # Once the worker is stopping, a response whose head is not sent yet closes
        # its connection instead of inviting another request to a worker going away.
        self._state = state
        self._version = version
        self._is_head = is_head
        self.keep_alive = keep_alive
        self.status: str | None = None
        self.status_code = 0
        self.headers: list[tuple[str, str]] = []
        self.head_sent = False
        self.sent = 0
        self._length = -1  # Content-Length of the response, -1 when none
        self._chunked = False
        self._body = True  # whether this response may carry a body at all

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Any:
        if exc_info is not None:
            try:
                if self.head_sent:
                    # Too late to replace the response: PEP 3333 says re-raise.
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None
        elif self.status is not None:
            raise AssertionError("start_response() called again without exc_info")
        if type(status) is not str:
            raise TypeError(f"status must be a str such as '200 OK', not {status!r}")
        self.status = status
        self.headers = headers
        return self.write

    def _head(self, known_length: int) -> bytes:
        """Format the head; ``known_length`` >= 0 when the whole body size is known."""
        status = self.status
        if status is None:
            raise AssertionError("the application did not call start_response()")
        self._conn.before_response()
        if self._state.stopping:
            self.keep_alive = False
        head, length, chunked, keep_alive = response_head(
            status, self.headers, self._version, self.keep_alive, self._is_head, known_length
        )
        code = int(status[:3])
        body = not self._is_head and code >= 200 and code != 204 and code != 304
        self.status_code = code
        self._length = length
        self._chunked = chunked
        self.keep_alive = keep_alive
        self._body = body
        return head

    def write(self, data: bytes) -> None:
        """The write() callable of PEP 3333, also used for each block of the body."""
        if not self.head_sent:
            if data:  # the head waits for the first non-empty block
                self._send_first(data, -1)
        elif data and self._body:
            self._send_more(data)

    def _send_first(self, data: bytes, known_length: int) -> None:
        if type(data) is not bytes:
            data = _as_bytes(data)
        head = self._head(known_length)
        self.head_sent = True
        if not data or not self._body:
            self._conn.sendall(head)
            return
        n = len(data)
        if self._chunked:
            self._conn.sendall(b"".join((head, b"%x\r\n" % n, data, b"\r\n")))
        else:
            if 0 <= self._length < n:
                data = data[: self._length]
                n = self._length
            if n <= _JOIN_UP_TO:
                self._conn.sendall(head + data)
            else:
                self._conn.sendall(head)
                self._conn.sendall(data)
        self.sent = n

    def _send_more(self, data: bytes) -> None:
        if type(data) is not bytes:
            data = _as_bytes(data)
        n = len(data)
        if self._chunked:
            self._conn.sendall(b"".join((b"%x\r\n" % n, data, b"\r\n")))
        else:
            if self._length >= 0:
                room = self._length - self.sent
                if n > room:  # more than the app's Content-Length: never send it
                    if room <= 0:
                        return
                    data = data[:room]
                    n = room
            self._conn.sendall(data)
        self.sent += n

    def send_whole(self, data: bytes) -> None:
        """The whole body in one block (a one-item list): one send, Content-Length known."""
        if self.head_sent:
            if data and self._body:
                self._send_more(data)
            self.finish()
            return
        # The most common response of all, so _send_first() and finish() are inlined.
        if type(data) is not bytes:
            data = _as_bytes(data)
        n = len(data)
        head = self._head(n)
        self.head_sent = True
        if not n or not self._body:
            self._conn.send_last(head)
            if self._body and self._length > 0:
                self.keep_alive = False  # announced a body it did not send
            return
        if self._chunked:  # not expected (the length is known), but keep the framing right
            self._conn.send_last(b"".join((head, b"%x\r\n" % n, data, b"\r\n", _LAST_CHUNK)))
        else:
            if 0 <= self._length < n:
                data = data[: self._length]
                n = self._length
            if n <= _JOIN_UP_TO:
                self._conn.send_last(head + data)
            else:
                # Not copied behind its head: a slow reader would hold the
                # app's body and the copy.
                self._conn.sendall(head)
                self._conn.send_last(data)
            if n < self._length:
                self.keep_alive = False
        self.sent = n

    def finish(self) -> None:
        """End the body: send the head if still due, or the last chunk."""
        if not self.head_sent:
            self._send_first(b"", 0)
        elif self._chunked:
            self._conn.sendall(_LAST_CHUNK)
        if self._body and self.sent < self._length:
            # Shorter than announced: the client would wait for the rest.
            self.keep_alive = False

    def send_file(self, wrapper: FileWrapper, use_sendfile: bool) -> bool:
        """Send a wsgi.file_wrapper over a regular file; False to iterate it instead."""
        if self.head_sent:
            return False
        filelike = wrapper.filelike
        try:
            fd = filelike.fileno()
            info = os.fstat(fd)
            offset = filelike.tell() if hasattr(filelike, "tell") else os.lseek(fd, 0, os.SEEK_CUR)
        except (AttributeError, OSError, io.UnsupportedOperation):
            return False
        if not stat.S_ISREG(info.st_mode):
            return False
        size = max(info.st_size - offset, 0)
        if self._is_head and not any(k.lower() == "content-length" for k, _ in self.headers):
            # The size a GET would get: HEAD must announce it too.
            self.headers = [*self.headers, ("Content-Length", str(size))]
        head = self._head(size)
        self.head_sent = True
        count = size if self._length < 0 else min(size, self._length)
        if not self._body or not count or self._chunked:
            self._conn.sendall(head)
            # A Content-Length we could not add: the caller sends the file as chunks.
            return not self._chunked
        conn = self._conn
        if use_sendfile:
            conn.sendall(head)
            self.sent = conn.sendfile(fd, offset, count)
            # Leave the file where a reader would have left it.
            if hasattr(filelike, "seek"):
                filelike.seek(offset + self.sent)
        else:
            # TLS or --no-sendfile: plain reads, the head still coalesced with the first.
            pending = head
            left = count
            while left > 0:
                data = filelike.read(min(wrapper.blksize, left))
                if not data:
                    break
                conn.sendall(pending + data if pending else data)
                pending = b""
                left -= len(data)
                self.sent += len(data)
            if pending:
                conn.sendall(pending)
        return True

    def send_error(self, status: int, text: str = "") -> None:
        """Answer with a short error response and close (nothing was sent yet)."""
        data = error_response(status, text, body=not self._is_head)
        self.status = f"{status} {phrase(status)}"
        self.status_code = status
        self.headers = [("Content-Type", "text/plain; charset=utf-8"), ("Connection", "close")]
        self.keep_alive = False
        self.head_sent = True
        self.sent = len(data) - data.index(b"\r\n\r\n") - 4
        with contextlib.suppress(ClientError):
            self._conn.sendall(data)
