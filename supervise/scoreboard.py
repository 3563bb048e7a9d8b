"""Shared-memory scoreboard: one fixed-size slot per worker.

The arbiter maps an anonymous shared region before the first fork, so every
worker inherits it. A worker writes only its own slot (heartbeat, request
count, state); the arbiter reads all of them to judge health and readiness.
This replaces Gunicorn's per-worker temp file whose mtime is the heartbeat:
no file-system writes on the hot path, and more facts per worker.

A field that one process writes while another reads it goes through a typed
``memoryview``: one aligned store and one aligned load, so the reader sees the
old value or the new one. ``struct.pack_into`` is not safe for that: it zeroes
the field before writing it, and an arbiter that read a heartbeat of 0.0 in
that gap took a healthy worker for a stuck one and killed it mid-request.
"""

from __future__ import annotations

import mmap
import struct
import time
from enum import IntEnum

# pid, generation, state, active, heartbeat, requests, booted_at
_SLOT = struct.Struct("=iIIIdQd")
_SLOT_SIZE = 64
assert _SLOT.size <= _SLOT_SIZE
# Byte offsets of the fields written while the worker runs; each is aligned
# to its size, which is what makes a typed store a single one.
_PID_OFFSET = 0
_STATE_OFFSET = 8
_ACTIVE_OFFSET = 12
_HEARTBEAT_OFFSET = 16
_REQUESTS_OFFSET = 24

DEFAULT_SLOTS = 4096


class State(IntEnum):
    FREE = 0
    BOOTING = 1
    READY = 2
    RETIRING = 3
    STOPPING = 4


class _Views:
    """The shared region seen as arrays of each field type (native order, as "=" packs)."""

    __slots__ = ("f64", "i32", "u32", "u64")

    def __init__(self, mem: mmap.mmap) -> None:
        raw = memoryview(mem)
        self.i32 = raw.cast("i")
        self.u32 = raw.cast("I")
        self.f64 = raw.cast("d")
        self.u64 = raw.cast("Q")

    def release(self) -> None:
        for view in (self.i32, self.u32, self.f64, self.u64):
            view.release()


class Slot:
    """A view on one worker's record in the shared region."""

    __slots__ = ("_active", "_base", "_beat", "_mem", "_pid", "_requests", "_state", "_v", "index")

    def __init__(self, mem: mmap.mmap, views: _Views, index: int) -> None:
        self._mem = mem
        self.index = index
        self._base = base = index * _SLOT_SIZE
        self._v = views
        # Indexes into the typed views, computed once: the worker's hot path is one store.
        self._pid = (base + _PID_OFFSET) // 4
        self._state = (base + _STATE_OFFSET) // 4
        self._active = (base + _ACTIVE_OFFSET) // 4
        self._beat = (base + _HEARTBEAT_OFFSET) // 8
        self._requests = (base + _REQUESTS_OFFSET) // 8

    # -- arbiter side -------------------------------------------------------
    # reset() and free() pack the whole slot at once: they run only while no
    # worker owns the slot (before fork, after the reap), so nobody sees the gap.
    def reset(self, pid: int, generation: int) -> None:
        now = time.monotonic()
        _SLOT.pack_into(self._mem, self._base, pid, generation, State.BOOTING, 0, now, 0, now)

    def set_pid(self, pid: int) -> None:
        # Written by the arbiter and by the new worker at once, after fork.
        self._v.i32[self._pid] = pid

    def free(self) -> None:
        _SLOT.pack_into(self._mem, self._base, 0, 0, State.FREE, 0, 0.0, 0, 0.0)

    # -- worker side (hot path: one store each, never struct.pack_into) -------
    def heartbeat(self) -> None:
        self._v.f64[self._beat] = time.monotonic()

    def set_state(self, state: State) -> None:
        self._v.u32[self._state] = state

    def set_requests(self, count: int) -> None:
        self._v.u64[self._requests] = count

    def set_active(self, count: int) -> None:
        self._v.u32[self._active] = count

    # -- reads ---------------------------------------------------------------
    def read(self) -> tuple[int, int, State, int, float, int, float]:
        pid, gen, state, active, beat, requests, booted = _SLOT.unpack_from(self._mem, self._base)
        return pid, gen, State(state), active, beat, requests, booted

    @property
    def state(self) -> State:
        return State(self._v.u32[self._state])

    @property
    def last_heartbeat(self) -> float:
        return self._v.f64[self._beat]

    @property
    def requests(self) -> int:
        return self._v.u64[self._requests]

    @property
    def active(self) -> int:
        return self._v.u32[self._active]


class Scoreboard:
    """The shared region and the arbiter's allocation of its slots."""

    def __init__(self, slots: int = DEFAULT_SLOTS) -> None:
        # MAP_SHARED | MAP_ANONYMOUS: survives fork, invisible to anything else.
        self._mem = mmap.mmap(-1, slots * _SLOT_SIZE, flags=mmap.MAP_SHARED)
        self._views = _Views(self._mem)
        self._free = list(range(slots - 1, -1, -1))

    def claim(self) -> Slot:
        if not self._free:
            raise RuntimeError("scoreboard is full: too many workers")
        return Slot(self._mem, self._views, self._free.pop())

    def release(self, slot: Slot) -> None:
        slot.free()
        self._free.append(slot.index)

    def close(self) -> None:
        # The mmap refuses to close while views of it exist.
        self._views.release()
        self._mem.close()
