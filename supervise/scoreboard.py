"""Shared-memory scoreboard: one fixed-size slot per worker.

The arbiter maps an anonymous shared region before the first fork, so every
worker inherits it. A worker writes only its own slot (heartbeat, request
count, state); the arbiter reads all of them to judge health and readiness.
This replaces Gunicorn's per-worker temp file whose mtime is the heartbeat:
no file-system writes on the hot path, and more facts per worker.
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
_HEARTBEAT = struct.Struct("=d")
_HEARTBEAT_OFFSET = 16
_REQUESTS = struct.Struct("=Q")
_REQUESTS_OFFSET = 24
_STATE = struct.Struct("=I")
_STATE_OFFSET = 8
_ACTIVE = struct.Struct("=I")
_ACTIVE_OFFSET = 12

DEFAULT_SLOTS = 4096


class State(IntEnum):
    FREE = 0
    BOOTING = 1
    READY = 2
    RETIRING = 3
    STOPPING = 4


class Slot:
    """A view on one worker's record in the shared region."""

    __slots__ = ("_base", "_mem", "index")

    def __init__(self, mem: mmap.mmap, index: int) -> None:
        self._mem = mem
        self.index = index
        self._base = index * _SLOT_SIZE

    # -- arbiter side -------------------------------------------------------
    def reset(self, pid: int, generation: int) -> None:
        now = time.monotonic()
        _SLOT.pack_into(self._mem, self._base, pid, generation, State.BOOTING, 0, now, 0, now)

    def set_pid(self, pid: int) -> None:
        struct.pack_into("=i", self._mem, self._base, pid)

    def free(self) -> None:
        _SLOT.pack_into(self._mem, self._base, 0, 0, State.FREE, 0, 0.0, 0, 0.0)

    # -- worker side (hot path: keep these to one pack_into each) -----------
    def heartbeat(self) -> None:
        _HEARTBEAT.pack_into(self._mem, self._base + _HEARTBEAT_OFFSET, time.monotonic())

    def set_state(self, state: State) -> None:
        _STATE.pack_into(self._mem, self._base + _STATE_OFFSET, state)

    def set_requests(self, count: int) -> None:
        _REQUESTS.pack_into(self._mem, self._base + _REQUESTS_OFFSET, count)

    def set_active(self, count: int) -> None:
        _ACTIVE.pack_into(self._mem, self._base + _ACTIVE_OFFSET, count)

    # -- reads ---------------------------------------------------------------
    def read(self) -> tuple[int, int, State, int, float, int, float]:
        pid, gen, state, active, beat, requests, booted = _SLOT.unpack_from(self._mem, self._base)
        return pid, gen, State(state), active, beat, requests, booted

    @property
    def state(self) -> State:
        return State(_STATE.unpack_from(self._mem, self._base + _STATE_OFFSET)[0])

    @property
    def last_heartbeat(self) -> float:
        return _HEARTBEAT.unpack_from(self._mem, self._base + _HEARTBEAT_OFFSET)[0]

    @property
    def requests(self) -> int:
        return _REQUESTS.unpack_from(self._mem, self._base + _REQUESTS_OFFSET)[0]

    @property
    def active(self) -> int:
        return _ACTIVE.unpack_from(self._mem, self._base + _ACTIVE_OFFSET)[0]


class Scoreboard:
    """The shared region and the arbiter's allocation of its slots."""

    def __init__(self, slots: int = DEFAULT_SLOTS) -> None:
        # MAP_SHARED | MAP_ANONYMOUS: survives fork, invisible to anything else.
        self._mem = mmap.mmap(-1, slots * _SLOT_SIZE, flags=mmap.MAP_SHARED)
        self._free = list(range(slots - 1, -1, -1))

    def claim(self) -> Slot:
        if not self._free:
            raise RuntimeError("scoreboard is full: too many workers")
        return Slot(self._mem, self._free.pop())

    def release(self, slot: Slot) -> None:
        slot.free()
        self._free.append(slot.index)

    def close(self) -> None:
        self._mem.close()
