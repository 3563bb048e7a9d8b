"""Kernel-side routing of QUIC (HTTP/3) packets between pre-forked workers.

Theory of operation
-------------------
TCP has ``accept()``: the kernel picks a worker once per connection and every
later byte arrives on that worker's own socket. UDP has no accept. Each worker
owns one UDP socket in a ``SO_REUSEPORT`` group bound to the same address, and
the kernel picks a socket for *every datagram*. Its default pick is a hash of
the 4-tuple, which is wrong for QUIC twice over: a connection outlives its
4-tuple (NAT rebinding, connection migration), and the set of sockets changes
on a reload, which reshuffles the hash. A QUIC connection's packets must reach
the worker that holds its state for the connection's whole life, across
reloads, while *new* connections must go only to the workers that currently
accept (not to one that is draining before it exits).

QUIC gives us the handle: after the first flight the client addresses every
packet to a destination connection ID (DCID) that the *server* chose. So the
server's CIDs carry the index of the socket that owns the connection, and a
classic BPF program attached with ``SO_ATTACH_REUSEPORT_CBPF`` reads it back.
For UDP the kernel runs the program on the UDP payload and uses its return
value as the index of the socket in the group; an index past the end makes the
kernel fall back to its own hash.

CID layout (``CID_LEN`` = 16 bytes; the Rust QUIC server generates them so)::

    bytes 0..4   big-endian u32  (socket_index << 24) | MAGIC24
    bytes 4..8   big-endian u32  MAGIC32
    bytes 8..16  random

The 48 magic bits make a client's random DCID look like ours by accident with
probability 2**-48. A packet without our CID starts a new connection (a
client's first-flight Initial or 0-RTT packet, whose DCID the client picked at
random) or is garbage; it goes to ``accepting[dcid_word0 % len(accepting)]``.
Every packet of one client's first flight has the same DCID, so they all reach
the same worker, which then hands out its own CIDs for the rest.

Socket indexes are the kernel's: members of a reuseport group are numbered in
the order they joined it (for UDP, bind order), and closing one moves the last
member into its slot. So the indexes stay meaningful only while the sockets
stay open, which is why one process (the arbiter) keeps the whole group open
across reloads. The program belongs to the group: attaching to any one of its
sockets replaces the program for all of them, so re-attaching with a new
``accepting`` list is how a reload steers new connections.

Classic BPF ends the program with return value 0 on an out-of-bounds load, so a
packet too short to hold a DCID goes to socket 0. That is harmless: the worker
there drops it as malformed.
"""

from __future__ import annotations

import errno
import functools
import os
import socket
import struct
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "CID_LEN",
    "MAGIC24",
    "MAGIC32",
    "MAX_SOCKET_INDEX",
    "SO_ATTACH_REUSEPORT_CBPF",
    "Instruction",
    "attach",
    "cid_prefix",
    "pack_program",
    "routing_program",
    "run_program",
]

CID_LEN = 16
MAGIC24 = 0x5E7AC1
MAGIC32 = 0x9D3B46E2
# 255 is left out so that an index byte of 0xFF never names one of our sockets.
MAX_SOCKET_INDEX = 254
# asm-generic/socket.h; the value the x86, arm and riscv kernels use.
SO_ATTACH_REUSEPORT_CBPF = 51
# Tells the kernel to use its own hash (any index >= the group size would do).
KERNEL_HASH = 0xFFFFFFFF

# struct sock_filter: (code, jt, jf, k).
Instruction = tuple[int, int, int, int]

# -- classic BPF opcodes (linux/bpf_common.h, linux/filter.h) --------------------
_LD, _LDX, _ALU, _JMP, _RET = 0x00, 0x01, 0x04, 0x05, 0x06
_W, _H, _B = 0x00, 0x08, 0x10
_IMM, _ABS, _IND = 0x00, 0x20, 0x40
_AND, _RSH, _MOD = 0x50, 0x70, 0x90
_JA, _JEQ, _JSET = 0x00, 0x10, 0x40
_K, _A = 0x00, 0x10  # BPF_K source / BPF_A return value

