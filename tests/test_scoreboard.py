"""The scoreboard is written by workers while the arbiter reads it (issue 14).

The arbiter judges a worker by the fields it reads: a heartbeat read as 0.0
made it SIGABRT a healthy worker, mid-request at times. These tests hammer a
slot from a forked writer and check that the reader only ever sees values
that were written, never a write in progress.
"""

from __future__ import annotations

import os
import time

from supervise.scoreboard import Scoreboard, State

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
    assert slot.read() == (0, 0, State.FREE, 0, 0.0, 0, 0.0)
    board.close()  # the typed views are released: the mmap can close
