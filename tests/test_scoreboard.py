"""The scoreboard is written by workers while the arbiter reads it (issue 14).

The arbiter judges a worker by the fields it reads: a heartbeat read as 0.0
made it SIGABRT a healthy worker, mid-request at times. These tests hammer a
slot from a forked writer and check that the reader only ever sees values
that were written, never a write in progress.
"""

from __future__ import annotations

import os
import time

from supervise.scoreboard import (
    DURATION_BOUNDS,
    OTHER_STATUS,
    ResponseFigures,
    Scoreboard,
    State,
)

# Before the fix about 1 read in 70 saw a zeroed field on a 2-core machine;
# a second of reading makes hundreds of thousands of reads.
SECONDS = 1.0
REQUESTS = 0x0102030405060708  # every byte non-zero: a zeroed byte shows
ACTIVE = 0x01020304


def _write_until(slot, deadline: float) -> None:
    while time.monotonic() < deadline:
        for _ in range(200):
            slot.heartbeat()
            slot.set_state(State.READY)
            slot.set_requests(REQUESTS)
            slot.set_active(ACTIVE)


def test_reader_never_sees_a_field_half_written():
    board = Scoreboard(slots=4)
    slot = board.claim()
    slot.reset(0, 1)
    slot.set_state(State.READY)
    slot.set_requests(REQUESTS)
    slot.set_active(ACTIVE)
    first_beat = slot.last_heartbeat
    deadline = time.monotonic() + SECONDS
    pid = os.fork()
    if pid == 0:  # the worker's side
        try:
            _write_until(slot, deadline)
        finally:
            os._exit(0)
    reads = 0
    bad: dict[str, object] = {}
    try:
        while time.monotonic() < deadline:
            for _ in range(200):
                reads += 1
                beat, state, requests, active = (
                    slot.last_heartbeat,
                    slot.state,
                    slot.requests,
                    slot.active,
                )
                if beat < first_beat:
                    bad.setdefault("heartbeat", beat)
                if state != State.READY:
                    bad.setdefault("state", state)
                if requests != REQUESTS:
                    bad.setdefault("requests", hex(requests))
                if active != ACTIVE:
                    bad.setdefault("active", hex(active))
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not bad, f"half-written fields seen in {reads} reads: {bad}"
    board.close()


def test_slot_fields_round_trip():
    board = Scoreboard(slots=2)
    slot = board.claim()
    slot.reset(0, 7)
    slot.set_pid(4321)
    slot.set_state(State.RETIRING)
    slot.set_requests(2**40 + 5)
    slot.set_active(3)
    before = time.monotonic()
    slot.heartbeat()
    pid, generation, state, active, beat, requests, _ = slot.read()
    assert (pid, generation, state, active, requests) == (4321, 7, State.RETIRING, 3, 2**40 + 5)
    assert slot.state is State.RETIRING and slot.requests == 2**40 + 5 and slot.active == 3
    assert beat == slot.last_heartbeat >= before
    board.release(slot)
    pid, _, state, *_ = slot.read()
    assert (pid, state) == (0, State.FREE)
    assert board.departed.requests == 2**40 + 5  # kept in the totals
    board.close()  # the typed views are released: the mmap can close


