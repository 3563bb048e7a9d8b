"""An HTTP/3 client that reads a response as slowly as it is told to.

A QUIC receiver decides how fast a sender may go: it grants flow-control
credit (MAX_STREAM_DATA) and the sender may not send past it. aioquic grants
credit on its own as data arrives (doubling the window), so a client built on
it alone always reads at full speed. `read_slowly` replaces that decision for
its request stream: it grants `credit` bytes at first and `rate` bytes a
second after that (0: never more), as a client that is stuck or reading a
trickle would, and reports what the server did about it.

The rest is aioquic as it is (the handshake, QPACK, the other streams'
credit), so what the server sees is a real HTTP/3 client.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
from dataclasses import dataclass
from typing import Any

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import MAX_STREAM_DATA_FRAME_CAPACITY
from aioquic.quic.events import ConnectionTerminated, QuicEvent, StreamReset
from aioquic.quic.packet import QuicFrameType

TICK = 0.05  # seconds between the client's packets while it waits


@dataclass
class SlowRead:
    status: int | None = None
    received: int = 0
    ended: bool = False  # the response arrived whole
    reset_code: int | None = None  # the server reset the stream
    closed: bool = False  # the connection ended


class _Protocol(QuicConnectionProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.http = H3Connection(self._quic)
        self.result = SlowRead()
        self.stream_id: int | None = None
        self.changed = asyncio.Event()

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamReset) and event.stream_id == self.stream_id:
            self.result.reset_code = event.error_code
        elif isinstance(event, ConnectionTerminated):
            self.result.closed = True
        for h3_event in self.http.handle_event(event):
            if getattr(h3_event, "stream_id", None) != self.stream_id:
                continue
            if isinstance(h3_event, HeadersReceived):
                self.result.status = int(dict(h3_event.headers)[b":status"])
            elif isinstance(h3_event, DataReceived):
                self.result.received += len(h3_event.data)
            self.result.ended |= h3_event.stream_ended
        self.changed.set()


def _grant_on_schedule(protocol: _Protocol, credit: int, rate: float) -> None:
    """The request stream's credit: `credit`, then `rate` bytes a second."""
    quic = protocol._quic
    loop = asyncio.get_running_loop()
    began = loop.time()
    by_aioquic = quic._write_stream_limits

    def write_stream_limits(builder: Any, space: Any, stream: Any) -> None:
        if stream.stream_id != protocol.stream_id:
            by_aioquic(builder=builder, space=space, stream=stream)
            return
        allowed = credit + int(rate * (loop.time() - began))
        stream.max_stream_data_local = max(stream.max_stream_data_local, allowed)
        if stream.max_stream_data_local_sent == stream.max_stream_data_local:
            return
        buf = builder.start_frame(
            QuicFrameType.MAX_STREAM_DATA,
            capacity=MAX_STREAM_DATA_FRAME_CAPACITY,
            handler=quic._on_max_stream_data_delivery,
            handler_args=(stream,),
        )
        buf.push_uint_var(stream.stream_id)
        buf.push_uint_var(stream.max_stream_data_local)
        stream.max_stream_data_local_sent = stream.max_stream_data_local

    quic._write_stream_limits = write_stream_limits


async def _read(
    host: str, port: int, cafile: str, path: str, credit: int, rate: float, seconds: float
) -> SlowRead:
    config = QuicConfiguration(
        is_client=True,
        alpn_protocols=H3_ALPN,
        verify_mode=ssl.CERT_REQUIRED,
        server_name=host,
        max_stream_data=credit,
    )
    config.load_verify_locations(cafile)
    async with connect(host, port, configuration=config, create_protocol=_Protocol) as protocol:
        protocol.stream_id = protocol._quic.get_next_available_stream_id()
        _grant_on_schedule(protocol, credit, rate)
        headers = [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", f"{host}:{port}".encode()),
            (b":path", path.encode()),
        ]
        protocol.http.send_headers(protocol.stream_id, headers, end_stream=True)
        protocol.transmit()
        result = protocol.result
        deadline = asyncio.get_running_loop().time() + seconds
        while not (result.ended or result.reset_code is not None or result.closed):
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            protocol.changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(protocol.changed.wait(), min(TICK, left))
            protocol.transmit()  # the credit granted since the last packet
        # A copy: leaving the block closes the connection, which the live
        # result would record as the server's doing.
        return dataclasses.replace(result)


def read_slowly(
    host: str,
    port: int,
    cafile: str,
    path: str,
    *,
    credit: int,
    rate: float,
    seconds: float,
) -> SlowRead:
    """GET `path` granting `credit` bytes, then `rate` bytes a second, for at
    most `seconds`; what arrived, and whether the server reset the stream."""
    return asyncio.run(_read(host, port, cafile, path, credit, rate, seconds))
