"""``--send-min-rate``'s rule (supervise/http/send_pace.py), sans I/O, and
the kernel's count of acknowledged bytes it reads on asyncio transports.
The rule's twin in Rust is tested in native/src/server/send_pace.rs; the
behaviour a client sees, on every class, in tests/test_send_bounds.py."""

from __future__ import annotations

import socket
import time

from supervise.http.send_pace import SendPace, bytes_acked, pace_for


def test_off_when_either_setting_is_zero() -> None:
    assert pace_for(0, 100) is None
    assert pace_for(None, 100) is None
    assert pace_for(10, 0) is None
    assert pace_for(10, 100) is not None


def test_a_client_under_the_floor_is_too_slow_once_the_waits_fill_the_window() -> None:
    pace = SendPace(10, 100)
    for _ in range(3):
        pace.took(200)
        pace.wait_ended(3)
        assert not pace.too_slow()
    pace.took(200)
    pace.wait_ended(3)
    # 12 s waited, 800 bytes taken: under 100 a second.
    assert pace.too_slow()


def test_a_client_over_the_floor_starts_a_new_window() -> None:
    pace = SendPace(10, 100)
    pace.took(2_000)
    pace.wait_ended(11)
    assert not pace.too_slow()
    # The new window counts from nothing: a long silence is judged alone.
    pace.wait_ended(11)
    assert pace.too_slow()


def test_a_wait_in_progress_counts_and_is_not_counted_twice() -> None:
    pace = SendPace(10, 100)
    pace.took(5_000)
    assert not pace.too_slow(12)
    # The window closed 12 s into this wait; its end adds only the rest.
    pace.wait_ended(14)
    assert not pace.too_slow()
    pace.wait_ended(7.5)
    # 9.5 s of the new window: not over yet, however little was taken.
    assert not pace.too_slow()


def test_bytes_acked_counts_what_the_peer_took() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        with client, server:
            before = bytes_acked(server)
            assert before is not None
            server.sendall(b"x" * 10_000)
            got = 0
            while got < 10_000:
                got += len(client.recv(65536))
            # The ACK may trail the data by a moment.
            for _ in range(500):
                if bytes_acked(server) - before >= 10_000:
                    break
                time.sleep(0.01)
            assert bytes_acked(server) - before >= 10_000


def test_bytes_acked_is_none_off_tcp() -> None:
    left, right = socket.socketpair()
    with left, right:
        assert bytes_acked(left) is None
