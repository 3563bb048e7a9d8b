"""The WSGI response side: start_response, write(), body framing, file_wrapper.

The per-request steps are native (``_native.WsgiResponse``: start_response,
write, the head's validation, Date, Server and framing headers); the head goes
out together with the first body block, so a typical response costs one
``send``. When the whole body is known up front (a one-item list, a file) and
the application gave no Content-Length, one is added: the connection can then
stay open without chunked framing.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat

# wsgi.file_wrapper is native (native/src/py/file_wrapper.rs): an app makes
# one per file response.
from supervise._native import FileWrapper, WsgiResponse
from supervise.http.errors import ClientError, error_response, phrase

__all__ = ["FileWrapper", "Response"]


class Response(WsgiResponse):
    """One response: the state start_response() and write() share.

    Also the ``resp`` given to the post_request hook and the access log:
    ``status``, ``status_code``, ``headers`` and ``sent`` (body bytes).
    ``start_response``, ``write``, ``send_whole`` and ``finish`` are native
    (``WsgiResponse``: the per-request steps); the rare paths are here.
    """

    __slots__ = ()

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
