"""The QUIC reuseport routing program: in the interpreter, then in the kernel."""

from __future__ import annotations

import contextlib
import errno
import os
import random
import select
import socket
import struct
import sys
from collections import Counter
from collections.abc import Iterator, Sequence

import pytest

from supervise.quic_routing import (
    CID_LEN,
    MAGIC24,
    MAGIC32,
    attach,
    cid_prefix,
    pack_program,
    routing_program,
    run_program,
)

KERNEL_HASH = 0xFFFFFFFF
QUIC_V1 = b"\x00\x00\x00\x01"
INITIAL, ZERO_RTT, HANDSHAKE = 0b00, 0b01, 0b10


def our_cid(index: int, rng: random.Random | None = None) -> bytes:
    rng = rng or random.Random()
    return cid_prefix(index) + rng.randbytes(CID_LEN - 8)


def short_packet(dcid: bytes, payload: bytes = b"\x17" * 24) -> bytes:
    # 0x40: fixed bit set, header form bit clear.
    return bytes([0x40 | 0x01]) + dcid + payload


def long_packet(packet_type: int, dcid: bytes, scid: bytes = b"\xaa" * 8, size: int = 0) -> bytes:
    header = (
        bytes([0xC0 | (packet_type << 4)])
        + QUIC_V1
        + bytes([len(dcid)])
        + dcid
        + bytes([len(scid)])
        + scid
    )
    body = b"\x00" * 32
    return (header + body).ljust(size, b"\x00")


def route(accepting: Sequence[int], packet: bytes) -> int:
    return run_program(routing_program(accepting), packet)


# -- interpreter -------------------------------------------------------------------

ACCEPTING_CASES = [[], [0], [1, 3, 4], list(range(254)), [7] * 5]


def test_cid_prefix_layout() -> None:
    assert len(cid_prefix(0)) == 8
    word0, word1 = struct.unpack(">II", cid_prefix(3))
    assert word0 == (3 << 24) | MAGIC24
    assert word1 == MAGIC32
    assert cid_prefix(254)[0] == 254


@pytest.mark.parametrize("bad", [-1, 255, 1000])
def test_bad_socket_index_is_refused(bad: int) -> None:
    with pytest.raises(ValueError):
        cid_prefix(bad)
    with pytest.raises(ValueError):
        routing_program([0, bad])


def test_too_many_accepting_is_refused() -> None:
    with pytest.raises(ValueError):
        routing_program([0] * 255)


@pytest.mark.parametrize("accepting", ACCEPTING_CASES)
@pytest.mark.parametrize("index", [0, 1, 2, 4, 77, 254])
def test_our_cid_routes_to_its_index(accepting: list[int], index: int) -> None:
    cid = our_cid(index)
    assert route(accepting, short_packet(cid)) == index
    assert route(accepting, long_packet(HANDSHAKE, cid)) == index
    # The client's Initials after the server's first answer carry our CID too.
    assert route(accepting, long_packet(INITIAL, cid, size=1200)) == index


def test_random_dcids_go_only_to_accepting_and_spread() -> None:
    rng = random.Random(1234)
    accepting = [1, 3, 4]
    program = routing_program(accepting)
    hits: Counter[int] = Counter()
    for n in range(2000):
        dcid = rng.randbytes(8)
        packet_type = (INITIAL, ZERO_RTT)[n % 2]
        packet = long_packet(packet_type, dcid, size=1200)
        target = run_program(program, packet)
        hits[target] += 1
        # Deterministic: what the program promises, and the same every time.
        assert target == accepting[struct.unpack(">I", dcid[:4])[0] % len(accepting)]
        assert run_program(program, packet) == target
        # A later first-flight packet of the same connection (new SCID, other
        # type) lands on the same worker.
        assert run_program(program, long_packet(ZERO_RTT, dcid, scid=b"\x01" * 4)) == target
    assert set(hits) == {1, 3, 4}
    assert min(hits.values()) > 2000 / 3 / 2


def test_random_short_header_dcids_go_to_accepting() -> None:
    rng = random.Random(99)
    accepting = [0, 5]
    seen = {route(accepting, short_packet(rng.randbytes(CID_LEN))) for _ in range(200)}
    assert seen == {0, 5}


def test_near_misses_are_new_connections() -> None:
    accepting = [9]
    wrong_magic24 = struct.pack(">II", (2 << 24) | (MAGIC24 ^ 1), MAGIC32) + b"\x00" * 8
    wrong_magic32 = struct.pack(">II", (2 << 24) | MAGIC24, MAGIC32 ^ 0x80000000) + b"\x00" * 8
    for cid in (wrong_magic24, wrong_magic32):
        assert route(accepting, short_packet(cid)) == 9
        assert route(accepting, long_packet(HANDSHAKE, cid)) == 9


