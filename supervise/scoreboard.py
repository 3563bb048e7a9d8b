"""Shared-memory scoreboard: a master record, the totals of departed workers,
and one fixed-size slot per worker.

The arbiter maps an anonymous shared region before the first fork, so every
worker (and the metrics helper) inherits it. A worker writes only its own
slot (heartbeat, state, request figures); the arbiter writes the master
record and the fields it measures itself (a worker's memory); everyone else
only reads. This replaces Gunicorn's per-worker temp file whose mtime is the
heartbeat: no file-system writes on the hot path, and more facts per worker.

A field that one process writes while another reads it goes through a typed
``memoryview``: one aligned store and one aligned load, so the reader sees the
old value or the new one. ``struct.pack_into`` is not safe for that: it zeroes
the field before writing it, and an arbiter that read a heartbeat of 0.0 in
that gap took a healthy worker for a stuck one and killed it mid-request.

The request path counts in the worker's own memory (``ResponseFigures``) and
publishes to the slot about once a second: no lock, no system call. Counters
only grow while a worker lives; when it is reaped the
arbiter adds its counters to the "departed" record before freeing the slot,
so totals summed over the departed record and the live slots never go back.
That hand-over is the one multi-field change a reader must see whole: the
arbiter brackets it (and a slot's reset) with a sequence number, odd while
it writes, and ``Scoreboard.snapshot`` reads again when the number moved.

The byte layout is documented in docs/internals.md ("Scoreboard") so that a
native writer could keep to it (the Rust server does not write here; the doc says why).
"""

from __future__ import annotations

import mmap
import time
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

