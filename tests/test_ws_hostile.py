"""Hostile WebSocket clients against `supervise -k asgi` (both --ws libraries).

Two floods, each with a probe client (tests/hostile.py's Prober) asking
``GET /`` meanwhile and the worker's RSS sampled throughout:

- pings sent as fast as the socket takes them by clients that never read:
  the pongs they are owed must not pile up in the worker, nor keep its loop
  busy writing them;
- a message in millions of one-byte continuation frames: a small
  ``--ws-max-size`` closes it with 1009; a large one assembles it without a
  Python object per fragment, and without starving the loop meanwhile.

The clients are raw sockets (tests/ws_raw.py): a library would answer, read
or coalesce where the attack must not.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
import threading
import time

import pytest
from hostile import Prober, worker_rss
from websockets.sync.client import connect
from ws_raw import KEY, close_code, frame, read_frame, split_frames

from supervise.http import asgi_ws

# Soaks, hostile clients and external suites: `pytest -m long` (CI runs it too).
pytestmark = pytest.mark.long

APP = "hostile_app:asgi_ws_app"
# What the worker may grow by while attacked (its idle RSS is ~30 MiB).
GROWTH_BUDGET = 64 * 2**20
PING_CLIENTS = 4
PING_SECONDS = 5.0
# One-byte continuation frames: at most this many past a small --ws-max-size
# (the server must close long before), and this many assembled under a large
# one: 7 bytes on the wire each, and wsproto parses ~50,000 a second.
FRAGMENTS_PAST_LIMIT = 2 * 2**20
FRAGMENTS = 2**19
# What assembling it may add beyond three times its payload; a list of the
# fragments cost 70-150 bytes of RSS each (35 MiB and more here).
ASSEMBLY_BUDGET = 16 * 2**20


@pytest.fixture(params=["websockets", "wsproto"])
def serve(request, start_server):
    def start(*args: str):
        return start_server("-k", "asgi", "--ws", request.param, *args, APP)

    return start


def upgraded(server, rcvbuf: int | None = None) -> socket.socket:
    """A raw socket past the handshake; ``rcvbuf`` is set before connecting,
    so that the window it advertises is small from the first segment."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect((server.host, server.port))
    sock.sendall(
        (
            "GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        assert chunk, f"closed during the handshake: {head!r}"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


class RssSampler:
    """The workers' total RSS, sampled every 0.2 s in a thread: the peak counts,
    since the worker may free what it held once the attack ends."""

    def __init__(self, server) -> None:
        self.master = server.pid
        self.before = self.peak = sum(worker_rss(self.master).values())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sample()

    def _sample(self) -> None:
        self.peak = max(self.peak, sum(worker_rss(self.master).values()))

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    @property
    def growth(self) -> int:
        return self.peak - self.before


def flood(sock: socket.socket, data: bytes, until: float) -> tuple[int, bool]:
    """Send ``data`` over and over until ``until`` (monotonic), never reading:
    the bytes sent, and whether the server dropped the connection first.
    Non-blocking sends resume mid-``data``, so the frames stay whole however
    the socket cuts them."""
    sock.setblocking(False)
    view = memoryview(data)
    at = sent = 0
    while time.monotonic() < until:
        if not select.select([], [sock], [], 0.1)[1]:
            continue
        try:
            n = sock.send(view[at:])
        except BlockingIOError:
            continue
        except OSError:
            return sent, True
        sent += n
        at = (at + n) % len(data)
    return sent, False


def echo_works(server) -> None:
    with connect(f"ws://{server.host}:{server.port}/", open_timeout=10) as ws:
        ws.send("still here")
        assert ws.recv(timeout=10) == "still here"
        ws.send(b"\x00" * 60000)  # under the smallest --ws-max-size here
        assert ws.recv(timeout=10) == b"\x00" * 60000


def test_ping_flood_from_clients_that_never_read(serve) -> None:
    server = serve()
    # 64 pings with the largest payload a control frame may carry, sent as one
    # buffer again and again: the client spends no time building frames.
    pings = b"".join(frame(0x9, os.urandom(125)) for _ in range(64))
    clients = [upgraded(server, rcvbuf=4096) for _ in range(PING_CLIENTS)]
    sent = [0] * PING_CLIENTS
    try:
        with RssSampler(server) as rss, Prober(server.host, server.port) as prober:
            until = time.monotonic() + PING_SECONDS

            def attack(i: int) -> None:
                sent[i], _ = flood(clients[i], pings, until)

            threads = [threading.Thread(target=attack, args=(i,)) for i in range(PING_CLIENTS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(PING_SECONDS + 10)
    finally:
        for sock in clients:
            sock.close()
    probes = prober.result
    report = (
        f"{sum(sent) / 2**20:.1f} MiB of pings sent; RSS {rss.before / 2**20:.0f} -> "
        f"{rss.peak / 2**20:.0f} MiB; probes {probes.ok}/{probes.total}, "
        f"worst {probes.worst:.2f}s"
    )
    print(report)
    assert probes.total >= 1, report
    assert not probes.failures, (report, probes.failures[:5])
    assert rss.growth < GROWTH_BUDGET, report
    echo_works(server)


def test_a_client_that_never_reads_is_dropped_after_send_timeout(serve) -> None:
    # No keepalive pings: their timeout would close it too, only later.
    server = serve("--send-timeout", "1", "--ws-ping-interval", "0")
    pings = b"".join(frame(0x9, os.urandom(125)) for _ in range(64))
    sock = upgraded(server, rcvbuf=4096)
    try:
        _, dropped = flood(sock, pings, time.monotonic() + 15)
    finally:
        sock.close()
    assert dropped, "still connected after 15 s of never reading"
    server.wait_for_log("took no bytes within send_timeout")
    echo_works(server)


def continuation_flood(sock: socket.socket, fragments: int) -> int:
    """A binary message in one first frame and ``fragments`` - 1 continuation
    frames of one byte each, none final, sent in 56 KiB batches; stops as soon
    as the server answers (or closes); the fragments sent."""
    sock.sendall(frame(0x2, b"\x00", fin=False))
    batch_frames = 8192
    batch = frame(0x0, b"\x01", fin=False) * batch_frames  # one mask for all: still valid
    sent = 1
    while sent < fragments:
        if select.select([sock], [], [], 0)[0]:
            break
        n = min(batch_frames, fragments - sent)
        try:
            sock.sendall(batch if n == batch_frames else batch[: n * 7])
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += n
    return sent


def test_continuation_flood_past_ws_max_size_is_closed_with_1009(serve) -> None:
    # No keepalive ping: the first frame the client reads must be the close.
    server = serve("--ws-max-size", "65536", "--ws-ping-interval", "0")
    sock = upgraded(server)
    try:
        with RssSampler(server) as rss, Prober(server.host, server.port) as prober:
            sent = continuation_flood(sock, FRAGMENTS_PAST_LIMIT)
            sock.settimeout(10)
            opcode, payload = read_frame(sock)
    finally:
        sock.close()
    probes = prober.result
    report = (
        f"{sent} fragments sent; RSS {rss.before / 2**20:.0f} -> {rss.peak / 2**20:.0f} MiB; "
        f"probes {probes.ok}/{probes.total}, worst {probes.worst:.2f}s"
    )
    print(report)
    assert opcode == 0x8 and close_code(payload) == 1009, (opcode, payload, report)
    assert sent < FRAGMENTS_PAST_LIMIT, report  # closed long before the end of the flood
    assert not probes.failures, (report, probes.failures[:5])
    assert rss.growth < GROWTH_BUDGET, report
    echo_works(server)


def test_continuation_flood_under_ws_max_size_is_assembled_in_bounded_memory(serve) -> None:
    # No keepalive ping: the flood stops at the first byte the server sends.
    server = serve("--ws-max-size", str(64 * 2**20), "--ws-ping-interval", "0")
    sock = upgraded(server)
    try:
        with RssSampler(server) as rss, Prober(server.host, server.port) as prober:
            sent = continuation_flood(sock, FRAGMENTS)
            assert sent == FRAGMENTS, "the server answered before the message was complete"
            sock.sendall(frame(0x0, b"\x02", fin=True))
            sock.settimeout(20)
            opcode, payload = read_frame(sock)
    finally:
        sock.close()
    probes = prober.result
    report = (
        f"RSS {rss.before / 2**20:.0f} -> {rss.peak / 2**20:.0f} MiB; "
        f"probes {probes.ok}/{probes.total}, worst {probes.worst:.2f}s"
    )
    print(report)
    assert opcode == 0x2, (opcode, payload[:40], report)
    assert payload == b"\x00" + b"\x01" * (FRAGMENTS - 1) + b"\x02"
    assert probes.total >= 1, report
    assert not probes.failures, (report, probes.failures[:5])
    # The message, its copy for the app and the echo on its way out: three
    # times the payload, never ~100 bytes per fragment.
    assert rss.growth < 3 * (FRAGMENTS + 1) + ASSEMBLY_BUDGET, report
    echo_works(server)


# -- the mechanisms, on a fake transport -------------------------------------------
# (test_asgi_websocket.fake_session: the protocol class with a transport that
# records what it is asked to do, on a loop run by hand)


@pytest.fixture(params=["websockets", "wsproto"])
def ws_impl(request) -> str:
    return request.param


def accepted(ws_impl: str, app=None):
    from test_asgi_websocket import fake_session

    received: list = []

    async def echo(scope, receive, send):
        await receive()
        await send({"type": "websocket.accept"})
        while (message := await receive())["type"] == "websocket.receive":
            received.append(message)

    loop, proto, transport = fake_session(ws_impl, app or echo)
    loop.run_until_complete(asyncio.sleep(0.01))
    assert transport.written.startswith(b"HTTP/1.1 101")
    del transport.written[:]
    return loop, proto, transport, received


def finish(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()


def server_frames(data: bytes) -> list[tuple[int, bytes]]:
    frames, rest = split_frames(bytes(data))
    assert not rest
    return frames


def test_every_ping_of_a_read_is_answered(ws_impl) -> None:
    loop, proto, transport, _ = accepted(ws_impl)
    try:
        proto.data_received(b"".join(frame(0x9, b"a%d" % i) for i in range(10)))
        assert server_frames(transport.written) == [(0xA, b"a%d" % i) for i in range(10)]
    finally:
        finish(loop)


def test_reading_stops_while_writing_is_paused(ws_impl) -> None:
    loop, proto, transport, received = accepted(ws_impl)
    try:
        proto.pause_writing()
        assert transport.paused
        # What the transport had already read is kept, not parsed: no pong.
        proto.data_received(frame(0x9, b"p") + frame(0x1, b"m"))
        loop.run_until_complete(asyncio.sleep(0.01))
        assert transport.written == b"" and received == [] and transport.paused
        proto.resume_writing()
        loop.run_until_complete(asyncio.sleep(0.01))
        assert server_frames(transport.written) == [(0xA, b"p")]
        assert [m["text"] for m in received] == ["m"] and not transport.paused
    finally:
        finish(loop)


def test_app_sends_wait_while_writing_is_paused(ws_impl) -> None:
    go = asyncio.Event()
    sent = []

    async def app(scope, receive, send):
        await receive()
        await send({"type": "websocket.accept"})
        await go.wait()
        # Three tasks at once: each waits, none writes past the high-water mark.
        await asyncio.gather(*(send({"type": "websocket.send", "text": f"x{i}"}) for i in range(3)))
        sent.append(True)
        await receive()

    loop, proto, transport, _ = accepted(ws_impl, app)
    try:
        proto.pause_writing()
        go.set()
        loop.run_until_complete(asyncio.sleep(0.01))
        assert transport.written == b"" and not sent
        proto.resume_writing()
        loop.run_until_complete(asyncio.sleep(0.01))
        assert sorted(server_frames(transport.written)) == [(0x1, b"x%d" % i) for i in range(3)]
        assert sent
    finally:
        finish(loop)


def test_a_read_full_of_tiny_frames_is_parsed_over_several_turns(ws_impl) -> None:
    loop, proto, transport, received = accepted(ws_impl)
    tiny = asgi_ws.FEED_SLICE  # frames of 7 bytes: 7 slices, each over FRAMES_PER_TURN
    data = (
        frame(0x2, b"<", fin=False)
        + frame(0x0, b".", fin=False) * tiny
        + frame(0x0, b">", fin=True)
    )
    try:
        proto.data_received(data)
        # One turn parsed part of it; the rest waits, reading paused meanwhile.
        assert received == [] and transport.paused
        for _ in range(50):
            loop.run_until_complete(asyncio.sleep(0))
        assert [m["bytes"] for m in received] == [b"<" + b"." * tiny + b">"]
        assert not transport.paused
    finally:
        finish(loop)


def test_a_stalled_peer_is_aborted_after_send_timeout(ws_impl) -> None:
    loop, proto, transport, _ = accepted(ws_impl)
    try:
        transport.buffered = 70000
        proto.pause_writing()
        now = time.monotonic()
        proto.sweep(now + 29)
        assert not transport.aborted
        transport.buffered = 60000  # it took some: the clock starts again
        proto.sweep(now + 31)
        assert not transport.aborted
        proto.sweep(now + 62)
        assert transport.aborted
    finally:
        finish(loop)


def test_fragments_past_ws_max_size_close_with_1009(ws_impl) -> None:
    loop, proto, transport, received = accepted(ws_impl)
    limit = proto.max_size
    try:
        proto.data_received(frame(0x2, b"x" * (limit // 2), fin=False))
        proto.data_received(frame(0x0, b"x" * (limit // 2), fin=False))
        assert transport.written == b""  # exactly at the limit: still fine
        proto.data_received(frame(0x0, b"x", fin=False))
        loop.run_until_complete(asyncio.sleep(0.01))
        ((opcode, payload),) = server_frames(transport.written)
        assert opcode == 0x8 and close_code(payload) == 1009 and transport.closing
        assert received == []
    finally:
        finish(loop)