_SIZE_BYTES = {_W: 4, _H: 2, _B: 1}
_SIZE_FORMAT = {_W: ">I", _H: ">H", _B: ">B"}  # packet loads are big-endian

_SHORT_DCID_OFFSET = 1  # short header: flags byte, then the DCID
_LONG_DCID_OFFSET = 6  # long header: flags, 4-byte version, DCID length, DCID


def cid_prefix(index: int) -> bytes:
    """The first 8 bytes of every CID owned by the socket at ``index``."""
    _check_index(index)
    return struct.pack(">II", (index << 24) | MAGIC24, MAGIC32)


def routing_program(accepting: Sequence[int]) -> list[Instruction]:
    """The classic BPF program that routes our CIDs to their socket and new
    connections into ``accepting`` (socket indexes, in order; repeats weight)."""
    accepting = list(accepting)
    for index in accepting:
        _check_index(index)
    if len(accepting) > MAX_SOCKET_INDEX:
        # More would be pointless and would push the jump chain towards the
        # kernel's 4096-instruction limit.
        raise ValueError(f"at most {MAX_SOCKET_INDEX} accepting sockets, got {len(accepting)}")

    # The jump offsets below are counted by hand; the tests run the program.
    program: list[Instruction] = [
        # X = where the DCID starts: offset 1 (short header) unless bit 7 of the
        # first byte says long header, then offset 6. Setting X first saves a jump.
        _stmt(_LDX | _W | _IMM, _SHORT_DCID_OFFSET),  # 0
        _stmt(_LD | _B | _ABS, 0),  # 1  A = first byte
        _jump(_JSET, 0x80, 0, 1),  # 2  long header? else skip 3
        _stmt(_LDX | _W | _IMM, _LONG_DCID_OFFSET),  # 3
        # Ours only if both magic parts match; either miss -> new connection (11).
        _stmt(_LD | _W | _IND, 4),  # 4  A = DCID word 1
        _jump(_JEQ, MAGIC32, 0, 6),  # 5
        _stmt(_LD | _W | _IND, 0),  # 6  A = DCID word 0
        _stmt(_ALU | _AND | _K, 0xFFFFFF),  # 7
        _jump(_JEQ, MAGIC24, 0, 3),  # 8
        _stmt(_LD | _W | _IND, 0),  # 9  reload word 0 (A was masked)
        _stmt(_ALU | _RSH | _K, 24),  # 10 A = socket index
        _stmt(_RET | _A, 0),  # 11
        # New connection (12 on).
    ]
    if not accepting:
        program.append(_stmt(_RET | _K, KERNEL_HASH))
        return program
    if len(accepting) == 1:
        program.append(_stmt(_RET | _K, accepting[0]))
        return program
    # The client's random DCID bytes pick a slot; the same DCID (every packet of
    # one first flight) always picks the same slot while `accepting` stands.
    program += [
        _stmt(_LD | _W | _IND, 0),
        _stmt(_ALU | _MOD | _K, len(accepting)),
    ]
    # A is now 0..K-1: "if A == slot return accepting[slot]" for all but the last
    # slot, which is what is left. Two instructions a slot keep every jump
    # offset tiny, whatever K (classic BPF offsets are 8 bits).
    for slot, index in enumerate(accepting[:-1]):
        program += [_jump(_JEQ, slot, 0, 1), _stmt(_RET | _K, index)]
    program.append(_stmt(_RET | _K, accepting[-1]))
    return program


def pack_program(instructions: Sequence[Instruction]) -> bytes:
    """The program as the kernel's ``struct sock_filter`` array (native order)."""
    # u16 code, u8 jt, u8 jf, u32 k: 8 bytes with no padding.
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in instructions)


@functools.cache
def _ctypes_parts() -> tuple[Any, Callable[..., int]]:
    """``struct sock_fprog`` and libc's setsockopt. ctypes is imported here, on the
    first attach, not with the module: the master imports this module whether or
    not QUIC is on, and ctypes (with libffi) is half a MiB in every process."""
    import ctypes

    class SockFprog(ctypes.Structure):
        # ctypes inserts the padding before the pointer on 64-bit.
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    # Python's socket.setsockopt can pass bytes but not a struct that points at
    # another buffer, so call libc's directly; use_errno keeps errno readable.
    function = ctypes.CDLL(None, use_errno=True).setsockopt
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return SockFprog, function