# -- a worker slot: byte offsets, each aligned to its field's size ---------------
PID = 0  # i32   worker (and the arbiter, right after fork)
GENERATION = 4  # u32   arbiter, before fork
STATE = 8  # u32   worker
ACTIVE = 12  # u32   worker: open connections
HEARTBEAT = 16  # f64   worker: time.monotonic()
REQUESTS = 24  # u64   worker: requests finished (max_requests counts these)
BOOTED_AT = 32  # f64   arbiter, before fork: time.monotonic()
IN_FLIGHT = 40  # u32   worker: requests being served now
# 44: u32 reserved
BYTES_OUT = 48  # u64   worker: response body bytes
DURATION_SUM = 56  # f64   worker: seconds, summed over the histogram's requests
MEMORY = 64  # u64   arbiter: resident set size in bytes (0: not measured)
MEMORY_AT = 72  # f64   arbiter: time.monotonic() of that reading
LOGS = 80  # u64[4] worker: log calls by level (LOG_LEVELS)
BUCKETS = 112  # u64[16] worker: requests by duration (DURATION_BOUNDS, then +Inf)
CODES = 240  # u64[501] worker: responses by status, index status-100; 500: any other
HEALTH_CHECKS = CODES + 501 * 8  # u64   worker: --health-path probes answered
_END = HEALTH_CHECKS + 8
SLOT_SIZE = -(-_END // 64) * 64  # whole cache lines

# Upper bounds (seconds, inclusive) of the request-duration histogram; a
# sixteenth bucket takes the rest. Fixed, so every writer and reader agrees.
DURATION_BOUNDS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
LOG_LEVELS = ("critical", "error", "warning", "exception")
OTHER_STATUS = 500  # the CODES index of a status outside 100-599 (none sent, say)

# -- the master record (written by the arbiter only) ------------------------------
M_SEQ = 0  # u64   odd while the arbiter moves a slot's counters (see above)
M_STARTED_AT = 8  # f64   time.time() when the master started
M_GENERATION = 16  # u32   newest generation
M_SERVING = 20  # u32   newest generation that was fully ready
M_TARGET = 24  # u32   workers wanted
M_PID = 28  # u32   the master's pid
M_RELOADS = 32  # u64   reloads started (HUP, ctl reload)
M_RELOADS_FAILED = 40  # u64
M_EXITS = 48  # u64[12] worker exits by cause (EXIT_CAUSES; 2 spare)
M_LOGS = 144  # u64[4] the master's own log calls by level
M_BACKLOG = 176  # u32[16] per listener: connections waiting, then the queue's size
M_HIGH_WATER = 240  # u32   slots ever claimed: readers scan no further
M_DRAINING = 244  # u32   1 from a TERM on: workers answer readiness probes 503
MASTER_SIZE = 256
MAX_LISTENER_QUEUES = 8

EXIT_CAUSES = (
    "crash",  # exited or was killed without being asked
    "timeout",  # no heartbeat: SIGABRT, then SIGKILL
    "max_requests",  # retired itself at --max-requests
    "memory",  # retired at --max-worker-memory
    "lifetime",  # retired at --worker-lifetime
    "retire",  # retired by `supervise ctl retire`
    "scale_down",  # TTOU, `ctl scale`, fewer workers after a reload
    "reload",  # an older generation replaced by a reload
    "boot_failure",  # could not boot (import error, failed startup)
    "stop",  # the master stopped
)
_DEPARTED = MASTER_SIZE
_SLOTS = MASTER_SIZE + SLOT_SIZE

DEFAULT_SLOTS = 4096


class State(IntEnum):
    FREE = 0
    BOOTING = 1
    READY = 2
    RETIRING = 3
    STOPPING = 4


class _Views:
    """The shared region seen as arrays of each field type (native byte order)."""

    __slots__ = ("f64", "i32", "u32", "u64")

    def __init__(self, mem: mmap.mmap) -> None:
        raw = memoryview(mem)
        self.i32 = raw.cast("i")
        self.u32 = raw.cast("I")
        self.f64 = raw.cast("d")
        self.u64 = raw.cast("Q")
        raw.release()

    def release(self) -> None:
        for view in (self.i32, self.u32, self.f64, self.u64):
            view.release()


@dataclass
class SlotFigures:
    """One slot read field by field (each field whole; see the module docstring)."""

    pid: int
    generation: int
    state: State
    active: int
    heartbeat: float
    requests: int
    booted_at: float
    in_flight: int
    bytes_out: int
    duration_sum: float
    memory: int
    logs: list[int]
    buckets: list[int]
    codes: list[int]
    health_checks: int = 0


class Slot:
    """A view on one worker's record in the shared region."""

    __slots__ = (
        "_active",
        "_base",
        "_beat",
        "_buckets",
        "_bytes",
        "_codes",
        "_dsum",
        "_f64",
        "_health",
        "_in_flight",
        "_logs",
        "_mem",
        "_requests",
        "_state",
        "_u32",
        "_u64",
        "_v",
        "index",
    )

    def __init__(self, mem: mmap.mmap, views: _Views, offset: int, index: int) -> None:
        self._mem = mem
        self.index = index
        self._base = offset
        self._v = views
        self._u64 = views.u64
        self._u32 = views.u32
        self._f64 = views.f64
        # Indexes into the typed views, computed once: the hot path is one store each.
        self._state = (offset + STATE) // 4
        self._active = (offset + ACTIVE) // 4
        self._in_flight = (offset + IN_FLIGHT) // 4
        self._beat = (offset + HEARTBEAT) // 8
        self._requests = (offset + REQUESTS) // 8
        self._bytes = (offset + BYTES_OUT) // 8
        self._dsum = (offset + DURATION_SUM) // 8
        self._logs = (offset + LOGS) // 8
        self._buckets = (offset + BUCKETS) // 8
        self._codes = (offset + CODES) // 8
        self._health = (offset + HEALTH_CHECKS) // 8

    def _i(self, field: int, size: int) -> int:
        return (self._base + field) // size

    # -- arbiter side -------------------------------------------------------
    def reset(self, pid: int, generation: int) -> None:
        """Zero a free slot for a worker about to be forked (FREE until the end)."""
        base = self._base
        self._mem[base : base + SLOT_SIZE] = bytes(SLOT_SIZE)
        now = time.monotonic()
        self._v.i32[self._i(PID, 4)] = pid
        self._u32[self._i(GENERATION, 4)] = generation
        self._f64[self._i(HEARTBEAT, 8)] = now
        self._f64[self._i(BOOTED_AT, 8)] = now
        self._u32[self._i(STATE, 4)] = State.BOOTING

    def set_pid(self, pid: int) -> None:
        # Written by the arbiter and by the new worker at once, after fork.
        self._v.i32[self._i(PID, 4)] = pid

    def set_memory(self, rss: int) -> None:
        self._u64[self._i(MEMORY, 8)] = rss
        self._f64[self._i(MEMORY_AT, 8)] = time.monotonic()

    def free(self) -> None:
        self._u32[self._i(STATE, 4)] = State.FREE
        self._v.i32[self._i(PID, 4)] = 0

    def add_counters_of(self, other: Slot) -> None:
        """Departed record += ``other``'s counters (arbiter only, its worker reaped)."""
        u64, f64 = self._u64, self._f64
        counted = (
            (REQUESTS, 1),
            (BYTES_OUT, 1),
            (LOGS, 4),
            (BUCKETS, 16),
            (CODES, 501),
            (HEALTH_CHECKS, 1),
        )
        for field, count in counted:
            mine, theirs = self._i(field, 8), other._i(field, 8)
            for k in range(count):
                if u64[theirs + k]:
                    u64[mine + k] += u64[theirs + k]
        f64[self._dsum] += f64[other._dsum]

    # -- worker side (hot path: one store each, never struct.pack_into) -------
    def heartbeat(self, behind: float = 0.0) -> None:
        """Stamp now, or ``behind`` seconds ago (the moment the worker was
        last seen free, for a worker whose app runs beside its tick)."""
        self._f64[self._beat] = time.monotonic() - behind

    def set_state(self, state: State) -> None:
        self._u32[self._state] = state

    def set_requests(self, count: int) -> None:
        self._u64[self._requests] = count

    def set_active(self, count: int) -> None:
        self._u32[self._active] = count

    def set_in_flight(self, count: int) -> None:
        self._u32[self._in_flight] = count

    def count_log(self, level: int) -> None:
        self._u64[self._logs + level] += 1

    # -- reads ---------------------------------------------------------------
    def read(self) -> tuple[int, int, State, int, float, int, float]:
        """pid, generation, state, active, heartbeat, requests, booted_at."""
        i32, u32, f64, u64 = self._v.i32, self._u32, self._f64, self._u64
        return (
            i32[self._i(PID, 4)],
            u32[self._i(GENERATION, 4)],
            State(u32[self._i(STATE, 4)]),
            u32[self._i(ACTIVE, 4)],
            f64[self._i(HEARTBEAT, 8)],
            u64[self._i(REQUESTS, 8)],
            f64[self._i(BOOTED_AT, 8)],
        )

    def figures(self) -> SlotFigures:
        pid, generation, state, active, beat, requests, booted = self.read()
        u32, f64, u64 = self._u32, self._f64, self._u64
        return SlotFigures(
            pid=pid,
            generation=generation,
            state=state,
            active=active,
            heartbeat=beat,
            requests=requests,
            booted_at=booted,
            in_flight=u32[self._i(IN_FLIGHT, 4)],
            bytes_out=u64[self._bytes],
            duration_sum=f64[self._dsum],
            memory=u64[self._i(MEMORY, 8)],
            logs=u64[self._logs : self._logs + 4].tolist(),
            buckets=u64[self._buckets : self._buckets + 16].tolist(),
            codes=u64[self._codes : self._codes + 501].tolist(),
            health_checks=u64[self._health],
        )

    @property
    def state(self) -> State:
        return State(self._u32[self._state])

    @property
    def pid(self) -> int:
        return self._v.i32[self._i(PID, 4)]

    @property
    def last_heartbeat(self) -> float:
        return self._f64[self._beat]

    @property
    def requests(self) -> int:
        return self._u64[self._requests]

    @property
    def active(self) -> int:
        return self._u32[self._active]

    @property
    def in_flight(self) -> int:
        return self._u32[self._in_flight]

    @property
    def memory(self) -> int:
        return self._u64[self._i(MEMORY, 8)]

    def master_draining_address(self) -> int:
        """Where the master's drain flag lies in this process's memory, for
        the native server to read it itself (the mapping lives as long as the
        worker)."""
        import ctypes

        return ctypes.addressof(ctypes.c_uint32.from_buffer(self._mem, M_DRAINING))

    @property
    def master_draining(self) -> bool:
        """The master's drain flag (MasterRecord.set_draining): the slot's view
        spans the whole region, whose first bytes are the master record."""
        return bool(self._u32[M_DRAINING // 4])


class ResponseFigures:
    """A worker's per-response figures: counted in the worker's own memory on
    the request path, published to its slot about once a second.

    Counting in Python lists and numbers costs a request about half of what
    shared-memory increments did (a ``memoryview`` item is unpacked and packed
    again on every ``+=``); what ``publish()`` writes are absolute values, each
    one aligned store, so readers still see every counter only grow. The
    worker publishes from one thread (its heartbeat) and once more as it
    exits, so the departed totals are exact; a worker killed outright loses
    at most its last second of figures.
    """

    __slots__ = ("_slot", "buckets", "codes", "duration", "health_checks", "sent")

    def __init__(self, slot: Slot) -> None:
        self._slot = slot
        self.codes = [0] * 501
        self.buckets = [0] * 16
        self.duration = 0.0
        self.sent = 0
        self.health_checks = 0

    def record(self, status: int, seconds: float, sent: int) -> None:
        """One finished response: its status, duration and body bytes.

        Positional on purpose: it runs once per request. A worker with several
        threads calls it under the lock it already holds for its request count
        (gthread): ``+=`` is a read and a write.
        """
        code = status - 100
        self.codes[code if 0 <= code < OTHER_STATUS else OTHER_STATUS] += 1
        self.buckets[bisect_left(DURATION_BOUNDS, seconds)] += 1
        self.duration += seconds
        self.sent += sent

    def publish(self) -> None:
        """Store the figures in the slot (the heartbeat's thread, and at exit)."""
        slot = self._slot
        u64 = slot._u64
        base = slot._codes
        for i, count in enumerate(self.codes):
            if count:
                u64[base + i] = count
        base = slot._buckets
        for i, count in enumerate(self.buckets):
            if count:
                u64[base + i] = count
        slot._f64[slot._dsum] = self.duration
        u64[slot._bytes] = self.sent
        u64[slot._health] = self.health_checks


class MasterRecord:
    """The arbiter's own figures, for the metrics helper (arbiter writes, others read)."""

    __slots__ = ("_f64", "_u32", "_u64")

    def __init__(self, views: _Views) -> None:
        self._u32 = views.u32
        self._u64 = views.u64
        self._f64 = views.f64

    # -- arbiter side
    def start(self, pid: int) -> None:
        self._f64[M_STARTED_AT // 8] = time.time()
        self._u32[M_PID // 4] = pid

    def set_generations(self, generation: int, serving: int, target: int) -> None:
        u32 = self._u32
        u32[M_GENERATION // 4] = generation
        u32[M_SERVING // 4] = serving
        u32[M_TARGET // 4] = target

    def count_reload(self, *, failed: bool = False) -> None:
        self._u64[(M_RELOADS_FAILED if failed else M_RELOADS) // 8] += 1

    def count_exit(self, cause: str) -> None:
        self._u64[M_EXITS // 8 + EXIT_CAUSES.index(cause)] += 1

    def count_log(self, level: int) -> None:
        self._u64[M_LOGS // 8 + level] += 1

    def set_draining(self, draining: bool) -> None:
        self._u32[M_DRAINING // 4] = int(draining)

    def set_listen_queues(self, queues: list[tuple[int, int]]) -> None:
        u32 = self._u32
        for i, (waiting, size) in enumerate(queues[:MAX_LISTENER_QUEUES]):
            u32[M_BACKLOG // 4 + 2 * i] = waiting
            u32[M_BACKLOG // 4 + 2 * i + 1] = size

    def _begin(self) -> None:
        self._u64[M_SEQ // 8] += 1

    _end = _begin

    # -- reads
    @property
    def seq(self) -> int:
        return self._u64[M_SEQ // 8]

    def figures(self) -> dict[str, object]:
        u32, u64, f64 = self._u32, self._u64, self._f64
        base = M_BACKLOG // 4
        return {
            "pid": u32[M_PID // 4],
            "started_at": f64[M_STARTED_AT // 8],
            "generation": u32[M_GENERATION // 4],
            "serving_generation": u32[M_SERVING // 4],
            "target_workers": u32[M_TARGET // 4],
            "reloads": u64[M_RELOADS // 8],
            "reloads_failed": u64[M_RELOADS_FAILED // 8],
            "draining": bool(u32[M_DRAINING // 4]),
            "exits": dict(
                zip(
                    EXIT_CAUSES,
                    u64[M_EXITS // 8 : M_EXITS // 8 + len(EXIT_CAUSES)].tolist(),
                    strict=True,
                )
            ),
            "logs": u64[M_LOGS // 8 : M_LOGS // 8 + 4].tolist(),
            "listen_queues": [
                (u32[base + 2 * i], u32[base + 2 * i + 1]) for i in range(MAX_LISTENER_QUEUES)
            ],
        }


@dataclass
class Snapshot:
    """What a reader saw at one moment: the master's figures, the departed totals,
    and every slot in use."""

    master: dict[str, object]
    departed: SlotFigures
    workers: list[SlotFigures]


class Scoreboard:
    """The shared region and the arbiter's allocation of its slots."""

    def __init__(self, slots: int = DEFAULT_SLOTS) -> None:
        # MAP_SHARED | MAP_ANONYMOUS: survives fork, invisible to anything else.
        # Pages are allocated on first touch: unused slots cost address space only.
        self._mem = mmap.mmap(-1, _SLOTS + slots * SLOT_SIZE, flags=mmap.MAP_SHARED)
        self._views = _Views(self._mem)
        self._slots = slots
        self._free = list(range(slots - 1, -1, -1))
        self.master = MasterRecord(self._views)
        self.departed = Slot(self._mem, self._views, _DEPARTED, -1)

    def _slot(self, index: int) -> Slot:
        return Slot(self._mem, self._views, _SLOTS + index * SLOT_SIZE, index)

    def claim(self) -> Slot:
        if not self._free:
            raise RuntimeError("scoreboard is full: too many workers")
        index = self._free.pop()
        u32 = self._views.u32
        if index + 1 > u32[M_HIGH_WATER // 4]:
            u32[M_HIGH_WATER // 4] = index + 1
        return self._slot(index)

    def prepare(self, slot: Slot, generation: int) -> None:
        """Reset a claimed slot for the worker about to be forked."""
        master = self.master
        master._begin()
        try:
            slot.reset(0, generation)
        finally:
            master._end()

    def release(self, slot: Slot) -> None:
        """The slot's worker is gone: keep its counters in the totals, free the slot."""
        master = self.master
        master._begin()
        try:
            self.departed.add_counters_of(slot)
            slot.free()
        finally:
            master._end()
        self._free.append(slot.index)

    def slots_in_use(self) -> Iterator[Slot]:
        """Every slot whose state is not FREE (any process may call this)."""
        high = self._views.u32[M_HIGH_WATER // 4]
        u32 = self._views.u32
        for index in range(min(high, self._slots)):
            slot = self._slot(index)
            if u32[(slot._base + STATE) // 4] != State.FREE:
                yield slot

    def snapshot(self, patience: float = 1.0) -> Snapshot:
        """A consistent read for the metrics: read again while the arbiter moves
        counters. Only an arbiter stopped in the middle of a move (descheduled
        for ``patience`` seconds, or killed) gets a figure read while it wrote."""
        master = self.master
        give_up = time.monotonic() + patience
        while True:
            before = master.seq
            if not before & 1:
                snap = Snapshot(
                    master=master.figures(),
                    departed=self.departed.figures(),
                    workers=[slot.figures() for slot in self.slots_in_use()],
                )
                if master.seq == before or time.monotonic() > give_up:
                    return snap
            elif time.monotonic() > give_up:
                return Snapshot(
                    master.figures(),
                    self.departed.figures(),
                    [s.figures() for s in self.slots_in_use()],
                )
            else:
                time.sleep(0.0005)  # the arbiter is mid-move: let it finish

    def close(self) -> None:
        # The mmap refuses to close while views of it exist.
        self._views.release()
        self._mem.close()
