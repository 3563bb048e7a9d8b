"""An access log that cannot be written (a pipe nobody reads: a log collector
that stalled) never holds a request, in any worker class; once the reader
comes back, every line arrives."""

from __future__ import annotations

import fcntl
import os
import signal
import time

import httpx
from conftest import wait_until
from ops_helpers import ops_app

# Each line carries a long User-Agent, so that a few requests fill the pipe.
AGENT = "stuck-log-test " + "x" * 3000


def test_requests_go_on_while_the_access_log_is_stuck(any_worker, start_server, tmp_path):
    fifo = tmp_path / "access.fifo"
    os.mkfifo(fifo)
    # The reader end is open (the server's open() would wait for one) but nobody
    # reads, and the pipe holds one page: a few lines fill it.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        fcntl.fcntl(reader, fcntl.F_SETPIPE_SZ, 4096)
        server = start_server("-k", any_worker, "--access-logfile", str(fifo), ops_app(any_worker))
        url = f"http://127.0.0.1:{server.port}"
        # 40 lines of 3 KB: more than ten times what the pipe holds.
        slowest = 0.0
        with httpx.Client(base_url=url, timeout=10, headers={"User-Agent": AGENT}) as client:
            for i in range(40):
                started = time.monotonic()
                resp = client.get(f"/bytes/{i}")
                slowest = max(slowest, time.monotonic() - started)
                assert resp.status_code == 200 and len(resp.content) == i
            # logrotate's USR1 while a write is blocked: the worker goes on serving.
            server.signal(signal.SIGUSR1)
            server.wait_for_log("Handling signal: usr1")
            # An idle worker runs its handler at once (a busy one may run it later).
            time.sleep(0.5)
            count = 40
            while count < 45:
                assert client.get(f"/bytes/{count}").status_code == 200
                count += 1
        print(f"{any_worker}: slowest request with the log stuck: {slowest * 1000:.1f} ms")

        # The reader comes back: every line arrives, whole.
        received = b""

        def all_lines() -> bool:
            nonlocal received
            try:
                while chunk := os.read(reader, 65536):
                    received += chunk
            except BlockingIOError:
                pass
            return received.count(AGENT.encode()) >= count

        wait_until(all_lines)
        paths = [
            line.split(b'"GET ')[1].split(b" ")[0]
            for line in received.splitlines()
            if AGENT.encode() in line
        ]
        assert paths == [f"/bytes/{i}".encode() for i in range(count)]
    finally:
        os.close(reader)
