"""One client connection: buffered reads and writes with deadlines.

The socket is non-blocking (plain or TLS). Every call first tries the system
call and waits only when it would block, so a request that has already arrived
costs one ``recv`` and a small response one ``send`` — no ``poll`` before each
call as a socket timeout would add. Waiting goes through ``Connection.wait``,
which a worker built on another scheduler (gevent) replaces with its own, so
the same code serves a thread or a greenlet.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
from collections.abc import Callable
from time import monotonic
from typing import Any

from supervise._native import EnvironRepeats
from supervise.http.errors import ClientDisconnected, ClientTimeout, SendTimeout
from supervise.http.send_pace import SendPace, pace_for

# One recv holds almost every request head; bodies are read in bigger pieces.
HEAD_RECV_SIZE = 16384
BODY_RECV_SIZE = 65536
# A close with unread bytes in the kernel's receive queue sends RST, which can
# destroy the response still in flight to the client. Before closing such a
# connection, read and drop at most this much for at most this long.
LINGER_BYTES = 256 * 1024
LINGER_SECONDS = 1.0

_NEVER = float("inf")


class _HeadPending:
    """gather_head's answer while a request head is still incomplete."""

    def __repr__(self) -> str:
        return "HEAD_PENDING"


HEAD_PENDING = _HeadPending()


def wait_io(sock: socket.socket, write: bool, timeout: float | None) -> bool:
    """Block until ``sock`` is readable (or writable); False when ``timeout`` ran out."""
    poller = select.poll()
    poller.register(sock, select.POLLOUT if write else select.POLLIN)
    # Errors and hang-ups are always reported, and the following call surfaces them.
    return bool(poller.poll(None if timeout is None else max(timeout, 0.0) * 1000.0))