def attach(sock_fd: int, accepting: Sequence[int]) -> None:
    """Attach the routing program to the reuseport group of ``sock_fd``.

    Replaces the program of the whole group, whichever member ``sock_fd`` is.
    Raises OSError: errno EOPNOTSUPP off Linux (so callers that already handle a
    failed setsockopt need nothing more), else the setsockopt errno.
    """
    if sys.platform != "linux":
        raise OSError(errno.EOPNOTSUPP, "SO_ATTACH_REUSEPORT_CBPF (QUIC routing) is Linux-only")
    import ctypes

    sock_fprog, setsockopt = _ctypes_parts()
    instructions = routing_program(accepting)
    packed = pack_program(instructions)
    # The kernel copies the filter during the call; `buffer` must outlive it.
    buffer = ctypes.create_string_buffer(packed, len(packed))
    fprog = sock_fprog(len(instructions), ctypes.addressof(buffer))
    result = setsockopt(
        sock_fd,
        socket.SOL_SOCKET,
        SO_ATTACH_REUSEPORT_CBPF,
        ctypes.byref(fprog),
        ctypes.sizeof(fprog),
    )
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"SO_ATTACH_REUSEPORT_CBPF: {os.strerror(code)}")


def run_program(instructions: Sequence[Instruction], packet: bytes) -> int:
    """Run ``instructions`` on ``packet`` as the kernel would, for tests.

    Covers the subset that routing_program emits; anything else is a
    ValueError. An out-of-bounds load returns 0, as in the kernel.
    """
    a = x = 0
    pc = 0
    while True:
        if not 0 <= pc < len(instructions):
            raise ValueError(f"program runs off its end at {pc}")
        code, jt, jf, k = instructions[pc]
        pc += 1
        kind = code & 0x07
        if kind in (_LD, _LDX):
            mode, size = code & 0xE0, code & 0x18
            if mode == _IMM:
                value = k
            elif mode in (_ABS, _IND) and size in _SIZE_BYTES:
                offset = k + (x if mode == _IND else 0)
                end = offset + _SIZE_BYTES[size]
                if end > len(packet):
                    return 0  # the kernel's answer to an out-of-bounds load
                (value,) = struct.unpack(_SIZE_FORMAT[size], packet[offset:end])
            else:
                raise ValueError(f"unsupported load {code:#x} at {pc - 1}")
            if kind == _LD:
                a = value
            else:
                x = value
        elif kind == _ALU and (code & 0x08) == _K:
            op = code & 0xF0
            if op == _AND:
                a &= k
            elif op == _RSH:
                a >>= k & 31
            elif op == _MOD:
                if k == 0:
                    raise ValueError(f"modulo by 0 at {pc - 1}")  # the kernel refuses it
                a %= k
            else:
                raise ValueError(f"unsupported ALU op {code:#x} at {pc - 1}")
        elif kind == _JMP and (code & 0x08) == _K:
            op = code & 0xF0
            if op == _JA:
                pc += k
            elif op == _JEQ:
                pc += jt if a == k else jf
            elif op == _JSET:
                pc += jt if a & k else jf
            else:
                raise ValueError(f"unsupported jump {code:#x} at {pc - 1}")
        elif kind == _RET:
            return a if (code & 0x18) == _A else k
        else:
            raise ValueError(f"unsupported instruction {code:#x} at {pc - 1}")
        a &= 0xFFFFFFFF


def _stmt(code: int, k: int) -> Instruction:
    return (code, 0, 0, k)


def _jump(op: int, k: int, jt: int, jf: int) -> Instruction:
    return (_JMP | op | _K, jt, jf, k)


def _check_index(index: int) -> None:
    if not isinstance(index, int) or not 0 <= index <= MAX_SOCKET_INDEX:
        raise ValueError(f"socket index must be an int in 0..{MAX_SOCKET_INDEX}, got {index!r}")
