"""A frame-level HTTP/2 client for tests that must see what httpx hides:
GOAWAY, PING, RST_STREAM, the exact stream a frame came on. Frames are
read and written with `hyperframe` and `hpack` (the `h2` package's own
parts, installed with httpx[http2]) over a real socket, without `h2`'s
state machine, which refuses frames a server may legitimately send after
a graceful GOAWAY (its PING, the last DATA of open streams)."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

import hpack
from hyperframe import frame as hf

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@dataclass
class Stream:
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    ended: bool = False
    reset: int | None = None  # the RST_STREAM error code


class H2Client:
    def __init__(self, sock: socket.socket, *, authority: str, scheme: str = "http") -> None:
        self.sock = sock
        self.authority = authority
        self.scheme = scheme
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.buf = b""
        self.frames: list[hf.Frame] = []
        self.streams: dict[int, Stream] = {}
        self.goaways: list[hf.GoAwayFrame] = []
        self.closed = False  # EOF read
        self.refused = False  # a write failed
        self.next_stream = 1
        self._header_block: tuple[int, bytes, bool] | None = None
        sock.sendall(PREFACE + hf.SettingsFrame(0).serialize())

    def send(self, data: bytes) -> bool:
        """Write; False (not an error) once the server stopped reading."""
        try:
            self.sock.sendall(data)
        except OSError:
            self.refused = True
        return not self.refused

    def request(
        self,
        path: str,
        *,
        method: str = "GET",
        headers: list[tuple[str, str]] | None = None,
        body: bytes | None = None,
        open_ended: bool = False,
    ) -> int:
        """A new stream; ``open_ended`` leaves it open for `data` (a tunnel)."""
        stream = self.next_stream
        self.next_stream += 2
        head = [
            (":method", method),
            (":scheme", self.scheme),
            (":authority", self.authority),
            (":path", path),
            *(headers or []),
        ]
        frame = hf.HeadersFrame(stream)
        frame.data = self.encoder.encode(head)
        frame.flags.add("END_HEADERS")
        if body is None and not open_ended:
            frame.flags.add("END_STREAM")
        out = frame.serialize()
        if body is not None:
            data = hf.DataFrame(stream)
            data.data = body
            data.flags.add("END_STREAM")
            out += data.serialize()
        self.send(out)
        self.streams[stream] = Stream()
        return stream

    def data(self, stream: int, payload: bytes, *, end: bool = False) -> bool:
        frame = hf.DataFrame(stream)
        frame.data = payload
        if end:
            frame.flags.add("END_STREAM")
        return self.send(frame.serialize())

    def settings(self) -> dict[int, int]:
        """The server's SETTINGS so far (its first frame, RFC 9113 3.4)."""
        found: dict[int, int] = {}
        for frame in self.frames:
            if isinstance(frame, hf.SettingsFrame) and "ACK" not in frame.flags:
                found.update(frame.settings)
        return found

    def pump(self, timeout: float = 10.0) -> None:
        """Read once (up to ``timeout``) and handle every whole frame; ``closed`` at EOF."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            data = b""
        if not data:
            self.closed = True
            return
        self.buf += data
        while len(self.buf) >= 9:
            frame, length = hf.Frame.parse_frame_header(memoryview(self.buf[:9]))
            if len(self.buf) < 9 + length:
                break
            frame.parse_body(memoryview(self.buf[9 : 9 + length]))
            self.buf = self.buf[9 + length :]
            self._handle(frame)

    def _handle(self, frame: hf.Frame) -> None:
        self.frames.append(frame)
        stream = self.streams.get(frame.stream_id)
        if isinstance(frame, hf.SettingsFrame) and "ACK" not in frame.flags:
            ack = hf.SettingsFrame(0)
            ack.flags.add("ACK")
            self.send(ack.serialize())
        elif isinstance(frame, hf.PingFrame) and "ACK" not in frame.flags:
            pong = hf.PingFrame(0)
            pong.opaque_data = frame.opaque_data
            pong.flags.add("ACK")
            self.send(pong.serialize())
        elif isinstance(frame, hf.GoAwayFrame):
            self.goaways.append(frame)
        elif isinstance(frame, (hf.HeadersFrame, hf.ContinuationFrame)) and stream:
            sid, block, end = self._header_block or (frame.stream_id, b"", False)
            block += frame.data
            end = end or "END_STREAM" in frame.flags
            if "END_HEADERS" in frame.flags:
                self._header_block = None
                stream.headers.update(dict(self.decoder.decode(block)))
                stream.ended = stream.ended or end
            else:
                self._header_block = (sid, block, end)
        elif isinstance(frame, hf.DataFrame) and stream:
            stream.body += frame.data
            stream.ended = stream.ended or "END_STREAM" in frame.flags
            if frame.flow_controlled_length:
                # Give the window back, for the connection and the stream.
                out = b""
                for sid in (0, frame.stream_id):
                    update = hf.WindowUpdateFrame(sid)
                    update.window_increment = frame.flow_controlled_length
                    out += update.serialize()
                self.send(out)
        elif isinstance(frame, hf.RstStreamFrame) and stream:
            stream.reset = frame.error_code

    def until(self, predicate, timeout: float = 15.0) -> None:
        """Pump until ``predicate(self)`` holds, the server closes, or ``timeout``."""
        deadline = time.monotonic() + timeout
        while not predicate(self) and not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.pump(left)

    def finish(self, stream: int, timeout: float = 15.0) -> Stream:
        """Pump until ``stream`` ended or was reset; the stream."""
        s = self.streams[stream]
        self.until(lambda _: s.ended or s.reset is not None, timeout)
        return s