class Connection:
    """A client socket plus the bytes read from it that no request consumed yet.

    ``environ`` is the per-connection base environ (listener + peer), copied
    into every request's environ by the native parser. ``trusted`` says whether
    the peer may set proxy headers.
    """

    __slots__ = (
        "buf",
        "environ",
        "linger",
        "pace",
        "repeats",
        "send_min_rate",
        "send_timeout",
        "sock",
        "trusted",
    )

    # Replaceable by a worker with its own scheduler: (sock, write, timeout) -> ready.
    wait: Callable[[Any, bool, float | None], bool] = staticmethod(wait_io)

    def __init__(
        self,
        sock: socket.socket,
        environ: dict,
        trusted: bool,
        send_timeout: float | None,
        send_min_rate: int = 0,
    ) -> None:
        self.sock = sock
        self.buf: bytes = b""
        self.environ = environ
        self.trusted = trusted
        self.send_timeout = send_timeout
        self.send_min_rate = send_min_rate
        # --send-min-rate's count, made at the first write that has to wait.
        self.pace: SendPace | None = None
        # Set when the connection ends with part of a request body unread.
        self.linger = False
        # Its last request's environ values (EnvironRepeats), made once it keeps alive.
        self.repeats: EnvironRepeats | None = None

    # -- reading ---------------------------------------------------------------
    def read_head(
        self,
        parse: Callable[[bytes | bytearray], Any],
        timeout: float | None,
        idle_timeout: float | None = None,
    ) -> Any:
        """Read until ``parse`` finds a complete request head and return the request.

        Returns None when the peer closed, or stayed silent past ``idle_timeout``
        (keep-alive), before sending a byte: there is nothing to answer then.
        ``timeout`` bounds the whole head from its first byte, so that a client
        trickling bytes (slowloris) cannot hold the connection: past it,
        ClientTimeout. ParseError from ``parse`` propagates.
        """
        buf: bytes | bytearray = self.buf
        if buf:
            found = parse(buf)
            if found is not None:
                return self._take_head(found, buf)
        sock = self.sock
        head_deadline = idle_deadline = 0.0
        while True:
            try:
                data = sock.recv(HEAD_RECV_SIZE)
            except (BlockingIOError, ssl.SSLWantReadError):
                write = False
            except ssl.SSLWantWriteError:
                write = True
            except OSError as exc:
                return _left(buf, f"connection lost while reading the head: {exc}")
            else:
                if not data:
                    return _left(buf, "connection closed in the middle of a request head")
                buf = _grown(buf, data) if buf else data
                found = parse(buf)
                if found is not None:
                    return self._take_head(found, buf)
                continue
            # Would block: wait, against the head deadline once a byte has come,
            # against the idle deadline before that.
            now = monotonic()
            if buf or idle_timeout is None:
                if not head_deadline:
                    head_deadline = now + timeout if timeout else _NEVER
                deadline = head_deadline
            else:
                if not idle_deadline:
                    idle_deadline = now + idle_timeout
                deadline = idle_deadline
            remaining = deadline - now
            if remaining <= 0 or not self.wait(
                sock, write, None if deadline == _NEVER else remaining
            ):
                self.buf = b""
                if buf:
                    raise ClientTimeout("request head not complete within header_timeout")
                return None

    def gather_head(self, parse: Callable[[bytes | bytearray], Any]) -> Any:
        """One read towards a request head, never waiting: the request once the
        head is complete, HEAD_PENDING while it is not, None when the peer
        closed before a byte. For a worker that waits on many heads at once
        (sync): a client trickling its head then never holds the worker.
        ParseError propagates; a peer gone mid-head raises ClientDisconnected."""
        buf: bytes | bytearray = self.buf
        try:
            data = self.sock.recv(HEAD_RECV_SIZE)
        except BlockingIOError:
            return HEAD_PENDING
        except OSError as exc:
            return _left(buf, f"connection lost while reading the head: {exc}")
        if not data:
            return _left(buf, "connection closed in the middle of a request head")
        buf = _grown(buf, data) if buf else data
        found = parse(buf)
        if found is not None:
            return self._take_head(found, buf)
        self.buf = buf  # type: ignore[assignment]  # a bytearray while the head grows
        return HEAD_PENDING

    def take_head(self, found: tuple[Any, int]) -> Any:
        """The request of the head ``parse(self.buf)`` found complete (``found``
        is what it returned); the bytes after the head stay buffered. Spares a
        worker that already parsed the head to see whether it is complete a
        second parse."""
        request, size = found
        buf = self.buf
        self.buf = bytes(buf[size:]) if size < len(buf) else b""
        return request

    def _take_head(self, found: tuple[Any, int], buf: bytes | bytearray) -> Any:
        request, size = found
        self.buf = bytes(buf[size:]) if size < len(buf) else b""
        return request

    def read_some(self, size: int, timeout: float | None) -> bytes:
        """Up to ``size`` bytes: buffered ones first, else one ``recv``; b"" at EOF."""
        buf = self.buf
        if buf:
            if len(buf) <= size:
                self.buf = b""
                return buf
            self.buf = buf[size:]
            return buf[:size]
        sock = self.sock
        while True:
            try:
                return sock.recv(size)
            except (BlockingIOError, ssl.SSLWantReadError):
                write = False
            except ssl.SSLWantWriteError:
                write = True
            except OSError as exc:
                raise ClientDisconnected(f"connection lost while reading the body: {exc}") from None
            if not self.wait(sock, write, timeout):
                raise ClientTimeout("no request body data within body_timeout")

    def unread(self, data: bytes) -> None:
        """Give back bytes read past the end of a request (the next pipelined one)."""
        if data:
            self.buf = data + self.buf if self.buf else data

    # -- writing ---------------------------------------------------------------
    def sendall(self, data: bytes) -> None:
        sock = self.sock
        try:
            sent = sock.send(data)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            sent = 0
        except OSError as exc:
            raise ClientDisconnected(f"connection lost while sending: {exc}") from None
        if self.pace is not None:
            self.pace.taken += sent
        if sent < len(data):
            self._send_rest(data, sent)

    # A whole response in one piece (``Response.send_whole``). A worker that
    # serves several connections per poll may hold it back (gthread, gevent).
    send_last = sendall

    def send_what_fits(self, data: bytes) -> int:
        """Send what of ``data`` the socket takes without waiting; the count.
        0 also when the client is gone: the next ``sendall`` says so."""
        try:
            sent = self.sock.send(data)
        except OSError:  # full (BlockingIOError, a TLS want), or gone
            return 0
        if self.pace is not None:
            self.pace.taken += sent
        return sent

    def _send_rest(self, data: bytes, sent: int) -> None:
        view = memoryview(data)
        total = len(data)
        sock = self.sock
        while sent < total:
            try:
                count = sock.send(view[sent:])
            except (BlockingIOError, ssl.SSLWantWriteError):
                self._wait_for_room(True)
                continue
            except ssl.SSLWantReadError:
                self._wait_for_room(False)
                continue
            except OSError as exc:
                raise ClientDisconnected(f"connection lost while sending: {exc}") from None
            sent += count
            if self.pace is not None:
                self.pace.taken += count

    def _wait_for_room(self, write: bool) -> None:
        """Wait until the client makes room, under --send-timeout and --send-min-rate."""
        pace = self.pace
        if pace is None:
            pace = self.pace = pace_for(self.send_timeout, self.send_min_rate)
        elif pace.too_slow():
            raise SendTimeout("it took bytes slower than send_min_rate")
        started = monotonic()
        if not self.wait(self.sock, write, self.send_timeout):
            raise SendTimeout("it took no bytes within send_timeout")
        if pace is not None:
            pace.wait_ended(monotonic() - started)

    def sendfile(self, fd: int, offset: int, count: int) -> int:
        """Send ``count`` bytes of file ``fd`` from ``offset`` with os.sendfile (plain sockets)."""
        out = self.sock.fileno()
        done = 0
        while done < count:
            try:
                n = os.sendfile(out, fd, offset + done, count - done)
            except BlockingIOError:
                self._wait_for_room(True)
                continue
            except OSError as exc:
                raise ClientDisconnected(f"connection lost while sending a file: {exc}") from None
            if n == 0:  # the file shrank under us
                break
            done += n
            if self.pace is not None:
                self.pace.taken += n
        return done

    # -- TLS and closing -----------------------------------------------------------
    def handshake(self, timeout: float | None) -> None:
        """Finish the TLS handshake of a socket wrapped with do_handshake_on_connect=False."""
        sock: Any = self.sock
        deadline = monotonic() + timeout if timeout else _NEVER
        while True:
            try:
                sock.do_handshake()
                return
            except ssl.SSLWantReadError:
                write = False
            except ssl.SSLWantWriteError:
                write = True
            remaining = deadline - monotonic()
            if remaining <= 0 or not self.wait(
                sock, write, None if deadline == _NEVER else remaining
            ):
                raise ClientTimeout("TLS handshake not complete within header_timeout")

    def has_input(self) -> bool:
        """Bytes (or the client's EOF) are waiting to be read, right now.

        A worker closing idle keep-alive connections on a graceful stop asks
        first: a client may have sent its next request already, and closing
        then would drop it (and reset the connection) instead of answering it
        with ``Connection: close``.
        """
        if self.buf:
            return True
        pending = getattr(self.sock, "pending", None)  # bytes TLS already decrypted
        if pending is not None and pending():
            return True
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(self.sock.fileno(), select.POLLIN)
            return bool(poller.poll(0))
        # gevent's patched select module has no poll(); its select() has no fd limit.
        return bool(select.select([self.sock], [], [], 0)[0])

    def close(self) -> None:
        if self.linger:
            self.linger = False
            self._drain_before_close()
        # CPython's close() ignores ECONNRESET; it raises only for a bad fd (a bug).
        self.sock.close()

    def _drain_before_close(self) -> None:
        # Half-close first: the client sees the end of the response while we
        # swallow what it is still sending, so the final close carries no RST.
        sock = self.sock
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            return
        deadline = monotonic() + LINGER_SECONDS
        left = LINGER_BYTES
        while left > 0:
            try:
                data = sock.recv(BODY_RECV_SIZE)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                remaining = deadline - monotonic()
                if remaining <= 0 or not self.wait(sock, False, remaining):
                    return
                continue
            except OSError:
                return
            if not data:
                return
            left -= len(data)


def _grown(buf: bytes | bytearray, data: bytes) -> bytearray:
    """``buf + data`` in place: a head trickled in small pieces must not cost
    quadratic copying."""
    if type(buf) is bytes:
        buf = bytearray(buf)
    buf += data
    return buf  # type: ignore[return-value]


def _left(buf: bytes | bytearray, why: str) -> None:
    """The peer went away: between requests that is None (nothing to answer),
    in the middle of a head it is ClientDisconnected."""
    if buf:
        raise ClientDisconnected(why) from None