def test_no_accepting_falls_back_to_kernel_hash() -> None:
    rng = random.Random(5)
    assert route([], long_packet(INITIAL, rng.randbytes(8), size=1200)) == KERNEL_HASH
    assert route([], short_packet(rng.randbytes(16))) == KERNEL_HASH
    assert route([], short_packet(our_cid(3))) == 3


@pytest.mark.parametrize("accepting", ACCEPTING_CASES)
def test_truncated_packets_do_not_raise(accepting: list[int]) -> None:
    program = routing_program(accepting)
    allowed = {0, *accepting, KERNEL_HASH}
    for full in (
        short_packet(our_cid(6)),
        long_packet(HANDSHAKE, our_cid(6)),
        long_packet(INITIAL, bytes(range(8))),
    ):
        for end in range(len(full) + 1):
            result = run_program(program, full[:end])
            assert result in allowed | {6}
    # Too short to hold the second word of a DCID: the kernel's 0.
    assert run_program(program, b"") == 0
    assert run_program(program, b"\x41" + cid_prefix(6)[:7]) == 0
    assert run_program(program, b"\xe0" + QUIC_V1 + b"\x10" + cid_prefix(6)[:7]) == 0


@pytest.mark.parametrize("size", [0, 1, 2, 8, 254])
def test_program_shape(size: int) -> None:
    program = routing_program(list(range(size)))
    assert len(program) < 600  # far from the kernel's 4096
    for code, jt, jf, k in program:
        assert 0 <= code <= 0xFFFF and 0 <= jt <= 255 and 0 <= jf <= 255
        assert 0 <= k <= 0xFFFFFFFF
    # Every jump lands inside the program; the last instruction returns.
    for pc, (code, jt, jf, _k) in enumerate(program):
        if code & 0x07 == 0x05:
            assert pc + 1 + max(jt, jf) < len(program)
    assert program[-1][0] & 0x07 == 0x06
    packed = pack_program(program)
    assert len(packed) == 8 * len(program)
    assert list(struct.iter_unpack("=HBBI", packed)) == program


def test_instruction_counts() -> None:
    counts = {n: len(routing_program(list(range(n)))) for n in (1, 8, 254)}
    assert counts == {1: 13, 8: 29, 254: 521}


# -- the kernel --------------------------------------------------------------------

N_SOCKETS = 5


@pytest.fixture
def reuseport_group() -> Iterator[tuple[list[socket.socket], int]]:
    """N UDP sockets in one SO_REUSEPORT group on 127.0.0.1; index = bind order."""
    if sys.platform != "linux" or not hasattr(socket, "SO_REUSEPORT"):
        pytest.skip("SO_ATTACH_REUSEPORT_CBPF is Linux-only")
    socks: list[socket.socket] = []
    try:
        port = 0
        for _ in range(N_SOCKETS):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(("127.0.0.1", port))
            port = sock.getsockname()[1]
            sock.setblocking(False)
        yield socks, port
    finally:
        for sock in socks:
            sock.close()


def attach_or_skip(sock: socket.socket, accepting: Sequence[int]) -> None:
    try:
        attach(sock.fileno(), accepting)
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.ENOPROTOOPT):
            pytest.skip(f"the kernel refuses SO_ATTACH_REUSEPORT_CBPF: {exc}")
        raise


def deliver(socks: list[socket.socket], port: int, packet: bytes) -> int:
    """Send ``packet`` from a fresh client socket; the index of the socket it reached."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
        client.sendto(packet, ("127.0.0.1", port))
        ready, _, _ = select.select(socks, [], [], 5.0)
    assert ready, "the packet reached no socket"
    reached = []
    for sock in ready:
        with contextlib.suppress(BlockingIOError):
            while True:
                data = sock.recv(65535)
                assert data == packet, "a stray datagram"
                reached.append(socks.index(sock))
    assert len(reached) == 1, reached
    return reached[0]


def test_kernel_routes_by_cid_and_accepting(
    reuseport_group: tuple[list[socket.socket], int],
) -> None:
    socks, port = reuseport_group
    attach_or_skip(socks[0], [1, 3])

    assert deliver(socks, port, short_packet(our_cid(2))) == 2
    assert deliver(socks, port, short_packet(our_cid(0))) == 0
    assert deliver(socks, port, long_packet(HANDSHAKE, our_cid(4))) == 4

    rng = random.Random(os.getpid())
    hits: Counter[int] = Counter()
    for _ in range(200):
        initial = long_packet(INITIAL, rng.randbytes(8), size=1200)
        hits[deliver(socks, port, initial)] += 1
    assert set(hits) == {1, 3}, hits

    # A reload: the program of the whole group is replaced, whichever socket
    # it is attached through. New connections move; existing ones stay.
    attach_or_skip(socks[3], [0])
    for _ in range(50):
        assert deliver(socks, port, long_packet(INITIAL, rng.randbytes(8), size=1200)) == 0
    for index in range(N_SOCKETS):
        assert deliver(socks, port, short_packet(our_cid(index))) == index
        assert deliver(socks, port, long_packet(HANDSHAKE, our_cid(index))) == index