def test_response_figures_round_trip_and_survive_the_worker():
    board = Scoreboard(slots=4)
    slot = board.claim()
    board.prepare(slot, 3)
    slot.set_pid(99)
    figures = ResponseFigures(slot)
    figures.record(200, 0.003, 10)  # the 0.005 bucket
    figures.record(404, 0.5, 0)  # exactly on a bound: that bucket (le)
    figures.record(0, 100.0, 0)  # no status (client gone): "other"; past 60 s: +Inf
    assert sum(slot.figures().codes) == 0  # nothing shows before it is published
    figures.publish()
    slot.count_log(1)
    slot.set_in_flight(2)
    figures = slot.figures()
    assert figures.codes[100] == figures.codes[304] == figures.codes[OTHER_STATUS] == 1
    assert figures.buckets[DURATION_BOUNDS.index(0.005)] == 1
    assert figures.buckets[DURATION_BOUNDS.index(0.5)] == 1
    assert figures.buckets[len(DURATION_BOUNDS)] == 1
    assert figures.bytes_out == 10 and figures.in_flight == 2 and figures.logs == [0, 1, 0, 0]
    assert abs(figures.duration_sum - 100.503) < 1e-9
    assert [w.pid for w in board.snapshot().workers] == [99]
    board.release(slot)
    snap = board.snapshot()
    assert snap.workers == []
    assert snap.departed.codes[100] == 1 and snap.departed.bytes_out == 10
    # A slot used again starts from zero.
    again = board.claim()
    board.prepare(again, 4)
    assert again.index == slot.index and sum(again.figures().codes) == 0
    board.close()


def _record_until(slot, deadline: float) -> None:
    figures = ResponseFigures(slot)
    while time.monotonic() < deadline:
        for _ in range(200):
            figures.record(200, 0.002, 1000)
            slot.set_in_flight(ACTIVE)
        figures.publish()


def test_counters_never_read_going_back():
    """A counter read while the worker publishes it is the old or the new value:
    never a zeroed or half-written one, which a scrape would take for a reset."""
    board = Scoreboard(slots=4)
    slot = board.claim()
    board.prepare(slot, 1)
    slot.set_in_flight(ACTIVE)
    deadline = time.monotonic() + SECONDS
    pid = os.fork()
    if pid == 0:
        try:
            _record_until(slot, deadline)
        finally:
            os._exit(0)
    bucket = DURATION_BOUNDS.index(0.0025)
    last = (0, 0, 0, 0.0)
    reads = 0
    bad: dict[str, object] = {}
    try:
        while time.monotonic() < deadline:
            for _ in range(50):
                reads += 1
                f = slot.figures()
                now = (f.codes[100], f.buckets[bucket], f.bytes_out, f.duration_sum)
                if any(a < b for a, b in zip(now, last, strict=True)):
                    bad.setdefault("went back", (last, now))
                if f.in_flight != ACTIVE:
                    bad.setdefault("in_flight", hex(f.in_flight))
                last = now
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert last[0] > 0, "the writer never ran"
    assert not bad, f"torn counters in {reads} reads: {bad}"
    board.close()


def test_totals_never_go_back_while_workers_come_and_go():
    """The arbiter moves a reaped worker's counters to the departed record; a
    reader summing departed + live must never see them twice or not at all."""
    board = Scoreboard(slots=8)
    # Without the sequence number, from 1 snapshot in 100 to 1 in 4 saw a move half done.
    deadline = time.monotonic() + 2 * SECONDS
    pid = os.fork()
    if pid == 0:  # the arbiter's side: workers born, counting, reaped
        try:
            while time.monotonic() < deadline:
                slot = board.claim()
                board.prepare(slot, 1)
                # Every status once: moving 500 counters takes long enough for
                # a reader to land in the middle of it.
                figures = ResponseFigures(slot)
                for status in range(100, 600):
                    figures.record(status, 0.001, 1)
                figures.publish()
                board.release(slot)
        finally:
            os._exit(0)
    last, reads, backwards, torn = 0, 0, [], []
    try:
        while time.monotonic() < deadline:
            snap = board.snapshot()
            departed = sum(snap.departed.codes)
            total = departed + sum(sum(w.codes) for w in snap.workers)
            reads += 1
            if total < last:
                backwards.append((last, total))
            if departed % 500:  # every worker left 500 responses: a move seen half done
                torn.append(departed)
            last = total
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert last > 0
    assert not torn, f"{len(torn)} of {reads} snapshots saw a move half done: {torn[:3]}"
    assert not backwards, f"{len(backwards)} of {reads} snapshots went back: {backwards[:3]}"
    board.close()
